"""Failures become rows, a lost device stops the run cleanly, and --resume finishes it.

Faults are injected by replacing one arm's build (or the inputs, or the clock) for one call:
the runner must record an `error` row with the reason, write the case's parts, and run every
other arm and case.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from triton.runtime.errors import OutOfResources
from typer.testing import CliRunner

import arms.prefill.prefix_sum_masked
import arms.prefill.stock
from moebench.arm import prefill as pipeline
from moebench.cli.app import app
from moebench.core import faults
from moebench.measure.clock import Clock
from moebench.plan import inputs
from moebench.results.reader import load_run

cli = CliRunner()

# Two cases (routing seeds 1 and 2), one rank, two arms, bf16, the ffn regime only: the smallest
# run that still gates and times two arms.
TWO_CASES = """\
name: faults
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 1}
routing: {family: uniform, seed: 0}
shape: {tokens_per_rank: 4, alignment: 16}
precision: bf16
arms: [stock, prefix_sum_masked]
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
sweep: {routing.seed: [1, 2]}
"""
C0, C1 = "c000-seed=1", "c001-seed=2"


def scenario(tmp_path: Path, text: str = TWO_CASES) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def run_cli(tmp_path: Path, *args: str, text: str = TWO_CASES):
    result = cli.invoke(
        app, ["run", str(scenario(tmp_path, text)), "--results", str(tmp_path / "r"), *args]
    )
    dirs = sorted((tmp_path / "r").iterdir()) if (tmp_path / "r").exists() else []
    return result, (dirs[0] if dirs else None)


def checks_of(run_dir: Path, case: str) -> list[dict]:
    return pq.read_table(run_dir / "checks" / f"{case}.parquet").to_pylist()


def timed_arms(run_dir: Path, case: str) -> set[str]:
    return set(pq.read_table(run_dir / "samples" / f"{case}.parquet")["arm"].to_pylist())


def fail_once(monkeypatch, owner, name: str, exc: BaseException, call: int = 1) -> None:
    """Replace ``owner.name`` so that its ``call``-th call raises ``exc``; the others are real."""
    real = getattr(owner, name)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise exc
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)


def fail_arm_once(monkeypatch, module, exc: BaseException, call: int = 1) -> None:
    """Make the ``call``-th build of the arm that ``module.ARM`` defines raise ``exc``: the
    registry resolves ``module:ARM`` afresh at each run, so the run sees the patched arm."""
    holder = type("Holder", (), {"build": staticmethod(module.ARM.build)})
    fail_once(monkeypatch, holder, "build", exc, call)
    monkeypatch.setattr(module, "ARM", dataclasses.replace(module.ARM, build=holder.build))


OOM = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 158.00 GiB")


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    "exc, kind",
    [
        (OOM, "oom"),  # torch's own class
        (RuntimeError("Triton Error [CUDA]: out of memory"), "oom"),  # a launch that cannot fit
        (MemoryError(), "oom"),  # host memory
        (OutOfResources(300000, 232448, "shared memory"), "compile"),  # a config that cannot fit
        (RuntimeError("CUDA error: an illegal memory access was encountered"), "fatal"),
        (RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"), "fatal"),
        (RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors..."), "fatal"),
        (RuntimeError("cudaErrorIllegalAddress"), "fatal"),
        (RuntimeError("CUDA error: unspecified launch failure"), "fatal"),
        (ValueError("shapes do not match"), "error"),
    ],
)
def test_classify(exc, kind):
    assert faults.classify(exc) == kind
    text = faults.describe(exc)
    assert text.startswith(f"{kind}: {type(exc).__name__}") and "\n" not in text
    assert len(text) <= 300


def test_stopper_turns_a_signal_into_interrupted_at_the_next_check():
    stop = faults.Stopper()
    stop.check()
    stop.signal = 2
    with pytest.raises(faults.Interrupted) as info:
        stop.check()
    assert info.value.signum == 2 and info.value.signame == "SIGINT"
    assert isinstance(info.value, KeyboardInterrupt)


def test_stopper_case_deadline():
    stop = faults.Stopper()
    stop.start_case(1e-9)
    with pytest.raises(faults.CaseTimeout, match="case time limit of 1e-09 s"):
        stop.check("rank 0, timing")
    stop.end_case()
    stop.check()


# --------------------------------------------------------------------------- rows, not crashes


def test_out_of_memory_in_one_arm_is_a_row_and_the_rest_runs(tmp_path, monkeypatch):
    fail_once(monkeypatch, pipeline, "Workspace", OOM, call=2)  # the second arm's buffers
    result, run_dir = run_cli(tmp_path)
    assert result.exit_code == 1, result.output
    assert "could not run" in result.output and "oom: OutOfMemoryError" in result.output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "errors"
    assert manifest["finished_cases"] == [C0, C1]
    (row,) = [c for c in checks_of(run_dir, C0) if c["arm"] == "prefix_sum_masked"]
    assert (row["gate"], row["status"]) == ("run", "error")
    assert row["detail"].startswith("oom: OutOfMemoryError: CUDA out of memory")
    assert timed_arms(run_dir, C0) == {"stock"}  # the other arm still gated and timed
    assert timed_arms(run_dir, C1) == {"stock", "prefix_sum_masked"}  # the next case: all
    comparison = cli.invoke(app, ["compare", str(run_dir), "--format", "csv"])
    assert "run error (rank 0): oom: OutOfMemoryError" in comparison.output


def test_out_of_memory_building_inputs_fails_every_arm_of_that_case(tmp_path, monkeypatch):
    fail_once(monkeypatch, inputs, "make_weights", OOM)
    result, run_dir = run_cli(tmp_path)
    assert result.exit_code == 1, result.output
    rows = checks_of(run_dir, C0)
    assert {(c["arm"], c["gate"], c["status"]) for c in rows} == {
        ("stock", "inputs", "error"),
        ("prefix_sum_masked", "inputs", "error"),
    }
    assert timed_arms(run_dir, C0) == set()
    assert len(pq.read_table(run_dir / "routing" / f"{C0}.parquet")) == 1  # still recorded
    assert timed_arms(run_dir, C1) == {"stock", "prefix_sum_masked"}


def test_out_of_memory_in_the_cases_own_checks_is_a_row_for_every_arm(tmp_path, monkeypatch):
    """Out of memory outside any arm's call (here the work ledger built in the gates; on the
    H200 the model regime's weights fingerprint): every arm of the case gets a ``case`` error
    row naming it, the run goes on to the next case and ends with exit code 1, not a
    traceback."""
    import moebench.run.layer as layer

    fail_once(monkeypatch, layer, "ledger_rows", OOM)
    result, run_dir = run_cli(tmp_path)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    rows = [c for c in checks_of(run_dir, C0) if c["status"] == "error"]
    assert {(c["arm"], c["gate"]) for c in rows} == {
        ("stock", "case"),
        ("prefix_sum_masked", "case"),
    }
    assert all(c["detail"].startswith("oom: OutOfMemoryError: CUDA out of memory") for c in rows)
    assert timed_arms(run_dir, C1) == {"stock", "prefix_sum_masked"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["finished_cases"] == [C0, C1]
    comparison = cli.invoke(app, ["compare", str(run_dir), "--format", "csv"])
    assert comparison.exit_code == 0, comparison.output
    assert "case error (rank 0): oom: OutOfMemoryError" in comparison.output


def test_compile_error_is_a_row(tmp_path, monkeypatch):
    fail_arm_once(monkeypatch, arms.prefill.stock, OutOfResources(300000, 232448, "shared memory"))
    result, run_dir = run_cli(tmp_path)
    assert result.exit_code == 1, result.output
    (row,) = [c for c in checks_of(run_dir, C0) if c["arm"] == "stock"]
    assert row["detail"].startswith("compile: OutOfResources: out of resource: shared memory")
    assert timed_arms(run_dir, C0) == {"prefix_sum_masked"}


def test_out_of_memory_while_timing_drops_only_that_arm(tmp_path, monkeypatch):
    fail_once(monkeypatch, Clock, "sample_us", OOM)  # block 0 starts with stock
    result, run_dir = run_cli(tmp_path)
    assert result.exit_code == 1, result.output
    rows = [c for c in checks_of(run_dir, C0) if c["status"] == "error"]
    assert [(c["arm"], c["gate"]) for c in rows] == [("stock", "timing")]
    assert timed_arms(run_dir, C0) == {"prefix_sum_masked"}


def test_case_time_limit_from_the_scenario(tmp_path):
    # The first case may take a millisecond (it cannot), the second ten minutes: the limit is
    # per case, so a sweep can give each case its own.
    text = TWO_CASES.replace(
        "sweep: {routing.seed: [1, 2]}", "sweep: {measure.case_timeout_s: [0.001, 600]}"
    )
    result, run_dir = run_cli(tmp_path, text=text)
    assert result.exit_code == 1, result.output
    c0, c1 = sorted(load_run(run_dir).manifest["finished_cases"])
    rows = [c for c in checks_of(run_dir, c0) if c["gate"] == "timeout"]
    assert {c["arm"] for c in rows} == {"stock", "prefix_sum_masked"}
    assert all(c["status"] == "error" and "case time limit of 0.001 s" in c["detail"] for c in rows)
    assert timed_arms(run_dir, c1) == {"stock", "prefix_sum_masked"}


def test_case_timeout_option_and_its_validation(tmp_path):
    result, run_dir = run_cli(tmp_path, "--case-timeout", "0.001")
    assert result.exit_code == 1, result.output
    manifest = load_run(run_dir).manifest
    assert manifest["options"]["case_timeout_s"] == 0.001
    assert all(
        any(c["gate"] == "timeout" for c in checks_of(run_dir, case))
        for case in manifest["finished_cases"]
    )
    (tmp_path / "x").mkdir()
    bad, _ = run_cli(tmp_path / "x", "--case-timeout=0")
    assert bad.exit_code == 2 and "--case-timeout: must be > 0" in bad.output
    assert not (tmp_path / "x" / "r").exists()


def test_device_fault_stops_cleanly_and_resume_finishes(tmp_path, monkeypatch):
    lost = RuntimeError("CUDA error: an illegal memory access was encountered\nCompile with ...")
    fail_arm_once(monkeypatch, arms.prefill.prefix_sum_masked, lost)
    result, run_dir = run_cli(tmp_path)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"moebench: error: device fault in case {C0} (fatal: RuntimeError")
    assert f"--resume {run_dir}" in line and "--isolate" in line
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["fault_case"] == C0
    assert "illegal memory access" in manifest["error"] and "--resume" in manifest["resume"]
    assert manifest["finished_cases"] == [C0]  # the faulting case, with its rows
    rows = {(c["arm"], c["gate"]) for c in checks_of(run_dir, C0) if c["status"] == "error"}
    assert rows == {("prefix_sum_masked", "run"), ("stock", "aborted")}

    monkeypatch.undo()
    again = cli.invoke(app, ["run", str(tmp_path / "s.yaml"), "--resume", str(run_dir)])
    assert again.exit_code == 1, again.output  # finished, but case 0 keeps its error rows
    assert "1 cases run, 1 already done" in again.output
    run = load_run(run_dir)
    assert run.manifest["finished_cases"] == [C0, C1] and run.manifest["status"] == "errors"
    assert timed_arms(run_dir, C1) == {"stock", "prefix_sum_masked"}
