"""compare on synthetic samples with known effects: decisions, CIs, rank spread, renderers."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from synthetic_runs import CASE, ENV, SOURCES, checks, make_run, noisy, row_of, samples, two_arm_run

from moebench.analysis.compare import compare_runs
from moebench.core.errors import MoebenchError
from moebench.report.render import render
from moebench.report.sections import fmt_change, fmt_us
from moebench.results.reader import load_run
from moebench.results.writer import RunWriter


def test_twenty_percent_faster_arm_is_faster_with_ci_around_minus_twenty():
    comp = compare_runs([two_arm_run(noisy(0.8, seed=2))])
    row = row_of(comp, "prefix_sum_masked")
    assert row.decision == "FASTER", row
    assert row.ci_low_pct <= -20 <= row.ci_high_pct
    assert row.change_pct == pytest.approx(-20, abs=1.5)
    assert row.n_paired_blocks == 20 and row.n_blocks == 20 and row.n_samples == 100
    assert row_of(comp, "stock").decision == "baseline"
    assert math.isnan(row_of(comp, "stock").change_pct)


def test_twenty_percent_slower_arm_is_a_regression():
    comp = compare_runs([two_arm_run(noisy(1.2, seed=2))])
    row = row_of(comp, "prefix_sum_masked")
    assert row.decision == "SLOWER" and row.ci_low_pct <= 20 <= row.ci_high_pct
    assert comp.regressions(10) == [row]
    assert comp.regressions(25) == []


def test_a_a_identical_arms_are_same():
    comp = compare_runs([two_arm_run(noisy(1.0, seed=7), arm="stock_copy")])
    row = row_of(comp, "stock_copy")
    assert row.decision == "SAME", row
    # One A/A interval in twenty misses 0 by chance (this one does, by 0.1%); what must hold is
    # that it sits well inside the threshold.
    assert abs(row.change_pct) < 1
    assert -2 < row.ci_low_pct and row.ci_high_pct < 2
    assert comp.regressions(0) == []


def test_small_difference_with_few_blocks_is_ambiguous():
    # Seven blocks, one rank, one iteration: per-block critical paths are the values themselves.
    # The arm is 1.5% slower at the median, but its blocks spread from -3% to +6%; at 95%, seven
    # blocks give the interval [2nd smallest, 2nd largest] (coverage 1 - 2 * 8/128 = 87.5% is
    # too low, so [min, max] at 98.4%).
    base = np.full(7, 100.0)[:, None, None]
    arm = np.array([97.0, 99.0, 100.0, 101.5, 103.0, 104.0, 106.0])[:, None, None]
    row = row_of(compare_runs([two_arm_run(arm, base)]), "prefix_sum_masked")
    assert row.change_pct == pytest.approx(1.5)
    assert row.ci_low_pct == pytest.approx(-3.0) and row.ci_high_pct == pytest.approx(6.0)
    assert row.decision == "AMBIGUOUS"
    assert "beyond" in row.reason


def test_three_blocks_are_too_few_for_a_verdict():
    base = np.array([100.0, 100.0, 100.0])[:, None, None]
    arm = np.array([70.0, 71.0, 72.0])[:, None, None]
    row = row_of(compare_runs([two_arm_run(arm, base)]), "prefix_sum_masked")
    assert row.decision == "TOO FEW BLOCKS" and row.change_pct == pytest.approx(-29.0)
    assert math.isnan(row.ci_low_pct) and "need >= 6" in row.reason


def test_significant_change_below_threshold_is_same():
    # Every block is exactly 1% slower: the CI excludes 0 but the change is under 2%.
    base = noisy(1.0, seed=1, noise=0.0)
    row = row_of(compare_runs([two_arm_run(base * 1.01, base)]), "prefix_sum_masked")
    assert row.ci_low_pct > 0
    assert row.decision == "SAME"


def test_one_block_is_ambiguous_with_a_reason():
    comp = compare_runs([two_arm_run(noisy(0.5, seed=2, blocks=1), noisy(1, seed=1, blocks=1))])
    row = row_of(comp, "prefix_sum_masked")
    assert row.decision == "AMBIGUOUS" and "at least 2" in row.reason
    assert math.isnan(row.change_pct) and math.isnan(row.ci_low_pct)


def test_the_interval_is_deterministic_and_between_block_ratios():
    run = two_arm_run(noisy(0.97, seed=2, blocks=8))
    a = row_of(compare_runs([run]), "prefix_sum_masked")
    b = row_of(compare_runs([run]), "prefix_sum_masked")
    assert (a.ci_low_pct, a.ci_high_pct) == (b.ci_low_pct, b.ci_high_pct)
    assert a.ci_low_pct <= a.change_pct <= a.ci_high_pct


# --------------------------------------------------------------------------- correctness first


def test_mismatch_arm_shows_no_numbers_anywhere():
    run = two_arm_run(noisy(0.5, seed=2), arm_status="fail")
    comp = compare_runs([run])
    row = row_of(comp, "prefix_sum_masked")
    assert row.status == "mismatch" and row.decision == ""
    assert "reference fail" in row.reason
    timing = (
        "median_us",
        "rank_min_us",
        "rank_median_us",
        "rank_max_us",
        "change_pct",
        "ci_low_pct",
        "ci_high_pct",
    )
    assert all(math.isnan(getattr(row, f)) for f in timing)
    assert row.n_samples is None and row.n_ranks is None and row.slowest_rank is None
    assert comp.mismatches() == [row] and comp.regressions(0) == []

    doc = json.loads(render(comp, "json"))
    (js,) = [r for r in doc["rows"] if r["arm"] == "prefix_sum_masked"]
    assert all(js[f] is None for f in timing + ("n_samples", "n_ranks", "n_blocks"))
    (cs,) = [
        r
        for r in csv.DictReader(io.StringIO(render(comp, "csv")))
        if r["arm"] == "prefix_sum_masked"
    ]
    assert all(cs[f] == "" for f in timing + ("n_samples",))
    (md,) = [
        line
        for line in render(comp, "markdown").splitlines()
        if line.startswith("| ") and "prefix_sum_masked" in line
    ]
    cells = [c.strip() for c in md.strip("|").split("|")]
    i = cells.index("prefix_sum_masked") + 1  # after a mode column when the samples record one
    assert cells[i] == "mismatch"
    assert cells[i + 1 : i + 7] == [""] * 6, (
        cells
    )  # median, cv, spread, slowest rank, counts, change
    assert cells[i + 7].startswith("reference fail")


def test_mismatch_arm_that_was_never_timed_still_gets_a_row():
    run = make_run(
        "run-a",
        samples("run-a", "stock", noisy(1, seed=1)),
        checks("run-a", "stock") + checks("run-a", "sparse", "error"),
    )
    row = row_of(compare_runs([run]), "sparse")
    assert row.status == "mismatch" and "reference error" in row.reason


def test_failed_baseline_gives_no_change_and_a_warning():
    run = make_run(
        "run-a",
        samples("run-a", "stock", noisy(1, seed=1)) + samples("run-a", "fast", noisy(0.5, seed=2)),
        checks("run-a", "stock", "fail") + checks("run-a", "fast"),
    )
    comp = compare_runs([run])
    row = row_of(comp, "fast")
    assert row.decision == "" and "failed its checks" in row.reason
    assert math.isnan(row.change_pct) and not math.isnan(row.median_us)
    assert any("baseline 'stock' failed" in w for w in comp.warnings)


def test_unchecked_arm_is_flagged():
    run = make_run(
        "run-a",
        samples("run-a", "stock", noisy(1, seed=1)) + samples("run-a", "new", noisy(1, seed=2)),
        checks("run-a", "stock"),
    )
    comp = compare_runs([run])
    assert row_of(comp, "new").status == "unchecked"
    assert any("no correctness checks" in w for w in comp.warnings)


# --------------------------------------------------------------------------- ranks


def test_rank_spread_and_slowest_rank():
    # Four ranks; rank 2 is 1.5x slower in every block.
    times = np.full((6, 4, 3), 100.0)
    times[:, 2, :] = 150.0
    times[:, 3, :] = 110.0
    row = row_of(compare_runs([two_arm_run(times, times)]), "prefix_sum_masked")
    assert (row.rank_min_us, row.rank_median_us, row.rank_max_us) == (100.0, 105.0, 150.0)
    assert row.slowest_rank == 2 and row.n_ranks == 4
    assert row.median_us == 150.0  # the critical path is the slow rank


def test_critical_path_is_the_max_over_ranks_per_block():
    # The slow rank moves: in block b, rank b % 4 takes 150 us, the others 100 us. Every rank's
    # own median is 100, so a median of medians would say 100; the case really takes 150.
    times = np.full((8, 4, 3), 100.0)
    for b in range(8):
        times[b, b % 4, :] = 150.0
    row = row_of(compare_runs([two_arm_run(times, times)]), "prefix_sum_masked")
    assert row.rank_max_us == 100.0 and row.rank_median_us == 100.0
    assert row.median_us == 150.0


def test_block_medians_use_iterations_of_one_rank():
    # Block critical path = max over ranks of the median over iterations (not of the max sample).
    times = np.array([[[100.0, 100.0, 400.0], [120.0, 120.0, 90.0]]] * 3)  # [3 blocks, 2, 3]
    row = row_of(compare_runs([two_arm_run(times, times)]), "prefix_sum_masked")
    assert row.median_us == 120.0


def test_block_missing_a_rank_is_left_out():
    rows = samples("run-a", "stock", np.full((4, 2, 2), 100.0))
    rows = [r for r in rows if not (r["block"] == 3 and r["rank"] == 1)]
    comp = compare_runs([make_run("run-a", rows, checks("run-a", "stock"))])
    assert row_of(comp, "stock").n_blocks == 3
    assert any("miss some rank" in w for w in comp.warnings)


def test_change_uses_paired_blocks_only_and_says_so():
    run = two_arm_run(noisy(0.8, seed=2, blocks=6), noisy(1.0, seed=1, blocks=4))
    row = row_of(compare_runs([run]), "prefix_sum_masked")
    assert row.n_blocks == 6 and row.n_paired_blocks == 4
    assert "paired on 4 of 6 blocks" in row.reason


# --------------------------------------------------------------------------- runs and baselines


def test_missing_baseline_is_stated_not_invented():
    other = "t64-zipf"
    rows = samples("run-a", "stock", noisy(1, seed=1)) + samples(
        "run-a", "fast", noisy(0.5, seed=2), case_id=other
    )
    run = make_run("run-a", rows, checks("run-a", "stock") + checks("run-a", "fast", case_id=other))
    comp = compare_runs([run])
    row = row_of(comp, "fast")
    assert row.decision == "" and "no baseline" in row.reason and math.isnan(row.change_pct)
    assert any("no samples in 1" in w for w in comp.warnings)


def test_unknown_baseline_is_a_user_error():
    with pytest.raises(MoebenchError, match="in none of the runs"):
        compare_runs([two_arm_run(noisy(1, seed=2))], baseline="stok")


def test_several_runs_are_keyed_by_run_and_warn_on_provenance():
    a = two_arm_run(noisy(0.8, seed=2), run_id="run-a")
    b = two_arm_run(
        noisy(1.0, seed=3), run_id="run-b", sources=SOURCES | {"prefix_sum_masked": "dd"}
    )
    comp = compare_runs([a, b])
    assert row_of(comp, "prefix_sum_masked", run_id="run-a").decision == "FASTER"
    assert row_of(comp, "prefix_sum_masked", run_id="run-b").decision == "SAME"
    assert any("differ in sources: prefix_sum_masked" in w for w in comp.warnings)
    assert not any("environment" in w for w in comp.warnings)
    with pytest.raises(MoebenchError, match="more than once"):
        compare_runs([a, a])


def test_kernel_regime_stages_are_separate_rows():
    rows = []
    for stage, factor in (("fc1", 1.0), ("act", 0.5)):
        rows += samples("run-a", "stock", noisy(1, seed=1), stage=stage, regime="kernel")
        rows += samples("run-a", "masked", noisy(factor, seed=2), stage=stage, regime="kernel")
    comp = compare_runs(
        [make_run("run-a", rows, checks("run-a", "stock") + checks("run-a", "masked"))]
    )
    assert row_of(comp, "masked", stage="act").decision == "FASTER"
    assert row_of(comp, "masked", stage="fc1").decision == "SAME"
    assert [r.stage for r in comp.rows] == ["fc1", "fc1", "act", "act"]


def test_through_the_store(tmp_path: Path):
    run = two_arm_run(noisy(0.8, seed=2), run_id="20261129-000000-x-abcdef")
    writer = RunWriter.create(tmp_path, run.run_id, {"sources": SOURCES, "environment": ENV})
    writer.write_case(CASE, run.samples.to_pylist(), run.checks.to_pylist(), [])
    writer.finish("complete")
    comp = compare_runs([load_run(writer.run_dir)])
    assert row_of(comp, "prefix_sum_masked").decision == "FASTER"


# --------------------------------------------------------------------------- rendering


@pytest.fixture
def comparison():
    run = two_arm_run(noisy(0.8, seed=2))
    broken = make_run("run-b", [], checks("run-b", "broken", "fail"))
    return compare_runs([run]), compare_runs([run, broken])


def test_json_loads(comparison):
    doc = json.loads(render(comparison[0], "json"))
    assert doc["baseline"] == "stock" and len(doc["rows"]) == 2
    (fast,) = [r for r in doc["rows"] if r["arm"] == "prefix_sum_masked"]
    assert fast["decision"] == "FASTER" and fast["change_pct"] < 0
    assert "CPU timings" in doc["title"]


def test_csv_parses(comparison):
    text = render(comparison[0], "csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:5] == ["run_id", "case_id", "regime", "stage", "arm"]
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows)
    (stock,) = [r for r in csv.DictReader(io.StringIO(text)) if r["arm"] == "stock"]
    assert stock["change_pct"] == "" and stock["decision"] == "baseline"  # undefined: empty, not 0
    assert float(stock["median_us"]) > 0


def test_markdown_has_a_header_row(comparison):
    lines = render(comparison[0], "markdown").splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| case"))
    assert set(lines[header + 1].replace("|", "")) == {"-"}
    assert len(lines[header].split("|")) == len(lines[header + 1].split("|"))
    assert any("FASTER" in line and "%" in line for line in lines[header + 2 :])


@pytest.mark.parametrize("width", [200, 100, 80, 40])  # wide table, narrowed, records
def test_table_is_width_safe_and_labelled_cpu(comparison, width: int):
    comp = comparison[1]
    text = render(comp, "table", width=width)
    flat = " ".join(text.split())  # the title wraps at spaces
    assert "CPU timings" in flat and "not comparable with GPU" in flat
    assert "FASTER" in text and "mismatch" in text and "reference fail" in text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    # Numbers are never split: every token of every figure appears whole.
    fast = row_of(comp, "prefix_sum_masked")
    words = set(text.split())
    for figure in (fmt_change(fast), fmt_us(fast.median_us)):
        assert set(figure.split()) <= words, figure
    if width == 200:
        assert fmt_change(fast) in text


def test_change_format():
    comp = compare_runs([two_arm_run(noisy(0.8, seed=2))])
    lines = render(comp, "markdown").splitlines()
    cell = [c for c in lines if c.startswith("| ") and "prefix_sum_masked" in c][0]
    assert "-2" in cell and "% [-" in cell


def test_unknown_format():
    with pytest.raises(MoebenchError, match="unknown format"):
        render(compare_runs([two_arm_run(noisy(1, seed=2))]), "xml")
