"""A decode sweep through the real Typer app on the CPU: gates, weight bytes in Parquet, and the
crossover and bandwidth sections of the comparison."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from typer.testing import CliRunner

from moebench.cli.app import app

runner = CliRunner()

DECODE = """\
# tiny decode sweep: two token counts, MXFP4 weights, gpt-oss activation
name: tiny-decode
description: two token counts of a tiny decode MoE
model: {id: test/tiny, revision: unpinned, hidden: 64, intermediate: 32, experts: 4, top_k: 2}
topology: {ep: 2, dp: 1, tp: 2}
routing: {family: uniform, seed: 1}
shape: {tokens_per_rank: 1}
arms: [dense_decode, sparse_decode]
precision: w4a16
activation: swiglu_oai
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
sweep: {shape.tokens_per_rank: [1, 3]}
"""


def test_decode_sweep_end_to_end(tmp_path):
    scenario = tmp_path / "d.yaml"
    scenario.write_text(DECODE)
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["finished_cases"]) == 2
    assert set(manifest["sources"]) == {"dense_decode", "sparse_decode"}
    for case in manifest["finished_cases"]:
        checks = pq.read_table(run_dir / "checks" / f"{case}.parquet").to_pylist()
        assert checks and all(c["status"] in ("pass", "skip") for c in checks), checks
        names = {c["gate"] for c in checks}
        assert {"reference", "nan_poison", "sentinel_live", "sentinel_nonlocal",
                "cross_arm_output", "post_timing"} <= names  # fmt: skip
        samples = pq.read_table(run_dir / "samples" / f"{case}.parquet").to_pylist()
        by_arm = {(s["arm"], s["rank"]): s["weight_bytes"] for s in samples}
        assert all(b > 0 for b in by_arm.values())
        for rank in (0, 1):  # sparse reads only the experts routed here, dense all of them
            assert by_arm[("sparse_decode", rank)] <= by_arm[("dense_decode", rank)]
    # On the CPU the run shows its gates and work ledger; the timing sections are asked for.
    assert "Gates: every arm passed every gate" in result.output
    timed = runner.invoke(app, ["compare", str(run_dir), "--timings", "--width", "200"])
    assert timed.exit_code == 0, timed.output
    assert "Crossover" in timed.output and "sparse_decode vs dense_decode" in timed.output
    assert "Weight bandwidth" in timed.output
