"""Traces through the CLI: import then stats, bad input refused in one line (exit 2), what a run
records of its trace, what the import writes and what it refuses."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from trace_inputs import load_trace, scenario_text
from typer.testing import CliRunner

from moebench.cli.app import app
from moebench.core.errors import ScenarioError, clip
from moebench.routing.replay import apportion
from moebench.routing.traces import (
    first_line,
    read_meta,
    write_parquet,
)
from moebench.spec.load import parse_scenario

runner = CliRunner()

# --- CLI -----------------------------------------------------------------------------------------


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("moebench: error: "), result.output
    return lines[0]


def test_cli_import_then_stats(tmp_path):
    src = tmp_path / "c.csv"
    np.savetxt(src, load_trace().counts_SLE[0], delimiter=",", fmt="%d")
    out = tmp_path / "t.parquet"
    args = ["trace", "import", str(src), "--format", "counts", "--model", "x/tiny",
            "--revision", "r1", "--top-k", "2", "-o", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "load trace of x/tiny at r1" in result.output and read_meta(out)["top_k"] == 2
    result = runner.invoke(app, ["trace", "stats", str(out), "--ep", "2"])
    assert result.exit_code == 0, result.output
    assert "x/tiny at r1" in result.output and "EP2 overload" in result.output
    assert "empty (dense) layers, not shown: 0" in result.output
    result = runner.invoke(app, ["trace", "stats", str(out), "--ep", "4", "--tokens", "10",
                                 "--layer", "2"])  # fmt: skip
    assert result.exit_code == 0 and "a replayed step of 10 tokens x top-2" in result.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["stats", "{tmp}/missing.json"], "cannot read trace"),
        (["stats", "{tmp}/bad.json"], "malformed JSON"),
        (["stats", "{tmp}/c.npy", "--ep", "3"], "--ep: 3 does not divide"),
        (["stats", "{tmp}/c.npy", "--layer", "9"], "layer 9 is not in the trace"),
        (["stats", "{tmp}/c.npy", "--tokens", "4"], "pass --top-k"),
        (["stats", "{tmp}/c.txt"], "unknown trace type .txt"),
        (
            [
                "import",
                "{tmp}/bad.json",
                "--format",
                "sglang-stat",
                "--model",
                "m",
                "--revision",
                "r",
                "--top-k",
                "2",
                "-o",
                "{tmp}/o.parquet",
            ],
            "malformed JSON",
        ),  # fmt: skip
        (
            [
                "import",
                "{tmp}/c.npy",
                "--format",
                "magic",
                "--model",
                "m",
                "--revision",
                "r",
                "-o",
                "{tmp}/o.parquet",
            ],
            "--format: expected one of",
        ),  # fmt: skip
        (
            [
                "import",
                "{tmp}/c.npy",
                "--format",
                "counts",
                "--model",
                "m",
                "--revision",
                "r",
                "--top-k",
                "2",
                "-o",
                "{tmp}/o.csv",
            ],
            "a moebench trace is a .parquet file",
        ),  # fmt: skip
        (
            [
                "import",
                "{tmp}/c.npy",
                "--format",
                "counts",
                "--model",
                "m",
                "--revision",
                "r",
                "--top-k",
                "2",
                "-o",
                "{tmp}/no/such/o.parquet",
            ],
            "cannot write",
        ),  # fmt: skip
    ],
)
def test_cli_bad_input_exits_2_in_one_line(tmp_path, args, fragment):
    (tmp_path / "bad.json").write_text('{"logical_count": [[1, 2')
    (tmp_path / "c.txt").write_text("1,2")
    np.save(tmp_path / "c.npy", load_trace().counts_SLE)
    line = one_line_error(runner.invoke(app, ["trace", *[a.format(tmp=tmp_path) for a in args]]))
    assert fragment in line, line
    assert not (tmp_path / "o.parquet").exists()


def test_run_records_trace_label_and_sha(tmp_path):
    """A run replaying a trace fills the routing table's label and trace_sha256."""
    write_parquet(load_trace(), tmp_path / "t.parquet")
    doc = yaml.safe_load(scenario_text("t.parquet"))
    doc["shape"]["tokens_per_rank"] = 4
    doc["routing"]["layer"] = 5
    doc["arms"], doc["precision"] = ["prefix_sum_masked"], "bf16"  # one arm: the test is the table
    doc["measure"] = {"regimes": ["ffn"], "warmup": 0, "blocks": 1, "iterations": 1,
                      "baseline": "prefix_sum_masked"}  # fmt: skip
    (tmp_path / "s.yaml").write_text("# a trace replayed end to end\n" + yaml.safe_dump(doc))
    result = runner.invoke(app, ["run", str(tmp_path / "s.yaml"), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    rows = pq.read_table(run_dir / "routing" / "c000.parquet").to_pylist()
    assert {r["routing"] for r in rows} == {"trace(t.parquet,layer=5)"}
    assert {r["trace_sha256"] for r in rows} == {load_trace().sha256}
    n = apportion(load_trace().layer_counts(5), 16, 8)
    assert [r["live_rows"] for r in rows] == [int(n[:4].sum()), int(n[4:].sum())]


# --- what the import writes, and what it refuses -------------------------------------------------


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_parquet_trace_gets_the_mode_of_the_umask(tmp_path, mask, mode):
    """Not mkstemp's 0600: the mode a plain open() gives under the umask."""
    old = os.umask(mask)
    try:
        write_parquet(load_trace(), tmp_path / "t.parquet")
        src = tmp_path / "c.csv"
        np.savetxt(src, load_trace().counts_SLE[0], delimiter=",", fmt="%d")
        result = runner.invoke(app, [*import_args(src, tmp_path / "cli.parquet")])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    for name in ("t.parquet", "cli.parquet"):
        assert oct((tmp_path / name).stat().st_mode & 0o777) == oct(mode), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "cli.parquet", "t.parquet"]


def import_args(src: Path, out: Path, *extra: str, model: str = "x/tiny", rev: str = "r1"):
    return ["trace", "import", str(src), "--format", "counts", "--model", model,
            "--revision", rev, "--top-k", "2", "-o", str(out), *extra]  # fmt: skip


def test_cli_import_refuses_to_replace_its_output_without_force(tmp_path, monkeypatch):
    src = tmp_path / "c.csv"
    np.savetxt(src, load_trace().counts_SLE[0], delimiter=",", fmt="%d")
    out = tmp_path / "t.parquet"
    out.write_bytes(b"an earlier import, to keep")
    line = one_line_error(runner.invoke(app, import_args(src, out)))
    assert line == f"moebench: error: -o: {out} already exists; pass --force to replace it"
    assert out.read_bytes() == b"an earlier import, to keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "t.parquet"]  # no temp file
    result = runner.invoke(app, import_args(src, out, "--force"))
    assert result.exit_code == 0, result.output
    assert read_meta(out)["model_id"] == "x/tiny"
    # the race: the output appears after the check, while the trace is being read
    out.unlink()
    from moebench.routing import traces

    real = traces.atomic_write

    def appears_meanwhile(path, write, **kw):
        path.write_bytes(b"written by someone else meanwhile")
        return real(path, write, **kw)

    monkeypatch.setattr(traces, "atomic_write", appears_meanwhile)
    line = one_line_error(runner.invoke(app, import_args(src, out)))
    assert "already exists; pass --force" in line
    assert out.read_bytes() == b"written by someone else meanwhile"


V3_ID, V3_REV = "deepseek-ai/DeepSeek-V3", "e815299b0bcbac849fa540c768ef21845365c9eb"


def v3_scenario(path: str, **model) -> str:
    return yaml.safe_dump({
        "name": "t", "model": {"preset": "deepseek-v3", **model}, "topology": {"ep": 8},
        "routing": {"source": "trace", "path": path, "layer": 1},
        "shape": {"tokens_per_rank": 8},
    })  # fmt: skip


def test_cli_import_at_another_revision_warns_and_the_scenario_says_the_same(tmp_path):
    """A trace recorded on another revision of a preset's model is kept (it is legitimate);
    the import warns in one line, and the scenario's pin error gives the same advice."""
    src = tmp_path / "c.npy"
    np.save(src, np.random.default_rng(0).integers(0, 50, size=(3, 256)))
    out = tmp_path / "t.parquet"
    result = runner.invoke(app, import_args(src, out, model=V3_ID, rev="main"))
    assert result.exit_code == 0, result.output
    advice = "to replay this trace, set model.revision: main in the scenario"
    example = "(model: {preset: deepseek-v3, revision: main})"
    assert result.stderr.splitlines() == [
        f"moebench: warning: --revision main is not the revision preset deepseek-v3 pins "
        f"({V3_REV}); {advice} {example}"
    ]
    assert read_meta(out)["revision"] == "main"  # kept as recorded
    with pytest.raises(ScenarioError) as info:
        parse_scenario(v3_scenario("t.parquet"), path=str(tmp_path / "s.yaml"))
    msg = str(info.value)
    assert len(msg.splitlines()) == 1
    assert f"pinned to {V3_ID} at revision main" in msg
    assert f"the scenario's model is {V3_ID} at revision {V3_REV} (preset deepseek-v3)" in msg
    assert msg.endswith(f"; {advice} {example}")
    s = parse_scenario(v3_scenario("t.parquet", revision="main"), path=str(tmp_path / "s.yaml"))
    assert s.model.revision == "main" and s.model.label == "deepseek-v3 (modified: revision=main)"
    # the preset's own revision, or a model that is no preset's: no warning
    for model, rev, extra in ((V3_ID, V3_REV, []), ("x/tiny", "main", ["--experts", "256"])):
        args = import_args(src, tmp_path / f"{rev}.parquet", *extra, model=model, rev=rev)
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and result.stderr == "", result.output


# --- one-line messages are cut at a word, never inside one ---------------------------------------


@pytest.mark.parametrize(
    "text, limit, want",
    [
        ("short enough", 20, "short enough"),  # nothing to cut
        ("alpha beta gamma delta", 15, "alpha beta..."),  # cut before the word that overflows
        ("alpha beta, gamma delta", 16, "alpha beta..."),  # no dangling comma before "..."
        ("alpha beta gamma", 13, "alpha beta..."),  # the limit falls on a space
        ("a" * 30, 10, "a" * 7 + "..."),  # one word longer than the limit: cut, marked
        ("line one\n  line\ttwo", 80, "line one line two"),  # whitespace runs become one space
    ],
)
def test_clip_cuts_at_a_word_boundary(text, limit, want):
    assert clip(text, limit) == want
    assert len(clip(text, limit)) <= limit


def test_first_line_drops_advice_to_load_unsafely_and_cuts_at_a_word():
    torchs = Exception(
        "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
        "`weights_only` argument in `torch.load` from `False` to `True`. Re-running "
        "`torch.load` with `weights_only` set to `False` will likely succeed, but it can result "
        "in arbitrary code execution. Do it only if you got the file from a trusted source.\n"
        "Please file an issue with the following: WeightsUnpickler error: Unsupported operand 1"
    )
    assert first_line(torchs) == "Weights only load failed."
    numpys = ValueError(
        "This file contains pickled (object) data. If you trust the file you can load it "
        "unsafely using the `allow_pickle=` keyword argument or `pickle.load()`."
    )
    assert first_line(numpys) == "This file contains pickled (object) data."
    long = ValueError("could not convert string to float: " + " ".join(["'token'"] * 60))
    line = first_line(long)
    assert len(line) <= 160 and line.endswith("'token'...")
