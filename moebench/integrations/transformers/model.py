"""The whole transformers model of a preset, built for the ``model`` regime (issue 27,
docs/DESIGN.md section 14): its config at the real shapes, its memory before anything is
allocated, and the model itself with random weights on the device.

- **Config.** The preset's transformers family (``core/models.py``: ``transformers``) names the
  config class; the preset gives the widths, experts, top-k, layers and dense layers (``model:``
  of the scenario, ``model.layers: N`` keeping the first N layers); ``MODEL_CONFIG`` holds what
  else the model's config.json says where the class's defaults differ and it matters to a step's
  shapes; ``model_run.config`` overrides any field (a tiny model for tests). RoPE's parameters
  change no shape and no time: the class defaults stand.
- **Memory** (``estimate``): the parameters counted on the meta device (exact), every moebench
  arm's own copy of the expert weights at its precision, the arms' workspaces per token count and
  layer, both KV caches, the logits, a prefill's activations for each backend whose prefill is a
  captured graph (its pool keeps them); refused before the first allocation when it exceeds what the
  device has (``plan.steps.available_memory``, ``MOEBENCH_MEMORY_LIMIT_GB`` in tests).
- **Build** (``build``): constructed on the meta device, every module but the experts
  materialised on the device (``to_empty``) and initialised by transformers (seeded), then each
  MoE layer's experts given moebench's own random weights (``plan.inputs``: seeded per layer and
  expert, 1/sqrt(fan-in), biases for gpt-oss), rounded through the scenario's precision so that a
  quantised arm reads exactly what the model holds in bf16 (FP8 blocks, per-expert FP8 scales,
  MXFP4), written straight into the experts' parameters (no second copy of the model).
- **Backends.** A moebench arm is its ``moebench:<arm>:<precision>`` backend (``register``), an
  ``hf:<backend>`` arm that backend; ``NO_EXPERTS`` (``moebench:none``) writes zeros: the step
  without expert work, whose time is the model's non-MoE time, never an arm compared.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from dataclasses import dataclass, field

import torch

from moebench.arm.base import Arm, LayoutShapes
from moebench.arm.registry import HF_PREFIX
from moebench.core import reference
from moebench.core.errors import ScenarioError
from moebench.core.families import facts
from moebench.core.models import PRESETS
from moebench.core.vocabulary import MODEL_PREFILL, NO_EXPERTS
from moebench.integrations.transformers import families
from moebench.integrations.transformers.cache import FULL, SLIDING
from moebench.integrations.transformers.register import MOEBENCH_PREFIX, register
from moebench.plan.inputs import make_decode_weights, make_weights
from moebench.plan.steps import weight_seed
from moebench.spec.schema import Scenario

# The config.json fields of each preset (at its revision in core/models.py) where its transformers
# config class's defaults differ and the field sets a step's shapes or routing; the rest of the
# attention (heads, KV heads, head dim, sliding window, vocabulary) is the class's defaults, which
# are these models' own. A preset absent here is not built.
MODEL_CONFIG: dict[str, dict] = {
    "gpt-oss-20b": {},  # GptOssConfig: 64 heads, 8 KV heads of 64, window 128, vocab 201,088
    "gpt-oss-120b": {},
    "qwen3-30b-a3b": {"head_dim": 128, "norm_topk_prob": True},  # 32 heads, 4 KV heads
    "deepseek-v3": {},  # DeepseekV3Config: MLA (q_lora 1536, kv_lora 512), 1 shared expert
    "mixtral-8x7b": {},
    "olmoe-1b-7b": {},
}
# How each precision stores an expert weight [E, N, K] (K reduced), as moebench's arms quantise it
# (plan/inputs.py): the model's bf16 experts hold these values, so that every arm reads the same.
ROUND_TRIP = {
    "w8a16": (reference.quant_weight_fp8_expert, reference.dequant_weight_fp8_expert),
    "w4a16": (reference.quant_weight_mxfp4, reference.dequant_weight_mxfp4),
    "fp8": (reference.quant_weight_fp8_block, reference.dequant_weight_fp8_block),
}
CHUNK = 8  # experts generated and rounded at a time (bounds the float32 transient)
ATTENTION_BUDGET = 1 << 30  # bytes of attention scores a chunk of the context fill may make
DTYPE = torch.bfloat16


@dataclass(frozen=True, kw_only=True)
class ModelPlan:
    """What building a scenario's model will allocate, known before it is."""

    config: object  # the transformers config
    experts: families.ExpertsFamily
    kinds: tuple[str, ...]  # each layer's attention kind (cache.FULL, cache.SLIDING)
    window: int | None
    kv_token_bytes: tuple[int, ...]  # bytes a token adds to each layer's cache (keys and values)
    moe_layers: tuple[int, ...]
    param_bytes: int  # every parameter and buffer
    expert_bytes: int  # the routed experts' parameters (every MoE layer)
    embed_bytes: int  # the embedding table (a step reads a row a token of it)
    row_bytes: int  # one row of it
    attention: str
    label: str  # the model as reports print it
    overrides: dict = field(default_factory=dict)

    @property
    def step_bytes(self) -> int:
        """Parameters a decode step reads whatever the routing (all but the routed experts and
        the embedding table): attention, norms, routers, shared experts, dense layers, LM head."""
        return self.param_bytes - self.expert_bytes - self.embed_bytes

    def kv_bytes(self, batch: int, length: int) -> int:
        """The KV cache of ``batch`` sequences at ``length`` positions."""
        return sum(batch * (min(self.window, length) if k == SLIDING else length) * b
                   for k, b in zip(self.kinds, self.kv_token_bytes, strict=True))  # fmt: skip


