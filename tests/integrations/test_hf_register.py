"""moebench's arms as transformers experts backends (``moebench:<arm>``, issue 26): tiny random
Qwen3-MoE, Mixtral and gpt-oss models give their eager logits with each arm; weights are
prepared once per experts module and again when they change; the sentinel of expert parallelism
is skipped; what an arm cannot run is a clear error, never a silent fallback."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    GptOssConfig,
    GptOssForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)
from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

from moebench.core import reference
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.integrations.transformers import ExpertsForward, families, prepare, register
from moebench.integrations.transformers.register import CACHE

LAYERS, EXPERTS, TOP_K, VOCAB = 2, 4, 2, 64
ALIGNMENT = 16  # a small capacity buffer keeps the interpreter's work small
ATTENTION = dict(num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)


@pytest.fixture(scope="module", autouse=True)
def registered():
    return register(alignment=ALIGNMENT)


def qwen3(width: int = 128):
    cfg = Qwen3MoeConfig(vocab_size=VOCAB, hidden_size=width, moe_intermediate_size=width,
                         intermediate_size=width, num_hidden_layers=LAYERS, head_dim=64,
                         num_experts=EXPERTS, num_experts_per_tok=TOP_K, **ATTENTION)  # fmt: skip
    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(cfg).to(torch.bfloat16).eval()


def mixtral():
    cfg = MixtralConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=128, head_dim=64,
                        num_hidden_layers=LAYERS, num_local_experts=EXPERTS,
                        num_experts_per_tok=TOP_K, **ATTENTION)  # fmt: skip
    torch.manual_seed(1)
    return MixtralForCausalLM(cfg).to(torch.bfloat16).eval()


def gpt_oss():
    """gpt-oss at decode widths (multiples of 32), its expert weights MXFP4 values (what its
    checkpoints hold, and what a w4a16 arm reads exactly), its biases nonzero."""
    cfg = GptOssConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, head_dim=32,
                       num_hidden_layers=LAYERS, num_local_experts=EXPERTS,
                       num_experts_per_tok=TOP_K, layer_types=["full_attention"] * LAYERS,
                       **ATTENTION)  # fmt: skip
    torch.manual_seed(2)
    model = GptOssForCausalLM(cfg).to(torch.bfloat16).eval()
    mxfp4_experts(model, "GptOssExperts")
    with torch.no_grad():
        for m in experts_modules(model):
            m.gate_up_proj_bias.normal_(0, 0.5)
            m.down_proj_bias.normal_(0, 0.5)
    return model


def experts_modules(model) -> list[torch.nn.Module]:
    return [m for m in model.modules() if hasattr(m, "gate_up_proj")]


def mxfp4_experts(model, cls: str) -> None:
    """Round every expert weight to MXFP4 along its reduction dimension, in place."""
    with torch.no_grad():
        for m in experts_modules(model):
            for name in ("gate_up_proj", "down_proj"):
                w = getattr(m, name)
                w_ENK = w.transpose(1, 2) if m.is_transposed else w  # [E, N, K], K reduced
                q, s = reference.quant_weight_mxfp4(w_ENK.float())
                deq = reference.dequant_weight_mxfp4(q, s)
                w.copy_(deq.transpose(1, 2) if m.is_transposed else deq)


def logits(model, impl: str, tokens: torch.Tensor) -> torch.Tensor:
    model.set_experts_implementation(impl)
    with torch.no_grad():
        return model(tokens).logits.float()


MODELS = {"qwen3_moe": qwen3, "mixtral": mixtral, "gpt_oss": gpt_oss}
CASES = [
    ("qwen3_moe", "moebench:stock", "bf16"),
    ("qwen3_moe", "moebench:prefix_sum", "bf16"),
    ("qwen3_moe", "moebench:prefix_sum_masked", "bf16"),
    ("qwen3_moe", "moebench:prefix_sum_masked:fp8", "fp8"),  # FP8 pipeline: fp8's tolerance
    ("mixtral", "moebench:prefix_sum_masked", "bf16"),
    ("gpt_oss", "moebench:dense_decode", "w4a16"),
    pytest.param("gpt_oss", "moebench:sparse_decode", "w4a16", marks=pytest.mark.slow),
]


@pytest.fixture(scope="module")
def eager():
    """Each family's model with the eager logits of its tokens (computed once)."""
    out = {}
    for name, make in MODELS.items():
        model = make()
        tokens = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(7))
        out[name] = (model, tokens, logits(model, "eager", tokens))
    return out


@pytest.mark.parametrize("family, impl, precision", CASES)
def test_a_model_gives_its_eager_logits_with_a_moebench_arm(eager, family, impl, precision):
    model, tokens, want = eager[family]
    got = logits(model, impl, tokens)
    err = calc_diff(got, want)
    assert err <= TOLERANCE[precision], (impl, err)
    fn = ALL_EXPERTS_FUNCTIONS[impl]
    for m in experts_modules(model):  # the arm ran in every layer, at that precision
        assert (fn.arm.name, precision, fn.alignment) in m.__dict__[CACHE]


