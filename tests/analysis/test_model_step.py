"""The model step (issue 17) on synthetic step-regime runs whose answers are known: the critical
path over layers and ranks, the imbalance tax, exact percentiles and their intervals, an arm
against its baseline paired over steps, an A/A copy, TPOT share and goodput under an SLO."""

from __future__ import annotations

import math

import numpy as np
import pytest
from step_runs import GRAPH, LAYER_US, LAYERS, R_US, S_US, drift, step_run, step_samples
from synthetic_runs import checks, make_run

from moebench.analysis import stats
from moebench.analysis.compare import compare_runs
from moebench.analysis.step import StepSetup
from moebench.core.errors import MoebenchError

# --------------------------------------------------------------------------- quantile intervals


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.25])
def test_quantile_interval_at_one_half_is_the_median_interval(alpha):
    rng = np.random.default_rng(1)
    for n in range(1, 41):
        x = rng.standard_normal(n)
        q, m = stats.quantile_interval(x, 0.5, alpha), stats.median_interval(x, alpha)
        assert (q is None) == (m is None), n
        if q is not None:
            assert q[:2] == m[:2] and q[2] == pytest.approx(m[2]), n


# (n, q, alpha): each a tail the step regime reports.
COVERAGE = [
    pytest.param(100, 0.9, 0.05, id="P90-of-100-steps"),
    pytest.param(400, 0.99, 0.05, id="P99-of-400-steps"),
    pytest.param(40, 0.75, 0.10, id="P75-of-40-at-90%"),
]


@pytest.mark.parametrize(("n", "q", "alpha"), COVERAGE)
def test_quantile_interval_coverage_is_exact_by_simulation(n, q, alpha):
    """Uniform draws: the true q-quantile is q. The hit rate over 4000 samples matches the
    stated coverage, which is at least 1 - alpha."""
    rng = np.random.default_rng(7)
    coverage = stats.quantile_interval(rng.random(n), q, alpha)[2]
    assert coverage >= 1 - alpha
    hits = 0
    for _ in range(4000):
        low, high, _ = stats.quantile_interval(rng.random(n), q, alpha)
        hits += low <= q <= high
    assert abs(hits / 4000 - coverage) < 0.015, (hits / 4000, coverage)


def test_a_tail_quantile_needs_its_number_of_values():
    # 0.99^367 = 0.02501 > 0.025 >= 0.99^368: a two-sided 95% P99 interval needs 368 values.
    assert stats.quantile_needed(0.99, 0.05) == 368
    assert stats.quantile_interval(np.arange(367.0), 0.99, 0.05) is None
    assert stats.quantile_interval(np.arange(368.0), 0.99, 0.05) is not None
    assert stats.quantile_needed(0.9, 0.05) == 36
    assert stats.quantile_needed(0.5, 0.05) == stats.blocks_needed(0.05) == 6


# --------------------------------------------------------------------------- the model step


def one(comp, arm: str, case: str = "c000"):
    (row,) = [r for r in comp.step.rows if r.arm == arm and r.case_id == case]
    return row


def test_critical_path_over_layers_and_the_imbalance_tax():
    """Rank 1 is slow on layer 3, rank 0 on layer 5: S = 20 + 10 + 30 = 60 us, the slowest
    rank's own sum R = 50, the tax 10 us (1/6 of S); the graph step is 0.9 of the slower rank's
    sum (45 us), 0.75 of S."""
    comp = compare_runs([step_run({"stock": np.ones(8)})])
    r = one(comp, "stock")
    assert (r.n_steps, r.n_ranks, r.n_blocks, r.layers) == (8, 2, 1, LAYERS)
    assert r.p50.us == pytest.approx(S_US) and r.slowest_rank_sum_us == pytest.approx(R_US)
    assert r.imbalance_tax_us == pytest.approx(S_US - R_US)
    assert r.imbalance_tax_pct == pytest.approx(100 / 6)
    assert r.graph_step_us == pytest.approx(R_US * GRAPH)
    assert r.graph_ratio == pytest.approx(R_US * GRAPH / S_US)
    assert [lid for lid, _ in r.layer_us] == list(LAYERS)
    assert [us for _, us in r.layer_us] == pytest.approx(LAYER_US.max(axis=1).tolist())
    # Balanced layers: no tax.
    flat = compare_runs([step_run({"stock": np.ones(4)}, layer_us=np.full((3, 2), 10.0))])
    assert one(flat, "stock").imbalance_tax_us == pytest.approx(0.0)


