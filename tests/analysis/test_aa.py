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
    assert aa.rate <= 0.05, Counter(r.decision for r in aa.rows)  # not SAME, the rate
    assert aa.max_abs_change_pct < 1 and aa.max_half_width_pct < 2
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
    # Enough resamples that about 10 fall beyond each end of a 1 - 0.05/201 interval.
    assert corrected.resamples >= 20 / (0.05 / 201) and plain.resamples == 2000
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
    assert "false-positive rate 1 of 1 cell(s) not SAME = 100.0%" in " ".join(text.split())


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


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize("n", [1, 2, 5, 20, 300])  # one block, even, odd, typical, > 255 (uint16)
def test_medians_from_resample_counts_equal_sorting(n):
    rng = np.random.default_rng(n)
    values = rng.random(n) + 0.5
    idx = np.random.default_rng(7).integers(0, n, size=(500, n))
    (counts,) = stats._counts(n, 500, 7)
    np.testing.assert_allclose(stats._medians(values, counts), np.median(values[idx], axis=1))


def test_bootstrap_chunks_and_cache_agree_with_one_draw(monkeypatch):
    a = np.random.default_rng(1).random(30) + 1
    b = np.random.default_rng(2).random(30) + 1
    whole = stats.bootstrap_paired_change(a, b, resamples=4000, seed=5, alpha=0.05)
    assert whole == stats.bootstrap_paired_change(a, b, resamples=4000, seed=5, alpha=0.05)
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 30 * 1000)  # four chunks of 1,000 resamples
    monkeypatch.setattr(stats, "_CACHE_ELEMENTS", 0)
    chunked = stats.bootstrap_paired_change(a, b, resamples=4000, seed=5, alpha=0.05)
    assert chunked[0] == whole[0]
    assert chunked[1] == pytest.approx(whole[1], abs=0.02)  # other draws, same distribution


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
