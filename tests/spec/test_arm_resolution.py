"""A scenario's arms resolved with what it knows (moebench.spec.sections.arms_section,
moebench.arm.registry.bind): an hf: arm takes the family of the other arms, or alone the family
of the model preset's transformers class, and the class it builds comes from the preset; the
bound references are what every later resolution reads; every bad reference stays one line
naming arms[i]."""

from __future__ import annotations

import pytest
import transformers
import yaml
from scenario_support import doc, fails, parse

from moebench.arm import registry
from moebench.plan.cases import run_arms
from moebench.spec.load import parse_scenario
from moebench.spec.schema import to_dict

DECODE = {"model": {"id": "x/tiny", "hidden": 64, "intermediate": 64, "experts": 4, "top_k": 2},
          "topology": {"ep": 2, "dp": 1, "tp": 2}, "precision": "w8a16",
          "activation": "swiglu_oai"}  # fmt: skip
GPT_OSS = "transformers.models.gpt_oss.modeling_gpt_oss.GptOssExperts"


def experts_class(arm) -> str:
    (line,) = [k for k in arm.kernels if k.startswith("experts class ")]
    return line.removeprefix("experts class ").split(" (transformers")[0]


def test_hf_arm_takes_the_decode_family_of_the_other_arms():
    s = parse(doc(**DECODE, arms=["dense_decode", "sparse_decode", "hf:grouped_mm"]))
    assert s.family == "decode" and s.arms == ("dense_decode", "sparse_decode", "hf:grouped_mm")
    # The reference as the scenario keeps it: bound to what the scenario knew.
    assert s.arm_refs[2] == "hf:grouped_mm?family=decode&activation=swiglu_oai"
    arms = run_arms(s)  # what a child, a rank or a resume resolves again
    hf = arms["hf:grouped_mm"]
    assert hf.name == "hf:grouped_mm" and hf.family == "decode"
    assert hf.precisions == ("w8a16", "w4a16") and experts_class(hf) == GPT_OSS
    assert f"(transformers {transformers.__version__})" in hf.kernels[1]
    assert "the default of a decode arm: the model names no preset" in hf.summary


@pytest.mark.parametrize(
    "model, activation, family, built",
    [
        # hf: arms alone: the preset's transformers family sets the family and the class
        ("gpt-oss-20b", "swiglu_oai", "decode", GPT_OSS),
        ("deepseek-v4-flash", "silu",
         "prefill", "transformers.models.deepseek_v4.modeling_deepseek_v4.DeepseekV4Experts"),
        ("qwen3-30b-a3b", "silu",
         "prefill", "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeExperts"),
        # a preset with fields overridden keeps its class (built at the scenario's widths)
        ({"preset": "mixtral-8x7b", "experts": 8, "hidden": 256, "intermediate": 256}, "silu",
         "prefill", "transformers.models.mixtral.modeling_mixtral.MixtralExperts"),
    ],
)  # fmt: skip
def test_hf_arms_alone_take_the_family_and_class_of_the_preset(model, activation, family, built):
    d = doc(model=model, activation=activation, arms=["hf:grouped_mm", "hf:eager"],
            precision="w8a16" if family == "decode" else "bf16",
            measure={"baseline": "hf:grouped_mm"})  # fmt: skip
    d["topology"] = {"ep": 1 if family == "decode" else 2}
    s = parse(d)
    assert s.family == family
    preset = model if isinstance(model, str) else model["preset"]
    for name, arm in run_arms(s).items():
        assert arm.family == family and experts_class(arm) == built, name
        assert f"the class of model {preset}" in arm.summary
        assert f"model={preset}" in s.arm_refs[s.arms.index(name)]


def test_beside_prefill_arms_a_decode_presets_hf_arm_builds_the_prefill_default():
    s = parse(doc(model={"preset": "gpt-oss-20b", "hidden": 256, "intermediate": 256},
                  arms=["stock", "hf:grouped_mm"], precision="bf16"))  # fmt: skip
    hf = run_arms(s)["hf:grouped_mm"]
    assert hf.family == "prefill" and "Qwen3MoeExperts" in experts_class(hf)
    assert "model gpt-oss-20b's gpt-oss experts take the decode layout" in hf.summary


def test_a_bound_reference_resolves_to_the_same_arm():
    bound = registry.bind("hf:grouped_mm", registry.Context(model="gpt-oss-20b",
                                                            activation="swiglu_oai"))  # fmt: skip
    once, again = registry.resolve(bound), registry.resolve(bound)
    assert once.name == again.name == "hf:grouped_mm"
    assert (once.family, once.summary, once.kernels) == (again.family, again.summary, again.kernels)
    assert registry.bind("stock", registry.Context(family="decode")) == "stock"  # no context
    assert registry.bind("hf:eager", registry.Context()) == "hf:eager"


def test_the_normalised_document_parses_to_the_same_bound_arms():
    s = parse(doc(**DECODE, arms=["dense_decode", "hf:grouped_mm"]))
    again = parse_scenario(yaml.safe_dump(to_dict(s)), path="case.yaml")  # a manifest's document
    assert again.arm_refs == s.arm_refs and again.arms == s.arms
    # A bound reference keeps its binding in another scenario: it is what moebench resolved.
    other = parse(doc(**DECODE, arms=["dense_decode", "hf:grouped_mm?model=gpt-oss-20b"]))
    assert other.arm_refs[1] == "hf:grouped_mm?model=gpt-oss-20b"
    assert "the class of model gpt-oss-20b" in run_arms(other)["hf:grouped_mm"].summary


@pytest.mark.parametrize(
    "sections, field, fragments",
    [
        # silu in the decode layout: no class computes it
        ({**DECODE, "activation": "silu", "arms": ["dense_decode", "hf:grouped_mm"]}, "arms[1]",
         ("'hf:grouped_mm': a decode arm (the family of the scenario's other arms)",
          "the scenario's activation is silu")),
        # alone on gpt-oss-20b, without its activation (the scenario's default is silu)
        ({"model": "gpt-oss-20b", "arms": ["hf:grouped_mm"], "topology": {"ep": 1}}, "arms[0]",
         ("(the family of model gpt-oss-20b's gpt-oss experts)",)),
        # a named class of the other family
        ({**DECODE, "arms": ["dense_decode", "hf:grouped_mm@olmoe"]}, "arms[1]",
         ("'hf:grouped_mm@olmoe': OLMoE's experts take the prefill layout; the scenario's "
          "other arms are decode arms",)),
        # the first bad entry is named, whether or not it is an hf: arm
        ({"arms": ["hf:nope", "no_such_arm"]}, "arms[0]", ("has no experts backend 'nope'",)),
        ({"arms": ["hf:grouped_mm", "no_such_arm"]}, "arms[1]", ("unknown arm 'no_such_arm'",)),
        ({"arms": ["hf:eager?model=olmoe-1b-7b&colour=red"]}, "arms[0]",
         ("'colour=red' is not a context moebench binds",)),
        # the precision error says why an hf: arm runs bf16 only
        ({"arms": ["stock", "hf:grouped_mm"], "precision": "fp8"}, "arms[1]",
         ("runs precision bf16 only, not 'fp8': moebench's fp8 quantises", "Hugging Face Hub")),
    ],
)  # fmt: skip
def test_a_bad_reference_is_one_line_naming_its_entry(sections, field, fragments):
    fails(doc(**sections), field, *fragments)