def test_vectorised_critical_path_matches_a_direct_computation():
    """Random times over 4 steps x 2 blocks x 3 layers x 3 ranks x 3 iterations: S per step is
    the median over blocks of the sum over layers of the max over ranks of the iteration
    median."""
    rng = np.random.default_rng(3)
    t = rng.uniform(5, 50, (4, 2, 3, 3, 3))  # step, block, layer, rank, iteration
    rows = [dict(r, time_us=float(t[r["step"], r["block"], LAYERS.index(r["layer"]),
                                    r["rank"], r["iteration"]]))
            for r in step_samples("run-v", "c000", "stock", np.ones(4), blocks=2, graph=None,
                                  layer_us=np.ones((3, 3)))]  # fmt: skip
    run = make_run("run-v", rows, checks("run-v", "stock", case_id="c000"),
                   finished_cases=["c000"])  # fmt: skip
    r = one(compare_runs([run]), "stock")
    m = np.median(t, axis=4)  # [step, block, layer, rank]
    s = np.median(m.max(axis=3).sum(axis=2), axis=1)
    tax = np.median(m.max(axis=3).sum(axis=2) - m.sum(axis=2).max(axis=2), axis=1)
    assert sorted(r.step_us) == pytest.approx(sorted(s))
    assert r.imbalance_tax_us == pytest.approx(float(np.median(tax)))
    assert math.isnan(r.graph_step_us)  # no stage-step samples: no graph figure


def test_percentiles_of_known_steps_are_exact_and_p99_of_64_has_no_interval():
    """S of step k is 60 * k for k = 1..64 (shuffled): P50 = X_(32), P90 = X_(58), P99 =
    X_(64), the empirical quantiles; P90 has its 95% interval, P99 of 64 steps none."""
    factors = np.random.default_rng(0).permutation(np.arange(1.0, 65.0))
    r = one(compare_runs([step_run({"stock": factors})]), "stock")
    assert (r.p50.us, r.p90.us, r.p99.us) == pytest.approx((60 * 32, 60 * 58, 60 * 64))
    lo, hi, cov = stats.quantile_interval(60 * np.arange(1.0, 65.0), 0.9, 0.05)
    assert (r.p90.low_us, r.p90.high_us, r.p90.coverage) == pytest.approx((lo, hi, cov))
    assert r.p90.low_us < r.p90.us < r.p90.high_us and r.p90.note == ""
    assert math.isnan(r.p99.low_us) and math.isnan(r.p99.high_us)
    assert r.p99.note == "P99 of n=64 steps: no 95% interval below 368 steps"
    assert r.mean_us == pytest.approx(60 * 32.5)


def test_p99_has_its_interval_at_400_steps():
    r = one(compare_runs([step_run({"stock": drift(400)})]), "stock")
    assert r.n_steps == 400 and r.p99.note == ""
    assert r.p99.low_us <= r.p99.us <= r.p99.high_us and r.p99.coverage >= 0.95


def test_an_arm_20_percent_faster_is_detected_and_the_aa_copy_is_not_claimed():
    d = drift(64)
    noise = lambda seed: 1 + 0.002 * np.random.default_rng(seed).standard_normal(64)  # noqa: E731
    run = step_run({"stock": d * noise(1), "prefix_sum_masked": 0.8 * d * noise(2),
                    "stock~aa": d * noise(3)})  # fmt: skip
    comp = compare_runs([run])
    fast, aa = one(comp, "prefix_sum_masked"), one(comp, "stock~aa")
    assert fast.decision == "FASTER" and fast.baseline == "stock"
    assert fast.change_pct == pytest.approx(-20, abs=0.5)
    assert fast.ci_low_pct <= -20 <= fast.ci_high_pct and fast.n_paired_steps == 64
    assert aa.decision == "SAME" and aa.baseline == "stock"
    assert one(comp, "stock").decision == "baseline"
    # Both comparisons count toward the correction; step rows make no ordinary rows.
    assert comp.comparisons == 2 and comp.cell_confidence == pytest.approx(0.975)
    assert comp.rows == [] and comp.warnings == []
    assert (comp.aa.cells, comp.aa.not_same) == (1, 0)  # the step A/A cell is in the control