def _fail(s: Scenario, path: str, message: str) -> ScenarioError:
    return ScenarioError(f"{s.path or s.name}: {path}: {message}")


def plan(s: Scenario) -> ModelPlan:
    """The model of ``s`` as transformers will build it; a ScenarioError names what cannot be."""
    import transformers

    m, run = s.model, s.model_run
    if m.preset not in MODEL_CONFIG:
        raise _fail(s, "model.preset", f"the model regime builds {', '.join(MODEL_CONFIG)}; not "
                    f"{m.preset!r}")  # fmt: skip
    fam = families.FAMILIES[PRESETS[m.preset]["transformers"]]
    if fam.activation != s.activation:
        raise _fail(s, "activation", f"{m.preset}'s experts ({fam.experts}) compute "
                    f"{fam.activation}, not {s.activation}")  # fmt: skip
    if fam.layout == families.GPT_OSS and fam.moebench_family != s.family:
        raise _fail(s, "arms", f"{fam.label}'s experts have biases; {s.family} arms take none")
    cls = getattr(transformers, fam.config)
    d, f, e = fam.widths
    kw = {**MODEL_CONFIG[m.preset], d: m.hidden, f: m.intermediate, e: m.experts,
          "num_experts_per_tok": m.top_k, "num_hidden_layers": m.layers}  # fmt: skip
    kw.update(_dense(s, fam))
    # The class's fields, and head_dim, which Qwen3-MoE's attention reads from any config.
    known = {*inspect.signature(cls.__init__).parameters, *cls().to_dict(),
             *getattr(cls, "attribute_map", {}), "head_dim"}  # fmt: skip
    for key, value in run.config:
        if key not in known:
            raise _fail(s, f"model_run.config.{key}", f"not a field of transformers "
                        f"{transformers.__version__}'s {fam.config}")  # fmt: skip
        kw[key] = list(value) if isinstance(value, tuple) else value
    try:
        config = cls(**kw)
    except (TypeError, ValueError) as exc:
        raise _fail(s, "model_run.config", f"{fam.config} refuses it: {exc}") from None
    attention = run.attention or ("eager" if fam.layout == families.GPT_OSS else "sdpa")
    kinds = tuple(getattr(config, "layer_types", None) or [FULL] * config.num_hidden_layers)
    window = getattr(config, "sliding_window", None) if SLIDING in kinds else None
    if SLIDING not in kinds and getattr(config, "use_sliding_window", False):
        raise _fail(s, "model_run.config.use_sliding_window", "a window on every layer is not "
                    "held by moebench's cache; the presets have none")  # fmt: skip
    if set(kinds) - {FULL, SLIDING}:
        raise _fail(s, "model.preset", f"attention kinds {sorted(set(kinds))} moebench's cache "
                    "does not hold")  # fmt: skip
    model = _on_meta(config, attention)
    sizes = {n: t.numel() * t.element_size() for n, t in model.state_dict().items()}
    experts = [n for n, mod in model.named_modules() if hasattr(mod, "gate_up_proj")]
    moe = tuple(i for i in range(config.num_hidden_layers) if any(
        n.startswith(f"model.layers.{i}.") for n in experts))  # fmt: skip
    embed = model.get_input_embeddings().weight
    tied = model.get_output_embeddings().weight is embed
    embed_bytes = 0 if tied else embed.numel() * embed.element_size()
    return ModelPlan(
        config=config, experts=fam, kinds=kinds, window=window,
        kv_token_bytes=tuple(_kv_token_bytes(config, fam) for _ in kinds), moe_layers=moe,
        param_bytes=sum(sizes.values()),
        expert_bytes=sum(b for n, b in sizes.items() if n.rpartition(".")[0] in experts),
        embed_bytes=embed_bytes, row_bytes=embed.shape[1] * embed.element_size(),
        attention=attention, label=m.label,
        overrides={k: (list(v) if isinstance(v, tuple) else v) for k, v in run.config},
    )  # fmt: skip


