"""`scenarios/smoke-step.yaml` end to end on the CPU, as CI runs it: every MoE layer of a tiny
model per step through the real kernels under the interpreter, then `compare --format json`,
which must carry the step's percentiles per arm, the derived TPOT share and goodput, and the
policy entries (without verdicts: CPU timings say nothing about a GPU)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from moebench.cli import app

runner = CliRunner()
SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "smoke-step.yaml"
ARMS = {"stock", "prefix_sum", "prefix_sum_masked"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    results = tmp_path_factory.mktemp("smoke-step")
    run = runner.invoke(app, ["run", str(SCENARIO), "--results", str(results)])
    assert run.exit_code == 0, run.output
    (run_dir,) = results.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest["status"]
    out = runner.invoke(app, ["compare", str(run_dir), "--format", "json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_every_arm_has_its_percentiles_in_every_case(doc):
    rows = doc["step"]["rows"]
    cases = {r["case_id"] for r in rows}
    assert cases == {"c000-tokens_per_rank=2", "c001-tokens_per_rank=8"}
    assert {(r["case_id"], r["arm"]) for r in rows} == {(c, a) for c in cases for a in ARMS}
    for r in rows:
        assert r["status"] == "ok" and r["n_steps"] == 3 and r["n_layers"] == 2, r
        p50, p90, p99 = (r[k]["us"] for k in ("p50", "p90", "p99"))
        assert 0 < p50 <= p90 <= p99, r
        # Three steps support no interval for any of them, and the row says so.
        assert all(r[k]["ci"] is None and "no 95% interval" in r[k]["note"]
                   for k in ("p50", "p90", "p99"))  # fmt: skip
        assert r["moe_us_per_token"] == pytest.approx(p50 / r["tokens_per_step"])
        assert r["imbalance_tax_us"] >= 0 and r["slowest_rank_sum_us"] <= p50 * (1 + 1e-9)
        assert r["tpot_share"]["derived"] is True and r["tpot_share"]["non_moe_us"] == 100.0
        assert r["change"]["decision"] in ("", "baseline"), r["change"]  # no verdict on a CPU
    (setup,) = doc["step"]["runs"]
    assert setup["layers"] == [1, 2] and setup["slo_tpot_ms"] == 50.0


def test_goodput_per_arm_is_derived_and_labelled(doc):
    goodput = doc["step"]["goodput"]
    assert {g["arm"] for g in goodput} == ARMS
    assert all(g["derived"] and g["slo_tpot_ms"] == 50.0 for g in goodput)
    assert all(len(g["points"]) == 2 for g in goodput)  # one per token count swept
    assert "DistServe" in doc["step"]["goodput_definition"]


def test_the_policy_names_every_arm_pair_over_the_sweep(doc):
    pairs = {(p["arm"], p["against"]) for p in doc["policy"] if p["regime"] == "step"}
    assert {("prefix_sum", "stock"), ("prefix_sum_masked", "stock")} <= pairs
    assert ("prefix_sum_masked", "prefix_sum") in pairs
    for p in doc["policy"]:
        assert p["measured"] == [2, 8] and p["use_when"] is None, p  # no verdict, no policy
        assert "CPU timing" in p["note"]
