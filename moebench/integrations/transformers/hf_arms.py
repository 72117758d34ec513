"""``hf:<backend>``: an experts backend of transformers as a moebench arm (whole-FFN contract,
docs/DESIGN.md section 13; docs/TRANSFORMERS.md).

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate.

A scenario names ``hf:eager``, ``hf:grouped_mm``, ``hf:batched_mm`` or any other name in the
installed transformers' ``ALL_EXPERTS_FUNCTIONS``; ``moebench.arm.registry`` loads ``hf_arm``
below by import string and hands it the text after ``hf:`` with the scenario's ``Context`` (the
family of its other arms, its model preset, its activation). The experts class is chosen then
(``families.choose``: the one ``@<family>`` names, else the model preset's, else the default of
the family and activation), so the arm is made for its scenario: its family, its precisions and
the class it builds are fixed before any work, and its summary and kernels say which class (module,
name, transformers version). ``prepare`` (untimed) builds that class at the problem's widths,
gives it moebench's weights in its own layout, and probes how this transformers version takes
non-local slots (``backends``); the timed callable maps the rank's global ids to local ones (the
sentinel or its exact substitute: a few elementwise kernels, what transformers' own
expert-parallel router does too) and calls the module, whose forward is the backend. The gates,
timing, statistics and pins are every arm's; where the backend's kernels are known
(``backends.launches``), the dispatch gate checks that they launched.

- prefill: bf16 only (``PREFILL_NOTE`` says why, in the scenario's precision error).
- decode (gpt-oss's layout is the decode layout): w8a16 and w4a16, the weights dequantised to
  bf16 before timing. The arithmetic is the precision's (activations stay bf16 in both); the
  bytes are bf16's, two (w8a16) or about four (w4a16) times what moebench's decode arms read, and
  ``weight_bytes`` says so. This is transformers' own gpt-oss path wherever its MXFP4 Hub kernels
  are absent (it dequantises the checkpoint to bf16).

A backend that cannot run on this machine, an unknown name, a class the scenario cannot take and
a missing transformers are one ``ArmError`` line when the scenario is loaded, before any work.
"""

from __future__ import annotations

import functools

import torch

from moebench.arm import base, decode, prefill
from moebench.arm.base import Arm, Prepared
from moebench.arm.registry import HF_PREFIX, ArmError, Context
from moebench.core import vocabulary
from moebench.integrations.transformers import backends, families
from moebench.integrations.transformers.register import MOEBENCH_PREFIX, register
from moebench.plan.inputs import dequant_decode_weights

PREFILL_PRECISIONS = ("bf16",)
DECODE_PRECISIONS = ("w8a16", "w4a16")
PREFILL_NOTE = (
    "moebench's fp8 quantises the tokens and the activation between the projections, which "
    "transformers' bf16 backends do not, and transformers' fine-grained FP8 experts load their "
    "kernels from the Hugging Face Hub at run time, which no moebench machine reaches"
)


def parse(text: str) -> tuple[str, str | None]:
    """``grouped_mm`` -> (grouped_mm, None); ``grouped_mm@mixtral`` -> (grouped_mm, mixtral)."""
    backend, at, named = text.rpartition("@")
    return (backend, named) if at else (text, None)


def hf_arm(text: str, context: Context | None = None) -> Arm:
    """The arm of transformers' experts backend ``text`` (``grouped_mm``, ``grouped_mm@gpt_oss``)
    in its scenario's ``context`` (none: a prefill arm on Qwen3-MoE's class, or the class
    named); an ``ArmError`` naming ``hf:<text>`` when it names none, the scenario cannot take the
    class, or it cannot run here. A package that registers a backend of its own is compared
    through a file arm: ``import that_package`` and ``ARM = hf_arm("its_name")`` (so that its
    sources are pinned with the arm)."""
    ref = HF_PREFIX + text
    context = context or Context()
    if not backends.installed():
        raise ArmError(
            f"{ref!r}: transformers is not installed (pip install 'moebench[transformers]')"
        )
    backend, named = parse(text)
    version = families.transformers_version()
    if named is not None and named not in families.FAMILIES:
        raise ArmError(f"{ref!r}: {named!r} after '@' is not an experts family moebench builds "
                       f"({', '.join(families.FAMILIES)})")  # fmt: skip
    try:
        choice = families.choose(named=named, family=context.family, preset=context.model,
                                 activation=context.activation)  # fmt: skip
    except ValueError as exc:
        raise ArmError(f"{ref!r}: {exc}") from None
    if backend.startswith(MOEBENCH_PREFIX):  # a moebench arm through transformers: a round trip
        register([backend.removeprefix(MOEBENCH_PREFIX).split(":")[0]])
    known = backends.names()
    if backend not in known:
        raise ArmError(
            f"{ref!r}: transformers {version} has no experts backend {backend!r} (it has "
            f"{', '.join(known)}); one that another package registers is named by an arm file "
            "that imports the package (docs/TRANSFORMERS.md)"
        )
    fam = choice.experts
    why = backends.unavailable(backend, fam.name)
    if why is not None:
        raise ArmError(f"{ref!r}: the transformers {version} experts backend {backend!r} cannot "
                       f"run on this machine: {why}")  # fmt: skip
    decode_arm = choice.family == vocabulary.DECODE
    precisions = DECODE_PRECISIONS if decode_arm else PREFILL_PRECISIONS
    built = f"{families.class_path(fam)} (transformers {version})"
    launches = backends.launches(backend)
    return Arm(
        name=ref,
        family=choice.family,
        contract=base.WHOLE_FFN,
        summary=(
            f"transformers {version} experts backend {backend!r} on {fam.label}'s experts class, "
            f"{choice.why}" + ("; weights dequantised to bf16" if decode_arm else "")
        ),
        prepare=functools.partial(_prepare, backend=backend, family=fam.name),
        weight_bytes=_decode_weight_bytes if decode_arm else None,
        kernels=(backends.origin(backend), f"experts class {built}"),
        launches=dict.fromkeys(precisions, launches) if launches else {},
        precisions=precisions,
        precision_note="" if decode_arm else PREFILL_NOTE,
        # eager reads the experts hit back to the host (nonzero): no CUDA graph captures it.
        graph=backend != backends.EAGER,
    )


