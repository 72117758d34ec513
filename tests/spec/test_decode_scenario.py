"""Scenario keys of the decode family: arms of one family, family precisions, widths, stages and
baseline, and the project's gpt-oss decode scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from moebench.core.errors import ScenarioError
from moebench.spec.load import load_scenario, parse_scenario
from moebench.spec.sweep import expand

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

DECODE = {
    "name": "d",
    "model": {"preset": "gpt-oss-20b"},
    "topology": {"ep": 2, "dp": 1, "tp": 2},
    "shape": {"tokens_per_rank": 1},
    "arms": ["dense_decode", "sparse_decode"],
}


def parse(**over):
    return parse_scenario(yaml.safe_dump(DECODE | over, sort_keys=False), path="d.yaml")


def fails(field: str, fragment: str, **over) -> None:
    with pytest.raises(ScenarioError) as info:
        parse(**over)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1 and f"d.yaml: {field}: " in msg and fragment in msg, msg


def test_decode_defaults():
    s = parse()
    assert s.precision == "w8a16" and s.measure.baseline == "dense_decode"
    assert s.measure.stages == ("fc1", "fc2", "combine")
    assert s.model.hidden == 2880  # 2,880 is a multiple of 32: the 128 rule is prefill's


# (field named, fragment, override); each names its edge.
RULES = [
    pytest.param("arms[1]", "one family", {"arms": ["dense_decode", "stock"]}, id="mixed-families"),
    pytest.param("precision", "w8a16, w4a16", {"precision": "fp8"}, id="prefill-precision"),
    pytest.param(
        "precision",
        "fp8, bf16",
        {
            "arms": ["stock"],
            "precision": "w4a16",
            "model": {"id": "x/y", "hidden": 128, "intermediate": 128, "experts": 4, "top_k": 2},
        },
        id="decode-precision-on-prefill",
    ),
    pytest.param(
        "model.hidden",
        "multiple of 32 for the decode arms",
        {"model": {"preset": "gpt-oss-20b", "hidden": 2880 + 16}},
        id="width-not-32",
    ),
    pytest.param(
        "measure.stages[0]",
        "fc1, fc2, combine",
        {"measure": {"stages": ["scatter"]}},
        id="prefill-stage",
    ),
    pytest.param(
        "measure.baseline",
        "dense_decode",
        {"measure": {"baseline": "stock"}},
        id="baseline-not-run",
    ),
]


@pytest.mark.parametrize(("field", "fragment", "over"), RULES)
def test_decode_rules(field, fragment, over):
    fails(field, fragment, **over)


def test_precision_sweeps_with_tokens():
    s = parse(sweep={"precision": ["w8a16", "w4a16"], "shape.tokens_per_rank": [1, 8]})
    cases = expand(s)
    assert [(c.scenario.precision, c.scenario.shape.tokens_per_rank) for c in cases] == [
        ("w8a16", 1), ("w8a16", 8), ("w4a16", 1), ("w4a16", 8)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "ep", "local", "tokens"),
    [
        pytest.param("gpt-oss-20b-decode", 2, 16, (1, 2, 4, 8, 16, 32, 64), id="20b-tp2"),
        pytest.param("gpt-oss-120b-decode", 4, 32, (1, 2, 4, 8, 16, 32, 64, 128), id="120b-tp4"),
    ],
)
def test_project_decode_scenarios(name, ep, local, tokens):
    s = load_scenario(SCENARIOS / f"{name}.yaml")
    assert s.arms == ("dense_decode", "sparse_decode") and s.activation == "swiglu_oai"
    assert (s.model.hidden, s.model.intermediate, s.model.top_k) == (2880, 2880, 4)
    assert (s.topology.ep, s.topology.dp, s.topology.tp) == (ep, 1, ep)
    assert s.model.experts // s.topology.ep == local
    cases = expand(s)
    assert {c.scenario.precision for c in cases} == {"w8a16", "w4a16"}
    assert sorted({c.scenario.shape.tokens_per_rank for c in cases}) == list(tokens)
