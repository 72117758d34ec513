"""The profile regime's attribution of kernels to stages (the profiler itself needs a GPU)."""

import pytest

from moebench.measure.profile import split
from moebench.spec.load import parse_scenario


def test_kernels_are_cut_into_stages_in_order():
    counts = {"scatter": 4, "fc1": 1, "act": 1, "fc2": 1, "combine": 1}
    durations = [1, 2, 3, 4, 10, 5, 20, 6] + [1, 1, 1, 1, 11, 4, 21, 7]
    out = split(durations, [("stock", counts), ("prefix_sum", counts)])
    assert out[0] == ("stock", {"scatter": 10, "fc1": 10, "act": 5, "fc2": 20, "combine": 6})
    assert out[1] == ("prefix_sum", {"scatter": 4, "fc1": 11, "act": 4, "fc2": 21, "combine": 7})


def test_a_replay_that_launches_something_else_is_an_error():
    with pytest.raises(RuntimeError, match="7 kernels in the replays, 8 expected"):
        split([1.0] * 7, [("stock", {"scatter": 4, "fc1": 1, "act": 1, "fc2": 1, "combine": 1})])


def test_profile_is_a_regime_a_scenario_may_ask_for():
    s = parse_scenario(
        "name: p\nmodel: {id: t/t, revision: unpinned, hidden: 128, intermediate: 128,"
        " experts: 4, top_k: 2}\nshape: {tokens_per_rank: 4, alignment: 16}\n"
        "measure: {regimes: [ffn, profile]}\n"
    )
    assert s.measure.regimes == ("ffn", "profile")
