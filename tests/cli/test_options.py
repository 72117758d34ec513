"""The command line's own edges (issue 18): every option of `run` checked before any work, the
warnings a run gives up front, progress without a terminal, `validate`'s samples and CPU estimate,
`--version`, `-h` on every command, `env --format json`."""

import io
import json
import re

import click
import pytest
import typer
from cli_support import REPO, TINY, one_line_error, runner, write
from rich.console import Console

from moebench.cli import preflight
from moebench.cli.app import app
from moebench.cli.progress import CliProgress, LineProgress
from moebench.core.version import __version__
from moebench.plan.cases import plan
from moebench.spec.load import load_scenario, parse_scenario

DISTRIBUTED = TINY.replace("topology: {ep: 2}", "topology: {ep: 2, dp: 2, mode: distributed}")
PROGRESS = r"^moebench: (\d+)/(\d+) c000 rank \d \S+ \(\d+:\d\d:\d\d elapsed"

BAD_OPTIONS = [
    # (scenario, options, words the one-line error must contain)
    (TINY, ["--baseline", "foo"], "--baseline: must be one of the run's arms (stock, prefix_sum,"),
    (TINY, ["--baseline", "stock~aa"], "only with --aa or measure.aa"),  # no A/A copy without --aa
    (TINY, ["--aa", "--baseline", "prefix_sum~aa"], "got 'prefix_sum~aa'"),  # copies stock only
    (TINY, ["--case-timeout", "0"], "--case-timeout: must be > 0"),
    (TINY, ["--case-timeout", "nan"], "--case-timeout: must be > 0"),
    (TINY, ["--case-timeout", "1e9"], "at most 604800 seconds"),
    (TINY, ["--dist-timeout", "0"], "--dist-timeout: must be > 0"),
    (TINY, ["--dist-timeout", "-5"], "--dist-timeout: must be > 0"),
    (TINY, ["--dist-timeout", "inf"], "--dist-timeout: must be > 0"),
    (TINY, ["--nproc", "0"], "--nproc: must be at least 1"),
    (TINY, ["--nproc", "2"], "launching ranks needs 'distributed'"),  # a simulated scenario
    (DISTRIBUTED, ["--nproc", "3"], "the world has 3 rank(s) but the scenario needs"),
    (DISTRIBUTED, ["--nproc", "2", "--baseline", "foo"], "--baseline: must be one of"),
    (DISTRIBUTED, ["--isolate"], "--isolate: runs the cases of a simulated run"),
    (DISTRIBUTED, ["--case-timeout", "60"], "--dist-timeout bounds how long a collective waits"),
]


@pytest.mark.parametrize("text, options, words", BAD_OPTIONS)
def test_every_run_option_is_checked_before_any_work(tmp_path, text, options, words):
    scenario = write(tmp_path, text)
    args = ["run", str(scenario), "--results", str(tmp_path / "r"), *options]
    line = one_line_error(runner.invoke(app, args))
    assert words in line, line
    assert not (tmp_path / "r").exists(), "a bad option must write nothing"


def test_results_folder_that_cannot_be_made_is_refused_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    scenario = write(tmp_path, TINY)
    args = ["run", str(scenario), "--results", str(tmp_path / "file" / "r"), "--baseline", "stock"]
    line = one_line_error(runner.invoke(app, args))
    assert "is not a folder" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "s.yaml"]


@pytest.fixture(scope="module")
def profiled_aa_run(tmp_path_factory):
    """A CPU run asking for the profile regime, with the A/A copy as the summary's baseline."""
    tmp = tmp_path_factory.mktemp("profiled")
    text = TINY.replace("regimes: [ffn, kernel]", "regimes: [ffn, profile]").replace(
        "blocks: 2", "blocks: 1"
    )
    scenario = write(tmp, text)
    args = ["run", str(scenario), "--results", str(tmp / "r"), "--aa", "--baseline", "stock~aa"]
    return runner.invoke(app, args)


