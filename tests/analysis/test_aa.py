"""The A/A control, the multiple-comparison correction, noise, modes and profile rows, on
synthetic samples whose truth is known."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from synthetic_runs import checks, make_run, row_of, samples

from moebench.analysis import stats
from moebench.analysis.compare import compare_runs
from moebench.report.render import render
from moebench.report.sections import title
from moebench.results.reader import Run
from moebench.results.schema import SAMPLES_SCHEMA

RUN = "run-a"


def block_times(seed: int, *, blocks: int, iters: int = 3, noise: float = 0.01, drift=None):
    """[blocks, 1 rank, iters] around 100 us: a block drift shared by the arms of a case times
    independent per-sample noise."""
    jitter = 1 + noise * np.random.default_rng(seed).standard_normal((blocks, 1, iters))
    shared = 1 if drift is None else drift[:, None, None]
    return 100 * shared * jitter


def aa_sweep(cells: int, *, blocks: int = 20, effect: float | None = None) -> Run:
    """``cells`` cases, each timing ``stock`` and its A/A copy ``stock~aa`` from the same
    distribution (3% block drift shared by both arms, 1% sample noise); with ``effect``, case
    c000 also times an arm ``fast`` at ``effect`` times the baseline."""
    rows, check_rows, cases = [], [], []
    for c in range(cells):
        case = f"c{c:03d}"
        cases.append(case)
        drift = 1 + 0.03 * np.random.default_rng(10_000 + c).standard_normal(blocks)
        arms = [("stock", 1.0), ("stock~aa", 1.0)]
        if effect is not None and c == 0:
            arms.append(("fast", effect))
        for k, (arm, factor) in enumerate(arms):
            times = factor * block_times(3 * c + k, blocks=blocks, drift=drift)
            rows += samples(RUN, arm, times, case_id=case)
            check_rows += checks(RUN, arm, case_id=case)
    return make_run(RUN, rows, check_rows, finished_cases=cases)


@pytest.fixture(scope="module")
def sweep():
    """200 A/A cells and one 20% effect, compared four ways (each corrected one takes ~2 s)."""
    run = aa_sweep(200, effect=0.8)
    return {
        (threshold, correction): compare_runs([run], threshold_pct=threshold, correction=correction)
        for threshold in (0.0, 2.0)
        for correction in ("bonferroni", "none")
    }


# --------------------------------------------------------------------------- false positives


def test_aa_false_positive_rate_is_nominal_uncorrected_and_controlled_corrected(sweep):
    # Threshold 0: every interval that misses 0 is a claimed difference (FASTER or SLOWER).
    # Uncorrected, about 5% of the 200 A/A cells claim one; Bonferroni-corrected, the chance that
    # any of the 201 cells does is at most 5%, so at most a cell here, and usually none.
    plain = sweep[0.0, "none"].aa
    assert plain.cells == 200
    assert 0.01 <= plain.false_positives / plain.cells <= 0.10, plain.false_positives
    corrected = sweep[0.0, "bonferroni"].aa
    assert corrected.false_positives / corrected.cells <= 0.05
    assert corrected.false_positives <= 1


def test_aa_cells_are_same_at_the_default_threshold_after_correction(sweep):
    comp = sweep[2.0, "bonferroni"]
    aa = comp.aa
    # No difference claimed; the exact intervals at 99.98% over 20 blocks of ~1% noise leave a
    # few cells too wide to call SAME within +-2% (AMBIGUOUS: undecided, not a false positive).
    assert aa.false_positives == 0 and aa.fp_rate == 0, Counter(r.decision for r in aa.rows)
    assert aa.ambiguous / aa.cells <= 0.10, Counter(r.decision for r in aa.rows)
    assert aa.max_abs_change_pct < 1 and aa.max_half_width_pct < 2.5
    assert {r.baseline for r in aa.rows} == {"stock"}
    assert comp.regressions(0) == []


def test_twenty_percent_effect_is_still_detected_after_correction(sweep):
    comp = sweep[2.0, "bonferroni"]
    assert comp.comparisons == 201 and comp.correction == "bonferroni"
    assert comp.cell_confidence == pytest.approx(1 - 0.05 / 201)
    row = row_of(comp, "fast")
    assert row.decision == "FASTER", row
    assert row.ci_low_pct <= -20 <= row.ci_high_pct and row.ci_high_pct < -15


def test_correction_widens_each_interval_and_is_stated(sweep):
    corrected, plain = sweep[2.0, "bonferroni"], sweep[2.0, "none"]
    assert "Bonferroni-corrected for 201 comparisons (each 99.98%)" in title(corrected)
    assert "uncorrected (201 comparisons)" in title(plain)
    assert corrected.blocks_needed == stats.blocks_needed(0.05 / 201) == 13
    assert plain.blocks_needed == stats.blocks_needed(0.05) == 6
    for a, b in zip(corrected.rows, plain.rows, strict=True):
        if not math.isnan(a.ci_low_pct):
            assert a.ci_low_pct <= b.ci_low_pct + 1e-9 and b.ci_high_pct <= a.ci_high_pct + 1e-9
            assert a.change_pct == b.change_pct


def test_a_single_comparison_is_not_changed_by_the_correction():
    run = aa_sweep(1, blocks=12)
    a = row_of(compare_runs([run]), "stock~aa")
    b = row_of(compare_runs([run], correction="none"), "stock~aa")
    assert (a.ci_low_pct, a.ci_high_pct) == (b.ci_low_pct, b.ci_high_pct)


# --------------------------------------------------------------------------- the A/A arm


def test_aa_copy_is_compared_with_the_arm_it_copies():
    drift = 1 + 0.03 * np.random.default_rng(0).standard_normal(10)
    rows = []
    for k, (arm, factor) in enumerate(
        (("stock", 1.0), ("prefix_sum", 0.8), ("prefix_sum~aa", 0.8))
    ):
        rows += samples(RUN, arm, factor * block_times(k, blocks=10, drift=drift))
    chk = sum((checks(RUN, a) for a in ("stock", "prefix_sum", "prefix_sum~aa")), [])
    comp = compare_runs([make_run(RUN, rows, chk)])
    copy = row_of(comp, "prefix_sum~aa")
    assert copy.baseline == "prefix_sum" and copy.decision == "SAME"
    assert row_of(comp, "prefix_sum").decision == "FASTER"
    assert comp.aa.cells == 1 and comp.aa.rate == 0


def test_noisy_aa_is_reported_not_counted_as_a_regression():
    # The copy is 10% slower in the second half of the blocks: the machine changed under it.
    base = block_times(1, blocks=10)
    copy = block_times(2, blocks=10)
    copy[5:] *= 1.1
    rows = samples(RUN, "stock", base) + samples(RUN, "stock~aa", copy)
    comp = compare_runs([make_run(RUN, rows, checks(RUN, "stock") + checks(RUN, "stock~aa"))])
    aa = comp.aa
    assert aa.not_same == 1 and aa.rate == 1.0
    assert comp.regressions(0) == []
    assert any("A/A control: 1 of 1 cell(s) not SAME" in w for w in comp.warnings)
    text = render(comp, "table", width=200)
    flat = " ".join(text.split())
    assert "1 of 1 cell(s) not SAME = 100.0% (0 FASTER/SLOWER, 1 AMBIGUOUS)" in flat


def test_mismatched_aa_copy_shows_no_numbers():
    rows = samples(RUN, "stock", block_times(1, blocks=4))
    rows += samples(RUN, "stock~aa", block_times(2, blocks=4))
    comp = compare_runs(
        [make_run(RUN, rows, checks(RUN, "stock") + checks(RUN, "stock~aa", "fail"))]
    )
    row = row_of(comp, "stock~aa")
    assert row.status == "mismatch" and math.isnan(row.median_us) and comp.aa is None


# --------------------------------------------------------------------------- noise


def test_cv_of_block_critical_paths_per_cell_and_per_regime():
    # One rank, one iteration: the block critical paths are the values themselves.
    values = np.array([100.0, 102.0, 98.0, 100.0])
    rows = samples(RUN, "stock", values[:, None, None])
    rows += samples(RUN, "stock", (values * 0.5)[:, None, None], stage="act", regime="kernel")
    comp = compare_runs([make_run(RUN, rows, checks(RUN, "stock"))])
    want = float(np.std(values, ddof=1) / values.mean() * 100)
    assert row_of(comp, "stock", regime="ffn").cv_pct == pytest.approx(want)
    assert row_of(comp, "stock", regime="kernel").cv_pct == pytest.approx(want)
    (ffn, kernel) = comp.noise()
    assert (ffn.regime, kernel.regime) == ("ffn", "kernel")
    assert ffn.median_cv_pct == pytest.approx(want) and ffn.goal_pct == 1.0
    assert ffn.over_goal == 1 and math.isnan(kernel.goal_pct)
    text = " ".join(render(comp, "table", width=200).split())
    assert f"noise ffn [eager]: cv of block critical paths median {want:.2f}%" in text
    assert "goal under 1%: 1 cell(s) over" in text


def test_cv_is_undefined_for_one_block():
    assert math.isnan(stats.cv_pct(np.array([5.0])))
    rows = samples(RUN, "stock", np.full((1, 1, 3), 100.0))
    assert math.isnan(row_of(compare_runs([make_run(RUN, rows, checks(RUN, "stock"))]),
                             "stock").cv_pct)  # fmt: skip


# --------------------------------------------------------------------------- exact intervals


@pytest.mark.parametrize("n", [3, 5, 8, 12, 20])
def test_the_false_positive_rate_holds_at_every_block_count_with_drift_and_outliers(n):
    """Many A/A sweeps (same distribution for both arms, 5% block drift shared by the arms, 1%
    sample noise, and 3% of samples 1.5x outliers of either arm), through compare: a difference
    is claimed (FASTER/SLOWER at threshold 0) in at most alpha of the cells uncorrected, and in
    at most alpha of the sweeps corrected (family-wise). With fewer blocks than the level needs,
    cells say TOO FEW BLOCKS instead of a verdict."""
    sweeps, cells = 30, 40
    claimed_cells = claimed_sweeps = undecided = decided = 0
    for s in range(sweeps):
        rows, check_rows, cases = [], [], []
        rng = np.random.default_rng(1000 * n + s)
        for c in range(cells):
            case = f"c{c:03d}"
            cases.append(case)
            drift = 1 + 0.05 * rng.standard_normal(n)
            for arm in ("stock", "stock~aa"):
                times = 100 * drift[:, None, None] * (1 + 0.01 * rng.standard_normal((n, 1, 3)))
                times = np.where(rng.random((n, 1, 3)) < 0.03, 1.5 * times, times)
                rows += samples(RUN, arm, times, case_id=case)
                check_rows += checks(RUN, arm, case_id=case)
        run = make_run(RUN, rows, check_rows, finished_cases=cases)
        plain = compare_runs([run], threshold_pct=0.0, correction="none").aa
        claimed_cells += plain.false_positives
        decided += plain.cells
        undecided += plain.too_few
        corrected = compare_runs([run], threshold_pct=0.0).aa
        claimed_sweeps += corrected.false_positives > 0
    if n < stats.blocks_needed(0.05):
        assert decided == 0 and undecided == sweeps * cells  # 3 or 5 blocks cannot reach 95%
        return
    assert undecided == 0
    # alpha = 5%, with three binomial standard deviations of slack for the finite draw.
    assert claimed_cells / decided <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / decided)
    assert claimed_sweeps <= 0.05 * sweeps + 3 * math.sqrt(0.05 * 0.95 * sweeps)


def test_three_blocks_get_no_verdict_and_say_why():
    """The seen case: `moebench run scenarios/smoke.yaml --aa` (3 blocks) judged the A/A copy
    FASTER -24.1% [-34.0, -0.1] at a nominal 99.6%. Three paired blocks reach 75% at most."""
    run = aa_sweep(1, blocks=3)
    row = row_of(compare_runs([run]), "stock~aa")
    assert row.decision == stats.TOO_FEW and math.isnan(row.ci_low_pct)
    assert row.reason.startswith("n=3 paired blocks, need >= 6 for 95% per cell")
    assert stats.median_interval(np.arange(3.0), 0.25) == (0.0, 2.0, 0.75)


def test_order_statistic_interval_coverage_is_exact():
    rng = np.random.default_rng(3)
    for n, alpha in ((10, 0.05), (20, 0.01), (7, 0.05)):
        low, high, coverage = stats.median_interval(np.arange(float(n)), alpha)
        assert coverage >= 1 - alpha
        hits = 0
        for _ in range(4000):
            x = rng.standard_normal(n)  # true median 0
            lo, hi, _ = stats.median_interval(x, alpha)
            hits += lo <= 0 <= hi
        assert abs(hits / 4000 - coverage) < 0.015, (n, hits / 4000, coverage)
    assert stats.median_interval(np.arange(5.0), 0.05) is None  # 5 blocks reach 93.75%
    assert [stats.blocks_needed(a) for a in (0.05, 0.05 / 22, 0.05 / 201)] == [6, 10, 13]


def test_unpaired_interval_counts_mann_whitney_exactly_and_covers():
    import itertools

    n, m = 3, 4
    counts = [0] * (n * m + 1)
    for xs in itertools.combinations(range(n + m), n):
        counts[sum(1 for i in xs for j in range(n + m) if j not in xs and i > j)] += 1
    want = np.cumsum(counts) / math.comb(n + m, n)
    np.testing.assert_allclose(stats._mann_whitney_cdf(n, m), want)
    rng = np.random.default_rng(4)
    hits, coverage = 0, None
    for _ in range(3000):
        base = np.exp(0.02 * rng.standard_normal(8))
        new = 1.05 * np.exp(0.02 * rng.standard_normal(8))
        point, low, high, coverage = stats.unpaired_change(new, base, 0.05)
        hits += low <= 0.05 <= high
    assert coverage >= 0.95 and abs(hits / 3000 - coverage) < 0.02
    assert stats.unpaired_change(np.ones(2), np.ones(2), 0.05) is None  # 2 + 2 reach 66.7%


# --------------------------------------------------------------------------- modes and profile


def with_mode(rows: list[dict], mode: str) -> list[dict]:
    return [r | {"mode": mode} for r in rows]


def table(rows: list[dict], extra: tuple[str, ...] = ()) -> pa.Table:
    """Samples as another branch may write them: the schema plus optional columns, and regimes
    (``profile``) this branch's writer does not accept yet."""
    schema = SAMPLES_SCHEMA
    for name in extra:
        if name in schema.names:
            continue
        schema = schema.append(pa.field(name, pa.string()))
    return pa.Table.from_pylist(rows, schema=schema)


