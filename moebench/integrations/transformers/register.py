"""``moebench:<arm>``: moebench's arms as experts backends of transformers (docs/TRANSFORMERS.md).

    from moebench.integrations.transformers import register
    register()  # the built-in arms and those installed packages register
    model.set_experts_implementation("moebench:prefix_sum_masked")

Legend: T tokens, K top-k, E the module's experts, D hidden, F intermediate.

``register`` puts a forward for each arm into ``ALL_EXPERTS_FUNCTIONS`` under
``moebench:<arm>`` (at the arm family's model precision: bf16 for prefill arms, so a bf16 model
gives its eager logits; w4a16 for decode arms, gpt-oss's own MXFP4) and under
``moebench:<arm>:<precision>`` for each precision the arm runs. A prefill arm takes
concatenated, bias-free silu experts (Qwen3-MoE, Mixtral, DeepSeek-V3, OLMoE); a decode arm takes
those (interleaved, zero biases) and gpt-oss's (``families.read``); anything else is a ValueError
naming the class.

Weights are prepared once per experts module, outside any forward that follows: the first call
(or ``prepare(model)``) quantises or lays them out as the arm's problem holds them
(``moebench.plan.inputs``: at bf16 a prefill arm reads the module's parameters themselves) and
caches them on the module; a parameter replaced or written in place (``load_state_dict``,
``copy_`` under ``no_grad``: its version counter moves) makes the next call prepare again. Writes
through ``.data`` bypass the counter: call ``prepare(model)`` after them. Per token count the
first call also allocates the arm's workspace and builds its stages on that call's routing (a
launch choice some arms make per case); later calls copy their tokens and routing into the same
tensors and run the same stages, so, after one call of each token count outside capture, the
forward is captured in a CUDA graph wherever the arm is (``Arm.graph``). A token routed to id E
(transformers' expert-parallel sentinel) is skipped, as moebench skips another rank's expert.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

import torch

from moebench.arm import assemble, decode, prefill, registry
from moebench.arm.base import Arm, run_all
from moebench.core import reference
from moebench.core.families import facts
from moebench.core.vocabulary import DECODE, PREFILL
from moebench.integrations.transformers import families
from moebench.plan import inputs

MOEBENCH_PREFIX = "moebench:"
ALIGNMENT = 128  # each expert's rows start on a multiple of this in the prefill capacity buffer
MODEL_PRECISION = {PREFILL: "bf16", DECODE: "w4a16"}
CACHE = "_moebench_prepared"  # the attribute of an experts module holding its prepared arms


def register(
    arms: Iterable[str | Arm] | None = None,
    *,
    base_dir: str | os.PathLike | None = None,
    alignment: int = ALIGNMENT,
) -> tuple[str, ...]:
    """Register ``arms`` (references as a scenario writes them, or ``Arm`` values; default: the
    built-in arms and every installed entry point) in transformers' experts interface; returns
    the names registered. ``base_dir``: the folder file references are relative to."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    refs = list(arms) if arms is not None else [
        *registry.builtin_names(), *sorted(registry.entry_points())
    ]  # fmt: skip
    out = []
    for ref in refs:
        arm = ref if isinstance(ref, Arm) else registry.resolve(ref, base_dir)
        default = MODEL_PRECISION[arm.family]
        precisions = [p for p in facts(arm.family).precisions if arm.runs(p)]
        for precision, suffix in [(default, ""), *((p, f":{p}") for p in precisions)]:
            if not arm.runs(precision):
                continue
            name = f"{MOEBENCH_PREFIX}{arm.name}{suffix}"
            ALL_EXPERTS_FUNCTIONS.register(name, ExpertsForward(arm, precision, alignment))
            out.append(name)
    return tuple(out)


