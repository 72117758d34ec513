"""What the two decode arms share: one rank's inputs, the workspace, the stage wiring, the ledger.

Decode (docs/DESIGN.md sections 3 and 4): a few tokens, each routed to its top-k experts, gpt-oss
semantics (gate/up rows interleaved, expert biases, `swiglu_oai` or `silu`). The arms differ in
how much weight they read: `dense_decode` multiplies every token by every local expert (batched
GEMMs that stream all E local experts once a step, whatever the routing) and keeps only the
token's local top-k slots in the weighted sum; `sparse_decode` runs a GEMV per (token, slot) whose
programs read the slot's expert id themselves and leave at once when it is not local, so it
streams only the experts actually routed here, once per slot. Both use the same weights, the same
combine and three stages:

- ``fc1``: gate/up projection + bias, with the GLU fused in the epilogue (the interleaved layout
  puts each (gate, up) pair in one program's columns), bf16 activation out;
- ``fc2``: down projection + bias, bf16 out;
- ``combine``: weighted sum over the token's local slots (skipped, never multiplied by zero).

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate.
"""

from __future__ import annotations

import weakref

import torch

from moebench.arm.base import LayoutShapes, Stage, Work
from moebench.arm.decode import Problem, Workspace
from moebench.core.vocabulary import DECODE_STAGES, WHOLE_FFN
from moebench.kernels.batched_gemm import batched_gemm
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.launch import weight_format
from moebench.kernels.mx_rotated import rotate_mxfp4
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.kernels.sparse_launch import (
    MXFP4_ROTATED,
    default_pdl,
    default_token_load,
    token_quads_fit,
)
from moebench.routing.synthetic import local_counts


def made_once(cache: dict, t: torch.Tensor, make):
    """``make(t)``, made once for tensor ``t`` while it lives and its contents are unchanged
    (``cache`` keyed by the tensor's identity, a tensor's == being elementwise; the entry holds
    the contents' version it was made from and goes with the tensor)."""
    key = id(t)
    entry = cache.get(key)
    if entry is None or entry[0] != t._version:
        if key not in cache:
            weakref.finalize(t, cache.pop, key, None)
        entry = cache[key] = (t._version, make(t))
    return entry[1]


# MXFP4 weights in `mx_rotated`'s layout, one copy a weight tensor while it lives, shared by every
# build over the same, unchanged weights and by both decode arms that read it (the model regime
# builds stages for every token count of every layer). The copy doubles the MXFP4 expert weights
# held while both are alive.
_ROTATED_WEIGHTS: dict[int, tuple[int, torch.Tensor]] = {}


def rotated_weights(w: torch.Tensor) -> torch.Tensor:
    """MXFP4 weights ``w`` in `mx_rotated`'s layout (`rotate_mxfp4`), made once (`made_once`)."""
    return made_once(_ROTATED_WEIGHTS, w, rotate_mxfp4)


def layout_bytes(s: LayoutShapes, layout: str) -> int:
    """Bytes of the copies of one layer's expert weights that `build_stages` makes for ``layout``
    (`Arm.layout_bytes`): the sparse GEMV's MXFP4 weights in the rotated layout, both tensors
    (`rotated_weights`, shared with the grouped arm's copy where both run); none otherwise."""
    if layout != "TKD" or s.precision != "w4a16" or not MXFP4_ROTATED:
        return 0
    D, F, E = s.hidden, s.intermediate, s.experts
    return E * (2 * F * D + D * F) // 2


def step_pdl(
    ws: Workspace, pdl: bool | None = None, trigger: str | None = None
) -> tuple[bool, str]:
    """(pdl, pdl_trigger) of the step's kernels: the given ones, and where None the sparse
    GEMVs' defaults for the format and token count (`sparse_launch.default_pdl`). The dense
    layout's only dependent launch is its combine: MXFP4's, as the sparse step's at every count
    (the one-token FP8 choice was measured with the GEMVs before it, not the batched GEMM)."""
    fmt = weight_format(ws.problem.w13)
    if ws.layout == "TKD":
        default = default_pdl(fmt, ws.problem.topk_ids_TK.shape[0])
    else:
        default = (fmt == "mxfp4", "start")
    return (default[0] if pdl is None else pdl), (default[1] if trigger is None else trigger)


