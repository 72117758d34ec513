"""gemm: torch — the prefill arms with both GEMMs through torch._grouped_mm (bf16)."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from moebench.cli.app import app
from moebench.core.errors import ScenarioError
from moebench.spec.load import parse_scenario

runner = CliRunner()
BASE = """\
name: peer
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: bf16
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
"""


def test_torch_gemm_needs_bf16_prefill():
    assert parse_scenario(BASE + "gemm: torch\n").gemm == "torch"
    with pytest.raises(ScenarioError, match="gemm: torch runs the prefill arms"):
        parse_scenario(BASE.replace("precision: bf16", "precision: fp8") + "gemm: torch\n")
    with pytest.raises(ScenarioError, match="gemm"):
        parse_scenario(BASE + "gemm: cublas\n")


@pytest.mark.slow  # a whole CLI run under the interpreter: 13-23 s on two cores
def test_both_backends_side_by_side_with_every_gate_passing(tmp_path: Path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(BASE + "sweep: {gemm: [triton, torch]}\n")
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    for case, gemm in (("c000-gemm=triton", "triton"), ("c001-gemm=torch", "torch")):
        checks = pq.read_table(run_dir / "checks" / f"{case}.parquet").to_pylist()
        assert checks and all(c["status"] in ("pass", "skip") for c in checks), case
        samples = pq.read_table(run_dir / "samples" / f"{case}.parquet").to_pylist()
        assert {s["gemm"] for s in samples} == {gemm}
    result = runner.invoke(app, ["compare", str(run_dir), "--format", "csv"])
    assert result.exit_code == 0 and "c001-gemm=torch" in result.output
