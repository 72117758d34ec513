"""The `combine` stage: fold each token's expert outputs back into one row.

Legend: T tokens, K top-k, D hidden, M rows of the capacity buffer.

    out_MD           float32 | bf16 [M, D]  FC2 output; padding rows may hold anything, NaN included
    slot_row_TK      int32 [T, K]           row of each slot, -1 when the slot's expert is not local
    topk_weights_TK  float32 | bf16 [T, K]  router weights; anything (NaN included) on -1 slots
    y_TD             float32 | bf16 [T, D]  y[t] = sum_k w[t, k] * out[slot_row[t, k]], local k only

Slots of non-local experts are skipped, never multiplied by zero (NaN * 0 = NaN): their row is not
loaded and their term is not added. Each program owns a tile of tokens and columns and adds the K
terms in increasing k in float32, so the result is deterministic (no atomics) and, for a float32 y,
rounds exactly as `reference.combine` does (one product, then one sum, per slot); a bf16 y is that
float32 sum rounded once to nearest even.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import fp32_to_bf16

_FLOATS = (torch.float32, torch.bfloat16)


@triton.jit
def _combine(
    out_ptr,
    slot_row_ptr,
    w_ptr,
    y_ptr,
    T,
    D,
    stride_om,
    stride_od,
    stride_st,
    stride_sk,
    stride_wt,
    stride_wk,
    stride_yt,
    stride_yd,
    K: tl.constexpr,
    Y_BF16: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    t_ok = t < T
    d_ok = d < D

    # Fixed k order, float32 accumulator. A slot with row -1 (or a token past T) masks its load and
    # keeps the accumulator as it was, so NaN in padding rows or in its weight cannot leak in.
    acc = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32)
    for k in tl.static_range(K):
        row = tl.load(slot_row_ptr + t * stride_st + k * stride_sk, mask=t_ok, other=-1)
        hit = t_ok & (row >= 0)
        w = tl.load(w_ptr + t * stride_wt + k * stride_wk, mask=hit, other=0.0).to(tl.float32)
        mask = hit[:, None] & d_ok[None, :]
        o = tl.load(
            out_ptr + row.to(tl.int64)[:, None] * stride_om + d[None, :] * stride_od,
            mask=mask,
            other=0.0,
        ).to(tl.float32)
        acc = tl.where(mask, acc + w[:, None] * o, acc)

    y_mask = t_ok[:, None] & d_ok[None, :]
    y_ptrs = y_ptr + t.to(tl.int64)[:, None] * stride_yt + d[None, :] * stride_yd
    # One rounding at the store; a bf16 y is rounded to nearest even on the bits when interpreting
    # (the interpreter's own conversion truncates, docs/DESIGN.md section 11).
    if Y_BF16:
        tl.store(y_ptrs, fp32_to_bf16(acc, EXACT_RNE), mask=y_mask)
    else:
        tl.store(y_ptrs, acc, mask=y_mask)


def combine(
    out_MD: torch.Tensor,
    slot_row_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    y_TD: torch.Tensor,
    *,
    block_t: int = 1,
    block_d: int | None = None,
    num_warps: int = 4,
) -> None:
    """y_TD = sum over local slots of topk_weights_TK * out_MD[slot_row_TK] (module docstring).

    out_MD float32 or bf16 [M, D]; slot_row_TK int32 [T, K]; topk_weights_TK float32 or bf16
    [T, K]; y_TD float32 or bf16 [T, D], written in full. All on one device, any strides.
    A program covers ``block_t`` tokens of ``block_d`` columns (default below) on
    ``num_warps`` warps; the tile changes which program adds a term, never the order of the terms,
    so every tile writes the same bits.
    """
    if out_MD.dim() != 2 or out_MD.dtype not in _FLOATS:
        raise ValueError(f"out_MD must be 2-D float32 or bf16, got {out_MD.dtype} {out_MD.dim()}-D")
    M, D = out_MD.shape
    dev = out_MD.device
    if slot_row_TK.dim() != 2 or slot_row_TK.dtype != torch.int32 or slot_row_TK.device != dev:
        raise ValueError(
            f"slot_row_TK must be 2-D int32 on {dev}, got {slot_row_TK.dtype} "
            f"{list(slot_row_TK.shape)} on {slot_row_TK.device}"
        )
    T, K = slot_row_TK.shape
    if (
        tuple(topk_weights_TK.shape) != (T, K)
        or topk_weights_TK.dtype not in _FLOATS
        or topk_weights_TK.device != dev
    ):
        raise ValueError(
            f"topk_weights_TK must be float32 or bf16 [T={T}, K={K}] on {dev}, got "
            f"{topk_weights_TK.dtype} {list(topk_weights_TK.shape)} on {topk_weights_TK.device}"
        )
    if tuple(y_TD.shape) != (T, D) or y_TD.dtype not in _FLOATS or y_TD.device != dev:
        raise ValueError(
            f"y_TD must be float32 or bf16 [T={T}, D={D}] on {dev}, got {y_TD.dtype} "
            f"{list(y_TD.shape)} on {y_TD.device}"
        )
    if T == 0 or D == 0:
        return

    for name, v in (("block_t", block_t), ("block_d", block_d or 1), ("num_warps", num_warps)):
        if v < 1 or v & (v - 1):
            raise ValueError(f"{name} must be a power of two, got {v}")
    # One token a program, wide column tiles: 1,024 columns measured best on the H200 at D=7168
    # (about 4 TB/s); 2,048 where they divide D (D=4096: 26.1 against 28.5 us, docs/PERF.md).
    if block_d is None:
        block_d = 2048 if D % 2048 == 0 else min(1024, triton.next_power_of_2(D))
    grid = (triton.cdiv(T, block_t), triton.cdiv(D, block_d))
    # No fused multiply-add: each term is rounded once as a product and once as a sum, as in the
    # reference, so float32 results agree bit for bit on the GPU too (the interpreter never fuses).
    _combine[grid](
        out_MD,
        slot_row_TK,
        topk_weights_TK,
        y_TD,
        T,
        D,
        *out_MD.stride(),
        *slot_row_TK.stride(),
        *topk_weights_TK.stride(),
        *y_TD.stride(),
        K=K,
        Y_BF16=y_TD.dtype == torch.bfloat16,
        EXACT_RNE=not y_TD.is_cuda,
        BLOCK_T=block_t,
        BLOCK_D=block_d,
        num_warps=num_warps,
        enable_fp_fusion=False,
    )