def _dense(s: Scenario, fam: families.ExpertsFamily) -> dict:
    """The config fields that make the preset's dense layers dense."""
    dense = s.model.dense_layers
    if fam.name == "deepseek_v3":
        if dense != tuple(range(len(dense))):
            raise _fail(s, "model.dense_layers", "DeepSeek-V3 makes its first layers dense")
        return {"first_k_dense_replace": len(dense)}
    if fam.name == "qwen3_moe":
        return {"mlp_only_layers": list(dense)}
    if dense:
        raise _fail(s, "model.dense_layers", f"{fam.label} has no dense layers")
    return {}


def _kv_token_bytes(config, fam: families.ExpertsFamily) -> int:
    """Bytes of one token in one layer's cache: DeepSeek-V3 caches its compressed latent and the
    rotary key (one head), the others K and V of every KV head."""
    if fam.name == "deepseek_v3":
        return (config.kv_lora_rank + config.qk_rope_head_dim) * DTYPE.itemsize
    heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * heads * head_dim * DTYPE.itemsize


def _on_meta(config, attention: str):
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE, attn_implementation=attention)
    keep = tuple(getattr(model, "_keep_in_fp32_modules", None) or ())
    for name, module in model.named_modules():  # what from_pretrained keeps in float32
        if keep and name.rsplit(".", 1)[-1] in keep:
            module.float()
    return model


# --------------------------------------------------------------------------- the backends


def backend_of(arm: Arm, precision: str, alignment: int) -> str:
    """The experts backend a model runs ``arm`` with (module docstring), registered; a prefill
    arm's capacity buffer aligns each expert's rows to ``alignment``."""
    if arm.name.startswith(HF_PREFIX):
        backend = arm.name.removeprefix(HF_PREFIX).rpartition("@")
        return backend[0] or backend[2]
    register([arm], alignment=alignment)
    return f"{MOEBENCH_PREFIX}{arm.name}:{precision}"


def no_experts(module, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
    """The experts backend that does no expert work: zeros, the experts' share of a step gone."""
    return torch.zeros_like(hidden_states)


def register_no_experts() -> str:
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    ALL_EXPERTS_FUNCTIONS.register(NO_EXPERTS, no_experts)
    return NO_EXPERTS


# --------------------------------------------------------------------------- building


def build(p: ModelPlan, s: Scenario, device: torch.device, seed: int):
    """The model of plan ``p`` on ``device``, random weights (module docstring), eval mode,
    experts backend ``eager``."""
    model = _on_meta(p.config, p.attention)
    experts = {n: m for n, m in model.named_modules() if hasattr(m, "gate_up_proj")}
    for name, module in model.named_modules():
        if name not in experts:
            module.to_empty(device=device, recurse=False)
    rng = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=rng), torch.no_grad():
        torch.manual_seed(seed)
        if device.type == "cuda":
            torch.cuda.manual_seed(seed)
        model.initialize_weights()
        for name, module in experts.items():
            layer = int(name.split(".")[2])  # model.layers.<i>.mlp.experts
            _fill_experts(module, p.experts, s, layer, device, weight_seed(seed, layer))
    model.eval()
    model.set_experts_implementation("eager")
    return model


def _fill_experts(module, fam, s: Scenario, layer: int, device, seed: int) -> None:
    """One MoE layer's experts: moebench's seeded weights rounded through the precision."""
    D, F, E = s.model.hidden, s.model.intermediate, s.model.experts
    biased = fam.layout == families.GPT_OSS
    w13 = torch.empty(E, 2 * F, D, dtype=DTYPE, device=device)
    w2 = torch.empty(E, D, F, dtype=DTYPE, device=device)
    b13 = torch.empty(E, 2 * F, dtype=DTYPE, device=device) if biased else None
    b2 = torch.empty(E, D, dtype=DTYPE, device=device) if biased else None
    for a in range(0, E, CHUNK):
        ids = range(a, min(a + CHUNK, E))
        if biased:  # gate/up rows interleaved, as gpt-oss holds them
            g13, g_b13, g2, g_b2 = make_decode_weights(experts=ids, hidden=D, intermediate=F,
                                                       seed=seed, device=device)  # fmt: skip
            b13[ids.start : ids.stop], b2[ids.start : ids.stop] = g_b13, g_b2
        else:
            g13, g2 = make_weights(experts=ids, hidden=D, intermediate=F, seed=seed,
                                   device=device)  # fmt: skip
        w13[ids.start : ids.stop] = round_trip(g13, s.precision)
        w2[ids.start : ids.stop] = round_trip(g2, s.precision)
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=biased, b13_E2F=b13, b2_ED=b2)


