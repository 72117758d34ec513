"""Scenario loading and validation: every rule raises ScenarioError naming its field path."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from conftest import shared_traces_beside_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenario_support import BASE, doc, fails, parse

from moebench.core import layout
from moebench.core.errors import ScenarioError
from moebench.core.models import PRESETS
from moebench.spec.load import load_scenario, parse_scenario, scenario_with
from moebench.spec.schema import (
    DEFAULT_ARMS,
    Case,
    Scenario,
    global_tokens,
    local_experts,
    to_dict,
)
from moebench.spec.sweep import expand

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


def test_base_document_is_valid():
    s = parse(BASE)
    assert s.model.preset is None and s.model.revision == "unpinned"
    assert s.topology.dp == 2 and s.topology.tp == 1 and s.topology.mode == "simulated"
    assert s.routing.family == "uniform" and s.shape.capacity == "formula"
    assert s.arms == DEFAULT_ARMS and s.measure.baseline == "stock" and s.measure.ranks is None
    assert s.measure.regimes == ("ffn", "kernel") and s.measure.stages[2] == "act"
    assert s.precision == "fp8" and s.activation == "silu" and s.device == "auto"
    assert global_tokens(s) == 16 and local_experts(s) == 4
    assert len(s.sha256) == 64 and s.text.startswith("name:")


def test_yaml_tags_never_construct_objects(tmp_path):
    marker = tmp_path / "pwned"
    for tag in ("!!python/object/apply:os.system", "!!python/object/new:os.system"):
        text = f"name: t\nmodel: {tag} ['touch {marker}']\nshape: {{tokens_per_rank: 4}}\n"
        fails(text, "", "tags that build objects are never allowed")
    fails("name: !!python/name:os.system t\n", "", "constructor")
    assert not marker.exists()


def test_load_scenario_file_errors(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ScenarioError, match=r"missing\.yaml: cannot read"):
        load_scenario(missing)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path)  # a folder
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ScenarioError, match=r"latin\.yaml: not UTF-8 text \(byte 0xe9"):
        load_scenario(latin)
    ok = tmp_path / "bom.yaml"
    ok.write_text("\ufeff" + yaml.safe_dump(BASE), encoding="utf-8")
    assert load_scenario(ok).name == "t"


def test_ints_accepted_for_floats_and_nulls_for_optional_sections():
    s = parse(doc(routing={"alpha": 2, "hot_fraction": 1, "empty_fraction": 0}))
    assert s.routing.alpha == 2.0 and isinstance(s.routing.alpha, float)
    assert s.routing.hot_fraction == 1.0 and s.routing.empty_fraction == 0.0
    s = parse(doc(topology=None, routing=None) | {"measure": None, "sweep": None})
    assert s.topology.ep == 1 and s.measure.blocks == 10 and s.sweep == ()


def test_topology_and_measure_values():
    s = parse(
        doc(
            topology={"ep": 2, "dp": 1, "tp": 2, "mode": "distributed"},
            measure={
                "ranks": [1],
                "regimes": ["kernel"],
                "stages": ["act"],
                "graph": False,
                "baseline": "prefix_sum",
            },
        )
    )
    assert (s.topology.ep, s.topology.dp, s.topology.tp) == (2, 1, 2)
    assert s.topology.mode == "distributed" and global_tokens(s) == 8
    assert s.measure.ranks == (1,) and s.measure.regimes == ("kernel",) and not s.measure.graph
    assert s.measure.baseline == "prefix_sum"


def test_trace_path_is_resolved_against_the_scenario_folder(tmp_path):
    (tmp_path / "traces").mkdir()
    trace = tmp_path / "traces" / "t.json"
    trace.write_text('{"logical_count": [[1, 2, 3, 4, 5, 6, 7, 8]]}')
    text = yaml.safe_dump(doc(routing={"source": "trace", "path": "traces/t.json", "layer": 0}))
    (tmp_path / "s.yaml").write_text(text)
    s = load_scenario(tmp_path / "s.yaml")
    assert s.routing.family == "trace" and s.routing.layer == 0
    assert Path(s.routing.path) == trace.resolve()
    # the same relative path from another folder is not found, and the error says where it looked
    fails(text, "routing.path", "traces/t.json", path=str(tmp_path / "elsewhere" / "s.yaml"))
    fails(doc(routing={"family": "trace", "path": str(trace), "layer": -1}), "routing.layer")


def test_expect_sources():
    pin = "AB" * 32
    s = parse(doc(expect_sources={"stock": pin}))
    assert s.expect_sources == (("stock", pin.lower()),)
    assert s.sources == {"stock": pin.lower()}


# --- presets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets(name):
    p = PRESETS[name]
    assert set(p) == {"id", "revision", "hidden", "intermediate", "experts", "top_k", "source",
                      "layers", "dense_layers", "layers_source", "transformers"}  # fmt: skip
    assert 0 < len(p["dense_layers"]) < p["layers"] or p["dense_layers"] == ()
    assert p["revision"] == "unpinned" or re.fullmatch(r"[0-9a-f]{40}", p["revision"])
    d = doc(model=name, topology={"ep": 8}, shape={"tokens_per_rank": 4, "alignment": 128})
    if p["hidden"] % 128:  # gpt-oss: hidden 2880 does not fit the FP8 128x128 prefill arms
        fails(d, "model.hidden", f"preset {name!r}")
        d["model"] = {"preset": name, "hidden": 2944, "intermediate": 2944}
    s = parse(d)
    assert s.model.preset == name and s.model.id == p["id"] and s.model.revision == p["revision"]
    assert s.model.experts == p["experts"] and s.model.top_k == p["top_k"]


def test_preset_figures():
    v4 = PRESETS["deepseek-v4-flash"]
    assert (v4["hidden"], v4["intermediate"], v4["experts"], v4["top_k"]) == (4096, 2048, 256, 6)
    assert v4["revision"] == "60d8d70770c6776ff598c94bb586a859a38244f1"
    v3 = PRESETS["deepseek-v3"]
    assert (v3["hidden"], v3["intermediate"], v3["experts"], v3["top_k"]) == (7168, 2048, 256, 8)


def test_overrides_win():
    model = {"preset": "deepseek-v4-flash", "top_k": 8, "revision": "main"}
    s = parse({**doc(topology={"ep": 8}), "model": model})
    assert s.model.preset == "deepseek-v4-flash" and s.model.top_k == 8
    assert s.model.revision == "main" and s.model.hidden == 4096


@pytest.mark.parametrize(
    "model, label",
    [
        ("deepseek-v4-flash", "deepseek-v4-flash"),  # the preset as it is
        ({"preset": "deepseek-v4-flash", "hidden": 4096}, "deepseek-v4-flash"),  # same value
        ({"preset": "deepseek-v4-flash", "hidden": 1024},
         "deepseek-v4-flash (modified: hidden=1024)"),  # a shape field differs
        ({"preset": "deepseek-v4-flash", "top_k": 8, "experts": 128},
         "deepseek-v4-flash (modified: experts=128, top_k=8)"),  # shape fields in one order
        ({"preset": "deepseek-v4-flash", "revision": "main"},
         "deepseek-v4-flash (modified: revision=main)"),  # another commit of the model
        (BASE["model"], "x/tiny"),  # no preset: the model id
    ],
)  # fmt: skip
def test_a_preset_with_fields_overridden_is_labelled_modified(model, label):
    s = parse({**doc(topology={"ep": 8}), "model": model})
    assert s.model.label == label
    # the normalised document (every field written out) names the same model
    again = parse_scenario(yaml.safe_dump(to_dict(s)), path="case.yaml")
    assert again.model.label == label


def test_each_case_of_a_model_sweep_has_its_own_label():
    d = doc(topology={"ep": 8}, sweep={"model.hidden": [4096, 1024]})
    s = parse({**d, "model": "deepseek-v4-flash"})
    assert [c.scenario.model.label for c in expand(s)] == [
        "deepseek-v4-flash", "deepseek-v4-flash (modified: hidden=1024)",
    ]  # fmt: skip


# --- sweeps ------------------------------------------------------------------------------------


def test_no_sweep_is_one_case():
    s = parse(BASE)
    (case,) = expand(s)
    assert isinstance(case, Case)
    assert case.case_id == "c000" and case.index == 0 and case.params == () and case.scenario is s


def test_sweep_expansion():
    s = parse(
        doc(
            routing={"alpha": 1.2},
            sweep={"shape.tokens_per_rank": [1, 2, 4], "routing.alpha": [1.0, 1.5]},
        )
    )
    assert s.sweep == (("shape.tokens_per_rank", (1, 2, 4)), ("routing.alpha", (1.0, 1.5)))
    # the scenario itself carries each swept field's first value
    assert s.shape.tokens_per_rank == 1 and s.routing.alpha == 1.0
    cases = expand(s)
    assert [c.case_id for c in cases] == [
        "c000-tokens_per_rank=1-alpha=1.0",
        "c001-tokens_per_rank=1-alpha=1.5",
        "c002-tokens_per_rank=2-alpha=1.0",
        "c003-tokens_per_rank=2-alpha=1.5",
        "c004-tokens_per_rank=4-alpha=1.0",
        "c005-tokens_per_rank=4-alpha=1.5",
    ]
    c = cases[3]
    assert c.index == 3
    assert c.params == (("shape.tokens_per_rank", 2), ("routing.alpha", 1.5))
    assert c.scenario.shape.tokens_per_rank == 2 and c.scenario.routing.alpha == 1.5
    assert c.scenario.sweep == () and c.scenario.sha256 == s.sha256 and c.scenario.text == s.text
    assert expand(s) == cases  # deterministic


def test_sweep_of_whole_fields_and_presets():
    s = parse(
        doc(
            model="deepseek-v4-flash",
            topology={"ep": 8},
            sweep={
                "model.preset": ["deepseek-v4-flash", "qwen3-30b-a3b", "mixtral-8x7b"],
                "precision": ["fp8", "bf16"],
                "measure.stages": [["act"], ["fc1", "fc2"]],
                "topology.ep": [8, 4],
            },
        )
    )
    cases = expand(s)
    assert len(cases) == 24
    assert cases[-1].case_id == "c023-preset=mixtral-8x7b-precision=bf16-stages=fc1_fc2-ep=4"
    last = cases[-1].scenario
    assert (
        last.model.experts == 8 and last.topology.dp == 4 and last.measure.stages == ("fc1", "fc2")
    )


def test_case_ids_are_filesystem_safe_unique_and_short():
    s = parse(
        doc(
            sweep={
                "model.id": ["org/model with spaces", ".hidden", "x" * 150, "é/ü"],
                "model.revision": ["a:b", "c"],
            }
        )
    )
    ids = [c.case_id for c in expand(s)]
    assert len(set(ids)) == len(ids) == 8
    for case_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9._=-]+", case_id) and not case_id.startswith(".")
        assert len(case_id) <= 100
    assert ids[0] == "c000-id=org_model_with_spaces-revision=a_b"


def test_many_cases_get_wide_indices():
    s = parse(doc(sweep={"routing.seed": list(range(1000)), "shape.tokens_per_rank": [1, 2]}))
    cases = expand(s)
    assert len(cases) == 2000 and cases[0].case_id.startswith("c0000-")
    assert cases[-1].case_id == "c1999-seed=999-tokens_per_rank=2"


def test_scenario_with_and_to_dict():
    s = parse(doc(sweep={"shape.tokens_per_rank": [2, 4]}))
    t = scenario_with(s, **{"shape.tokens_per_rank": 16}, routing__seed=3)
    assert t.shape.tokens_per_rank == 16 and t.routing.seed == 3 and t.sweep == ()
    assert t.sha256 != s.sha256
    with pytest.raises(ScenarioError, match="shape.alignment: must be a power of two"):
        scenario_with(s, shape__alignment=3)
    with pytest.raises(ScenarioError, match="shape.nope: not a field"):
        scenario_with(s, shape__nope=3)
    d = to_dict(s)
    assert d["model"]["hidden"] == 256 and d["topology"]["dp"] == 2
    assert d["sweep"] == {"shape.tokens_per_rank": [2, 4]} and d["measure"]["ranks"] is None
    assert yaml.safe_load(yaml.safe_dump(d)) == d  # plain data


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_scenario_files_round_trip(path):
    if "../../shared/traces/" in path.read_text() and not shared_traces_beside_repo():
        pytest.skip("replays ../shared/traces, not beside this checkout (test_traces checks it)")
    s = load_scenario(path)
    assert s.text.startswith("#"), (
        "every scenario file opens with a comment saying what it measures"
    )
    assert s.description
    for case in expand(s):
        d = to_dict(case.scenario)
        again = parse_scenario(yaml.safe_dump(d), path=str(path))
        assert to_dict(again) == d


def test_scenario_files_exist():
    names = {p.name for p in SCENARIOS}
    assert {
        "smoke.yaml",
        "seed-act-microbench.yaml",
        "v4-flash-ep8.yaml",
        "full-buffer.yaml",
        "skew.yaml",
    } <= names


def capacity(s: Scenario) -> int:
    return layout.capacity_rows(
        s.shape.tokens_per_rank, s.topology.ep, s.model.top_k, local_experts(s), s.shape.alignment
    )


def test_seed_act_microbench_figures():
    s = load_scenario(SCENARIOS[0].parent / "seed-act-microbench.yaml")
    assert s.model.preset == "deepseek-v4-flash" and s.topology.ep == 8
    assert s.routing.family == "balanced" and s.measure.ranks == (0,)
    # the kernel regime (events) and the profile regime (device time inside the FFN graph)
    assert s.measure.regimes == ("kernel", "profile") and s.measure.stages == ("act",)
    assert capacity(s) == 28_672
    # balanced routing: every expert gets exactly T*K/E rows, so rank 0 holds 32 of them
    assert global_tokens(s) * s.model.top_k // s.model.experts * local_experts(s) == 3_072
    assert 2 * s.model.intermediate == 4_096 and s.model.intermediate == 2_048


def test_smoke_is_tiny_and_full_buffer_is_full():
    smoke = load_scenario(SCENARIOS[0].parent / "smoke.yaml")
    assert capacity(smoke) == 96 and smoke.model.hidden * smoke.model.intermediate <= 256 * 256
    assert (smoke.measure.warmup, smoke.measure.blocks, smoke.measure.iterations) == (1, 3, 2)
    full = load_scenario(SCENARIOS[0].parent / "full-buffer.yaml")
    assert full.routing.family == "full_capacity" and full.shape.capacity == "tight"
    per_expert = global_tokens(full) * full.model.top_k // full.model.experts
    assert per_expert % full.shape.alignment == 0 and per_expert * local_experts(full) == 12_288


def test_every_routing_family_of_the_vocabulary_synthesizes():
    # A scenario accepts every vocabulary family; synthesize must build each (trace needs a file:
    # test_traces.py replays them).
    from moebench.core.vocabulary import ROUTING_FAMILIES
    from moebench.routing.synthetic import synthesize

    for family in ROUTING_FAMILIES:
        if family != "trace":
            r = synthesize(family=family, tokens=64, experts=4, top_k=2, ep=2, alignment=16)
            assert r.topk_ids_TK.shape == (64, 2), family


# --- property: any mutation either parses or raises a one-line ScenarioError --------------------

VALID = yaml.safe_load((SCENARIOS[0].parent / "smoke.yaml").read_text())
VALID["sweep"] = {"routing.seed": [0, 1]}

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=-3, max_value=300)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(
        ["fp8", "trace", "formula", "tight", "stock", "deepseek-v4-flash", "act", "shape.alignment"]
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(d, prefix=()):
    yield prefix
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, (*prefix, k))


@st.composite
def mutated(draw):
    d = copy.deepcopy(VALID)
    paths = [p for p in _paths(d) if p]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        parent = d
        for k in path[:-1]:
            parent = parent.get(k) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(junk)
        elif action == "delete":
            parent.pop(path[-1], None)
        else:
            parent[draw(st.text(max_size=10))] = draw(junk)
    text = yaml.safe_dump(d, allow_unicode=draw(st.booleans()), sort_keys=False)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.sampled_from(["[", "{a: ", "- "])) * draw(st.integers(1, 3000)) + text
    return text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_parse_or_raise_one_line_scenario_error(text):
    try:
        s = parse_scenario(text, path="fuzz.yaml")
    except ScenarioError as exc:
        msg = str(exc)
        assert msg.startswith("fuzz.yaml: ") and len(msg.splitlines()) == 1 and len(msg) < 2000
    else:
        assert expand(s)