def test_too_few_steps_for_the_corrected_level_give_no_verdict():
    run = step_run({"stock": drift(5), "prefix_sum": 0.8 * drift(5)})
    r = one(compare_runs([run]), "prefix_sum")
    assert r.decision == stats.TOO_FEW and math.isnan(r.ci_low_pct)
    assert r.change_pct == pytest.approx(-20) and "n=5 paired steps, need >= 6" in r.reason


def test_a_block_missing_a_layer_on_one_rank_is_left_out():
    run = step_run({"stock": np.ones(6)})
    kept = [r for r in run.samples.to_pylist()
            if not (r["step"] == 2 and r["rank"] == 1 and r["layer"] == 4)]  # fmt: skip
    run = make_run(run.run_id, kept, run.checks.to_pylist(), finished_cases=["c000"])
    r = one(compare_runs([run]), "stock")
    assert r.n_steps == 5 and r.incomplete_blocks == 1


def test_a_failed_arm_carries_no_figures_and_no_goodput():
    run = step_run({"stock": drift(8), "prefix_sum": drift(8)}, failed=(("c000", "prefix_sum"),),
                   step={"slo_tpot_ms": 1.0})  # fmt: skip
    comp = compare_runs([run])
    r = one(comp, "prefix_sum")
    assert r.status == "mismatch" and r.p50 is None and math.isnan(r.tokens_per_step)
    (g,) = [g for g in comp.step.goodput if g.arm == "prefix_sum"]
    assert math.isnan(g.tokens_per_s) and "failed its checks in c000" in g.note


def test_tokens_per_step_time_per_token_and_tpot_share():
    run = step_run({"stock": np.ones(8)}, cases={"c000": 16}, step={"non_moe_us": 20.0})
    r = one(compare_runs([run]), "stock")
    assert r.tokens_per_rank == 16 and r.tokens_per_step == 32  # 2 data ranks
    assert r.moe_us_per_token == pytest.approx(S_US / 32)
    assert r.moe_us_per_token_mean == pytest.approx(S_US / 32)
    assert r.tpot_p50_us == pytest.approx(S_US + 20) and r.tpot_p99_us == pytest.approx(S_US + 20)
    assert r.moe_share_p50 == pytest.approx(S_US / (S_US + 20))
    alone = one(compare_runs([step_run({"stock": np.ones(8)})]), "stock")
    assert alone.moe_share_p50 == 1.0 and alone.moe_share_p99 == 1.0  # MoE alone


def test_layers_text_says_the_subset():
    base = dict(run_id="r", model_layers=58, steps=64, blocks=1, data_ranks=8, non_moe_us=0.0,
                slo_tpot_ms=None, tokens="128", routing="")  # fmt: skip
    assert StepSetup(layers=tuple(range(3, 61)), subset=False, **base).layers_text == (
        "58 of 58 MoE layers")  # fmt: skip
    sub = StepSetup(layers=(3, 4, 10), subset=True, **base)
    assert sub.layers_text == "a subset: 3, 4, 10 (3 of 58 MoE layers)"


def test_a_run_without_the_manifest_section_is_read_from_its_rows_with_a_warning():
    comp = compare_runs([step_run({"stock": np.ones(4)}, step=False)])
    (setup,) = comp.step.setups
    assert setup.layers == LAYERS and setup.data_ranks == 2 and setup.slo_tpot_ms is None
    assert any("no manifest 'step' section" in w for w in comp.warnings)


# --------------------------------------------------------------------------- goodput (derived)

# Batches of 4, 16 and 64 tokens per rank whose S scales with the tokens: 15, 60 and 240 us
# (times the steps' drift), 20 us of non-MoE time: P99 TPOT about 37, 86 and 290 us.
BATCHES = {"c000": 4, "c001": 16, "c002": 64}


