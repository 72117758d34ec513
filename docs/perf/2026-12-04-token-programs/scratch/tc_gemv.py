"""Scratch (issue 28, 2026-12-04, fourteenth session): the sparse FP8 GEMV on tensor cores, one
warp a (row block, slot, token) as the package's GEMV, the products in the tensor cores instead
of fp32 FMAs.

Why: the package's FP8 GEMV loop is 5.4 SASS instructions a weight byte (sm_90a, one warp, 2
rows): at the copy rate that is about 2.7 of an SM's 4 warp instructions a cycle, so the loop is
near the SMs' issue limit as well as the bytes'. A warp MMA (m16n8k16) takes 256 products in one
instruction; the e4m3 -> bf16 widening by bit placement (`jit.e4m3_to_bf16`) is 2.5 instructions a
value. The token is column 0 of a [BLOCK_K, 16] operand (the others masked to zero, never read);
the weights [BLOCK_N, BLOCK_K] take the left side in the dot's K order (`grouped_dot.dot_order`),
the step is `grouped_dot._fp8_step` itself (pointer loads). Products exact in fp32, the sum order
the tensor cores' (not the package GEMV's): held to the gate's tolerance, not bitwise."""

import triton
import triton.language as tl

from moebench.kernels.gemv_parts import gemv_epilogue, program_expert, row_bias
from moebench.kernels.grouped_dot import _fp8_step
from moebench.kernels.launch import check_slot_operands, checker


@triton.jit
def _tc_gemv_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EXACT_RNE: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr,
):  # fmt: skip
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    scale = tl.load(ws_ptr + e64)
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    w_src = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn + tl.arange(0, BLOCK_K)[None, :]
    cols = tl.arange(0, 16)
    m_ok = cols == 0
    x_row = x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk
    x_at = x_row + tl.arange(0, BLOCK_K)[:, None] + 0 * cols[None, :]
    acc = tl.zeros([BLOCK_N, 16], dtype=tl.float32)
    r_main = R // BLOCK_K * BLOCK_K
    for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        acc = _fp8_step(acc, w_src, 0, x_at, k0, R, m_ok, False, False, INTERPRET)
    if r_main < R:
        acc = _fp8_step(acc, w_src, 0, x_at, r_main, R, m_ok, True, False, INTERPRET)
    h = tl.sum(tl.where(m_ok[None, :], acc, 0.0), axis=1)
    gemv_epilogue(h * scale, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU, BLOCK_N,
                  EXACT_RNE)  # fmt: skip


_check = checker("tc_gemv")


def tc_gemv(x, topk_ids_TK, w, w_scale, bias_EN, out, *, expert_offset, glu="none", block_n=16,
            block_k=128, num_warps=1, num_stages=0):  # fmt: skip
    """As `sparse_gemv` (FP8 only), the products on tensor cores."""
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    _check(ops.fmt == "fp8", "tc_gemv is FP8 only")
    T, K, E, N, R = ops.T, ops.K, ops.E, ops.N, ops.R
    if T == 0 or K == 0 or E == 0:
        return
    _tc_gemv_fp8[(N // block_n, K, T)](
        x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
        ops.stride_xt, ops.stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
        bias_EN.stride(0), out.stride(0), out.stride(1),
        GLU=glu, BLOCK_N=block_n, BLOCK_K=block_k, EXACT_RNE=not out.is_cuda,
        NUM_STAGES=num_stages, INTERPRET=not out.is_cuda, num_warps=num_warps,
    )  # fmt: skip