def _prepare(problem, y_TD: torch.Tensor, *, backend: str, family: str) -> Prepared:
    """Untimed: the arm's experts class with this rank's weights; returns the timed callable."""
    fam = families.FAMILIES[family]
    if not isinstance(problem, decode.Problem | prefill.Problem):
        raise TypeError(f"an hf: arm takes a prefill or decode problem, got {type(problem)}")
    p = problem
    if p.activation != fam.activation:
        raise ValueError(f"hf:{backend} builds {fam.label}'s experts ({fam.activation}); the "
                         f"problem's activation is {p.activation}")  # fmt: skip
    E, D = p.local_experts, p.x_TD.shape[1]
    if isinstance(p, decode.Problem):
        F = p.intermediate
        w13, w2 = (w.to(torch.bfloat16) for w in dequant_decode_weights(p))
        biases = {"b13_E2F": p.b13_E2F, "b2_ED": p.b2_ED}
    else:
        if p.precision not in PREFILL_PRECISIONS:
            raise ValueError(f"hf:{backend} runs prefill at bf16 only, not {p.precision}")
        F, w13, w2, biases = p.w2_EDF.shape[2], p.w13_EFD, p.w2_EDF, {}
    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend=backend)
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=bool(biases), **biases)
    return _timed(module, p, backends.non_local_mode(backend, fam.name))


def _timed(module: torch.nn.Module, p, mode: str) -> Prepared:
    """The timed callable: this step's routing in the module's local ids, then its forward."""
    module._is_expert_parallel = True  # 5.24 masks the sentinel only on an expert-parallel module
    E = p.local_experts

    def run() -> torch.Tensor:
        ids_TK, w_TK = local_routing(p.topk_ids_TK, p.topk_weights_TK, p.expert_offset, E, mode)
        with torch.no_grad():
            return module(p.x_TD, ids_TK, w_TK)

    return Prepared(run=run)


def local_routing(
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    expert_offset: int,
    experts: int,
    mode: str,
    dtype: torch.dtype = torch.bfloat16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Global routing -> the module's: int64 local ids [T, K] (a non-local slot gets id E, the
    sentinel, or 0 when ``mode`` is ``CLAMP``) and its weights [T, K] in ``dtype`` (a model's
    router hands them in the model's dtype), 0 at every non-local slot. On the device, no host
    read, so a CUDA graph replays it with any routing."""
    e_TK = topk_ids_TK.to(torch.int64) - expert_offset
    local_TK = (e_TK >= 0) & (e_TK < experts)
    other = experts if mode == backends.SENTINEL else 0
    ids_TK = torch.where(local_TK, e_TK, other)
    w_TK = torch.where(local_TK, topk_weights_TK, 0.0).to(dtype)
    return ids_TK, w_TK


def _decode_weight_bytes(p: decode.Problem) -> dict[str, int]:
    """The bf16 weights the module reads: each local expert with a routed slot once, its gate/up
    and down matrices and biases (a minimum: batched_mm gathers a copy per slot)."""
    e = p.topk_ids_TK.to(torch.int64).flatten().cpu() - p.expert_offset
    hit = int(torch.unique(e[(e >= 0) & (e < p.local_experts)]).numel())
    D, F = p.x_TD.shape[1], p.intermediate
    per_expert = (2 * F * D + 2 * F + D * F + D) * torch.bfloat16.itemsize
    return {**dict.fromkeys(vocabulary.DECODE_STAGES, 0), vocabulary.WHOLE_FFN: hit * per_expert}
