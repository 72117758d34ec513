"""The policy threshold (issue 17) on synthetic token sweeps whose answer is known: where
``prefix_sum_masked`` stops beating ``prefix_sum`` and the baseline, where ``sparse_decode``
stops beating ``dense_decode`` (the same code as the work model's crossover), on the ``ffn``
regime and on the model step."""

from __future__ import annotations

import json

import numpy as np
import pytest
from step_runs import drift, step_run
from synthetic_runs import checks, make_run, noisy, samples

from moebench.analysis import policy
from moebench.analysis.compare import compare_runs
from moebench.report.sections import _use_text

RUN = "run-p"
TOKENS = (4, 16, 64, 256)


def sweep(times: dict[str, dict[int, float]], *, run_id: str = RUN, blocks: int = 12):
    """ffn rows of every arm at every token count: ``times[arm][tokens]`` is its factor on a
    100 us baseline (block drift shared by the arms, 1% noise); the live share grows with the
    tokens."""
    rows, check_rows, cases = [], [], []
    counts = sorted({t for by_tokens in times.values() for t in by_tokens})
    for c, tokens in enumerate(counts):
        case = f"c{c:03d}"
        cases.append(case)
        params = json.dumps({"shape.tokens_per_rank": tokens})
        for k, (arm, by_tokens) in enumerate(times.items()):
            t = noisy(by_tokens[tokens], seed=10 * c + k, blocks=blocks, ranks=2)
            for r in samples(run_id, arm, t, case_id=case):
                rows.append(r | {"tokens_per_rank": tokens, "params": params,
                                 "sweep.shape.tokens_per_rank": tokens,
                                 "live_rows": min(256, tokens * 4)})  # fmt: skip
            check_rows += checks(run_id, arm, case_id=case)
    return make_run(run_id, rows, check_rows, finished_cases=cases)


def entry(comp, arm: str, against: str, regime: str = "ffn") -> policy.Policy:
    (p,) = [p for p in comp.policy if (p.arm, p.against, p.regime) == (arm, against, regime)]
    return p


# Masking pays at 4 and 16 tokens per rank (0.7 of prefix_sum), not from 64 on (the same).
MASKING = {
    "stock": dict.fromkeys(TOKENS, 1.0),
    "prefix_sum": dict.fromkeys(TOKENS, 0.9),
    "prefix_sum_masked": {4: 0.63, 16: 0.63, 64: 0.9, 256: 0.9},
}


def test_where_masking_stops_beating_prefix_sum():
    comp = compare_runs([sweep(MASKING)])
    p = entry(comp, "prefix_sum_masked", "prefix_sum")
    assert [e.decision for e in p.evidence] == ["FASTER", "FASTER", "SAME", "SAME"]
    assert p.use_when == {"tokens_per_rank": {"<=": 16}}
    assert p.boundary == {"between": [16, 64], "faster": "below"}
    assert p.measured == (4, 256) and "at 64: the advantage is gone (SAME)" in p.note
    assert [round(e.live_fraction, 4) for e in p.evidence] == [16 / 256, 64 / 256, 1.0, 1.0]
    # Against the baseline both arms are faster throughout: the measured range.
    whole = {"tokens_per_rank": {">=": 4, "<=": 256}}
    assert entry(comp, "prefix_sum_masked", "stock").use_when == whole
    assert entry(comp, "prefix_sum", "stock").boundary is None
    # The pair's 4 cells count toward the correction with the 8 rows against the baseline.
    assert comp.comparisons == 12


def test_the_decode_crossover_and_the_policy_agree():
    """sparse_decode is 0.5 of dense at 4 and 16 tokens, 2x slower from 64: the policy uses it
    up to 16 tokens, and the work model's crossover (the same run-finding code, on medians) says
    dense is faster from 64."""
    times = {"dense_decode": dict.fromkeys(TOKENS, 1.0),
             "sparse_decode": {4: 0.5, 16: 0.5, 64: 2.0, 256: 4.0}}  # fmt: skip
    comp = compare_runs([sweep(times)], baseline="dense_decode")
    p = entry(comp, "sparse_decode", "dense_decode")
    assert p.use_when == {"tokens_per_rank": {"<=": 16}}
    assert p.boundary == {"between": [16, 64], "faster": "below"}
    assert "at 64: reversed (SLOWER)" in p.note
    (c,) = comp.workmodel.crossover
    assert c.crossover_tokens == 64 == p.boundary["between"][1]