def test_mode_column_keys_the_rows_and_modes_are_never_pooled():
    rows = []
    for mode, stock, masked in (("eager", 1.0, 0.8), ("graph", 0.5, 0.5)):
        rows += with_mode(samples(RUN, "stock", stock * block_times(1, blocks=8)), mode)
        rows += with_mode(samples(RUN, "masked", masked * block_times(2, blocks=8)), mode)
    run = make_run(RUN, [], checks(RUN, "stock") + checks(RUN, "masked"))
    run = Run(run_dir=run.run_dir, manifest=run.manifest, samples=table(rows, ("mode",)),
              checks=run.checks, routing=run.routing)  # fmt: skip
    comp = compare_runs([run])
    assert row_of(comp, "masked", mode="eager").decision == "FASTER"
    assert row_of(comp, "masked", mode="graph").decision == "SAME"
    assert row_of(comp, "stock", mode="graph").median_us == pytest.approx(50, rel=0.02)
    assert [(r.mode, r.arm) for r in comp.rows] == [
        ("eager", "masked"), ("eager", "stock"), ("graph", "masked"), ("graph", "stock")
    ]  # fmt: skip
    header = next(ln for ln in render(comp, "markdown").splitlines() if ln.startswith("| case"))
    assert "| mode |" in header
    # A run that records no mode compares beside one that does.
    old = make_run("run-b", samples("run-b", "stock", block_times(3, blocks=8)),
                   checks("run-b", "stock"))  # fmt: skip
    old = Run(run_dir=old.run_dir, manifest=old.manifest,
              samples=old.samples.drop_columns(["mode"]), checks=old.checks,
              routing=old.routing)  # fmt: skip
    both = compare_runs([run, old])
    assert row_of(both, "stock", run_id="run-b").mode == ""