def batch_run(steps: int, *, slo_ms: float | None = 0.1, cases=BATCHES, faster: float = 0.8):
    d = drift(steps, spread=0.03)
    scale = {(c, a): t / 16 for c, t in cases.items() for a in ("stock", "prefix_sum")}
    return step_run({"stock": d, "prefix_sum": faster * d}, cases=cases, scale=scale,
                    step={"slo_tpot_ms": slo_ms, "non_moe_us": 20.0})  # fmt: skip


def goodput_of(comp, arm: str):
    (g,) = [g for g in comp.step.goodput if g.arm == arm]
    return g


def test_goodput_is_at_the_largest_batch_meeting_the_slo():
    comp = compare_runs([batch_run(64)])
    base, arm = goodput_of(comp, "stock"), goodput_of(comp, "prefix_sum")
    p99 = {r.case_id: r.tpot_p99_us for r in comp.step.rows if r.arm == "stock"}
    assert p99["c001"] <= 100 < p99["c002"]  # the 64-token batch misses the 100 us SLO
    assert base.case_id == "c001" and base.tokens_per_step == 32
    assert base.tokens_per_s == pytest.approx(32 / (p99["c001"] * 1e-6))
    assert arm.case_id == "c001" and arm.ratio == pytest.approx(
        arm.tokens_per_s / base.tokens_per_s
    )
    # At 64 steps P99 has no interval: neither has the goodput or its ratio.
    assert math.isnan(base.low) and base.note.startswith("no interval: P99 of n=64 steps")
    assert math.isnan(arm.ratio_low) and arm.verdict == "" and "ratio: no interval" in arm.note


def test_goodput_ratio_has_its_interval_with_steps_enough():
    """Two batches at 600 steps: each side's two P99 intervals at 98.75% each reach below 505
    steps, so the ratio holds at 95%; the arm serves more tokens per second: HIGHER."""
    comp = compare_runs([batch_run(600, cases={"c000": 4, "c001": 16})])
    base, arm = goodput_of(comp, "stock"), goodput_of(comp, "prefix_sum")
    assert base.case_id == arm.case_id == "c001"
    assert base.low <= base.tokens_per_s <= base.high
    assert arm.ratio_low <= arm.ratio <= arm.ratio_high and arm.ratio_low > 1.02
    assert arm.verdict == "HIGHER"


def test_a_tighter_slo_picks_a_smaller_batch_and_none_meets_a_tiny_one():
    comp = compare_runs([batch_run(64, slo_ms=0.05)])
    assert goodput_of(comp, "stock").case_id == "c000"
    none = goodput_of(compare_runs([batch_run(64, slo_ms=0.001)]), "stock")
    assert none.case_id == "" and none.tokens_per_s == 0.0
    assert none.note.startswith("no batch meets the SLO")


def test_no_slo_no_goodput():
    g = goodput_of(compare_runs([batch_run(16, slo_ms=None)]), "stock")
    assert math.isnan(g.tokens_per_s) and g.note == "no SLO given"


def test_compare_can_replace_the_slo_and_the_non_moe_time():
    """The SLO and the non-MoE time are assumptions, not measurements: compare's values replace
    the scenario's, the setup says so, and a bad value is refused."""
    run = batch_run(64, slo_ms=0.001)  # the scenario's SLO: no batch meets it
    comp = compare_runs([run], slo_tpot_ms=0.1)
    assert goodput_of(comp, "stock").case_id == "c001"  # as with 0.1 ms in the scenario
    assert {s.given_by for s in comp.step.setups} == {"compare"}
    more = compare_runs([run], slo_tpot_ms=0.1, non_moe_us=70.0)  # 86 + 50 us > 100 us
    assert goodput_of(more, "stock").case_id == "c000"
    (row,) = [r for r in more.step.rows if r.case_id == "c000" and r.arm == "stock"]
    assert row.non_moe_us == 70.0
    assert {s.given_by for s in compare_runs([run]).step.setups} == {"scenario"}
    with pytest.raises(MoebenchError, match="--slo-tpot-ms"):
        compare_runs([run], slo_tpot_ms=0)
    with pytest.raises(MoebenchError, match="--non-moe-us"):
        compare_runs([run], non_moe_us=-1)