def test_the_a_a_copy_is_a_valid_baseline_with_aa(profiled_aa_run):
    result = profiled_aa_run
    assert result.exit_code == 0, result.output
    assert "1 cases run" in result.stdout


def test_profile_on_the_cpu_is_a_warning_before_the_run_starts(profiled_aa_run):
    lines = profiled_aa_run.stderr.splitlines()
    warning = (
        "moebench: warning: measure.regimes: profile needs a GPU with CUDA graphs; "
        "this CPU run records ffn only"
    )
    assert lines[0] == warning, lines
    assert lines.count(warning) == 1


def test_without_a_terminal_progress_is_plain_lines(profiled_aa_run):
    """CliRunner's stderr is no terminal: rich's live bar would print nothing there."""
    lines = profiled_aa_run.stderr.splitlines()
    assert lines[1] == "moebench: 8 step(s) to run (rank x arm of each case)"  # 2 ranks x 4 arms
    steps = [re.match(PROGRESS, ln) for ln in lines[2:]]
    steps = [(int(m[1]), int(m[2])) for m in steps if m]
    assert steps and steps[0][0] >= 1 and steps[-1] == (8, 8), lines
    assert all(total == 8 for _, total in steps)


def test_line_progress_throttles_and_always_prints_the_last_step():
    now = [100.0]
    printed: list[str] = []
    p = LineProgress(printed.append, every_s=5.0, clock=lambda: now[0])
    p.start(4)
    for t in (101.0, 102.0, 107.0, 108.0):  # steps 2 and 4 come sooner than 5 s after a line
        now[0] = t
        p.step(f"step at {t:g}")
    assert printed == [
        "moebench: 4 step(s) to run (rank x arm of each case)",
        "moebench: 1/4 step at 101 (0:00:01 elapsed, about 0:00:03 left)",
        "moebench: 3/4 step at 107 (0:00:07 elapsed, about 0:00:02 left)",
        "moebench: 4/4 step at 108 (0:00:08 elapsed)",
    ]


def test_cli_progress_is_a_bar_on_a_terminal_and_lines_elsewhere():
    pipe = io.StringIO()
    with CliProgress(Console(file=pipe, force_terminal=False), notes=["n"]) as p:
        p.start(1)
        p.step("c000 rank 0 stock")
    assert pipe.getvalue().splitlines()[0] == "moebench: warning: n"
    assert "moebench: 1/1 c000 rank 0 stock" in pipe.getvalue()
    tty = io.StringIO()
    with CliProgress(Console(file=tty, force_terminal=True, width=100)) as p:
        assert p.bar is not None and p.lines is None
        p.start(1)
        p.step("c000 rank 0 stock")
    assert "moebench: 1/1" not in tty.getvalue()


@pytest.mark.parametrize(
    "regimes, device, mode, graph, words",
    [
        ("[profile]", "cpu", "simulated", "true", "this CPU run records no timed samples"),
        ("[ffn, kernel, profile]", "cpu", "simulated", "true", "records ffn and kernel only"),
        ("[ffn, profile]", "cuda", "distributed", "true", "not recorded in topology.mode distrib"),
        ("[ffn, profile]", "cuda", "simulated", "false", "measure.graph is false"),
    ],
    ids=["profile-only-cpu", "cpu", "distributed", "no-graphs"],
)
def test_profile_notes_say_what_the_run_records(regimes, device, mode, graph, words):
    text = TINY.replace("regimes: [ffn, kernel]", f"regimes: {regimes}, graph: {graph}")
    if mode == "distributed":
        text = text.replace("topology: {ep: 2}", "topology: {ep: 2, dp: 2, mode: distributed}")
    notes = preflight.notes(parse_scenario(text), device)
    (note,) = [n for n in notes if n.startswith("measure.regimes: profile ")]
    assert words in note, note


def test_profile_on_a_gpu_with_graphs_needs_no_note():
    text = TINY.replace("regimes: [ffn, kernel]", "regimes: [ffn, profile]")
    notes = preflight.notes(parse_scenario(text), "cuda")
    assert not [n for n in notes if n.startswith("measure.regimes")], notes


