"""Scratch (issue 28, 2026-12-04): the sparse FP8 GEMV with several warps a program, each warp
its own rows (as the one-warp default's program, 2 rows at 1,024 bytes a row a step), so that a
launch has fewer, larger programs without splitting a row's K over warps. The tile is
[2, BLOCK_N, 32, 16] a step: byte j of lane l of half h of a row is byte 512 h + 16 l + j of the
step; the rows dimension comes before the lanes', so triton's layout gives the warps the rows and
a row's sum stays in its warp (no shared memory, no barrier). Epilogue loads early (as
`sparse_gemv(early_loads=True)`). Plain loop only: no PDL, stages or split-K. Same products and,
per row, the same per-lane sums in the same order as the default's, so the same bits."""

import triton
import triton.language as tl

from moebench.kernels.gemv_parts import gemv_epilogue, program_expert, row_bias
from moebench.kernels.launch import check_slot_operands, checker


@triton.jit
def _sparse_gemv_fp8_rows(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr,
):  # fmt: skip
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    scale = tl.load(ws_ptr + e64)
    BLOCK_K: tl.constexpr = 1024
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = (tl.arange(0, 2)[:, None, None, None] * 512 + tl.arange(0, 32)[None, None, :, None] * 16
            + tl.arange(0, 16)[None, None, None, :])  # fmt: skip
    w_rows = w_ptr + e64 * stride_we + rows.to(tl.int64)[None, :, None, None] * stride_wn
    x_row = (x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk).to(
        tl.pointer_type(tl.int16)
    )
    x_rows = x_row + 0 * rows[None, :, None, None]
    acc = tl.zeros([2, BLOCK_N, 32], dtype=tl.float32)
    for k0 in range(0, R, BLOCK_K):
        k = k0 + offs
        if EVEN_K:
            w = tl.load(w_rows + k)
            xv = tl.load(x_rows + k)
        else:
            w = tl.load(w_rows + k, mask=k < R, other=0.0)
            xv = tl.load(x_rows + k, mask=k < R, other=0)
        acc += tl.sum(w.to(tl.float32) * xv.to(tl.bfloat16, bitcast=True).to(tl.float32), axis=3)
    h = tl.sum(tl.sum(acc, axis=2), axis=0)
    gemv_epilogue(h * scale, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU, BLOCK_N,
                  EXACT_RNE)  # fmt: skip


_check = checker("sparse_gemv_rows")


def sparse_gemv_rows(x, topk_ids_TK, w, w_scale, bias_EN, out, *, expert_offset, glu="none",
                     block_n=8, num_warps=4):  # fmt: skip
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    assert ops.fmt == "fp8"
    T, K, E, N, R = ops.T, ops.K, ops.E, ops.N, ops.R
    _sparse_gemv_fp8_rows[(N // block_n, K, T)](
        x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
        ops.stride_xt, ops.stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
        bias_EN.stride(0), out.stride(0), out.stride(1),
        GLU=glu, BLOCK_N=block_n, EVEN_K=R % 1024 == 0, EXACT_RNE=not out.is_cuda,
        num_warps=num_warps,
    )  # fmt: skip