def test_an_arm_never_faster_has_no_condition():
    times = {"stock": dict.fromkeys(TOKENS, 1.0), "prefix_sum": dict.fromkeys(TOKENS, 1.0)}
    p = entry(compare_runs([sweep(times)]), "prefix_sum", "stock")
    assert p.use_when is None and p.boundary is None and p.note.startswith("never FASTER")


def test_faster_only_from_some_count_on():
    times = {"stock": dict.fromkeys(TOKENS, 1.0), "prefix_sum": {4: 1.0, 16: 1.0, 64: 0.8,
                                                                  256: 0.8}}  # fmt: skip
    p = entry(compare_runs([sweep(times)]), "prefix_sum", "stock")
    assert p.use_when == {"tokens_per_rank": {">=": 64}}
    assert p.boundary == {"between": [16, 64], "faster": "above"}


def test_not_monotone_lists_the_counts():
    times = {"stock": dict.fromkeys(TOKENS, 1.0), "prefix_sum": {4: 0.8, 16: 1.0, 64: 0.8,
                                                                  256: 1.0}}  # fmt: skip
    p = entry(compare_runs([sweep(times)]), "prefix_sum", "stock")
    assert p.use_when == {"tokens_per_rank": {"in": [4, 64]}}
    assert p.boundary is None and len(p.boundaries) == 3 and "not monotone" in p.note
    # 16 lies between the two FASTER counts: it bounds both runs and is named once.
    assert p.note.count("at 16:") == 1 and "at 256:" in p.note
    # The report writes the counts as a set: "[4, 64]" would read as a range.
    assert _use_text("in", [4, 64]) == "tokens in {4, 64}"
    assert _use_text("<=", 8) == "tokens <= 8"


# (flags, runs of True): each an edge of the run finder.
EDGES = [
    pytest.param([], [], id="empty"),
    pytest.param([False, False], [], id="none"),
    pytest.param([True, True, True], [(0, 2)], id="all"),
    pytest.param([True, False, True], [(0, 0), (2, 2)], id="two-runs"),
    pytest.param([False, True, True], [(1, 2)], id="reaches-the-end"),
]


@pytest.mark.parametrize(("flags", "runs"), EDGES)
def test_edges(flags, runs):
    assert policy.edges(flags) == runs


def test_no_token_sweep_no_policy():
    one_count = {"stock": {16: 1.0}, "prefix_sum": {16: 0.8}}
    assert compare_runs([sweep(one_count)]).policy == []


def test_the_model_step_has_its_policy():
    d = drift(32)
    cases = {"c000": 4, "c001": 16, "c002": 64}
    scale = {(c, a): 1.0 for c in cases for a in ("stock", "prefix_sum")}
    scale[("c000", "prefix_sum")] = scale[("c001", "prefix_sum")] = 0.8
    comp = compare_runs([step_run({"stock": d, "prefix_sum": d}, cases=cases, scale=scale)])
    p = entry(comp, "prefix_sum", "stock", regime="step")
    assert p.use_when == {"tokens_per_rank": {"<=": 16}}
    assert p.boundary == {"between": [16, 64], "faster": "below"}
    assert [e.decision for e in p.evidence] == ["FASTER", "FASTER", "SAME"]


def test_the_policy_as_json_and_without_verdicts():
    comp = compare_runs([sweep(MASKING)])
    doc = entry(comp, "prefix_sum_masked", "prefix_sum").as_dict()
    assert {"arm", "against", "regime", "use_when", "boundary", "evidence",
            "live_fraction"} <= set(doc)  # fmt: skip
    first = doc["evidence"][0]
    assert set(first) >= {"tokens_per_rank", "change_pct", "ci", "decision"}
    assert first["ci"][0] <= first["change_pct"] <= first["ci"][1]
    json.dumps(doc, allow_nan=False)
    (blank,) = policy.without_verdicts([entry(comp, "prefix_sum_masked", "prefix_sum")], "cpu")
    assert blank.use_when is None and blank.boundary is None
    assert all(e.decision == "" and np.isnan(e.change_pct) for e in blank.evidence)
