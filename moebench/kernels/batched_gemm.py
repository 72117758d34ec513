"""The dense decode GEMMs: `fc1` and `fc2` of the `dense_decode` arm over every local expert.

Legend: E local experts, T tokens, N output columns (2F for fc1, D for fc2), R reduction length
(D for fc1, F for fc2).

Every token is multiplied by every local expert, whatever the routing: ``out[e, t] =
x[e, t] @ dequant(w[e]).T + bias[e]`` for all e < E and t < T, then (fc1) the GLU of the
interleaved (gate, up) pairs. The per-expert input is ``x_TR`` itself for fc1 (each token
"replicated" to every expert through a zero expert stride, nothing copied) and the expert's own
activation ``a_ETF`` for fc2.

Tensors:
- ``x``:       bf16, row t of expert e at ``x + e * stride_xe + t * stride_xt``, R contiguous.
- ``w``:       [E, N, R] FP8 e4m3 or [E, N, R/2] uint8 MXFP4 (low nibble first), rows contiguous.
- ``w_scale``: float32 [E] (FP8) or uint8 e8m0 [E, N, R/32] (MXFP4).
- ``bias``:    bf16 [E, N].
- ``out``:     bf16 [E, T, N] (or N/2 with a GLU), unit column stride.

The grid is (N / BLOCK_N, E, ceil(T / BLOCK_M)): with T <= BLOCK_M (decode) each expert's weights
are streamed once a step. The weights are dequantised to bf16 in registers, exactly (e4m3 values by
bit placement, `jit.e4m3_to_bf16`, and e2m1 values times a power of two are all bf16 numbers), and
multiplied on tensor cores with fp32 accumulation; under the interpreter the operands are widened to
fp32 first, because its `tl.dot` multiplies bf16 bit patterns (docs/DESIGN.md section 11). From
sm_90 SASS compiled offline with triton 3.9 (not measured): the FP8 loop is cp.async-pipelined
mma.sync at about 4.5 instructions per weight; the MXFP4 loop about 9.6 per value (decode, scale,
bf16 pack, shared-memory staging), so dense MXFP4 is bound by the decode, not by its halved bytes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import (
    e2m1_pair,
    e4m3_to_bf16,
    e8m0_scale,
    fp32_to_bf16,
    gated_activation,
)
from moebench.kernels.launch import GLUS, MX_BLOCK, checker, describe, weight_format


@triton.jit
def _batched_gemm(
    x_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    T, R,
    stride_xe, stride_xt, stride_we, stride_wn, stride_se, stride_sn, stride_be,
    stride_oe, stride_ot,
    MXFP4: tl.constexpr, GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, INTERPRET: tl.constexpr,
):  # fmt: skip
    pid_n = tl.program_id(0)
    e64 = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(2) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = offs_m < T
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows64 = rows.to(tl.int64)
    x_rows = x_ptr + e64 * stride_xe + offs_m.to(tl.int64)[:, None] * stride_xt
    w_rows = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if MXFP4:
        # uint32 words of the weights: byte j of word q of the step holds values 8q + 2j (low
        # nibble) and 8q + 2j + 1 (high nibble); `e2m1_pair` decodes one byte of every word at
        # once (kernels.jit). The decoded tiles are joined into one [BLOCK_N, BLOCK_K] operand
        # whose column order is (q, j % 2, j // 2, nibble); x is read in that same order, so one
        # product covers the step. Each value is scaled by its group's power of two; the 2^-14
        # of the fp16 placement stays in until the end, so the bf16 conversion is exact.
        WORDS: tl.constexpr = BLOCK_K // 8
        offs_q = tl.arange(0, WORDS)
        p = tl.arange(0, BLOCK_K)
        k_perm = (p // 8) * 8 + ((p // 4) % 2) * 2 + ((p // 2) % 2) * 4 + p % 2
        s_rows = ws_ptr + e64 * stride_se + rows64[:, None] * stride_sn
        w_words = w_rows.to(tl.pointer_type(tl.uint32))
        for k0 in range(0, R, BLOCK_K):
            q = k0 // 8 + offs_q
            q_ok = q < R // 8
            w = tl.load(w_words + q[None, :], mask=q_ok[None, :], other=0)
            s = e8m0_scale(tl.load(s_rows + (q // 4)[None, :], mask=q_ok[None, :], other=0))
            lo0, hi0 = e2m1_pair(w, 0)
            lo1, hi1 = e2m1_pair(w, 1)
            w_hi = w >> 16
            lo2, hi2 = e2m1_pair(w_hi, 0)
            lo3, hi3 = e2m1_pair(w_hi, 1)
            lo = tl.join(tl.join(lo0, lo1), tl.join(lo2, lo3))
            hi = tl.join(tl.join(hi0, hi1), tl.join(hi2, hi3))
            wv = tl.reshape(tl.join(lo, hi), [BLOCK_N, BLOCK_K])
            sv = tl.reshape(tl.broadcast_to(s[:, :, None], [BLOCK_N, WORDS, 8]), [BLOCK_N, BLOCK_K])
            wv = (wv * sv).to(tl.bfloat16)
            k = k0 + k_perm
            xv = tl.load(x_rows + k[None, :], mask=m_ok[:, None] & (k < R)[None, :], other=0.0)
            if INTERPRET:
                wv, xv = wv.to(tl.float32), xv.to(tl.float32)
            acc = tl.dot(xv, tl.trans(wv), acc, out_dtype=tl.float32)
        # Undo the 2^-14 (a literal: kernels read no module globals).
        acc = acc * 16384.0
    else:
        offs_k = tl.arange(0, BLOCK_K)
        for k0 in range(0, R, BLOCK_K):
            w = e4m3_to_bf16(tl.load(w_rows + (k0 + offs_k)[None, :]), INTERPRET)
            xv = tl.load(x_rows + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0)
            if INTERPRET:
                xv = xv.to(tl.float32)
            acc = tl.dot(xv, tl.trans(w), acc, out_dtype=tl.float32)
        acc = acc * tl.load(ws_ptr + e64)
    acc = acc + tl.load(b_ptr + e64 * stride_be + rows).to(tl.float32)[None, :]

    out_rows = out_ptr + e64 * stride_oe + offs_m.to(tl.int64)[:, None] * stride_ot
    if GLU == "none":
        tl.store(out_rows + rows[None, :], fp32_to_bf16(acc, INTERPRET), mask=m_ok[:, None])
    else:
        gate, up = tl.split(tl.reshape(acc, [BLOCK_M, BLOCK_N // 2, 2]))
        a = gated_activation(gate, up, GLU)
        cols = pid_n * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        tl.store(out_rows + cols[None, :], fp32_to_bf16(a, INTERPRET), mask=m_ok[:, None])


_check = checker("batched_gemm")


def batched_gemm(
    x: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    bias_EN: torch.Tensor,
    out_ETN: torch.Tensor,
    *,
    glu: str = "none",
    block_n: int | None = None,
    num_warps: int = 4,
) -> None:
    """Every local expert times every token (module docstring). ``x`` is [T, R] (shared by all
    experts) or [E, T, R]; ``out_ETN`` [E, T, N] or, with ``glu``, [E, T, N/2]."""
    _check(glu in GLUS, f"glu must be one of {GLUS}, got {glu!r}")
    fmt = weight_format(w)
    _check(w.dim() == 3 and w.stride(2) == 1, f"w must be 3-D, rows contiguous: {describe(w)}")
    E, N, Rw = w.shape
    R = Rw * (2 if fmt == "mxfp4" else 1)
    _check(x.dtype == torch.bfloat16 and x.stride(-1) == 1, f"x must be bf16: {describe(x)}")
    if x.dim() == 2:
        T = x.shape[0]
        _check(x.shape[1] == R, f"x must be [T, R={R}], got {list(x.shape)}")
        stride_xe, stride_xt = 0, x.stride(0)
    else:
        T = x.shape[1]
        _check(tuple(x.shape) == (E, T, R), f"x must be [{E}, T, {R}], got {list(x.shape)}")
        stride_xe, stride_xt = x.stride(0), x.stride(1)
    # 64 output columns a program (32 when N is an odd multiple of 32).
    block_n = block_n or (64 if N % 64 == 0 else 32)
    _check(
        R % MX_BLOCK == 0 and N % block_n == 0,
        f"R ({R}) must be a multiple of {MX_BLOCK} and N ({N}) of block_n ({block_n})",
    )
    n_out = N // 2 if glu != "none" else N
    _check(
        out_ETN.dtype == torch.bfloat16
        and tuple(out_ETN.shape) == (E, T, n_out)
        and out_ETN.stride(2) == 1,
        f"out_ETN must be bf16 [{E}, {T}, {n_out}] with unit column stride, "
        f"got {describe(out_ETN)}",
    )
    _check(
        bias_EN.dtype == torch.bfloat16
        and tuple(bias_EN.shape) == (E, N)
        and bias_EN.stride(1) == 1,
        f"bias_EN must be bf16 [{E}, {N}], got {describe(bias_EN)}",
    )
    if fmt == "fp8":
        _check(
            w_scale.dtype == torch.float32
            and tuple(w_scale.shape) == (E,)
            and w_scale.stride(0) == 1,
            f"FP8 weights need w_scale float32 [{E}], got {describe(w_scale)}",
        )
        stride_se = stride_sn = 0
    else:
        _check(
            w_scale.dtype == torch.uint8
            and tuple(w_scale.shape) == (E, N, R // MX_BLOCK)
            and w_scale.stride(2) == 1,
            f"MXFP4 weights need w_scale uint8 [{E}, {N}, {R // MX_BLOCK}], "
            f"got {describe(w_scale)}",
        )
        stride_se, stride_sn = w_scale.stride(0), w_scale.stride(1)
    devices = {t.device for t in (x, w, w_scale, bias_EN, out_ETN)}
    _check(len(devices) == 1, f"all tensors must be on one device, got {sorted(map(str, devices))}")
    if T == 0 or E == 0:
        return
    # Decode batches: one row block holds every token, so each expert's weights stream once.
    block_m = min(64, max(16, triton.next_power_of_2(T)))
    # MXFP4 splits a step into eight products of depth block_k / 8, which must be >= 16; the
    # last step of a depth that is not a multiple is masked.
    block_k = 256 if fmt == "mxfp4" else next(b for b in (128, 64, 32) if R % b == 0)
    grid = (N // block_n, E, triton.cdiv(T, block_m))
    _batched_gemm[grid](
        x, w, w_scale, bias_EN, out_ETN, T, R,
        stride_xe, stride_xt, w.stride(0), w.stride(1), stride_se, stride_sn, bias_EN.stride(0),
        out_ETN.stride(0), out_ETN.stride(1),
        MXFP4=fmt == "mxfp4", GLU=glu, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        INTERPRET=not out_ETN.is_cuda, num_warps=num_warps,
    )  # fmt: skip
