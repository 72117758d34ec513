"""The pages cannot drift from the tree: every repository path that README.md and the pages at the
top of docs/ name exists, every link between them lands on a file and a heading, and every
`moebench ...` command in them parses against the real Typer app (issue 24).

docs/perf/ is left out on purpose: it is a dated journal of what was run at the time, and its paths
and commands are those of that day, not a description of the tree now. docs/PERF.md, which holds
the current figures (its tables generated from that journal by tools/perf_tables.py), is checked.

Paths are what a code span or a code block names under one of the repository's top-level folders
(`moebench/...`, `arms/...`, `tools/...`, `scenarios/...`, `docs/...`, `tests/...`,
`examples/...`, `baselines/...`, `traces/...`), with `::test_name` checked too, the modules named
relative to the package as docs/DESIGN.md writes them (`run/case.py`, `gates/families.py: ...`: a
moebench subpackage, then a module, which must exist under moebench/), and every link target
(relative to its page). Commands are the code spans and lines of shell blocks that run
`moebench` (also as `python -m moebench.cli` or under `torchrun`). A synopsis is parsed whole:
optional parts (`[--plot DIR]`) are included, each alternative (`table|json`) is parsed, and every
placeholder (`SCENARIO`, `results/<run_id>`, `$OUT`, `N`, ...) is replaced by a real example value
of its kind, chosen by the option it follows or by its name; a placeholder with no example fails
the test rather than being skipped. Parsing builds a click context for the subcommand with its
arguments (`make_context`, not resilient), so a wrong option, a missing argument or a value of the
wrong type fails, and nothing runs. A command named without arguments (`moebench lock`) must
name a command.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import typer.core
import typer.main

from moebench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FOLDERS = "moebench|arms|tools|scenarios|docs|tests|examples|baselines|traces"
PATH = re.compile(rf"(?<![\w./$<-])((?:{FOLDERS})/[\w./<>*-]*)(::[\w-]+)?")
# A module named relative to the package (`run/case.py`): its first folder is a subpackage of
# moebench (read from the tree), so `arms/...`, `tests/run/...` and paths outside the repository
# (`python/sglang/...`) are not taken for one.
SUBPACKAGES = "|".join(sorted(p.parent.name for p in (REPO / "moebench").glob("*/__init__.py")))
PACKAGE_PATH = re.compile(rf"(?<![\w./$<-])((?:{SUBPACKAGES})/[\w/]*\w\.py)(?![\w/-])")
# The placeholders a path may hold, each standing for any name there (a glob must then match).
PATH_PLACEHOLDERS = re.compile(r"<[^>/]+>|\bNAME\b")
SHELL_BLOCK_LANGS = ("", "sh", "bash", "shell", "console")

# --- example values of the placeholders in commands -------------------------------------------

SMOKE = "scenarios/smoke.yaml"
TRACE = "traces/mixtral-mmlu-abstract_algebra.npy"
# A real stored run folder: the baseline the gating benchmark compares with.
STORED_RUN = str(next(REPO.glob("baselines/*/*/manifest.json")).parent.relative_to(REPO))

# By the option the placeholder follows: a value of that option's kind.
OPTION_EXAMPLES = {
    "--results": "results",
    "--resume": STORED_RUN,
    "--against": STORED_RUN,
    "--plot": "plots",
    "--scenario": SMOKE,
    "--baseline": "stock",
    "--case-timeout": "600",
    "--dist-timeout": "300",
    "--nproc": "2",
    "--threshold": "2",
    "--fail-on-regression": "5",
    "--width": "120",
    "--slo-tpot-ms": "30",
    "--non-moe-us": "8000",
    "--format": "counts",  # the only option written with a placeholder: trace import's format
    "--model": "mistralai/Mixtral-8x7B-v0.1",
    "--revision": "main",
    "-o": "trace.parquet",
    "--output": "trace.parquet",
    "--top-k": "2",
    "--experts": "8",
    "--select": "abstract_algebra",
    "--ep": "2",
    "--layer": "0",
    "--tokens": "16",
    "--seed": "0",
}
# By the placeholder itself, for arguments.
ARGUMENT_EXAMPLES = {
    "SCENARIO": SMOKE,
    "scenarios/NAME.yaml": SMOKE,
    "RUN": STORED_RUN,
    "RUN_DIR": STORED_RUN,
    "BASE_RUN": STORED_RUN,
    "results/<run_id>": STORED_RUN,
    "results/<run>": STORED_RUN,
    "TRACE": TRACE,
    "SRC": TRACE,
    "STEP": STORED_RUN,
    "MODEL": STORED_RUN,
}


def is_placeholder(token: str) -> bool:
    """`SCENARIO`, `OUT.parquet`, `scenarios/NAME.yaml`, `results/<run_id>`, `$OUT`."""
    return bool(
        re.search(r"<[^>]+>", token)
        or token.startswith("$")
        or re.fullmatch(r"(?:[\w.-]*/)*[A-Z][A-Z0-9_]*(?:\.[a-z]+)?", token)
    )


# --- reading a page ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    page: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def split_page(page: Path) -> tuple[str, list[tuple[str, int, str]]]:
    """The page's prose (code blocks blanked, lines kept) and its code blocks (lang, line, body)."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        blocks.append((m.group(1), line_of(text, m.start(2)), m.group(2)))
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return prose, blocks


