"""transformers' experts classes as moebench builds and reads them (moebench.integrations.
transformers: families, backends): each family's layout against moebench's reference, the
non-local slots each version's backends take, the mapping of global ids to local ones."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from moebench.core import reference
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.integrations.transformers import backends, families, hf_arms

T, K, E, D, F = 8, 2, 4, 128, 128


def weights(seed: int, *, biases: bool):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, scale):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)

    w13, w2 = randn(E, 2 * F, D, scale=D**-0.5), randn(E, D, F, scale=F**-0.5)
    b13, b2 = (randn(E, 2 * F, scale=0.5), randn(E, D, scale=0.5)) if biases else (None, None)
    x = randn(T, D, scale=1.0)
    ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)])
    w = torch.softmax(torch.randn(T, K, generator=g), dim=1)
    return x, ids, w, w13, w2, b13, b2


@pytest.mark.parametrize("name", sorted(families.FAMILIES))
def test_each_family_computes_moebenchs_reference_from_moebenchs_weights(name):
    fam = families.FAMILIES[name]
    gpt_oss = fam.layout == families.GPT_OSS
    x, ids, w, w13, w2, b13, b2 = weights(1, biases=gpt_oss)
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend="eager")
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=gpt_oss, b13_E2F=b13, b2_ED=b2)
    with torch.no_grad():
        y = module(x, ids, w.to(torch.bfloat16)).float()
    if gpt_oss:  # w13 is the decode layout: rows interleaved, with biases
        ref = reference.moe_ffn_decode(x, ids, w, w13, b13, w2, b2)
    else:
        ref = reference.moe_ffn(x, ids, w, w13, w2)
    assert calc_diff(y, ref) < TOLERANCE["bf16"], name
    got = families.read(module)  # and back: what moebench's arms would be handed
    assert got.activation == fam.activation and got.interleaved == gpt_oss
    assert torch.equal(got.w13, w13) and torch.equal(got.w2_EDF, w2)
    if not gpt_oss:  # the concatenated layout is moebench's own: the parameter is its tensor
        assert module.gate_up_proj.data_ptr() == w13.data_ptr()


def test_a_gpt_oss_module_takes_a_prefill_problem_interleaved_with_zero_biases():
    x, ids, w, w13, w2, _, _ = weights(2, biases=False)
    fam = families.FAMILIES["gpt_oss"]
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend="eager")
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=False)
    with torch.no_grad():
        y = module(x, ids, w.to(torch.bfloat16)).float()
    ref = reference.moe_ffn(x, ids, w, w13, w2, activation_kind="swiglu_oai")
    assert calc_diff(y, ref) < TOLERANCE["bf16"]
    assert torch.equal(families.deinterleave(families.interleave(w13)), w13)


@pytest.mark.parametrize(
    "named, family, preset, activation, want, arm_family",
    [
        # each preset alone: its own class, and the arm's family from it
        (None, "", "deepseek-v4-flash", "silu", "deepseek_v4", "prefill"),
        (None, "", "deepseek-v3", "silu", "deepseek_v3", "prefill"),
        (None, "", "qwen3-30b-a3b", "silu", "qwen3_moe", "prefill"),
        (None, "", "mixtral-8x7b", "silu", "mixtral", "prefill"),
        (None, "", "olmoe-1b-7b", "silu", "olmoe", "prefill"),
        (None, "", "gpt-oss-20b", "swiglu_oai", "gpt_oss", "decode"),  # both gpt-oss presets
        (None, "", "gpt-oss-120b", "swiglu_oai", "gpt_oss", "decode"),
        # the other arms' family decides; the preset's class only where it takes that family
        (None, "decode", "gpt-oss-20b", "swiglu_oai", "gpt_oss", "decode"),
        (None, "decode", "qwen3-30b-a3b", "swiglu_oai", "gpt_oss", "decode"),  # the default
        (None, "prefill", "gpt-oss-20b", "silu", "qwen3_moe", "prefill"),  # gpt-oss is decode's
        (None, "prefill", "qwen3-30b-a3b", "swiglu_oai", "gpt_oss", "prefill"),  # not silu
        # no preset: the default of the family and activation
        (None, "", "", "silu", "qwen3_moe", "prefill"),
        (None, "prefill", "", "swiglu_oai", "gpt_oss", "prefill"),
        (None, "decode", "", "swiglu_oai", "gpt_oss", "decode"),
        (None, "", "", "", "qwen3_moe", "prefill"),  # outside a scenario
        # named wins over the preset, and its layout sets the family
        ("mixtral", "", "deepseek-v4-flash", "silu", "mixtral", "prefill"),
        ("gpt_oss", "", "", "swiglu_oai", "gpt_oss", "decode"),
    ],
)
def test_the_class_built_is_named_or_the_presets_or_the_default(
    named, family, preset, activation, want, arm_family
):
    choice = families.choose(named=named, family=family, preset=preset, activation=activation)
    assert (choice.experts.name, choice.family) == (want, arm_family)


@pytest.mark.parametrize(
    "named, family, preset, activation, message",
    [
        ("mixtral", "", "", "swiglu_oai", "Mixtral's experts (MixtralExperts) compute silu"),
        # silu in the decode layout: no class computes it, and the line says whence the family
        (None, "decode", "", "silu", "a decode arm (the family of the scenario's other arms)"),
        (None, "", "gpt-oss-20b", "silu", "(the family of model gpt-oss-20b's gpt-oss experts)"),
    ],
)
def test_a_class_the_scenario_cannot_take_is_refused(named, family, preset, activation, message):
    with pytest.raises(ValueError) as info:
        families.choose(named=named, family=family, preset=preset, activation=activation)
    assert message in str(info.value) and f"activation is {activation}" in str(info.value)


def test_the_class_path_is_the_installed_class():
    fam = families.FAMILIES["gpt_oss"]
    assert families.class_path(fam) == "transformers.models.gpt_oss.modeling_gpt_oss.GptOssExperts"
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend="eager")
    assert type(module) is families.experts_class(fam)


def test_read_refuses_what_moebenchs_arms_do_not_compute():
    fam = families.FAMILIES["deepseek_v4"]
    _, _, _, w13, w2, _, _ = weights(3, biases=False)
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend="eager")
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=False)
    assert families.read(module).activation == "silu"  # limit +inf: the clamp changes nothing
    module.limit = 10.0  # the model's own limit: moebench's silu has no clamp
    with pytest.raises(ValueError, match="clamps at swiglu_limit 10.0"):
        families.read(module)
    module = families.build(
        families.FAMILIES["qwen3_moe"], hidden=D, intermediate=F, experts=E, backend="eager"
    )
    families.load(module, families.FAMILIES["qwen3_moe"], w13=w13, w2_EDF=w2, interleaved=False)
    module.config.hidden_act = "gelu"
    with pytest.raises(ValueError, match="act 'gelu'"):
        families.read(module)


# How each version takes the sentinel (id E, weight 0), read from its source and probed: 5.17's
# eager forwards one-hot over E classes (no sentinel); 5.24's take it, except gpt-oss's.
EXPECTED_MODES = {
    "5.17.0": {("eager", "qwen3_moe"): "clamp", ("eager", "gpt_oss"): "clamp",
               ("grouped_mm", "qwen3_moe"): "sentinel", ("batched_mm", "gpt_oss"): "sentinel"},
    "5.24.0": {("eager", "qwen3_moe"): "sentinel", ("eager", "gpt_oss"): "clamp",
               ("grouped_mm", "qwen3_moe"): "sentinel", ("batched_mm", "gpt_oss"): "sentinel"},
}  # fmt: skip


def test_the_probe_finds_each_versions_sentinel_handling():
    expected = EXPECTED_MODES.get(transformers.__version__)
    if expected is None:
        pytest.skip(f"no recorded expectation for transformers {transformers.__version__}")
    got = {key: backends.probe(*key) for key in expected}
    assert all(p.error is None for p in got.values())
    assert {key: p.mode for key, p in got.items()} == expected


@pytest.mark.parametrize("mode", [backends.SENTINEL, backends.CLAMP])
def test_local_routing_maps_global_ids_and_zeroes_other_ranks_slots(mode):
    ids = torch.tensor([[4, 7], [8, 3], [5, 0]], dtype=torch.int32)  # rank 1 of 2: experts 4-7
    w = torch.tensor([[0.5, 0.25], [0.75, 1.0], [0.125, 2.0]])
    local, lw = hf_arms.local_routing(ids, w, 4, 4, mode)
    other = 4 if mode == backends.SENTINEL else 0
    assert local.dtype == torch.int64 and lw.dtype == torch.bfloat16
    assert local.tolist() == [[0, 3], [other, other], [1, other]]
    assert lw.float().tolist() == [[0.5, 0.25], [0.0, 0.0], [0.125, 0.0]]


@pytest.mark.parametrize("mode", [backends.SENTINEL, backends.CLAMP])
@pytest.mark.parametrize("backend", ["grouped_mm", "batched_mm"])
def test_either_form_of_non_local_slots_is_exact(backend, mode):
    """The clamp form (expert 0 at weight 0) and the sentinel give the rank's share exactly."""
    x, ids, w, w13, w2, _, _ = weights(4, biases=False)
    fam = families.FAMILIES["qwen3_moe"]
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend=backend)
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=False)
    module._is_expert_parallel = True
    g = torch.Generator().manual_seed(4)
    # This rank holds experts [2, 6) of 8: slots on 0, 1, 6 and 7 are other ranks'.
    global_ids = torch.stack([torch.randperm(2 * E, generator=g)[:K] for _ in range(T)])
    local, lw = hf_arms.local_routing(global_ids, w, 2, E, mode)
    with torch.no_grad():
        y = module(x, local, lw).float()
    ref = reference.moe_ffn(x, global_ids, w, w13, w2, expert_offset=2)
    other = (global_ids < 2) | (global_ids >= 2 + E)
    assert other.any() and (~other).any() and calc_diff(y, ref) < TOLERANCE["bf16"]


def test_a_module_built_on_meta_gets_every_parameter_or_an_error():
    fam = families.FAMILIES["qwen3_moe"]
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend="eager")
    _, _, _, w13, w2, _, _ = weights(5, biases=False)
    with pytest.raises(ValueError, match=r"has shape \(4, 256, 128\), not the \(4, 256, 64\)"):
        families.load(module, fam, w13=w13[..., :64], w2_EDF=w2, interleaved=False)
    assert math.isinf(dict(families.FAMILIES["deepseek_v4"].extra)["swiglu_limit"])
