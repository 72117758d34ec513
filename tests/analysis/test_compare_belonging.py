"""compare on runs that do not belong together: refuse what would mislead, warn about the rest."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from moebench.analysis.compare import compare_runs
from moebench.cli.app import app
from moebench.core.errors import MoebenchError
from moebench.results.reader import Run
from moebench.results.schema import SCHEMAS, rows_to_table
from moebench.results.writer import RunWriter

SOURCES = {"stock": "aa", "masked": "cc"}
ENV = {"torch": "2.13.0"}


def sample(run_id: str, case: str, arm: str, block: int, t: float, hidden: int = 128) -> dict:
    return dict(
        run_id=run_id, case_id=case, arm=arm, rank=0, stage="ffn", regime="ffn", block=block,
        position=0, iteration=0, time_us=t, weight_bytes=-1, device="cpu", sm_clock_mhz=math.nan,
        mem_clock_mhz=math.nan, temperature_c=math.nan, power_w=math.nan, mode="eager",
        weights="warm", weight_copies=1, step=-1, layer=-1,
        tokens_per_rank=16, live_rows=40, capacity_rows=256,
        local_experts=4, hidden=hidden, intermediate=128, top_k=2, precision="bf16",
        activation="silu", routing="uniform", gemm="triton", params="{}",
    )  # fmt: skip


def check(run_id: str, case: str, arm: str) -> dict:
    return dict(run_id=run_id, case_id=case, arm=arm, rank=0, gate="reference", status="pass",
                error=1e-6, detail="")  # fmt: skip


def make_run(run_id: str, cases=("c000",), arms=("stock", "masked"), hidden=128, **manifest):
    samples, checks = [], []
    for case in cases:
        for arm in arms:
            samples += [sample(run_id, case, arm, b, 100.0 + b, hidden) for b in range(4)]
            checks.append(check(run_id, case, arm))
    full = {"run_id": run_id, "finished_cases": list(cases), "sources": SOURCES,
            "environment": ENV, "scenario": {"sha256": "1" * 64}}  # fmt: skip
    return Run(
        run_dir=Path("/nonexistent") / run_id,
        manifest=full | manifest,
        samples=rows_to_table("samples", samples),
        checks=rows_to_table("checks", checks),
        routing=SCHEMAS["routing"].empty_table(),
    )


def test_runs_that_share_no_case_are_refused_unless_forced():
    a, b = make_run("run-a", cases=("c000",)), make_run("run-b", cases=("c001", "c002"))
    with pytest.raises(MoebenchError, match="runs run-a, run-b share no case.*--force"):
        compare_runs([a, b])
    comp = compare_runs([a, b], force=True)
    assert comp.warnings[0].startswith("forced: runs run-a, run-b share no case")
    assert {r.run_id for r in comp.rows} == {"run-a", "run-b"}


def test_one_case_id_with_two_shapes_is_refused():
    a, b = make_run("run-a"), make_run("run-b", hidden=256)
    with pytest.raises(MoebenchError, match=r"case c000 is not the same case .* \(hidden 128 vs"):
        compare_runs([a, b])
    assert compare_runs([a, b], force=True).warnings[0].startswith("forced: case c000")


def test_milder_differences_are_warnings():
    a = make_run("run-a", cases=("c000", "c001"))
    b = make_run("run-b", cases=("c000",), arms=("stock", "other"), scenario={"sha256": "2" * 64})
    warnings = compare_runs([a, b]).warnings
    assert any("do not have the same cases: c001 only in one of them" in w for w in warnings)
    assert any("come from different scenarios (sha256 111111111111 vs 222222222222)" in w
               for w in warnings)  # fmt: skip
    assert any("arm(s) masked only in some runs" in w for w in warnings)
    assert any("arm(s) other only in some runs" in w for w in warnings)


@pytest.mark.parametrize("status", ["interrupted", "failed", "running"])
def test_unfinished_runs_are_flagged(status):
    run = make_run("run-a", status=status, cases=("c000",))
    run.manifest["cases"] = ["c000", "c001", "c002"]
    (warning,) = compare_runs([run]).warnings
    assert warning == f"run run-a did not finish (status {status}): 1 of 3 case(s) finished"


def test_cli_refuses_then_forces(tmp_path):
    dirs = []
    for run in (make_run("run-a", cases=("c000",)), make_run("run-b", cases=("c001",))):
        writer = RunWriter.create(tmp_path, run.run_id, {"sources": SOURCES, "environment": ENV})
        case = run.manifest["finished_cases"][0]
        writer.write_case(case, run.samples.to_pylist(), run.checks.to_pylist(), [])
        writer.finish("complete")
        dirs.append(str(writer.run_dir))
    refused = cli_invoke(["compare", *dirs])
    assert refused.exit_code == 2
    (line,) = [ln for ln in refused.output.splitlines() if ln.strip()]
    assert line.startswith("moebench: error: these runs do not belong in one table: runs run-a")
    forced = cli_invoke(["compare", *dirs, "--force", "--format", "csv"])
    assert forced.exit_code == 0, forced.output
    assert "moebench: warning: forced: runs run-a, run-b share no case" in forced.output


def cli_invoke(args: list[str]):
    return CliRunner().invoke(app, args)
