"""Before and after: the same arm in a run against a baseline run (`compare NEW --against BASE`),
unpaired, refusing what does not compare, and the only thing `--fail-on-regression` gates on."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_support import one_line_error, runner
from synthetic_runs import CASE, ENV, SOURCES, checks, samples

from moebench.analysis.against import compare_against
from moebench.cli.app import app
from moebench.core.errors import MoebenchError
from moebench.results.reader import load_run
from moebench.results.writer import RunWriter


def times(factor: float, seed: int, blocks: int = 12) -> np.ndarray:
    """[blocks, 2 ranks, 3 iterations] around 100 us with 1% noise (each run its own drift: the
    runs were not interleaved)."""
    rng = np.random.default_rng(seed)
    drift = 1 + 0.005 * rng.standard_normal(blocks)
    return 100 * factor * drift[:, None, None] * (1 + 0.01 * rng.standard_normal((blocks, 2, 3)))


def write_run(tmp, run_id, *, stock, masked, env=ENV, hidden=64, status="pass"):
    rows = samples(run_id, "stock", stock) + samples(run_id, "prefix_sum_masked", masked)
    if hidden != 64:
        rows = [r | {"hidden": hidden} for r in rows]
    writer = RunWriter.create(tmp, run_id, {"sources": SOURCES, "environment": env,
                                            "device": "cpu"})  # fmt: skip
    chk = checks(run_id, "stock") + checks(run_id, "prefix_sum_masked", status)
    writer.write_case(CASE, rows, chk, [])
    writer.finish("complete")
    return writer.run_dir


@pytest.fixture
def pair(tmp_path):
    base = write_run(tmp_path, "base", stock=times(1.0, 1), masked=times(0.5, 2))
    new = write_run(tmp_path, "new", stock=times(1.0, 3), masked=times(0.55, 4))  # masked +10%
    return base, new


def test_a_ten_percent_slowdown_of_one_arm_is_a_regression_the_other_arm_is_same(pair):
    base, new = pair
    a = compare_against([load_run(new)], load_run(base))
    rows = {r.arm: r for r in a.rows}
    assert rows["prefix_sum_masked"].decision == "SLOWER"
    low, high = rows["prefix_sum_masked"].ci_low_pct, rows["prefix_sum_masked"].ci_high_pct
    assert low <= 10 <= high and low > 5
    assert rows["stock"].decision == "SAME"
    assert [r.arm for r in a.regressions(5)] == ["prefix_sum_masked"]
    assert a.comparisons == 2 and a.blocks_needed is not None


def test_the_cli_gates_on_a_regression_against_the_baseline_run_only(pair):
    base, new = pair
    result = runner.invoke(app, ["compare", str(new), "--against", str(base),
                                 "--fail-on-regression", "5"])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "unpaired (the runs were not interleaved" in result.output
    assert "1 significant regression(s) above 5% against base" in result.output
    assert runner.invoke(app, ["compare", str(new), "--against", str(base),
                               "--fail-on-regression", "20"]).exit_code == 0  # fmt: skip
    doc = json.loads(runner.invoke(app, ["compare", str(new), "--against", str(base),
                                         "--format", "json"]).output)  # fmt: skip
    assert {r["arm"]: r["decision"] for r in doc["rows"]}["prefix_sum_masked"] == "SLOWER"
    # Arms against arms are what the arms measure, never a regression.
    line = one_line_error(runner.invoke(app, ["compare", str(new), "--fail-on-regression", "5"]))
    assert "give --against BASE" in line


def test_another_environment_or_shape_is_refused_unless_forced(tmp_path, pair):
    base, _ = pair
    gpu = write_run(tmp_path, "gpu", stock=times(1, 5), masked=times(0.5, 6),
                    env=ENV | {"torch": "2.11.0"})  # fmt: skip
    with pytest.raises(MoebenchError, match="another environment than base .*torch"):
        compare_against([load_run(gpu)], load_run(base))
    forced = compare_against([load_run(gpu)], load_run(base), force=True)
    assert any(w.startswith("forced:") for w in forced.warnings)
    wide = write_run(tmp_path, "wide", stock=times(1, 7), masked=times(0.5, 8), hidden=128)
    with pytest.raises(MoebenchError, match="other shapes"):
        compare_against([load_run(wide)], load_run(base))


def test_three_blocks_a_run_are_too_few_and_say_so(tmp_path):
    base = write_run(tmp_path, "b3", stock=times(1, 1, 3), masked=times(0.5, 2, 3))
    new = write_run(tmp_path, "n3", stock=times(1, 3, 3), masked=times(0.8, 4, 3))
    a = compare_against([load_run(new)], load_run(base))
    assert {r.decision for r in a.rows} == {"TOO FEW BLOCKS"}
    assert a.regressions(0) == []


def test_a_failed_gate_is_a_mismatch_not_a_figure(tmp_path, pair):
    base, _ = pair
    bad = write_run(tmp_path, "bad", stock=times(1, 5), masked=times(0.5, 6), status="fail")
    rows = {r.arm: r for r in compare_against([load_run(bad)], load_run(base)).rows}
    assert rows["prefix_sum_masked"].decision == "mismatch"
