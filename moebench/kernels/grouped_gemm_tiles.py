"""Device helpers of the grouped GEMM (`moebench.kernels.grouped_gemm`): which expert owns a
program's output tile, and the fp8 output tile that every schedule of that module computes.

Shapes, dtypes and block ownership are in `grouped_gemm`'s module docstring. `fp8_tile` is the
whole fp8 product of one [BLOCK_M, BLOCK_N] tile (operand loads, the group scales of each K step,
the K loops of `grouped_gemm.K_LOOPS`); the capacity-sized grid and the persistent loop over the
live tiles both call it, so a live row's output does not depend on the schedule. `block_owner`
serves the bf16 kernel as well.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moebench.kernels.jit import expert_spans, fp32_to_bf16


@triton.jit
def block_owner(
    pid,
    ends_ptr,
    E,
    M,
    N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_E: tl.constexpr,
    ALIGNMENT: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """(first row, first column, owning expert, owner's end) of this program's output tile."""
    # Grouped ordering: GROUP_M row blocks walk the N blocks together before moving down.
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = N // BLOCK_N
    in_group = GROUP_M * num_n
    group_id = pid // in_group
    first_m = group_id * GROUP_M
    group_rows = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_rows
    pid_n = (pid % in_group) // group_rows
    m0 = pid_m * BLOCK_M

    # The owner is the number of experts starting at or before m0, minus one (``expert_spans``);
    # start[0] = 0 makes that at least 0, and tail blocks count every expert, giving E-1. Its end
    # is picked from the vector loaded with the starts, not by a second, dependent load.
    ex, in_e, starts, ends = expert_spans(ends_ptr, E, ALIGNMENT, BLOCK_E)
    e = tl.sum(((starts <= m0) & in_e).to(tl.int32), axis=0) - 1
    end = tl.sum(tl.where(ex == e, ends, 0), axis=0)
    return m0, pid_n * BLOCK_N, e, end


@triton.jit
def _step_scales(sf_ptrs, ws_ptr, kb, row_ok, stride_sfp, stride_sk):
    """(activation scale per row [BLOCK_M], weight scale) of K step ``kb``: the weight scale is a
    scalar for a tile of at most 128 columns, else a vector over the tile's columns."""
    word = tl.load(sf_ptrs + (kb // 4) * stride_sfp, mask=row_ok, other=0)
    exp = (word >> ((kb % 4) * 8)) & 0xFF
    a_scale = (exp << 23).to(tl.float32, bitcast=True)
    w_scale = tl.load(ws_ptr + kb * stride_sk)
    return a_scale, w_scale


@triton.jit
def _operands(a_src, w_src, kb, m0, w_row, row_ok, stride_ak, stride_wk, TMA: tl.constexpr):
    """The a and w tiles of K step ``kb``: through tensor descriptors (TMA) or pointer tiles
    (a_src and w_src point at step 0; rows not ``row_ok`` read as 0)."""
    if TMA:
        return a_src.load([m0, kb * 128]), w_src.load([w_row, kb * 128])
    else:
        a = tl.load(a_src + kb * 128 * stride_ak, mask=row_ok[:, None], other=0.0)
        return a, tl.load(w_src + kb * 128 * stride_wk)


@triton.jit
def _promote(acc, part, a_scale, w_scale, BLOCK_N: tl.constexpr):
    """``acc`` plus one K step's fp32 product ``part`` scaled by its group scales. Every tile loop
    joins its steps through this one expression, in K order, so the loops agree bit for bit."""
    if BLOCK_N <= 128:
        acc += part * (a_scale * w_scale)[:, None]
    else:
        acc += part * a_scale[:, None] * w_scale[None, :]
    return acc


@triton.jit
def fp8_tile(
    a_ptr, a_sf_ptr, w_ptr, w_scale_ptr, out_ptr, m0, n0, e, M, N, K,
    stride_am, stride_ak, stride_sfm, stride_sfp, stride_we, stride_wn, stride_wk,
    stride_se, stride_sn, stride_sk, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, K_LOOP: tl.constexpr, TMA: tl.constexpr,
    INTERPRET: tl.constexpr,
):  # fmt: skip
    # One [BLOCK_M, BLOCK_N] output tile of expert e. Every schedule (all, psum, live) computes a
    # tile with this function, so a live row's output does not depend on the schedule. With TMA,
    # a_ptr and w_ptr are tensor descriptors of a [M, K] and of w viewed as [E * N, K] (blocks
    # [BLOCK_M, 128] and [BLOCK_N, 128]): the copy engine loads the tiles (rows past M read as 0,
    # as the masked pointer loads do) and the K loop carries no address arithmetic.
    BLOCK_K: tl.constexpr = 128
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    row_ok = offs_m < M
    rows = offs_m.to(tl.int64)
    # Row of the tile in w viewed as [E * N, K] (the TMA descriptor's coordinates).
    w_row = e * N + n0
    if TMA:
        a_src = a_ptr
        w_src = w_ptr
    else:
        a_src = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
        w_base = w_ptr + e.to(tl.int64) * stride_we
        w_src = w_base + offs_n.to(tl.int64)[:, None] * stride_wn + offs_k[None, :] * stride_wk
    sf_ptrs = a_sf_ptr + rows * stride_sfm
    # A tile of at most 128 columns sits in one 128-row band of weight scales (one scalar per K
    # step); a wider tile takes a vector of per-column band scales.
    ws_ptr = w_scale_ptr + e.to(tl.int64) * stride_se
    if BLOCK_N <= 128:
        ws_ptr += (n0 // BLOCK_K) * stride_sn
    else:
        ws_ptr += (offs_n // BLOCK_K) * stride_sn

    # One K step is one 128-column quantisation group: a single exponent per row and a single
    # weight scale, so the fp8 product of the step is exact up to fp32 accumulation and is scaled
    # once before joining the running sum (_promote). The loops below differ only in when each
    # step's product is issued on the tensor cores; every one joins the steps in K order through
    # the same _promote, so their outputs are bitwise identical.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    steps = K // BLOCK_K
    if K_LOOP == "plain":
        # Step by step: the product is waited for, then promoted.
        for kb in range(0, steps):
            a, w = _operands(a_src, w_src, kb, m0, w_row, row_ok, stride_ak, stride_wk, TMA)
            a_scale, w_scale = _step_scales(sf_ptrs, ws_ptr, kb, row_ok, stride_sfp, stride_sk)
            part = tl.dot(a, tl.trans(w), out_dtype=tl.float32)
            acc = _promote(acc, part, a_scale, w_scale, BLOCK_N)
    else:
        # Two steps an iteration. "unroll2": both products, then both promotions.
        # "overlap1" / "overlap2": the odd step's product is carried to the next iteration
        # (`held`), so Triton may leave that wgmma in flight (its result is only yielded) while
        # the promotions run; it is promoted after the next even step's product, which waits
        # for it. overlap1 promotes `held` before issuing the new one (three fp32 tiles live),
        # overlap2 issues the new one before both promotions (four tiles live, more overlap).
        # Before the first iteration `held` is a zero product with zero scales: acc is +0 and
        # +0 + 0 * 0 is +0, so the extra promotion changes no bit.
        held = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        held_a = tl.zeros((BLOCK_M,), dtype=tl.float32)
        if BLOCK_N <= 128:
            held_w = 0.0
        else:
            held_w = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for pair in range(0, steps // 2):
            kb = 2 * pair
            a0, w0 = _operands(a_src, w_src, kb, m0, w_row, row_ok, stride_ak, stride_wk, TMA)
            a1, w1 = _operands(a_src, w_src, kb + 1, m0, w_row, row_ok, stride_ak, stride_wk, TMA)
            a_s0, w_s0 = _step_scales(sf_ptrs, ws_ptr, kb, row_ok, stride_sfp, stride_sk)
            a_s1, w_s1 = _step_scales(sf_ptrs, ws_ptr, kb + 1, row_ok, stride_sfp, stride_sk)
            if K_LOOP == "unroll2":
                p0 = tl.dot(a0, tl.trans(w0), out_dtype=tl.float32)
                p1 = tl.dot(a1, tl.trans(w1), out_dtype=tl.float32)
                acc = _promote(acc, p0, a_s0, w_s0, BLOCK_N)
                acc = _promote(acc, p1, a_s1, w_s1, BLOCK_N)
            elif K_LOOP == "overlap1":
                p0 = tl.dot(a0, tl.trans(w0), out_dtype=tl.float32)
                acc = _promote(acc, held, held_a, held_w, BLOCK_N)
                held = tl.dot(a1, tl.trans(w1), out_dtype=tl.float32)
                acc = _promote(acc, p0, a_s0, w_s0, BLOCK_N)
                held_a = a_s1
                held_w = w_s1
            else:
                tl.static_assert(K_LOOP == "overlap2")
                p0 = tl.dot(a0, tl.trans(w0), out_dtype=tl.float32)
                p1 = tl.dot(a1, tl.trans(w1), out_dtype=tl.float32)
                acc = _promote(acc, held, held_a, held_w, BLOCK_N)
                acc = _promote(acc, p0, a_s0, w_s0, BLOCK_N)
                held = p1
                held_a = a_s1
                held_w = w_s1
        if K_LOOP != "unroll2":
            acc = _promote(acc, held, held_a, held_w, BLOCK_N)
        # An odd step count leaves the last step, done plainly.
        if steps % 2 == 1:
            kb = steps - 1
            a, w = _operands(a_src, w_src, kb, m0, w_row, row_ok, stride_ak, stride_wk, TMA)
            a_scale, w_scale = _step_scales(sf_ptrs, ws_ptr, kb, row_ok, stride_sfp, stride_sk)
            part = tl.dot(a, tl.trans(w), out_dtype=tl.float32)
            acc = _promote(acc, part, a_scale, w_scale, BLOCK_N)

    out_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, fp32_to_bf16(acc, INTERPRET), mask=row_ok[:, None])
