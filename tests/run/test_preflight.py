"""Before any work: a bad scenario, trace, results folder or --resume target is one line, exit 2,
and nothing is written or changed."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from moebench.cli.app import app
from moebench.core.errors import ResultsError
from moebench.results.files import check_room
from moebench.results.reader import load_run
from moebench.results.writer import RunWriter

cli = CliRunner()
TINY = """\
name: tiny
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: bf16
arms: [stock, prefix_sum_masked]
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
"""


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("moebench: error: "), result.output
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished one-case run and its scenario."""
    tmp = tmp_path_factory.mktemp("finished")
    scenario = tmp / "tiny.yaml"
    scenario.write_text(TINY)
    result = cli.invoke(app, ["run", str(scenario), "--results", str(tmp / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp / "r").iterdir()
    return scenario, run_dir


@pytest.fixture
def run_copy(finished, tmp_path):
    """A private copy of the finished run (tests edit it)."""
    scenario, run_dir = finished
    copy = tmp_path / run_dir.name
    for name, data in snapshot(run_dir).items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(data)
    return scenario, copy


def test_every_case_is_planned_before_the_run_folder_exists(tmp_path):
    # Case c002 needs 96 rows of a 64-row capacity: found by planning, before anything is made.
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        TINY.replace("alignment: 16}", "alignment: 16, capacity: 64}")
        + "sweep: {shape.tokens_per_rank: [2, 3, 32]}\n"
    )
    line = one_line_error(cli.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")]))
    assert "case c002-tokens_per_rank=32: shape.capacity: rank 0 needs 96 rows" in line
    assert not (tmp_path / "r").exists()


def test_a_trace_that_does_not_load_in_a_later_case_writes_nothing(tmp_path):
    (tmp_path / "good.json").write_text(json.dumps({"logical_count": [[1, 2, 3, 4]]}))
    (tmp_path / "bad.json").write_text('{"logical_count": [[1, 2, 3, -4]]}')
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        TINY.replace("routing: {family: uniform, seed: 3}", "routing: {family: trace}")
        + "sweep: {routing.path: [good.json, bad.json]}\n"
    )
    line = one_line_error(cli.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")]))
    assert line.endswith("bad.json: logical_count holds negative counts")
    assert not (tmp_path / "r").exists()


def test_results_folder_below_a_file_creates_nothing(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultsError, match="is not a folder"):
        check_room(tmp_path / "file" / "a" / "b")
    with pytest.raises(ResultsError, match="MB free"):
        check_room(tmp_path / "new" / "deeper", min_free_mb=10**12)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (None, "needs the scenario the run started with"),  # another scenario
        ({"sources": "stock"}, "arm 'stock': sources bbbbbbbbbbbbbbbb... when the run started"),
        ({"device": "cuda"}, "the run started on cuda, this resume would run on cpu"),
    ],
    ids=["other-scenario", "sources-changed", "other-device"],
)
def test_resume_refusals_change_nothing(run_copy, tmp_path, edit, message):
    scenario, run_dir = run_copy
    manifest = run_dir / "manifest.json"
    if edit is None:
        scenario = tmp_path / "other.yaml"
        scenario.write_text(TINY.replace("seed: 3", "seed: 4"))
    else:
        doc = json.loads(manifest.read_text())
        if "sources" in edit:
            doc["sources"][edit["sources"]]["hash"] = "b" * 64
        else:
            doc.update(edit)
        manifest.write_text(json.dumps(doc))
    before = snapshot(run_dir)
    line = one_line_error(cli.invoke(app, ["run", str(scenario), "--resume", str(run_dir)]))
    assert message in line, line
    assert snapshot(run_dir) == before


def test_resume_with_allow_source_drift_records_the_drift(run_copy):
    scenario, run_dir = run_copy
    manifest = run_dir / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["sources"]["stock"]["hash"] = "b" * 64
    manifest.write_text(json.dumps(doc))
    args = ["run", str(scenario), "--resume", str(run_dir), "--allow-source-drift"]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    (resume,) = load_run(run_dir).manifest["resumes"]
    assert resume["source_drift"][0].startswith("arm 'stock': sources bbbbbbbbbbbbbbbb")


@pytest.mark.parametrize("target", ["not-a-run", "missing", "torn-manifest", "locked"])
def test_resume_of_something_that_is_not_a_resumable_run(run_copy, tmp_path, target):
    scenario, run_dir = run_copy
    folder = {"not-a-run": tmp_path, "missing": tmp_path / "gone"}.get(target, run_dir)
    if target == "torn-manifest":
        (run_dir / "manifest.json").write_text('{"results_format": 1, "run_id": ')
    before = snapshot(tmp_path)
    if target == "locked":
        with open(run_dir / ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            line = one_line_error(cli.invoke(app, ["run", str(scenario), "--resume", str(folder)]))
    else:
        line = one_line_error(cli.invoke(app, ["run", str(scenario), "--resume", str(folder)]))
    expected = {
        "not-a-run": "no manifest in",
        "missing": "results folder not found",
        "torn-manifest": "corrupt manifest",
        "locked": "is being written by another process",
    }[target]
    assert expected in line, line
    assert snapshot(tmp_path) == before


def test_scratch_is_private_and_gone_after_finish_and_resume(tmp_path):
    writer = RunWriter.create(tmp_path, "run-1", {})
    job = writer.scratch("c000")
    (job / "left.parquet").write_bytes(b"half")
    with pytest.raises(ValueError, match="invalid case id"):
        writer.scratch("../escape")
    writer.close()  # a crash: the scratch folder stays...
    assert load_run(tmp_path / "run-1").samples.num_rows == 0  # ...unseen by readers...
    resumed = RunWriter.resume(tmp_path / "run-1")
    assert not (tmp_path / "run-1" / ".scratch").exists()  # ...and resume empties it
    resumed.scratch("c001")
    resumed.finish("complete")
    assert not (tmp_path / "run-1" / ".scratch").exists()


@pytest.mark.parametrize(
    "options, message",
    [
        (["--baseline", "nope"], "--baseline: must be one of the run's arms"),
        (["--case-timeout", "-1"], "--case-timeout: must be > 0"),
        (["--dist-timeout", "0"], "--dist-timeout: must be > 0"),
    ],
    ids=["baseline", "case-timeout", "dist-timeout"],
)
def test_a_bad_option_on_resume_changes_nothing(run_copy, options, message):
    scenario, run_dir = run_copy
    before = snapshot(run_dir)
    line = one_line_error(
        cli.invoke(app, ["run", str(scenario), "--resume", str(run_dir), *options])
    )
    assert message in line, line
    assert snapshot(run_dir) == before