def test_profile_kernels_of_one_stage_are_summed_and_reconciled():
    rows = []
    for arm in ("stock", "masked"):
        rows += samples(RUN, arm, np.full((4, 2, 2), 100.0))  # ffn regime
        for stage, kernel_us in (("fc1", (30.0, 10.0)), ("act", (20.0,)), ("fc2", (25.0,))):
            for us in kernel_us:  # fc1 ran as two kernels: two rows per iteration
                rows += samples(RUN, arm, np.full((4, 2, 2), us), stage=stage, regime="kernel")
    for r in rows:
        if r["regime"] == "kernel":
            r["regime"] = "profile"
    run = make_run(RUN, [], checks(RUN, "stock") + checks(RUN, "masked"))
    run = Run(run_dir=run.run_dir, manifest=run.manifest, samples=table(rows),
              checks=run.checks, routing=run.routing)  # fmt: skip
    comp = compare_runs([run])
    assert row_of(comp, "stock", regime="profile", stage="fc1").median_us == 40.0
    assert row_of(comp, "stock", regime="profile", stage="fc1").n_samples == 32
    assert not any("several samples" in w for w in comp.warnings)
    (rec, _) = sorted(comp.reconciliation(), key=lambda r: r.arm != "stock")
    assert rec.stage_sum_us == 85.0 and rec.ffn_us == 100.0 and rec.ratio == 0.85
    assert rec.stages == ("fc1", "act", "fc2")
    assert [r.regime for r in comp.rows if r.arm == "stock"] == ["ffn", *["profile"] * 3]
    md = render(comp, "markdown")
    assert "## Profile reconciliation" in md and "| fc1 + act + fc2 | 85.00 | 100.0 | 0.850 |" in md
