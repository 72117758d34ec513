"""The model regime's transformers side (issue 27): a preset's whole model built at given widths
with random weights, moebench's cache that replays a decode step as one graph, the calls a served
model makes, and what is refused before anything is built. Tiny models of three families under
the installed transformers (5.17 and 5.24 both pass), on the CPU."""

from __future__ import annotations

import pytest
import torch

from moebench.core import reference
from moebench.core.errors import ScenarioError
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.core.vocabulary import MODEL_DECODE, MODEL_PREFILL, NO_EXPERTS
from moebench.integrations.transformers import model as hf_model
from moebench.integrations.transformers.cache import SlotCache
from moebench.integrations.transformers.serving import ModelRunner
from moebench.plan.cases import run_arms
from moebench.spec.load import parse_scenario

CPU = torch.device("cpu")
TINY = {"vocab_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
MLA = {"vocab_size": 96, "num_attention_heads": 4, "num_key_value_heads": 4, "n_group": 2,
       "topk_group": 1, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
       "qk_nope_head_dim": 16, "v_head_dim": 16, "intermediate_size": 128}  # fmt: skip


def scenario(preset: str, *, model: dict, arms: str, precision: str, activation: str = "silu",
             config: dict | None = None, run: str = "") -> object:  # fmt: skip
    widths = ", ".join(f"{k}: {v}" for k, v in model.items())
    cfg = ", ".join(f"{k}: {v}" for k, v in (config if config is not None else TINY).items())
    return parse_scenario(
        f"name: t\nmodel: {{preset: {preset}, {widths}}}\narms: [{arms}]\n"
        f"precision: {precision}\nactivation: {activation}\nshape: {{alignment: 16}}\n"
        f"measure: {{regimes: [model], blocks: 2}}\n"
        f"model_run: {{batch: 2, context: 9, prompt: 6, decode_steps: 3, check_steps: 2, "
        f"config: {{{cfg}}}{run}}}\n"
    )


GPT_OSS = dict(preset="gpt-oss-20b", model=dict(hidden=64, intermediate=64, experts=4, top_k=2,
               layers=3), arms="dense_decode", precision="w4a16", activation="swiglu_oai",
               config={**TINY, "sliding_window": 4})  # fmt: skip
QWEN3 = dict(preset="qwen3-30b-a3b", model=dict(hidden=128, intermediate=128, experts=4, top_k=2,
             layers=2), arms="stock", precision="bf16")  # fmt: skip
DEEPSEEK = dict(preset="deepseek-v3", model=dict(hidden=128, intermediate=128, experts=8, top_k=2,
                layers=3, dense_layers="[0]"), arms="stock", precision="fp8",
                config=MLA)  # fmt: skip
FAMILIES = [
    pytest.param(GPT_OSS, id="gpt_oss"),  # sliding and full layers, a window under the prompt
    pytest.param(QWEN3, id="qwen3_moe"),  # full attention, head_dim over hidden / heads
    pytest.param(DEEPSEEK, id="deepseek_v3"),  # a dense first layer, MLA's latent cache
]


def built(spec: dict):
    s = scenario(**spec)
    p = hf_model.plan(s)
    return s, p, hf_model.build(p, s, CPU, 0)


@pytest.mark.parametrize("spec", FAMILIES)
def test_the_slot_cache_gives_the_full_forwards_logits(spec):
    """A prompt, then decode steps through moebench's cache (masks and writes by a position held
    on the device), against one forward of the whole sequence without a cache."""
    s, p, model = built(spec)
    B, P, N = 2, 6, 4
    ids = torch.randint(0, 96, (B, P + N), generator=torch.Generator().manual_seed(1))
    cache = SlotCache(list(p.kinds), P + N, p.window, CPU, torch.bfloat16)
    runner = ModelRunner(model, p, batch=B, context=1, prompt=1, steps=1, device=CPU, seed=0)
    with torch.no_grad():
        want = model(input_ids=ids).logits.float()
        got = [runner._forward(cache, ids[:, :P])]
        got += [runner._forward(cache, ids[:, P + i : P + i + 1]) for i in range(N)]
    assert int(cache.pos) == P + N
    for i, g in enumerate(got):
        assert calc_diff(g.float(), want[:, P - 1 + i]) < 1e-5, i
    assert cache.nbytes() == p.kv_bytes(B, P + N)  # the memory estimate is what it allocates


@pytest.mark.parametrize("spec", FAMILIES)
def test_the_plan_counts_what_the_build_allocates(spec):
    s, p, model = built(spec)
    held = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert p.param_bytes == held
    experts = hf_model.experts_modules(model)
    assert tuple(experts) == p.moe_layers == s.model.moe_layers
    assert p.expert_bytes == sum(t.numel() * t.element_size()
                                 for m in experts.values() for t in m.parameters())  # fmt: skip
    finite = [torch.isfinite(t.float()).all() for t in model.state_dict().values()]
    assert all(finite)


@pytest.mark.parametrize(
    "precision, quant, dequant",
    [
        ("w4a16", reference.quant_weight_mxfp4, reference.dequant_weight_mxfp4),  # MXFP4 blocks
        ("w8a16", reference.quant_weight_fp8_expert, reference.dequant_weight_fp8_expert),
    ],
)
def test_the_experts_hold_what_the_precision_stores(precision, quant, dequant):
    """Every arm reads the same weights: the model's bf16 experts are the precision's values,
    so quantising them again lands on them (w8a16: up to bf16's rounding of a scaled value)."""
    s = scenario(**{**GPT_OSS, "precision": precision})
    p = hf_model.plan(s)
    model = hf_model.build(p, s, CPU, 0)
    for m in hf_model.experts_modules(model).values():
        w_ENK = m.down_proj.detach().transpose(1, 2).float()  # [E, D, F], F reduced
        again = dequant(*quant(w_ENK))
        if precision == "w4a16":
            assert torch.equal(again, w_ENK)
        else:
            assert calc_diff(again, w_ENK) < 1e-5


def test_a_served_model_runs_each_backend_against_the_reference():
    """The calls a request makes, through moebench's arm, transformers' backend and the no-work
    backend: the arm and grouped_mm give the eager experts' logits, the no-work backend does not
    (it is the gates' power), and the routing each layer received is recorded."""
    s = scenario(**{**GPT_OSS, "arms": "dense_decode, hf:grouped_mm"})
    p = hf_model.plan(s)
    run = s.model_run
    runner = ModelRunner(hf_model.build(p, s, CPU, 0), p, batch=run.batch, context=run.context,
                         prompt=run.prompt, steps=run.decode_steps, device=CPU, seed=0)  # fmt: skip
    runner.use("eager")
    runner.fill_context(0)
    ref = [runner.run_prefill(), *runner.run_decode(runner.decode, 2)]
    backends = {a: hf_model.backend_of(arm, s.precision, 16) for a, arm in run_arms(s).items()}
    assert backends == {"dense_decode": "moebench:dense_decode:w4a16",
                        "hf:grouped_mm": "grouped_mm"}  # fmt: skip
    for backend in backends.values():
        runner.use(backend)
        got = [runner.run_prefill(), *runner.run_decode(runner.decode, 2)]
        assert max(calc_diff(g, r) for g, r in zip(got, ref, strict=True)) <= TOLERANCE["w4a16"]
    runner.use(hf_model.register_no_experts())
    none = [runner.run_prefill(), *runner.run_decode(runner.decode, 2)]
    assert min(calc_diff(g, r) for g, r in zip(none, ref, strict=True)) > 100 * TOLERANCE["w4a16"]
    assert NO_EXPERTS == "moebench:none"
    touched = runner.touched(MODEL_DECODE)
    assert set(touched) == set(p.moe_layers)
    assert all(1 <= n <= 4 for n in touched[0][:2])
    assert all(1 <= v[0] <= 4 for v in runner.touched(MODEL_PREFILL).values())


def test_restore_returns_every_arm_to_the_same_context():
    """Decoding moves the cache (a sliding layer's ring is overwritten); restoring it gives the
    same logits again, so every arm decodes from the same state."""
    s = scenario(**GPT_OSS)
    p = hf_model.plan(s)
    run = s.model_run
    runner = ModelRunner(hf_model.build(p, s, CPU, 0), p, batch=run.batch, context=run.context,
                         prompt=run.prompt, steps=run.decode_steps, device=CPU, seed=0)  # fmt: skip
    runner.use("eager")
    runner.fill_context(0)
    first = runner.run_decode(runner.decode, 3)
    again = runner.run_decode(runner.decode, 3)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    runner.set_tokens(5)  # other tokens, the same tensors: other logits
    assert not torch.equal(runner.run_decode(runner.decode, 1)[0], first[0])


def test_trace_draws_replace_every_layers_routing():
    """With draws, each MoE layer's experts receive the draws' top-k, step by step."""
    s = scenario(**GPT_OSS)
    p = hf_model.plan(s)
    run, K = s.model_run, s.model.top_k
    g = torch.Generator().manual_seed(3)
    draws = {}
    for layer in p.moe_layers:
        ids = torch.stack([torch.randperm(4, generator=g)[:K] for _ in range(3 * 2)])
        draws[(layer, MODEL_DECODE)] = (ids.view(3, 2, K), torch.full((3, 2, K), 0.5))
        pre = torch.stack([torch.randperm(4, generator=g)[:K] for _ in range(2 * 6)])
        draws[(layer, MODEL_PREFILL)] = (pre, torch.full((12, K), 0.5))
    runner = ModelRunner(hf_model.build(p, s, CPU, 0), p, batch=run.batch, context=run.context,
                         prompt=run.prompt, steps=run.decode_steps, device=CPU, seed=0,
                         draws=draws)  # fmt: skip
    runner.use("eager")
    runner.fill_context(0)
    runner.run_prefill()
    runner.run_decode(runner.decode, 3)
    for layer in p.moe_layers:
        assert torch.equal(runner.routes[layer][MODEL_DECODE], draws[(layer, MODEL_DECODE)][0])
        assert torch.equal(runner.routes[layer][MODEL_PREFILL], draws[(layer, MODEL_PREFILL)][0])


@pytest.mark.parametrize(
    "spec, change, path",
    [
        (GPT_OSS, {"config": {**TINY, "num_expert": 3}}, "model_run.config.num_expert"),  # typo
        (QWEN3, {"preset": "deepseek-v4-flash"}, "model.preset"),  # no config recorded
        (GPT_OSS, {"activation": "silu"}, "activation"),  # gpt-oss's experts compute swiglu_oai
    ],
)
def test_what_cannot_be_built_is_one_line_naming_the_field(spec, change, path):
    with pytest.raises(ScenarioError) as err:
        hf_model.plan(scenario(**{**spec, **change}))
    text = str(err.value)
    assert f": {path}:" in text and "\n" not in text


def test_memory_counts_every_part_before_anything_is_built():
    s = scenario(**{**GPT_OSS, "arms": "dense_decode, hf:grouped_mm"})
    p = hf_model.plan(s)
    parts = hf_model.memory(p, s, list(run_arms(s).values()))
    assert parts["parameters"] == p.param_bytes
    assert parts["kv cache"] == p.kv_bytes(2, 9 + 3) + p.kv_bytes(2, 6)
    # dense_decode's MXFP4 copy of every MoE layer's experts and its workspaces; grouped_mm
    # reads the module's own parameters
    one = hf_model.arm_bytes(p, s, run_arms(s)["dense_decode"], (2, 12))
    assert parts["arms"] == one > 0
    assert hf_model.arm_bytes(p, s, run_arms(s)["hf:grouped_mm"], (2, 12)) == 0
    # Every backend's captured prefill holds its activations: the two arms' and the non-MoE
    # backend's; one prefill's when nothing is captured.
    eager = scenario(**{**GPT_OSS, "arms": "dense_decode, hf:grouped_mm"},
                     run=", prefill_graph: false")  # fmt: skip
    once = hf_model.memory(p, eager, list(run_arms(eager).values()))["activations"]
    assert once > 0 and parts["activations"] == 3 * once


def test_memory_counts_the_copies_an_arms_build_makes():
    """An arm's layout copies (`Arm.layout_bytes`: the grouped arm's tile layouts, the sparse
    GEMV's rotated MXFP4) are counted for every MoE layer beside its prepared weights: the grouped
    and sparse arms hold more than the dense arm by exactly those bytes."""
    from moebench.arm.base import LayoutShapes

    s = scenario(**{**GPT_OSS, "arms": "dense_decode, sparse_decode, grouped_decode"})
    p = hf_model.plan(s)
    arms = run_arms(s)
    tokens = (2, 12)
    dense = hf_model.arm_bytes(p, s, arms["dense_decode"], tokens)
    m = s.model
    shapes = LayoutShapes(precision=s.precision, tokens=tokens, top_k=m.top_k, experts=m.experts,
                          hidden=m.hidden, intermediate=m.intermediate)  # fmt: skip
    for name in ("sparse_decode", "grouped_decode"):
        layouts = arms[name].layout_bytes(shapes)
        assert layouts > 0, name
        got = hf_model.arm_bytes(p, s, arms[name], tokens)
        assert got == dense + layouts * len(p.moe_layers), name


def test_each_layers_experts_are_held_to_eager_on_their_own_inputs():
    """The gate that judges an arm's numerics in a whole model: every eager experts call is
    recorded (its inputs and output, per layer) and held to transformers' eager experts on the
    same inputs; an arm's call agrees within its precision, a call one layer got wrong is named,
    and a captured replay (no hook) records nothing."""
    s = scenario(**{**GPT_OSS, "arms": "dense_decode"})
    p = hf_model.plan(s)
    run = s.model_run
    runner = ModelRunner(hf_model.build(p, s, CPU, 0), p, batch=run.batch, context=run.context,
                         prompt=run.prompt, steps=run.decode_steps, device=CPU, seed=0)  # fmt: skip
    runner.fill_context(0)
    (arm,) = run_arms(s).values()
    runner.use(hf_model.backend_of(arm, s.precision, 16))
    runner.record = {}
    runner.run_prefill()
    runner.run_decode(runner.decode, 2)
    record, runner.record = runner.record, None
    assert set(record) == set(p.moe_layers)
    assert all(len(calls) == 3 for calls in record.values())  # the prefill and two steps
    worst, where = runner.experts_error(record, calc_diff)
    assert worst <= TOLERANCE[s.precision] and where
    last = max(p.moe_layers)
    hidden, ids, weights, out = record[last][2]
    record[last][2] = (hidden, ids, weights, out * 0.5 + out.roll(1, dims=0) * 0.5)
    worst, where = runner.experts_error(record, calc_diff)
    assert worst > 100 * TOLERANCE[s.precision] and where == f"layer {last}, call 2"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float32])
def test_the_weights_fingerprint_sums_in_small_chunks_and_sees_one_flipped_bit(monkeypatch, dtype):
    """The model's weights fingerprint once widened a whole tensor to int64 in one call: 56 GiB
    for a DeepSeek-V3 layer's bf16 experts, out of memory on the H200. In chunks it is the same
    sum (here 7 words a chunk: chunks that do not divide the tensor, and a last partial one) and
    still changes with any one bit."""
    from moebench.integrations.transformers import serving

    t = torch.randn(5, 9).to(dtype)
    words = t.view(serving._INTS[t.element_size()]).to(torch.int64)
    whole = int(serving.bit_sum(t))
    assert whole == int(words.sum())
    monkeypatch.setattr(serving, "BIT_SUM_CHUNK", 7)
    assert int(serving.bit_sum(t)) == whole
    flipped = t.clone()
    flipped.view(torch.uint8).view(-1)[17] ^= 1
    assert int(serving.bit_sum(flipped)) != whole
    assert int(serving.bit_sum(t[:0])) == 0
