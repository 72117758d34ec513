"""measure.target_cv: past measure.blocks, blocks are added until every arm's block medians vary
by at most the target (nvbench's --max-noise), up to max_blocks and a time budget."""

from __future__ import annotations

import pytest
from cli_support import TINY, runner, write

from moebench.cli.app import app
from moebench.core.errors import ScenarioError
from moebench.measure.sampling import noise_reached
from moebench.results.reader import load_run
from moebench.spec.load import parse_scenario


def blocks_of(tmp_path, measure: str) -> dict[int, set[int]]:
    text = TINY.replace("warmup: 0, blocks: 2, iterations: 1", measure)
    result = runner.invoke(app, ["run", str(write(tmp_path, text)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    out: dict[int, set[int]] = {}
    for s in load_run(run_dir).samples.to_pylist():
        out.setdefault(s["rank"], set()).add(s["block"])
    return out


@pytest.mark.slow
def test_an_unreachable_target_runs_to_max_blocks_on_every_rank(tmp_path):
    blocks = blocks_of(tmp_path, "warmup: 0, blocks: 2, iterations: 2, target_cv: 0.000001, "
                                 "max_blocks: 4")  # fmt: skip
    assert blocks == {0: {0, 1, 2, 3}, 1: {0, 1, 2, 3}}  # the ranks run the same blocks


@pytest.mark.slow  # a whole CLI run under the interpreter: 13-23 s on two cores
def test_a_reached_target_stops_at_the_minimum(tmp_path):
    blocks = blocks_of(tmp_path, "warmup: 0, blocks: 2, iterations: 2, target_cv: 100, "
                                 "max_blocks: 6")  # fmt: skip
    assert blocks == {0: {0, 1}, 1: {0, 1}}


def test_noise_is_the_cv_of_block_medians_of_every_arm():
    def rows(arm, values):
        return [{"rank": 0, "case_id": "c", "regime": "ffn", "arm": arm, "stage": "ffn",
                 "block": b, "time_us": v} for b, v in enumerate(values)]  # fmt: skip

    steady = rows("a", [100, 100.5, 99.5]) + rows("b", [50, 50.2, 49.9])
    assert noise_reached(steady, ["a", "b"], 1.0)
    noisy = steady + rows("c", [100, 120, 80])
    assert not noise_reached(noisy, ["a", "b", "c"], 1.0)


@pytest.mark.parametrize(
    "measure, message",
    [
        ("{max_blocks: 19}", "measure.max_blocks: needs measure.target_cv"),
        ("{time_budget_s: 5}", "measure.time_budget_s: needs measure.target_cv"),
        ("{target_cv: 0}", "measure.target_cv: must be a percent in (0, 100]"),
        ("{blocks: 6, target_cv: 1, max_blocks: 3}", "measure.max_blocks: must be between 6"),
    ],
)
def test_noise_stop_fields_are_checked(measure, message):
    text = TINY.replace(
        "measure: {regimes: [ffn, kernel], stages: [act], warmup: 0, blocks: 2, iterations: 1}",
        f"measure: {measure}",
    )
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(text, path="s.yaml")