def spans(page: Path) -> list[Item]:
    """Code spans of the prose; a span may wrap a line, never a paragraph."""
    prose, _ = split_page(page)
    out = []
    for m in SPAN.finditer(prose):
        if "\n\n" not in m.group(1):
            out.append(Item(page, line_of(prose, m.start()), m.group(1).replace("\\|", "|")))
    return out


def block_lines(page: Path, shell_only: bool) -> list[Item]:
    """Lines of the code blocks (of shell blocks only, with continuations joined)."""
    _, blocks = split_page(page)
    out = []
    for lang, first, body in blocks:
        if shell_only and lang not in SHELL_BLOCK_LANGS:
            continue
        body = body.replace("\\\n", " ") if shell_only else body
        for i, line in enumerate(body.splitlines()):
            out.append(Item(page, first + i, line))
    return out


def links(page: Path) -> list[Item]:
    prose, _ = split_page(page)
    return [Item(page, line_of(prose, m.start()), m.group(1)) for m in LINK.finditer(prose)]


# --- paths and links ---------------------------------------------------------------------------


def named_paths(page: Path) -> list[Item]:
    """Repository paths named in code spans and code blocks, with `::test` where given, and the
    package-relative modules (`run/case.py`) as the repository paths they stand for."""
    out = []
    for item in [*spans(page), *block_lines(page, shell_only=False)]:
        for m in PATH.finditer(item.text):
            path = m.group(1).rstrip(".,")
            out.append(Item(item.page, item.line, path + (m.group(2) or "")))
        for m in PACKAGE_PATH.finditer(item.text):
            out.append(Item(item.page, item.line, f"moebench/{m.group(1)}"))
    return out


def path_problem(text: str) -> str | None:
    """Why ``text`` (a repository path, perhaps with ``::test``) names nothing, or None."""
    path, _, test = text.partition("::")
    if PATH_PLACEHOLDERS.search(path) or "*" in path:
        pattern = PATH_PLACEHOLDERS.sub("*", path).rstrip("/")
        return None if list(REPO.glob(pattern)) else f"{text}: nothing matches {pattern}"
    target = REPO / path
    if not target.exists():
        return f"{text}: no such file or folder"
    if test and not re.search(rf"^(?:async )?def {re.escape(test)}\(", target.read_text(), re.M):
        return f"{text}: {path} has no test {test}"
    return None


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    prose, _ = split_page(page)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", prose, re.M)}


def link_problem(item: Item) -> str | None:
    target = item.text
    if re.match(r"[a-z]+:", target):  # https:, mailto:: outside the repository
        return None
    path, _, anchor = target.partition("#")
    file = (item.page.parent / path).resolve() if path else item.page
    if not file.exists():
        return f"{target}: no such file or folder"
    if REPO not in file.parents and file != REPO:
        return f"{target}: outside the repository"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"{target}: {file.relative_to(REPO)} has no heading #{anchor}"
    return None


# --- commands ----------------------------------------------------------------------------------

SHELL_END = re.compile(r"\s(?:\|\||&&|\||;|>|2>)\s|;\s|;$|\s#\s")
ROOT = typer.main.get_command(app)


def command_args(text: str) -> list[str] | None:
    """The arguments after ``moebench`` (or ``-m moebench.cli``) in ``text``, or None when it runs
    no moebench command (``moebench: error: ...`` and ``moebench 0.1.0`` are output)."""
    text = SHELL_END.split(text.strip().removeprefix("$ "), maxsplit=1)[0]
    try:
        tokens = shlex.split(text)
    except ValueError:
        return None
    for i, tok in enumerate(tokens):
        if tok == "moebench" or tok.endswith("/moebench"):
            args = tokens[i + 1 :]
        elif tok == "-m" and tokens[i + 1 : i + 2] == ["moebench.cli"]:
            args = tokens[i + 2 :]
        else:
            continue
        if args and not re.fullmatch(r"-.*|[a-z][a-z-]*", args[0]):
            return None
        return args
    return None