def prepare(model: torch.nn.Module) -> int:
    """Prepare now, not in the first forward, every experts module of ``model`` whose backend is
    a moebench arm; returns how many."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    n = 0
    for m in model.modules():
        impl = getattr(getattr(m, "config", None), "_experts_implementation", None)
        if not (isinstance(impl, str) and impl.startswith(MOEBENCH_PREFIX)):
            continue
        fn = ALL_EXPERTS_FUNCTIONS.get(impl) if hasattr(m, "gate_up_proj") else None
        if isinstance(fn, ExpertsForward):
            fn.prepare(m)
            n += 1
    return n


class ExpertsForward:
    """The forward transformers calls: ``(module, hidden_states [T, D], top_k_index [T, K],
    top_k_weights [T, K]) -> [T, D]`` in the hidden states' dtype."""

    def __init__(self, arm: Arm, precision: str, alignment: int):
        self.arm, self.precision, self.alignment = arm, precision, alignment
        self.__name__ = self.__qualname__ = f"moebench_{arm.name}_{precision}"

    def __call__(self, module, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        if not hidden_states.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError(
                f"{MOEBENCH_PREFIX}{self.arm.name} on CPU tensors runs Triton kernels in the "
                "interpreter: set TRITON_INTERPRET=1 before anything imports triton"
            )
        if torch.is_grad_enabled() and hidden_states.requires_grad:
            raise RuntimeError(
                f"{MOEBENCH_PREFIX}{self.arm.name} runs inference only (no backward): call the "
                "model under torch.no_grad() or torch.inference_mode()"
            )
        # The cached tensors are written by later calls: never inference tensors, whatever mode
        # the first call came in.
        with torch.inference_mode(False), torch.no_grad():
            return self.prepare(module)(hidden_states, top_k_index, top_k_weights)

    def prepare(self, module: torch.nn.Module) -> PreparedExperts:
        cache = module.__dict__.setdefault(CACHE, {})
        key = (self.arm.name, self.precision, self.alignment)
        stamp = _stamp(module)
        got = cache.get(key)
        if got is None or got.stamp != stamp:
            got = cache[key] = PreparedExperts(self, module, stamp)
        return got


def _stamp(module: torch.nn.Module) -> tuple:
    """What changes when a parameter is replaced or written in place."""
    return tuple(
        (n, p.data_ptr(), p._version, tuple(p.shape), p.dtype, p.device)
        for n, p in module.named_parameters(recurse=False)
    )


class PreparedExperts:
    """One experts module's weights as ``forward.arm``'s problem holds them, and per token count
    the problem, workspace and stages that the calls of that count reuse."""

    def __init__(self, forward: ExpertsForward, module: torch.nn.Module, stamp: tuple):
        arm, precision = forward.arm, forward.precision
        cls = type(module).__name__
        w = families.read(module)
        E, D, F = w.w2_EDF.shape[0], w.w2_EDF.shape[1], w.w2_EDF.shape[2]
        if arm.family == PREFILL and w.b13_E2F is not None:
            raise ValueError(f"{MOEBENCH_PREFIX}{arm.name}: a prefill arm takes no expert biases "
                             f"and {cls} has them; a decode arm runs it")  # fmt: skip
        multiple, why = facts(arm.family).width, facts(arm.family).width_why
        if D % multiple or F % multiple:
            raise ValueError(f"{MOEBENCH_PREFIX}{arm.name} needs hidden and intermediate widths "
                             f"multiples of {multiple} ({why}); {cls} has {D} and {F}")  # fmt: skip
        dev = w.w13.device
        x0, ids0 = torch.zeros(1, D, device=dev), torch.zeros(1, 1, dtype=torch.int32, device=dev)
        w0 = torch.zeros(1, 1, device=dev)
        if arm.family == PREFILL:
            self.template = inputs.build_problem(
                x_TD=x0, topk_ids_TK=ids0, topk_weights_TK=w0, w13_EFD=w.concatenated(),
                w2_EDF=w.w2_EDF, expert_offset=0, experts=E, alignment=forward.alignment,
                capacity_rows=0, precision=precision, activation=w.activation,
            )  # fmt: skip
        else:
            w13, b13, b2 = w.decode_layout()
            self.template = inputs.build_decode_problem(
                x_TD=x0, topk_ids_TK=ids0, topk_weights_TK=w0, w13_E2FD=w13, b13_E2F=b13,
                w2_EDF=w.w2_EDF, b2_ED=b2, expert_offset=0, experts=E, precision=precision,
                activation=w.activation,
            )  # fmt: skip
        self.arm, self.precision, self.alignment = arm, precision, forward.alignment
        self.stamp, self.experts = stamp, E
        self.runners: dict[tuple, _Runner] = {}

    def __call__(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        x_TD = hidden_states.reshape(-1, hidden_states.shape[-1])
        key = (*top_k_index.shape, x_TD.device)
        runner = self.runners.get(key)
        if runner is None:  # first call of this count: build on its own inputs
            runner = self.runners[key] = _Runner(self, x_TD, top_k_index, top_k_weights)
        else:
            runner.load(x_TD, top_k_index, top_k_weights)
        run_all(runner.stages)
        return runner.ws.y_TD.to(hidden_states.dtype, copy=True)


class _Runner:
    """One token count's problem (its input tensors filled by every call), workspace, stages."""

    def __init__(self, prep: PreparedExperts, x_TD, ids_TK, w_TK):
        T, K = ids_TK.shape
        t = prep.template
        self.precision = prep.precision
        fields = {
            "x_TD": torch.empty(T, t.x_TD.shape[1], dtype=t.x_TD.dtype, device=x_TD.device),
            "topk_ids_TK": torch.empty(T, K, dtype=torch.int32, device=x_TD.device),
            "topk_weights_TK": torch.empty(T, K, dtype=torch.float32, device=x_TD.device),
        }
        if isinstance(t, prefill.Problem):
            if t.x_sf_TG4 is not None:  # packed UE8M0 scales, M-major as the kernels read them
                groups = t.x_TD.shape[1] // reference.GROUP
                fields["x_sf_TG4"] = reference.empty_packed_scales(T, groups, x_TD.device)
            fields["capacity_rows"] = inputs.default_capacity(T, K, prep.experts, prep.alignment)
        self.problem = dataclasses.replace(t, **fields)
        self.load(x_TD, ids_TK, w_TK)
        arm = prep.arm
        staged = (
            (lambda a, p: prefill.Workspace(p))
            if arm.family == PREFILL
            else (lambda a, p: decode.Workspace(p, layout=a.layout))
        )
        self.ws = assemble.workspace(arm, self.problem, staged)
        self.stages = assemble.build(arm, self.ws)

    def load(self, x_TD, ids_TK, w_TK) -> None:
        """This call's tokens and routing into the problem's tensors (on the device)."""
        p = self.problem
        if getattr(p, "x_sf_TG4", None) is not None:
            q, sf = inputs.prefill_tokens(x_TD, "fp8")
            p.x_TD.copy_(q)
            p.x_sf_TG4.copy_(sf)
        else:
            p.x_TD.copy_(x_TD)
        p.topk_ids_TK.copy_(ids_TK)
        p.topk_weights_TK.copy_(w_TK)