def test_validate_counts_each_cases_samples_and_estimates_its_time(tmp_path):
    scenario = write(tmp_path, TINY + "sweep: {measure.iterations: [1, 3]}\n")
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 0, result.output
    rows = [ln for ln in result.stdout.splitlines() if ln.startswith("│ c00")]
    # 2 ranks x 3 arms x 2 blocks x iterations x (ffn + the act stage)
    assert [ln.split("│")[7].strip() for ln in rows] == ["24", "72"], result.stdout
    estimates = [ln.split("│")[8].strip() for ln in rows]
    assert all(e.startswith("~") and e.endswith(" s") for e in estimates), estimates
    caption = " ".join(result.stdout.split())
    assert "an estimate for this CPU under the Triton interpreter" in caption
    assert result.stderr == ""  # nothing to warn about


def test_validate_warns_that_a_preset_shape_cannot_finish_on_the_cpu(tmp_path):
    text = (
        "name: qwen\nmodel: qwen3-30b-a3b\nshape: {tokens_per_rank: 2, alignment: 16}\n"
        "measure: {regimes: [ffn], warmup: 0, blocks: 1, iterations: 1, case_timeout_s: 60}\n"
    )
    result = runner.invoke(app, ["validate", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("moebench: warning: 1 of 1 case(s) would take longer than ")
    assert "measure.case_timeout_s (60 s)" in line and "(estimate: c000 ~" in line


def test_the_cpu_estimate_agrees_with_the_measured_smoke_run():
    """scenarios/smoke.yaml says it was measured at 62 s on two cores; the constants of
    moebench/cli/preflight.py must put it within a factor of three of that."""
    planned = plan(load_scenario(REPO / "scenarios" / "smoke.yaml"))
    (cost,) = preflight.case_costs(planned, "cpu")
    assert 62 / 3 < cost.seconds < 62 * 3, cost
    assert cost.samples == 2 * 3 * 3 * 2 * (1 + 5)  # ranks x arms x blocks x iterations x stages
    assert preflight.case_costs(planned, "cuda")[0].seconds is None  # no estimate on a GPU


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"moebench {__version__}\n"
    assert __version__ == "0.1.0"


def _command_paths(command: click.Command, path=()):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from _command_paths(sub, (*path, name))


def test_h_is_help_on_every_command():
    paths = list(_command_paths(typer.main.get_command(app)))
    assert ("run",) in paths and ("trace", "import") in paths, paths
    for path in paths:
        short, long = (runner.invoke(app, [*path, flag]) for flag in ("-h", "--help"))
        assert short.exit_code == 0 and "Usage:" in short.output, (path, short.output)
        assert short.output == long.output, path


def test_env_json():
    result = runner.invoke(app, ["env", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["moebench"] == __version__ and "torch" in doc and "triton" in doc
    line = one_line_error(runner.invoke(app, ["env", "--format", "yaml"]))
    assert "--format: expected table or json, got 'yaml'" in line


def test_a_scenario_whose_blocks_cannot_support_a_verdict_is_warned_up_front(tmp_path):
    from moebench.cli import preflight
    from moebench.spec.load import load_scenario

    smoke = load_scenario(REPO / "scenarios" / "smoke.yaml")
    assert preflight.verdict_cells(smoke) == 12 and preflight.verdict_cells(smoke, aa=True) == 18
    (note,) = [n for n in preflight.notes(smoke, "cuda") if n.startswith("measure.blocks")]
    assert "3 blocks cannot support a verdict for the 12 cells" in note and ">= 9" in note
    assert not [n for n in preflight.notes(smoke, "cpu") if n.startswith("measure.blocks")]
    result = runner.invoke(app, ["validate", str(smoke.path)])
    assert "need >= 9 paired blocks; measure.blocks is 3: TOO FEW on a GPU" in result.output
