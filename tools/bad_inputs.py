"""Feed moebench's CLI one bad input after another and print, as a markdown table, what each
printed and its exit code (the table in docs/ROBUSTNESS.md comes from this script).

    python tools/bad_inputs.py > /tmp/table.md

Runs on the CPU in about a minute: three tiny runs are made first, for the resume and compare
rows. Paths under the temporary folder are shown as ``T/``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from moebench.cli.app import app  # noqa: E402

TINY = """\
name: tiny
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: bf16
arms: [stock, prefix_sum_masked]
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
"""
TRACE = TINY.replace("routing: {family: uniform, seed: 3}", "routing: {family: trace, path: t}")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="moebench-bad-"))
    cli = CliRunner()
    rows: list[tuple[str, str, int, str]] = []

    def show(text: str) -> str:
        text = text.replace(str(tmp), "T")
        text = re.sub(r"\d{8}-\d{6}-([\w.-]+)-[0-9a-f]{6}", r"<run \1>", text)
        return text.replace("|", "\\|")

    def scenario(text: str | bytes, name: str = "s.yaml") -> Path:
        path = tmp / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    def trace(name: str, data: bytes | str) -> Path:
        path = tmp / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return path

    def row(group: str, what: str, *args: str) -> None:
        result = cli.invoke(app, [str(a) for a in args])
        lines = [ln for ln in result.output.splitlines() if ln.startswith("moebench:")]
        if not lines and result.exit_code == 2:  # a usage error, worded by Click
            lines = [
                ln.strip("│╭╰─ ")
                for ln in result.output.splitlines()
                if "Usage:" in ln or "Invalid value" in ln
            ]
        if "Traceback" in result.output:
            lines = ["TRACEBACK"]
        said = "<br>".join(show(ln) for ln in lines) or "(a table)"
        rows.append((group, what, result.exit_code, said))

    def note(group: str, what: str, text: str) -> None:
        rows.append((group, what, "", show(text)))

    def run(text: str, *extra: str) -> Path:
        results = tmp / f"runs-{len(list(tmp.glob('runs-*')))}"
        out = cli.invoke(
            app, ["run", str(scenario(text, "run.yaml")), "--results", str(results), *extra]
        )
        assert out.exit_code == 0, out.output
        return next(results.iterdir())

    # --- scenario documents
    s = "scenario"
    row(s, "not UTF-8 (bytes ff fe 00)", "validate", scenario(b"\xff\xfe\x00name: x"))
    row(s, "empty file", "validate", scenario(""))
    row(s, "YAML syntax error `name: [unclosed`", "validate", scenario("name: [unclosed\n"))
    row(
        s,
        "`!!python/object/apply:os.system ['touch /tmp/pwned']`",
        "validate",
        scenario("!!python/object/apply:os.system ['touch /tmp/pwned']\n"),
    )
    anchors = [f"&a [{', '.join(['x'] * 9)}]"] + [
        f"&{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    row(
        s,
        "billion-laughs alias bomb (9^9 leaves) in a sweep list",
        "validate",
        scenario(TINY + f"sweep: {{routing.seed: [{', '.join(anchors)}, *i]}}\n"),
    )
    row(s, "100,000 nested `[`", "validate", scenario("[" * 100_000))
    row(s, "duplicate key `name`", "validate", scenario(TINY + "name: again\n"))
    row(s, "`hidden: 100`", "validate", scenario(TINY.replace("hidden: 128", "hidden: 100")))
    row(
        s,
        "`tokens_per_rank: -5`",
        "validate",
        scenario(TINY.replace("tokens_per_rank: 4", "tokens_per_rank: -5")),
    )
    row(
        s,
        "`tokens_per_rank: 10**30`",
        "validate",
        scenario(TINY.replace("tokens_per_rank: 4", "tokens_per_rank: " + "1" + "0" * 30)),
    )
    row(s, "`seed: three`", "validate", scenario(TINY.replace("seed: 3", "seed: three")))
    row(s, "`alpha: .nan`", "validate", scenario(TINY.replace("seed: 3", "seed: 3, alpha: .nan")))
    row(s, "`measure: {blockz: 2}`", "validate", scenario(TINY.replace("blocks: 2", "blockz: 2")))
    # Arm references (docs/ARMS.md "Bring your own arm"): each one line naming arms[i], nothing
    # written.
    scenario(
        "from moebench.arm.base import Arm\nNOT_AN_ARM = 42\n"
        "CLASH = Arm(name='stock', family='prefill', summary='s', build=lambda ws: ())\n"
        "DECODE = Arm(name='d', family='decode', summary='s', build=lambda ws: (), layout='TKD')\n",
        "bad_arm.py",
    )
    scenario("raise RuntimeError('broken at import')\n", "raises.py")
    arm_refs = [
        ("a file that does not exist", "missing.py:ARM"),
        ("a file without that attribute", "bad_arm.py:NOPE"),
        ("an attribute that is not an Arm", "bad_arm.py:NOT_AN_ARM"),
        ("a user's arm named like a built-in arm", "bad_arm.py:CLASH"),
        ("a decode arm among prefill arms", "bad_arm.py:DECODE"),
        ("a file that raises while importing", "raises.py:ARM"),
        ("an import string of no module", "no_such_pkg.moe:ARM"),
        ("a name that is no arm", "nonsense"),
        ("the same arm twice", "stock"),
    ]
    for what, ref in arm_refs:
        text = TINY.replace("arms: [stock, prefix_sum_masked]", f"arms: [stock, '{ref}']")
        row(s, f"arm reference: {what} (`{ref}`)", "run", scenario(text), "--results",
            tmp / "never-written")  # fmt: skip
    row(
        s,
        "`name: '\\u202e'` (right-to-left override)",
        "validate",
        scenario(TINY.replace("name: tiny", 'name: "\\u202e"')),
    )
    row(
        s,
        "DeepSeek preset, 2^20 tokens per rank, EP8",
        "validate",
        scenario(
            "name: big\nmodel: deepseek-v4-flash\ntopology: {ep: 8}\n"
            "shape: {tokens_per_rank: 1048576}\n"
        ),
    )
    row(
        s,
        "`blocks: 10000, iterations: 100000`",
        "validate",
        scenario(TINY.replace("blocks: 2, iterations: 1", "blocks: 10000, iterations: 100000")),
    )
    row(
        s,
        "`measure.case_timeout_s: -1`",
        "validate",
        scenario(TINY.replace("iterations: 1}", "iterations: 1, case_timeout_s: -1}")),
    )
    row(
        s,
        "a sweep whose third case needs more rows than `capacity: 64` holds",
        "run",
        scenario(
            TINY.replace("alignment: 16}", "alignment: 16, capacity: 64}")
            + "sweep: {shape.tokens_per_rank: [2, 3, 32]}\n"
        ),
        "--results",
        tmp / "r1",
    )
    note(s, "(what that run wrote)", f"T/r1 exists: {(tmp / 'r1').exists()}")
    row(s, "scenario path is a folder", "validate", tmp)
    row(s, "scenario is `/dev/zero`", "validate", "/dev/zero")
    row(s, "scenario file missing", "validate", tmp / "missing.yaml")
    row(s, "5 MB scenario", "validate", scenario("# " + "x" * 5_000_000))

    # --- trace files (the scenario names the trace)
    t = "trace"

    def with_trace(name: str, data: bytes | str, extra: str = "") -> Path:
        trace(name, data)
        return scenario(TRACE.replace("path: t}", f"path: {name}{extra}}}"))

    row(t, "trace file missing", "validate", scenario(TRACE.replace("path: t", "path: none.json")))
    row(
        t,
        "`/etc/passwd` as a trace",
        "validate",
        scenario(TRACE.replace("path: t", "path: /etc/passwd")),
    )
    good = json.dumps({"logical_count": [[0, 0, 0, 0], [5, 1, 0, 2]]})
    row(t, "JSON truncated half-way", "validate", with_trace("half.json", good[: len(good) // 2]))
    row(
        t,
        "JSON nested 100,000 deep",
        "validate",
        with_trace("deep.json", '{"logical_count": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    )
    row(t, "a NaN count", "validate", with_trace("nan.json", '{"logical_count": [[1, NaN, 2, 3]]}'))
    row(
        t,
        "a negative count",
        "validate",
        with_trace("neg.json", '{"logical_count": [[1, -2, 2, 3]]}'),
    )
    row(
        t,
        "a count of 10**400",
        "validate",
        with_trace("big.json", '{"logical_count": [[1, 1' + "0" * 400 + ", 2, 3]]}"),
    )
    row(
        t,
        "a string among the counts",
        "validate",
        with_trace("str.json", '{"logical_count": [[1, "2", 2, 3]]}'),
    )
    row(
        t,
        "8 experts for a 4-expert model",
        "validate",
        with_trace("wide.json", json.dumps({"logical_count": [[1] * 8]})),
    )
    row(t, "layer 7 of a 2-layer trace", "validate", with_trace("l.json", good, ", layer: 7"))
    row(t, "layer 0, which is all zeros", "validate", with_trace("z.json", good, ", layer: 0"))
    with open(tmp / "pickle.npy", "wb") as f:
        np.save(f, np.array([[object(), 1.0]], dtype=object), allow_pickle=True)
    row(
        t,
        "`.npy` holding pickled objects",
        "validate",
        scenario(TRACE.replace("path: t", "path: pickle.npy")),
    )
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 4), }"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    row(
        t,
        "`.npy` header claiming 2^40 x 4 floats (8 TiB)",
        "validate",
        with_trace(
            "huge.npy",
            b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 32,
        ),
    )
    with open(tmp / "strs.npy", "wb") as f:
        np.save(f, np.array([["1", "2", "3", "4"]]))
    row(t, "`.npy` of strings", "validate", scenario(TRACE.replace("path: t", "path: strs.npy")))

    # --- results folder, resume, time limit, source pins
    r = "run"
    blocker = trace("file", "not a folder")
    row(r, "`--results` is a file", "run", scenario(TINY), "--results", blocker)
    row(r, "`--results` below a file", "run", scenario(TINY), "--results", blocker / "sub")
    row(r, "`--case-timeout=0`", "run", scenario(TINY), "--case-timeout=0", "--results", tmp)
    row(r, "`--case-timeout nan`", "run", scenario(TINY), "--case-timeout", "nan")
    row(
        r,
        "`--case-timeout soon` (a usage error, worded by Click)",
        "run",
        scenario(TINY),
        "--case-timeout",
        "soon",
    )
    pinned = TINY + "expect_sources: {stock: " + "a" * 64 + "}\n"
    row(
        r,
        "`expect_sources` pin that does not match the code",
        "run",
        scenario(pinned),
        "--results",
        tmp / "r2",
    )
    row(r, "`--resume` of a folder that is not a run", "run", scenario(TINY), "--resume", tmp)
    row(r, "`--resume` of a missing folder", "run", scenario(TINY), "--resume", tmp / "gone")
    run_a = run(TINY)
    manifest = run_a / "manifest.json"
    row(
        r,
        "`--resume` with another scenario",
        "run",
        scenario(TINY.replace("seed: 3", "seed: 4")),
        "--resume",
        run_a,
    )
    with open(run_a / ".lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        row(
            r,
            "`--resume` while another process writes the run",
            "run",
            scenario(TINY),
            "--resume",
            run_a,
        )
    doc = json.loads(manifest.read_text())
    doc["sources"]["stock"]["hash"] = "b" * 64
    manifest.write_text(json.dumps(doc))
    row(r, "`--resume` after the arm's code changed", "run", scenario(TINY), "--resume", run_a)
    manifest.write_text('{"results_format": 1, "run_id": ')
    row(r, "`--resume` of a run with a torn manifest", "run", scenario(TINY), "--resume", run_a)

    # --- compare
    c = "compare"
    run_b = run(TINY)
    run_c = run(
        TINY.replace("name: tiny", "name: other") + "sweep: {shape.tokens_per_rank: [2, 3]}\n"
    )
    run_d = run(TINY.replace("hidden: 128", "hidden: 256"))
    run_e = run(TINY.replace("arms: [stock, prefix_sum_masked]", "arms: [stock, prefix_sum]"))
    row(c, "runs that share no case", "compare", run_b, run_c)
    row(c, "the same, with `--force`", "compare", run_b, run_c, "--force", "--format", "csv")
    row(c, "case `c000` is hidden 128 in one run, 256 in the other", "compare", run_b, run_d)
    row(c, "runs with different arms", "compare", run_b, run_e, "--format", "csv")
    row(c, "the same run twice", "compare", run_b, run_b)
    row(c, "a baseline arm no run has", "compare", run_b, "--baseline", "stok")
    (run_b / "samples" / "c000.parquet").write_bytes(b"PAR1 garbage")
    row(c, "a run with a corrupt part", "compare", run_b)
    row(c, "a folder that is not a run", "compare", tmp)

    print("| input | what | exit | printed |")
    print("|---|---|---|---|")
    for group, what, code, said in rows:
        print(f"| {group} | {what} | {code} | {said} |")


if __name__ == "__main__":
    main()
