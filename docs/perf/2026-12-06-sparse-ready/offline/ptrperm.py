"""Scratch (issue 28, 2026-12-06, twenty-fifth session), offline, no GPU: sm_90a SASS probe of the
MXFP4 tile with the slots' operand loaded through K-permuted pointers
(dot order only, pairs contiguous: as a rotated layout whose decode gives natural pairs would
allow) instead of loaded in natural order and permuted in registers (today: 8 STS and 2 LDS.128
a step re-lay it through shared memory). Numerics not checked (the weights keep today's decode
order): instruction counts only. Usage (triton 3.6 venv, repository root):
PYTHONPATH=$PWD:$PWD/tools:DIR python DIR/ptrperm.py OUT [ptr]; without ``ptr`` the arm's tile.
Output in ptrperm.txt: 272 and 265 instructions a step against 217 (the 4-byte cp.async copies,
more address work and 16 warpgroup instructions against 2 cost more than the re-layout they
remove)."""

import sys

import sass_grouped_decode as s
import triton
import triton.language as tl

from moebench.kernels import grouped_dot
from moebench.kernels.gemv_parts import row_bias
from moebench.kernels.grouped_slots import expert_slots, slot_epilogue
from moebench.kernels.tile_order import dot_order, mx_tile, operand_rows


@triton.jit
def _mxfp4_step(acc, w_at, s, x_at, k0, R, m_ok, MASKED: tl.constexpr, INTERPRET: tl.constexpr,
                FOLD_SCALES: tl.constexpr, ROTATED: tl.constexpr):  # fmt: skip
    BK: tl.constexpr = x_at.shape[0]
    if MASKED:
        b_ok = (k0 // 2 + tl.arange(0, BK // 2) < R // 2)[None, :]
        w = tl.load(w_at + k0 // 2, mask=b_ok, other=0)
        kp = tl.arange(0, BK)
        nat = (BK // 4) * ((kp // 2) % 4) + 4 * (kp // 16) + 2 * ((kp // 8) % 2) + kp % 2
        x_ok = m_ok[None, :] & (k0 + nat < R)[:, None]
        xv = tl.load(x_at + k0, mask=x_ok, other=0.0)
    else:
        w = tl.load(w_at + k0 // 2)
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
    wv = mx_tile(operand_rows(w), operand_rows(s), INTERPRET, FOLD_SCALES, ROTATED)
    return tl.dot(dot_order(wv), xv, acc, out_dtype=tl.float32)


@triton.jit
def _mxfp4_pass(
    x_ptr,
    ids_ptr,
    w_at,
    s_at,
    s_words,
    b_ptr,
    out_ptr,
    TK,
    K,
    expert_offset,
    R,
    e,
    e64,
    count,
    m0,
    n_block,
    stride_xt,
    stride_xk,
    stride_it,
    stride_ik,
    stride_be,
    stride_ot,
    stride_ok,
    GLU: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    INTERPRET: tl.constexpr,
    SCALE_WORDS: tl.constexpr,
    FOLD_SCALES: tl.constexpr,
    EARLY_BIAS: tl.constexpr,
    ROTATED: tl.constexpr,
):
    kg = tl.arange(0, BLOCK_K // 32)
    t64, k64 = expert_slots(
        ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0, BLOCK_M, SCAN
    )
    m_ok = m0 + tl.arange(0, BLOCK_M) < count
    if EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    kp = tl.arange(0, BLOCK_K)
    nat = (BLOCK_K // 4) * ((kp // 2) % 4) + 4 * (kp // 16) + 2 * ((kp // 8) % 2) + kp % 2
    x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + nat[:, None]
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    r_main = R // BLOCK_K * BLOCK_K
    for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        words = tl.load(s_words + k0 // 128)
        sc = tl.reshape(
            (words[:, :, None] >> (8 * tl.arange(0, 4))[None, None, :]) & 0xFF,
            [BLOCK_N, BLOCK_K // 32],
        ).to(tl.uint8)
        acc = _mxfp4_step(acc, w_at, sc, x_at, k0, R, m_ok, False, INTERPRET, FOLD_SCALES, ROTATED)
    s_last = tl.load(s_at + r_main // 32, mask=(r_main // 32 + kg < R // 32)[None, :], other=0)
    if not EVEN_K:
        acc = _mxfp4_step(
            acc, w_at, s_last, x_at, r_main, R, m_ok, True, INTERPRET, FOLD_SCALES, ROTATED
        )
    if not EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    slot_epilogue(
        tl.trans(acc),
        bias,
        n_block,
        t64,
        k64,
        m_ok,
        out_ptr,
        stride_ot,
        stride_ok,
        GLU,
        BLOCK_M,
        BLOCK_N,
        EXACT_RNE,
    )


if __name__ == "__main__":
    out = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "ptr":
        grouped_dot._grouped_dot_mxfp4.fn.__globals__["_mxfp4_pass"] = _mxfp4_pass
    s.grouped("dot:mxfp4:16:64:128:4:3:64:ptr:80:1:1:1:0:1", out)