def test_an_fp8_decode_arm_reads_gpt_oss_transposed_experts():
    """gpt-oss holds its experts transposed: the FP8 weights prepared from them are rows the
    kernels read (a strided FP8 copy was refused by the kernels on the H200), and the logits
    are eager's on weights that FP8 with a scale an expert holds exactly."""
    model = gpt_oss()
    with torch.no_grad():
        for m in experts_modules(model):
            for name in ("gate_up_proj", "down_proj"):
                w = getattr(m, name)
                w_ENK = w.transpose(1, 2)
                q, s = reference.quant_weight_fp8_expert(w_ENK.float())
                w.copy_(reference.dequant_weight_fp8_expert(q, s).transpose(1, 2))
    tokens = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(9))
    want = logits(model, "eager", tokens)
    got = logits(model, "moebench:dense_decode:w8a16", tokens)
    assert calc_diff(got, want) <= TOLERANCE["w8a16"]
    for m in experts_modules(model):
        (prep,) = [v for k, v in m.__dict__[CACHE].items() if k[1] == "w8a16"]
        assert prep.template.w13.is_contiguous() and prep.template.w2.is_contiguous()


def test_a_decode_arm_runs_a_silu_model_with_zero_biases():
    model = qwen3()
    mxfp4_experts(model, "Qwen3MoeExperts")
    tokens = torch.randint(0, VOCAB, (1, 3), generator=torch.Generator().manual_seed(8))
    want = logits(model, "eager", tokens)
    assert calc_diff(logits(model, "moebench:dense_decode", tokens), want) <= TOLERANCE["w4a16"]


def test_weights_are_prepared_once_and_again_when_they_change():
    model = qwen3()
    tokens = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(9))
    impl = "moebench:prefix_sum_masked"
    model.set_experts_implementation(impl)
    assert prepare(model) == LAYERS  # before any forward
    first = experts_modules(model)[0]
    key = ("prefix_sum_masked", "bf16", ALIGNMENT)
    prepared = first.__dict__[CACHE][key]
    logits(model, impl, tokens)
    logits(model, impl, tokens)
    assert first.__dict__[CACHE][key] is prepared and len(prepared.runners) == 1
    # New expert weights through the state dict: the next forward prepares them again.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for k in state:
        if k.endswith("experts.gate_up_proj"):
            state[k] = torch.randn_like(state[k]) * 128**-0.5
    model.load_state_dict(state)
    got = logits(model, impl, tokens)
    assert first.__dict__[CACHE][key] is not prepared
    assert calc_diff(got, logits(model, "eager", tokens)) <= TOLERANCE["bf16"]


def test_the_expert_parallel_sentinel_is_another_ranks_slot():
    fam = families.FAMILIES["qwen3_moe"]
    g = torch.Generator().manual_seed(3)
    w13 = (torch.randn(EXPERTS, 256, 128, generator=g) * 128**-0.5).to(torch.bfloat16)
    w2 = (torch.randn(EXPERTS, 128, 128, generator=g) * 128**-0.5).to(torch.bfloat16)
    module = families.build(fam, hidden=128, intermediate=128, experts=EXPERTS, backend="eager")
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=False)
    x = torch.randn(6, 128, generator=g).to(torch.bfloat16)
    ids = torch.tensor([[0, 4], [1, 2], [4, 4], [3, 0], [2, 1], [4, 3]])  # 4: another rank's
    w = torch.rand(6, 2, generator=g).masked_fill(ids == 4, 0.0)
    with torch.no_grad():
        y = ALL_EXPERTS_FUNCTIONS["moebench:prefix_sum_masked"](module, x, ids, w)
    ref = reference.moe_ffn(x, ids, w, w13, w2)
    assert y.dtype == torch.bfloat16 and calc_diff(y.float(), ref) <= TOLERANCE["bf16"]
    assert torch.equal(y[2], torch.zeros_like(y[2]))  # no local slot: zero, never NaN


def test_what_an_arm_cannot_run_is_a_clear_error(monkeypatch):
    fn = ALL_EXPERTS_FUNCTIONS["moebench:stock"]
    assert isinstance(fn, ExpertsForward)
    oss = experts_modules(gpt_oss())[0]
    x, ids = torch.randn(2, 64).to(torch.bfloat16), torch.tensor([[0, 1], [2, 3]])
    w = torch.full((2, 2), 0.5)
    with torch.no_grad(), pytest.raises(ValueError, match="a prefill arm takes no expert biases"):
        fn(oss, x, ids, w)
    narrow = experts_modules(qwen3(width=64))[0]
    with torch.no_grad(), pytest.raises(ValueError, match="multiples of 128"):
        fn(narrow, x, ids, w)
    wide = experts_modules(qwen3())[0]
    x = torch.randn(2, 128, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(RuntimeError, match="inference only"):
        fn(wide, x, ids, w)
    monkeypatch.delenv("TRITON_INTERPRET")
    with torch.no_grad(), pytest.raises(RuntimeError, match="set TRITON_INTERPRET=1"):
        fn(wide, x.detach(), ids, w)


def test_register_names_each_precision_and_a_users_arm(registered, tmp_path):
    assert {"moebench:stock", "moebench:stock:fp8", "moebench:sparse_decode:w8a16"} <= set(
        registered
    )
    assert ALL_EXPERTS_FUNCTIONS["moebench:sparse_decode"].precision == "w4a16"
    arm = tmp_path / "mine.py"
    arm.write_text(
        "from moebench.arm.base import Arm\nfrom arms.prefill.stock import ARM as S\n"
        "import dataclasses\nARM = dataclasses.replace(S, name='mine')\n"
    )
    names = register(["mine.py:ARM"], base_dir=tmp_path, alignment=ALIGNMENT)
    assert names == ("moebench:mine", "moebench:mine:fp8", "moebench:mine:bf16")