def restore_experts(model, p: ModelPlan, s: Scenario, layers, device, seed: int) -> None:
    """Write each of ``layers``' experts' weights again from their seeds, in place: the tensors a
    captured graph or an arm's prepared copy reads keep their addresses."""
    modules = experts_modules(model)
    with torch.no_grad():
        for layer in layers:
            module = modules[layer]
            fresh = copy.copy(module)
            fresh._parameters = dict(module._parameters)  # replaced in the copy, not the model
            _fill_experts(fresh, p.experts, s, layer, device, weight_seed(seed, layer))
            for name, t in module.named_parameters(recurse=False):
                t.copy_(getattr(fresh, name))


def round_trip(w_ENK: torch.Tensor, precision: str) -> torch.Tensor:
    """``w_ENK`` as ``precision`` stores it, in bf16 (bf16 itself: unchanged)."""
    if precision not in ROUND_TRIP:
        return w_ENK.to(DTYPE)
    quant, dequant = ROUND_TRIP[precision]
    return dequant(*quant(w_ENK.float())).to(DTYPE)


def experts_modules(model) -> dict[int, torch.nn.Module]:
    """{model layer: its experts module} of every MoE layer."""
    return {int(n.split(".")[2]): m for n, m in model.named_modules() if hasattr(m, "gate_up_proj")}


# --------------------------------------------------------------------------- memory


def arm_bytes(p: ModelPlan, s: Scenario, arm: Arm, tokens: tuple[int, ...]) -> int:
    """What a moebench arm adds to the model: its prepared expert weights at the precision (bf16
    reads the module's own), the copies of them its build makes for its kernels (its
    ``layout_bytes``: the grouped arm's tile layouts, the sparse GEMV's rotated MXFP4) and its
    workspace per token count and MoE layer. A transformers backend reads the module's
    parameters; its own buffers are not known (0)."""
    if arm.name.startswith(HF_PREFIX):
        return 0
    D, F, E, K = s.model.hidden, s.model.intermediate, s.model.experts, s.model.top_k
    fam = facts(arm.family)
    copy = 0 if s.precision == "bf16" else fam.expert_bytes(D, F, E, s.precision)
    layouts = 0
    if arm.layout_bytes is not None and s.precision != "bf16":
        shapes = LayoutShapes(precision=s.precision, tokens=tokens, top_k=K, experts=E, hidden=D,
                              intermediate=F)  # fmt: skip
        layouts = arm.layout_bytes(shapes)
    work = sum(fam.workspace_bytes(T, K, D, F, E, T * K + E * s.shape.alignment) for T in tokens)
    return int((copy + layouts + work) * len(p.moe_layers))


@contextlib.contextmanager
def quiet():
    """transformers' deprecation warnings of a keyword (once per call) kept off the output."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def fill_chunk(p: ModelPlan, batch: int, context: int, steps: int) -> tuple[int, int]:
    """(tokens a sequence in each chunk of the context fill, bytes of that chunk's attention
    scores): as many tokens as keep the scores within ``ATTENTION_BUDGET``."""
    per_token = batch * int(p.config.num_attention_heads) * (context + steps) * 4
    chunk = max(1, min(context, ATTENTION_BUDGET // per_token))
    return chunk, chunk * per_token


def memory(p: ModelPlan, s: Scenario, arms: list[Arm]) -> dict[str, int]:
    """Bytes a case allocates on its device, by part, before anything is (module docstring)."""
    run = s.model_run
    B, V = run.batch, int(p.config.vocab_size)
    D, K = s.model.hidden, s.model.top_k
    tokens = (B, B * run.prompt)  # a decode step's tokens, a prefill's
    heads = int(p.config.num_attention_heads)
    activations = (
        B * run.prompt * (8 * D + 6 * K * s.model.intermediate) * DTYPE.itemsize
        + B * heads * run.prompt**2 * 4
    )  # a prefill's attention scores, if made
    backends = {a.name: a for a in arms}
    # Each backend's captured prefill (the arms' and the non-MoE backend's) keeps its activations in
    # its graph's private pool for the whole case, all held at once while the blocks rotate the
    # backends: on the H200 deepseek-v3-model at 64 sequences ran out of memory in its gates with
    # 67 GiB in graph pools, counted once here then (2026-12-02, docs/perf/HISTORY.md).
    captured = s.measure.graph and run.prefill_graph and MODEL_PREFILL in run.stages
    return {
        "parameters": p.param_bytes,
        "arms": sum(arm_bytes(p, s, a, tokens) for a in backends.values()),
        "kv cache": p.kv_bytes(B, run.context + run.decode_steps) + p.kv_bytes(B, run.prompt),
        "logits": 4 * B * V * 4,  # the step's, the reference's, a check's, a fresh one's
        "activations": activations * (len(backends) + 1 if captured else 1),
        "context fill": fill_chunk(p, B, run.context, run.decode_steps)[1],
    }
