"""Scratch (issue 28, 2026-12-04, fourteenth session): the package's sparse FP8 GEMV
(`moebench.kernels.sparse_gemv._sparse_gemv_fp8`, copied) with the token's values loaded once a
step as [LANES, 16] and broadcast over the rows in registers, instead of through a pointer tile
broadcast over the rows. Why: in triton 3.6's sm_90a SASS the broadcast pointer tile is loaded
once a row (2 rows: 8 of the loop's 12 16-byte loads are the token's, half of them repeats, and
their widening is repeated too); loaded once, the compiler moves the values into the weights'
layout with warp shuffles (2 rows at 1,024 bytes: 365 instructions a step against 344) or through
512 bytes of shared memory (4 rows at 512: 313 against 344). The same products and per-lane sums
in the same order: the same bits. Plain loop only (the package's NUM_STAGES path already loads
the token once)."""

import triton
import triton.language as tl
from moebench.kernels.gemv_parts import (
    gemv_epilogue,
    k_range,
    program_expert,
    row_bias,
    store_partial,
)
from moebench.kernels.jit import HAS_PDL, pdl_launch_dependents, pdl_wait
from moebench.kernels.launch import check_slot_operands, checker


@triton.jit
def _xonce_gemv_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok, part_ptr, stride_pt, stride_pk, N, K_SPLIT,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr, NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr,
    PEEL: tl.constexpr, GDC: tl.constexpr, LATE_TRIGGER: tl.constexpr, EARLY_LOADS: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC and not LATE_TRIGGER)
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    e64 = e.to(tl.int64)
    n_block, k_lo, k_hi = k_range(R, K_SPLIT, SPLIT_K)
    if EARLY_LOADS and SPLIT_K == 1:
        # The epilogue's bias and scale asked for now, in flight with the loop's first loads,
        # not after the loop, where they are one more round trip at the end of every program.
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        scale = tl.load(ws_ptr + e64)
    # Tile [BLOCK_N, LANES, 16]: 16 consecutive weight bytes a lane (one 16-byte load), a warp
    # across a row. The token row is read as int16 through a pointer tile broadcast over the rows
    # so that it takes the weights' layout (no shared-memory shuffle); the loads are the same for
    # every row and the compiler issues them once.
    # With NUM_STAGES the loop is software-pipelined: the compiler copies the next NUM_STAGES - 1
    # steps' tiles into shared memory asynchronously (cp.async) while this one is computed, so the
    # bytes in flight no longer cost registers. The token row is then loaded once as [LANES, 16]
    # (a row-broadcast pointer tile would be copied BLOCK_N times into shared memory).
    LANES: tl.constexpr = BLOCK_K // 16
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, LANES)[:, None] * 16 + tl.arange(0, 16)[None, :]
    w_rows = w_ptr + e64 * stride_we + rows.to(tl.int64)[:, None, None] * stride_wn
    x_row = (x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk).to(
        tl.pointer_type(tl.int16)
    )
    acc = tl.zeros([BLOCK_N, LANES], dtype=tl.float32)
    k_first = k_lo
    if PEEL:
        # The first step's weights are loaded before the wait for the previous kernel (they are
        # constant), then its token values after it; the sum is the loop's first step, so the
        # bits are the plain loop's (plain loop only: NUM_STAGES == 0).
        k = k_lo + offs[None, :, :]
        w = tl.load(w_rows + k, mask=k < k_hi, other=0.0)
        pdl_wait(GDC)
        xv = tl.load(x_row + k_lo + offs, mask=k_lo + offs < k_hi, other=0)
        xf = xv.to(tl.bfloat16, bitcast=True).to(tl.float32)[None, :, :]
        acc += tl.sum(w.to(tl.float32) * xf, axis=2)
        k_first = k_lo + BLOCK_K
    else:
        pdl_wait(GDC)
    for k0 in tl.range(k_first, k_hi, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        k = k0 + offs[None, :, :]
        if EVEN_K:
            w = tl.load(w_rows + k)
            xv = tl.load(x_row + k0 + offs)
        else:
            w = tl.load(w_rows + k, mask=k < k_hi, other=0.0)
            xv = tl.load(x_row + k0 + offs, mask=k0 + offs < k_hi, other=0)
        xf = xv.to(tl.bfloat16, bitcast=True).to(tl.float32)
        xf = xf[None, :, :]
        acc += tl.sum(w.to(tl.float32) * xf, axis=2)
    pdl_launch_dependents(GDC and LATE_TRIGGER)
    h = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        if not EARLY_LOADS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
            scale = tl.load(ws_ptr + e64)
        gemv_epilogue(h * scale, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU,
                      BLOCK_N, EXACT_RNE)  # fmt: skip
    else:
        store_partial(h, n_block, t, slot, part_ptr, stride_pt, stride_pk, N, BLOCK_N, SPLIT_K)


_check = checker("xonce_gemv")


def xonce_gemv(x, topk_ids_TK, w, w_scale, bias_EN, out, *, expert_offset, glu="none",
               block_n=2, block_k=1024, pdl=False):  # fmt: skip
    """As `sparse_gemv` with its defaults (FP8, the plain loop, early loads), the token loaded
    once a step."""
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    _check(ops.fmt == "fp8", "xonce_gemv is FP8 only")
    T, K, E, N, R = ops.T, ops.K, ops.E, ops.N, ops.R
    if T == 0 or K == 0 or E == 0:
        return
    gdc = pdl and HAS_PDL and out.is_cuda
    kw = dict(launch_pdl=True) if gdc else {}
    _xonce_gemv_fp8[(N // block_n, K, T)](
        x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
        ops.stride_xt, ops.stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
        bias_EN.stride(0), out.stride(0), out.stride(1), out, 0, 0, N, R,
        GLU=glu, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=R % block_k == 0,
        EXACT_RNE=not out.is_cuda, NUM_STAGES=0, SPLIT_K=1, PEEL=gdc, GDC=gdc,
        LATE_TRIGGER=False, EARLY_LOADS=True, num_warps=1, **kw,
    )  # fmt: skip