def named_commands(page: Path) -> list[Item]:
    out = []
    for item in [*spans(page), *block_lines(page, shell_only=True)]:
        args = command_args(item.text.replace("\n", " "))
        if args is not None:
            out.append(Item(item.page, item.line, shlex.join(args)))
    return out


def resolve(args: list[str]):
    """(command, its arguments, parent context, name): the groups' command words consumed."""
    cmd, parent, name = ROOT, None, "moebench"
    while isinstance(cmd, typer.core.TyperGroup) and args and not args[0].startswith("-"):
        ctx = cmd.make_context(name, [], parent=parent, resilient_parsing=True)
        sub_name, sub, rest = cmd.resolve_command(ctx, args)
        if sub is None:
            raise LookupError(f"no command {args[0]!r} in '{ctx.command_path}'")
        cmd, parent, name, args = sub, ctx, sub_name, rest
    return cmd, args, parent, name


def expansions(cmd, args: list[str]) -> list[list[str]]:
    """A synopsis made concrete: brackets dropped, `...` dropped, each alternative of `a|b` its
    own command, every placeholder replaced by an example value of its kind."""
    takes_value = {
        opt: not p.is_flag
        for p in cmd.params
        if isinstance(p, typer.core.TyperOption)
        for opt in (*p.opts, *p.secondary_opts)
    }
    tokens = [t.strip("[]") for t in args]
    tokens = [t for t in tokens if t and t != "..."]
    concrete = []
    for i, tok in enumerate(tokens):
        if is_placeholder(tok):
            before = tokens[i - 1] if i else ""
            if before.startswith("-") and before not in takes_value:
                value = tok  # an option the command lacks: click says so
            elif takes_value.get(before) and before in OPTION_EXAMPLES:
                value = OPTION_EXAMPLES[before]
            elif not takes_value.get(before) and tok in ARGUMENT_EXAMPLES:
                value = ARGUMENT_EXAMPLES[tok]
            else:
                raise LookupError(
                    f"placeholder {tok!r} (after {before!r}) has no example value: add one to "
                    "OPTION_EXAMPLES or ARGUMENT_EXAMPLES"
                )
            concrete.append([value])
        elif "|" in tok and not tok.startswith("-"):
            concrete.append(tok.split("|"))
        else:
            concrete.append([tok])
    return [list(c) for c in itertools.product(*concrete)]


def command_problem(text: str) -> str | None:
    """Why ``moebench <text>`` does not parse, or None. Nothing runs."""
    try:
        cmd, args, parent, name = resolve(shlex.split(text))
        if not args:
            return None  # a command named, not run: `moebench lock`
        for concrete in expansions(cmd, args):
            try:
                cmd.make_context(name, concrete, parent=parent, resilient_parsing=False)
            except typer.Exit as exc:  # --version, --help: they answer and exit 0
                if exc.exit_code != 0:
                    return f"moebench {text}: exits {exc.exit_code} as {concrete}"
    except LookupError as exc:
        return f"moebench {text}: {exc}"
    except typer.TyperException as exc:  # click's usage errors
        return f"moebench {text}: {type(exc).__name__}: {exc}"
    return None


