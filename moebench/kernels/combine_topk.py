"""The decode `combine`: each token's weighted sum over its top-k slots routed to local experts.

Legend: T tokens, K top-k slots, E local experts, D hidden.

    o                bf16, row of (t, k, local expert e) at o + t*stride_ot + k*stride_ok
                     + e*stride_oe: the sparse arm's o_TKD (stride_oe = 0) or the dense arm's
                     o_ETD (stride_ok = 0)
    topk_ids_TK      int32 [T, K] global expert ids; local ones are [expert_offset, +E)
    topk_weights_TK  float32 | bf16 [T, K]
    y_TD             bf16 | float32 [T, D], written in full

y[t] = sum over k with a local expert of w[t, k] * o[t, k, e], in increasing k, in fp32, rounded
once at the store. The slot's expert id is read on the device; a non-local slot's row and weight
are not loaded and its term is not added (skipped, never multiplied by zero: NaN * 0 = NaN), so
whatever a non-local slot's rows or weight hold, NaN included, never reaches y. No fused
multiply-add, as in `kernels.combine`, so the float32 sum rounds like the reference's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import HAS_PDL, fp32_to_bf16, pdl_launch_dependents, pdl_wait


@triton.jit
def mul_add_rn(acc, w, v, PTX: tl.constexpr):
    """acc + w * v, the product and the sum each rounded to fp32. A kernel compiled with fused
    multiply-add on (the sparse GEMV's: its sums' bits depend on it) asks for that with ``PTX``:
    explicit ``mul.rn.f32`` and ``add.rn.f32``, which ptxas does not fuse. `_combine_topk`
    compiles with fusion off; the interpreter does not fuse."""
    if PTX:
        p = tl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=f,f,f", [v, w],
                                      dtype=tl.float32, is_pure=True, pack=1)  # fmt: skip
        return tl.inline_asm_elementwise("add.rn.f32 $0, $1, $2;", "=f,f,f", [acc, p],
                                         dtype=tl.float32, is_pure=True, pack=1)  # fmt: skip
    else:
        return acc + w * v


@triton.jit
def slots_sum(
    o_ptr, ids_ptr, w_ptr, t, d, d_ok, expert_offset, E,
    stride_ot, stride_ok, stride_oe, stride_it, stride_ik, stride_wt, stride_wk,
    K: tl.constexpr, BLOCK_D: tl.constexpr, STRONG: tl.constexpr, PTX: tl.constexpr,
):  # fmt: skip
    """y[t, d] in fp32 before its rounding (the module docstring): the local slots in increasing
    k, w[t, k] * o[t, k, d] added (`mul_add_rn`); ``t`` int64. ``STRONG``: ``o`` read past the
    L1 (another program of the same kernel wrote it, `gemv_combine`)."""
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for k in tl.static_range(K):
        e = tl.load(ids_ptr + t * stride_it + k * stride_ik) - expert_offset
        if (e >= 0) & (e < E):
            w = tl.load(w_ptr + t * stride_wt + k * stride_wk).to(tl.float32)
            row = o_ptr + t * stride_ot + k * stride_ok + e.to(tl.int64) * stride_oe
            if STRONG:
                v = tl.load(row + d, mask=d_ok, other=0.0, cache_modifier=".cg")
            else:
                v = tl.load(row + d, mask=d_ok, other=0.0)
            acc = mul_add_rn(acc, w, v.to(tl.float32), PTX)
    return acc


@triton.jit
def store_sum(y_ptr, t, d, d_ok, stride_yt, acc, Y_BF16: tl.constexpr, EXACT_RNE: tl.constexpr):
    """``acc`` to y[t, d], rounded once to bf16 where y is bf16; ``t`` int64."""
    if Y_BF16:
        tl.store(y_ptr + t * stride_yt + d, fp32_to_bf16(acc, EXACT_RNE), mask=d_ok)
    else:
        tl.store(y_ptr + t * stride_yt + d, acc, mask=d_ok)


@triton.jit
def _combine_topk(
    o_ptr, ids_ptr, w_ptr, y_ptr,
    expert_offset, E, D,
    stride_ot, stride_ok, stride_oe, stride_it, stride_ik, stride_wt, stride_wk,
    stride_yt,
    K: tl.constexpr, Y_BF16: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_D: tl.constexpr,
    GDC: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    # o is the previous kernel's output: everything below may depend on it.
    pdl_wait(GDC)
    t = tl.program_id(0).to(tl.int64)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = d < D
    acc = slots_sum(o_ptr, ids_ptr, w_ptr, t, d, d_ok, expert_offset, E, stride_ot, stride_ok,
                    stride_oe, stride_it, stride_ik, stride_wt, stride_wk, K, BLOCK_D, False,
                    False)  # fmt: skip
    store_sum(y_ptr, t, d, d_ok, stride_yt, acc, Y_BF16, EXACT_RNE)


def combine_topk(
    o: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    y_TD: torch.Tensor,
    *,
    expert_offset: int,
    local_experts: int,
    layout: str,
    pdl: bool = False,
) -> None:
    """y_TD from ``o`` laid out as ``TKD`` (one row a slot: the sparse arm) or ``ETD`` (one row an
    (expert, token): the dense arm); see the module docstring. ``pdl``: on the GPU, launched as a
    programmatic dependent of the previous kernel (`kernels.jit`), waiting for it before any read;
    the same bits."""
    T, K = topk_ids_TK.shape
    D = y_TD.shape[1] if y_TD.dim() == 2 else -1
    if layout == "TKD":
        shape, (s_t, s_k, s_e) = (T, K, D), (o.stride(0), o.stride(1), 0)
    elif layout == "ETD":
        shape, (s_t, s_k, s_e) = (local_experts, T, D), (o.stride(1), 0, o.stride(0))
    else:
        raise ValueError(f"combine_topk: layout must be 'TKD' or 'ETD', got {layout!r}")
    if o.dtype != torch.bfloat16 or tuple(o.shape) != shape or o.stride(2) != 1:
        raise ValueError(
            f"combine_topk: o must be bf16 {list(shape)} ({layout}) with unit column stride, "
            f"got {o.dtype} {list(o.shape)}"
        )
    if topk_ids_TK.dtype != torch.int32 or tuple(topk_weights_TK.shape) != (T, K):
        raise ValueError(
            f"combine_topk: topk_ids_TK must be int32 [T, K] and topk_weights_TK [T={T}, K={K}], "
            f"got {topk_ids_TK.dtype} and {list(topk_weights_TK.shape)}"
        )
    if y_TD.dtype not in (torch.bfloat16, torch.float32) or tuple(y_TD.shape) != (T, D):
        raise ValueError(f"combine_topk: y_TD must be bf16 or float32 [T={T}, D], got "
                         f"{y_TD.dtype} {list(y_TD.shape)}")  # fmt: skip
    if y_TD.stride(1) != 1:
        raise ValueError("combine_topk: y_TD must have unit column stride")
    devices = {t.device for t in (o, topk_ids_TK, topk_weights_TK, y_TD)}
    if len(devices) != 1:
        raise ValueError(f"combine_topk: all tensors must be on one device, got {devices}")
    if T == 0 or D == 0:
        return
    block_d = min(1024, triton.next_power_of_2(D))
    grid = (T, triton.cdiv(D, block_d))
    gdc = pdl and HAS_PDL and y_TD.is_cuda
    launch = dict(launch_pdl=True) if gdc else {}
    _combine_topk[grid](
        o, topk_ids_TK, topk_weights_TK, y_TD, expert_offset, local_experts, D,
        s_t, s_k, s_e, *topk_ids_TK.stride(), *topk_weights_TK.stride(), y_TD.stride(0),
        K=K, Y_BF16=y_TD.dtype == torch.bfloat16, EXACT_RNE=not y_TD.is_cuda, BLOCK_D=block_d,
        GDC=gdc, enable_fp_fusion=False, **launch,
    )  # fmt: skip
