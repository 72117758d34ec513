"""The grouped decode GEMV's tensor-core path: one touched expert's weight tile times all of its
slots, for `moebench.kernels.grouped_gemv` (its docstring has the tensors, the grid and the
grouping; this file only the two kernels).

A program holds its expert's [BLOCK_N, BLOCK_K] weight tile as the left operand of ``tl.dot`` and
the pass's slots as the right one, [BLOCK_K, BLOCK_M] bf16 (slot m's row down column m; columns
past the expert's count are masked to zero and never stored). The weights take the operand's
large side, so a few slots pad only the small side to the 16 the tensor cores need (on sm_90 a
64-row left operand converted in registers is what a warpgroup MMA takes), and the accumulator
[BLOCK_N, BLOCK_M] is fp32. The K loop is software-pipelined ``NUM_STAGES`` deep (0: the
compiler's default).

- FP8: e4m3 converted to bf16 (exact: every e4m3 value is a bf16 number), the expert scale applied
  to the fp32 sums after the loop, as `sparse_gemv` and `batched_gemm` do.
- MXFP4: ``tl.dot_scaled`` of the packed e2m1 tile with its e8m0 scales (the compiler's upcast:
  e2m1 times its power-of-two scale, exact in bf16) by the bf16 slots. Scale byte 255 (NaN in the
  format) gives a non-finite output (``fast_math`` skips only the NaN select), as in the other
  kernels.

Under the interpreter (``INTERPRET``, FP8) the bf16 operands are widened to fp32 first: its
``tl.dot`` multiplies bf16 bit patterns (docs/DESIGN.md section 11); its ``tl.dot_scaled`` needs
no help. Products are exact either way.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moebench.kernels.grouped_slots import expert_slots, slot_epilogue, touched_expert
from moebench.kernels.jit import pdl_launch_dependents, pdl_wait


@triton.jit
def _grouped_dot_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    # Only the routing was read so far; x may be the previous kernel's output.
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    kk = tl.arange(0, BLOCK_K)
    w_tile = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn + kk[None, :]
    scale = tl.load(ws_ptr + e64)
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_tile = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + kk[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in tl.range(0, R, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            if EVEN_K:
                w = tl.load(w_tile + k0)
                xv = tl.load(x_tile + k0, mask=m_ok[None, :], other=0.0)
            else:
                k_ok = k0 + kk < R
                w = tl.load(w_tile + k0, mask=k_ok[None, :], other=0.0)
                xv = tl.load(x_tile + k0, mask=m_ok[None, :] & k_ok[:, None], other=0.0)
            wb = w.to(tl.bfloat16)
            if INTERPRET:
                wb, xv = wb.to(tl.float32), xv.to(tl.float32)
            acc = tl.dot(wb, xv, acc, out_dtype=tl.float32)
        h = tl.trans(acc) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


@triton.jit
def _grouped_dot_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    kb = tl.arange(0, BLOCK_K // 2)
    kg = tl.arange(0, BLOCK_K // 32)
    kx = tl.arange(0, BLOCK_K)
    w_tile = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn + kb[None, :]
    s_tile = ws_ptr + e64 * stride_se + rows64[:, None] * stride_sn + kg[None, :]
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_tile = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + kx[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in tl.range(0, R, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            if EVEN_K:
                w = tl.load(w_tile + k0 // 2)
                s = tl.load(s_tile + k0 // 32)
                xv = tl.load(x_tile + k0, mask=m_ok[None, :], other=0.0)
            else:
                w = tl.load(w_tile + k0 // 2, mask=(k0 // 2 + kb < R // 2)[None, :], other=0)
                s = tl.load(s_tile + k0 // 32, mask=(k0 // 32 + kg < R // 32)[None, :], other=0)
                x_ok = m_ok[None, :] & (k0 + kx < R)[:, None]
                xv = tl.load(x_tile + k0, mask=x_ok, other=0.0)
            acc = tl.dot_scaled(w, s, "e2m1", xv, None, "bf16", acc, fast_math=True)
        slot_epilogue(tl.trans(acc), n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be,
                      stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