# --- the tests ---------------------------------------------------------------------------------


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_path_named_exists(page):
    problems = [f"{i.where()}: {p}" for i in named_paths(page) if (p := path_problem(i.text))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_link_lands(page):
    problems = [f"{i.where()}: {p}" for i in links(page) if (p := link_problem(i))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_moebench_command_parses(page):
    problems = [f"{i.where()}: {p}" for i in named_commands(page) if (p := command_problem(i.text))]
    assert not problems, "\n".join(problems)


def test_the_readme_links_every_reference_page():
    linked = {(REPO / i.text.partition("#")[0]).resolve() for i in links(REPO / "README.md")}
    for name in ("GUIDE.md", "SCENARIOS.md", "ARMS.md", "CLI.md", "ROBUSTNESS.md"):
        assert REPO / "docs" / name in linked, f"README.md does not link docs/{name}"


def unnamed_kernel_modules(design: str) -> list[str]:
    """Modules of moebench/kernels that the `moebench.kernels` row of DESIGN.md's module table
    does not name (as `module`)."""
    row = next(ln for ln in design.splitlines() if ln.startswith("| `moebench.kernels` |"))
    modules = sorted(p.stem for p in (REPO / "moebench" / "kernels").glob("*.py"))
    return [m for m in modules if m != "__init__" and f"`{m}`" not in row]


def test_design_names_every_kernel_module():
    """A kernel file added without a word in the architecture page fails here."""
    missing = unnamed_kernel_modules((REPO / "docs" / "DESIGN.md").read_text())
    assert not missing, f"docs/DESIGN.md's moebench.kernels row does not name {missing}"


# --- the checks themselves can fail ------------------------------------------------------------


def test_the_pages_are_read():
    readme = REPO / "README.md"
    assert len(PAGES) >= 6
    assert "scenarios/smoke.yaml" in {i.text for i in named_paths(readme)}
    assert "run scenarios/smoke.yaml" in {i.text for i in named_commands(readme)}
    assert "moebench/run/case.py" in {i.text for i in named_paths(REPO / "docs" / "DESIGN.md")}
    cli = {i.text for i in named_commands(REPO / "docs" / "CLI.md")}
    assert any(t.startswith("compare RUN") and "--slo-tpot-ms" in t for t in cli), cli


@pytest.mark.parametrize(
    "text, problem",
    [
        ("run scenarios/smoke.yaml --results DIR", None),
        ("run SCENARIO [--results DIR] [--isolate] [--nproc N]", None),
        ("compare RUN [RUN ...] [--format table|markdown|csv|json]", None),
        ("trace import SRC --format FMT --model ID --revision REV -o OUT.parquet", None),
        ("--version", None),
        ("lock", None),  # a command named, not run
        ("run scenarios/smoke.yaml --no-such-option", "No such option"),
        ("run scenarios/smoke.yaml --case-timeout soon", "BadParameter"),  # wrong type
        ("compare --format json", "Missing parameter"),  # no run
        ("run a.yaml b.yaml", "unexpected extra argument"),
        ("trace stats TRACE --ep N --bucket B", "No such option"),
        ("comapre RUN", "no command 'comapre'"),
        ("run SCENARIO --exit-code-file FILE", "placeholder 'FILE'"),  # no example: fails
    ],
)
def test_a_command_that_does_not_parse_fails(text, problem):
    got = command_problem(text)
    if problem is None:
        assert got is None, got
    else:
        assert got is not None and problem in got, got


@pytest.mark.parametrize(
    "text, ok",
    [
        ("scenarios/smoke.yaml", True),
        ("moebench/arm/registry.py", True),
        ("arms/prefill/", True),
        ("scenarios/NAME.yaml", True),  # any scenario
        ("baselines/<kind>/", True),
        (
            "tests/run/test_interrupt.py::test_sigkill_leaves_whole_parts_and_resume_finishes_with"
            "_the_same_run_id",
            True,
        ),  # fmt: skip
        ("moebench/runner.py", False),  # before the layout of 2026-12-01
        ("arms/stock.py", False),
        ("scenarios/NAME.toml", False),
        ("tests/run/test_interrupt.py::test_no_such_test", False),
    ],
)
def test_a_path_that_names_nothing_fails(text, ok):
    assert (path_problem(text) is None) == ok


def test_a_package_relative_module_is_looked_for_under_moebench(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "`run/case.py`, `gates/families.py: FamilyRecord`, `run/no_such.py`, `moebench/run/step.py`"
        ", `tests/run/test_step.py`, `arms/prefill/stock.py`, `python/sglang/srt/eplb/x.py`, "
        "`path/file.py`, `prefix_sum.py`\n\n```\n  -> measure/sampling.py.\n```\n"
    )
    named = [i.text for i in named_paths(page)]
    assert named == [
        "moebench/run/case.py",
        "moebench/gates/families.py",
        "moebench/run/no_such.py",
        "moebench/run/step.py",  # once: a full path is not also read as a relative one
        "tests/run/test_step.py",
        "arms/prefill/stock.py",  # a top-level folder, not the package's arm/
        "moebench/measure/sampling.py",  # in a code block too, at the end of a sentence
    ], named
    problems = {t: path_problem(t) for t in named}
    assert [t for t, p in problems.items() if p] == ["moebench/run/no_such.py"], problems


def test_a_link_that_lands_nowhere_fails():
    page = REPO / "README.md"
    assert link_problem(Item(page, 1, "docs/GUIDE.md#distributed-mode")) is None
    assert link_problem(Item(page, 1, "docs/GUIDE.md#no-such-heading")) is not None
    assert link_problem(Item(page, 1, "docs/NOPE.md")) is not None
    assert link_problem(Item(REPO / "docs" / "GUIDE.md", 1, "ARMS.md#bring-your-own-arm")) is None


def test_a_kernel_module_missing_from_the_design_row_is_caught():
    design = (REPO / "docs" / "DESIGN.md").read_text()
    assert unnamed_kernel_modules(design.replace("`sparse_launch`", "sparse_launch")) == [
        "sparse_launch"
    ]
