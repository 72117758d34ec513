"""Scratch (issue 28, 2026-12-04, fourteenth session): the package's sparse MXFP4 GEMV
(`moebench.kernels.sparse_gemv._sparse_gemv_mxfp4`, copied, the group-major tile) with the token's
bf16-pair words read through a pointer tile broadcast over the rows, in the weights' layout,
instead of loaded as [GROUPS, 4] and broadcast in registers. Why: in triton 3.6's sm_90a SASS
that broadcast moves the words through shared memory, 8 STSM, 8 LDSM and 16 barriers a step
(16 rows, 4 warps); through the row tile none (16 single-word loads a step, repeated over the
rows a thread holds), and 80 registers against 95: 6 programs an SM against 5. The same products
and sums in the same order: the same bits."""

import triton
import triton.language as tl

from moebench.kernels.gemv_parts import (
    gemv_epilogue,
    k_range,
    program_expert,
    row_bias,
    store_partial,
)
from moebench.kernels.jit import HAS_PDL, e2m1_pair, e8m0_scale, pdl_launch_dependents, pdl_wait
from moebench.kernels.launch import check_slot_operands, checker


@triton.jit
def _mx_rowtile(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok, part_ptr, stride_pt, stride_pk, N, K_SPLIT,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr, NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr,
    GROUP_MAJOR: tl.constexpr, PTX: tl.constexpr, GDC: tl.constexpr, LATE_TRIGGER: tl.constexpr,
    EARLY_LOADS: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC and not LATE_TRIGGER)
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    e64 = e.to(tl.int64)
    n_block, k_lo, k_hi = k_range(R, K_SPLIT, SPLIT_K)
    if EARLY_LOADS and SPLIT_K == 1:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)  # as in the FP8 kernel
    # Only the routing (and the bias) was read so far; the token row may be the previous
    # kernel's output.
    pdl_wait(GDC)
    # A lane loads one MX group (16 bytes, 32 values) of a row, as 4 uint32 words, and its single
    # e8m0 scale. Word q of group g holds values 32g + 8q + 2j (low nibble of byte j) and
    # 32g + 8q + 2j + 1 (high nibble), which pair with bf16-pair word 16g + 4q + j of the token
    # row: low half even, high half odd, each widened by a shift. The tile is [GROUPS, BLOCK_N, 4]
    # with GROUP_MAJOR, else [BLOCK_N, GROUPS, 4]: the compiler spreads the lanes over the first
    # two dimensions in that order, so with GROUP_MAJOR a thread holds several rows of one group
    # and reads and widens the token's values once for all of them (13.2 SASS instructions a
    # weight byte at 16 rows, 1,024 values, 4 warps, against 16.3). NUM_STAGES pipelines the loop
    # as in the FP8 kernel. PTX (compiled, not interpreted): the decode's bit-select as inline
    # PTX (kernels.jit), one instruction fewer a weight byte; the same bits.
    GROUPS: tl.constexpr = BLOCK_K // 32
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_g = tl.arange(0, GROUPS)
    offs_q = tl.arange(0, 4)
    w_base = (w_ptr + e64 * stride_we).to(tl.pointer_type(tl.uint32))
    s_base = ws_ptr + e64 * stride_se
    if GROUP_MAJOR:
        w_rows = w_base + rows64[None, :, None] * (stride_wn // 4)
        s_rows = s_base + rows64[None, :] * stride_sn
        acc = tl.zeros([GROUPS, BLOCK_N], dtype=tl.float32)
    else:
        w_rows = w_base + rows64[:, None, None] * (stride_wn // 4)
        s_rows = s_base + rows64[:, None] * stride_sn
        acc = tl.zeros([BLOCK_N, GROUPS], dtype=tl.float32)
    x_row = x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk
    x_pairs = x_row.to(tl.pointer_type(tl.uint32))
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        g = k0 // 32 + offs_g
        word = g[:, None] * 4 + offs_q[None, :]
        g_ok = g < k_hi // 32
        if GROUP_MAJOR:
            w_at, s_at = w_rows + word[:, None, :], s_rows + g[:, None]
            w_ok, s_ok = g_ok[:, None, None], g_ok[:, None]
        else:
            w_at, s_at = w_rows + word[None, :, :], s_rows + g[None, :]
            w_ok, s_ok = g_ok[None, :, None], g_ok[None, :]
        if EVEN_K:
            w = tl.load(w_at)
            s = tl.load(s_at)
        else:
            w = tl.load(w_at, mask=w_ok, other=0)
            s = tl.load(s_at, mask=s_ok, other=0)
        w_hi = w >> 16
        part = tl.zeros(w.shape, dtype=tl.float32)
        for j in tl.static_range(4):
            # the token's words through a pointer tile broadcast over the rows (the weights' layout)
            x_at = x_pairs + word[:, None, :] * 4 + j + 0 * rows64[None, :, None]
            if EVEN_K:
                xp = tl.load(x_at)
            else:
                xp = tl.load(x_at, mask=g_ok[:, None, None], other=0)
            x_lo = (xp << 16).to(tl.float32, bitcast=True)
            x_hi = (xp & 0xFFFF0000).to(tl.float32, bitcast=True)
            if j < 2:
                lo, hi = e2m1_pair(w, j, PTX)
            else:
                lo, hi = e2m1_pair(w_hi, j - 2, PTX)
            # Two separate updates keep each product a fused multiply-add.
            part += lo * x_lo
            part += hi * x_hi
        acc += tl.sum(part, axis=2) * e8m0_scale(s)
    pdl_launch_dependents(GDC and LATE_TRIGGER)
    # Undo the 2^-14 of the fp16 placement (kernels.jit); kernels read no module globals.
    h = tl.sum(acc, axis=0 if GROUP_MAJOR else 1)
    if SPLIT_K == 1:
        if not EARLY_LOADS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        gemv_epilogue(h * 16384.0, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU,
                      BLOCK_N, EXACT_RNE)  # fmt: skip
    else:
        store_partial(h, n_block, t, slot, part_ptr, stride_pt, stride_pk, N, BLOCK_N, SPLIT_K)


_check = checker("mx_rowtile_gemv")


def mx_rowtile_gemv(x, topk_ids_TK, w, w_scale, bias_EN, out, *, expert_offset, glu="none",
                    block_n=16, block_k=1024, num_warps=4, pdl=False):  # fmt: skip
    """As `sparse_gemv` with its MXFP4 defaults (group-major, plain loop, early loads), the
    token's words through the row-broadcast tile."""
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    _check(ops.fmt == "mxfp4", "mx_rowtile_gemv is MXFP4 only")
    T, K, E, N, R = ops.T, ops.K, ops.E, ops.N, ops.R
    if T == 0 or K == 0 or E == 0:
        return
    gdc = pdl and HAS_PDL and out.is_cuda
    kw = dict(launch_pdl=True) if gdc else {}
    _mx_rowtile[(N // block_n, K, T)](
        x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
        ops.stride_xt, ops.stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
        w_scale.stride(0), w_scale.stride(1), bias_EN.stride(0), out.stride(0), out.stride(1),
        out, 0, 0, N, R,
        GLU=glu, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=R % block_k == 0,
        EXACT_RNE=not out.is_cuda, NUM_STAGES=0, SPLIT_K=1, GROUP_MAJOR=True, PTX=out.is_cuda,
        GDC=gdc, LATE_TRIGGER=False, EARLY_LOADS=True, num_warps=num_warps, **kw,
    )  # fmt: skip