def build_stages(
    ws: Workspace, *, pdl: bool | None = None, pdl_trigger: str | None = None, gemv=None
) -> tuple[Stage, ...]:
    """The three stages as argument-free closures over the workspace (no allocation inside).
    The sparse GEMV reads MXFP4 weights in the rotated layout (`sparse_launch.MXFP4_ROTATED`)
    and the token's values as `sparse_launch.default_token_load` says; the same bits. ``pdl``
    and ``pdl_trigger`` (`sparse_gemv`'s; None: `step_pdl`'s) choose the dependent launch, for
    benchmarks that time other choices; the same bits. ``gemv`` (None: `sparse_gemv`) stands in
    for the sparse GEMV with the arm's arguments, for benchmarks that time another launch of it
    against the arm's step (tools/sparse_ab.py)."""
    p = ws.problem
    E, off = p.local_experts, p.expert_offset
    pdl, pdl_trigger = step_pdl(ws, pdl, pdl_trigger)
    gemv = gemv or sparse_gemv

    if ws.layout == "TKD":
        w13, w2, opts = p.w13, p.w2, {}
        if weight_format(p.w13) == "mxfp4" and MXFP4_ROTATED:
            w13, w2 = rotated_weights(p.w13), rotated_weights(p.w2)
            opts["mx_rotated"] = True
        load = default_token_load(weight_format(p.w13), p.topk_ids_TK.shape[0])
        load1 = {"token_load": load} if token_quads_fit(p.x_TD, ws.a) else {}

        def run_fc1() -> None:
            gemv(p.x_TD, p.topk_ids_TK, w13, p.w13_scale, p.b13_E2F, ws.a, expert_offset=off,
                 glu=p.activation, pdl=pdl, pdl_trigger=pdl_trigger, **opts, **load1)  # fmt: skip

        def run_fc2() -> None:
            gemv(ws.a, p.topk_ids_TK, w2, p.w2_scale, p.b2_ED, ws.o, expert_offset=off, pdl=pdl,
                 pdl_trigger=pdl_trigger, **opts, **load1)  # fmt: skip

    else:

        def run_fc1() -> None:
            batched_gemm(p.x_TD, p.w13, p.w13_scale, p.b13_E2F, ws.a, glu=p.activation)

        def run_fc2() -> None:
            batched_gemm(ws.a, p.w2, p.w2_scale, p.b2_ED, ws.o)

    def run_combine() -> None:
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=E, layout=ws.layout, pdl=pdl)  # fmt: skip

    fns = (run_fc1, run_fc2, run_combine)
    return tuple(Stage(name=n, run=f) for n, f in zip(DECODE_STAGES, fns, strict=True))


def expert_bytes(p: Problem) -> dict[str, int]:
    """Bytes of one expert's weights per stage: values, scales and bias."""

    def one(w: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> int:
        per = lambda t: t[0].numel() * t.element_size() if t.dim() > 1 else t.element_size()
        return per(w) + per(scale) + per(bias)

    return {"fc1": one(p.w13, p.w13_scale, p.b13_E2F), "fc2": one(p.w2, p.w2_scale, p.b2_ED)}


def weight_bytes(p: Problem, *, layout: str) -> dict[str, int]:
    """Expert weight bytes one step reads on this rank, per stage (the work model's byte count).

    Dense (``ETD``): every local expert, once. Sparse (``TKD``): only the local experts that some
    slot routes to, each counted once (the DRAM minimum; a GEMV program per slot streams its
    expert again, which the L2 may or may not serve). Computed on the host before timing.
    """
    per = expert_bytes(p)
    if layout == "ETD":
        hit = p.local_experts
    else:
        counts = local_counts(p.topk_ids_TK.cpu(), p.expert_offset, p.local_experts)
        hit = int((counts > 0).sum())
    out = {s: 0 for s in DECODE_STAGES}
    out["fc1"], out["fc2"] = hit * per["fc1"], hit * per["fc2"]
    out[WHOLE_FFN] = out["fc1"] + out["fc2"]
    return out


def work(p: Problem, *, layout: str) -> dict[str, Work]:
    """The work ledger of one decode step on this rank (moebench.arm.base.Work per stage, ``ffn``
    the sum). Rows: ``ETD`` (dense) computes every (expert, token) pair, ``TKD`` (sparse) the
    (token, slot) pairs routed here; the combine writes every token. Bytes: the weights of
    ``weight_bytes``, the token read once, bf16 intermediates. FLOPs: 2 * rows * K * N of the two
    projections."""
    T, K = p.topk_ids_TK.shape
    D, F, E = p.x_TD.shape[1], p.intermediate, p.local_experts
    e = p.topk_ids_TK.cpu().to(torch.int64) - p.expert_offset
    slots = int(((e >= 0) & (e < E)).sum())
    rows = E * T if layout == "ETD" else slots
    wb = weight_bytes(p, layout=layout)
    out = {
        "fc1": Work(rows=rows, bytes_read=wb["fc1"] + T * D * 2, bytes_written=rows * F * 2,
                    flops=2 * rows * D * 2 * F),
        "fc2": Work(rows=rows, bytes_read=wb["fc2"] + rows * F * 2, bytes_written=rows * D * 2,
                    flops=2 * rows * F * D),
        "combine": Work(rows=T, bytes_read=slots * D * 2 + T * K * 8, bytes_written=T * D * 2),
    }  # fmt: skip
    out[WHOLE_FFN] = Work.total(out.values(), rows=rows)
    return out
