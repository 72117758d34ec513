"""The pieces the sparse decode GEMV kernels (`moebench.kernels.sparse_gemv`) share: which
(token, slot, expert) a program serves, its K slice, the epilogue (bias, the GLU, the bf16
store), the fp32 partials of a split-K launch and the second pass that sums them. The tensors
are those of `moebench.kernels.sparse_gemv`'s docstring; ``part`` is float32 [T, K, SPLIT_K, N].
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import fp32_to_bf16, gated_activation


@triton.jit
def program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E, LOCAL_FIRST: tl.constexpr = 0):
    """(token, slot, local expert id) of this program; the id is outside [0, E) when the slot's
    expert lives on another rank.

    The grid is (row blocks, K, T). By default program (n, k, t) serves slot k of token t, so the
    programs of a slot routed to another rank sit between the local ones in launch order, and
    the GPU starts and retires them (they leave after this load) before it reaches the next local
    slot's. With ``LOCAL_FIRST`` (a power of two >= T * K, the routing's size) program (n, k, t)
    serves the (t K + k)-th local (token, slot) pair in (token, slot) order instead: every program
    with work comes first in launch order and those past the local count leave here, last. Each
    program then reads the whole routing (T * K ids, one or a few cache lines) instead of one id.
    A (token, slot) pair is served by the same program body either way, so the outputs are the
    same bits. Measured slower than the default (`sparse_launch.LOCAL_FIRST_MAX_SLOTS`): the
    remote slots' programs cost less where they sit than the whole routing's read does."""
    slot = tl.program_id(1)
    t = tl.program_id(2)
    if LOCAL_FIRST:
        K = tl.num_programs(1)
        i = tl.arange(0, LOCAL_FIRST)
        held = i < K * tl.num_programs(2)
        e_all = tl.load(ids_ptr + i // K * stride_it + i % K * stride_ik, mask=held, other=0)
        e_all = e_all - expert_offset
        local = held & (e_all >= 0) & (e_all < E)
        # The pair at position i is the (count of local pairs up to i)-th; this program's is the
        # (t K + slot + 1)-th, if there are that many.
        hit = local & (tl.cumsum(local.to(tl.int32), 0) == t * K + slot + 1)
        pick = tl.max(tl.where(hit, i, -1), axis=0)
        e = tl.where(pick >= 0, tl.sum(tl.where(hit, e_all, 0), axis=0), -1)
        pick = tl.maximum(pick, 0)
        return pick // K, pick % K, e
    e = tl.load(ids_ptr + t * stride_it + slot * stride_ik) - expert_offset
    return t, slot, e


@triton.jit
def row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N: tl.constexpr, N=0,
             RAGGED: tl.constexpr = False):  # fmt: skip
    """The bias of row block ``n_block`` of expert ``e64``, bf16 as stored; with ``RAGGED`` the
    block may pass the expert's ``N`` rows, whose bias reads as zero."""
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    if RAGGED:
        return tl.load(b_ptr + e64 * stride_be + rows, mask=rows < N, other=0.0)
    return tl.load(b_ptr + e64 * stride_be + rows)


@triton.jit
def gemv_epilogue(
    h, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, EXACT_RNE: tl.constexpr,
):  # fmt: skip
    """Bias (``row_bias``'s), optional GLU over the interleaved (gate, up) pairs, bf16 store of
    row block ``n_block``."""
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    h = h + bias.to(tl.float32)
    out_row = out_ptr + t.to(tl.int64) * stride_ot + slot.to(tl.int64) * stride_ok
    if GLU == "none":
        tl.store(out_row + rows, fp32_to_bf16(h, EXACT_RNE))
    else:
        gate, up = tl.split(tl.reshape(h, [BLOCK_N // 2, 2]))
        cols = n_block * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        tl.store(out_row + cols, fp32_to_bf16(gated_activation(gate, up, GLU), EXACT_RNE))


@triton.jit
def k_range(R, K_SPLIT, SPLIT_K: tl.constexpr):
    """(column block, K slice [k_lo, k_hi)) of this program. With SPLIT_K > 1 the programs of a
    column block sit next to each other along grid axis 0, one K_SPLIT slice each (a multiple of
    BLOCK_K; the last may be short or empty)."""
    if SPLIT_K == 1:
        return tl.program_id(0), 0, R
    else:
        split = tl.program_id(0) % SPLIT_K
        k_lo = split * K_SPLIT
        return tl.program_id(0) // SPLIT_K, k_lo, tl.minimum(k_lo + K_SPLIT, R)


@triton.jit
def store_partial(h, n_block, t, slot, part_ptr, stride_pt, stride_pk, N, BLOCK_N: tl.constexpr,
                   SPLIT_K: tl.constexpr):  # fmt: skip
    """fp32 row sums of one K slice to ``part`` [T, K, SPLIT_K, N]."""
    split = tl.program_id(0) % SPLIT_K
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    base = part_ptr + t.to(tl.int64) * stride_pt + slot.to(tl.int64) * stride_pk
    tl.store(base + split * N + rows, h)


@triton.jit
def _sparse_gemv_split_k_sum(
    ids_ptr, ws_ptr, b_ptr, out_ptr, part_ptr,
    expert_offset, E, N, stride_it, stride_ik, stride_be, stride_ot, stride_ok, stride_pt,
    stride_pk,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, EXACT_RNE: tl.constexpr, SPLIT_K: tl.constexpr,
    FP8: tl.constexpr,
):  # fmt: skip
    """Second pass of a split-K launch, grid (N / BLOCK_N, K, T): the K slices' fp32 partials
    summed in slice order, then the scale (FP8: the expert's; MXFP4: the 2^14 of the fp16
    placement) and the epilogue. Non-local slots leave at once, as in the first pass."""
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    e64 = e.to(tl.int64)
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    base = part_ptr + t.to(tl.int64) * stride_pt + slot.to(tl.int64) * stride_pk + rows
    h = tl.load(base)
    for split in tl.static_range(1, SPLIT_K):
        h += tl.load(base + split * N)
    if FP8:
        h = h * tl.load(ws_ptr + e64)
    else:
        h = h * 16384.0
    bias = row_bias(b_ptr, e64, tl.program_id(0), stride_be, BLOCK_N)
    gemv_epilogue(h, bias, tl.program_id(0), t, slot, out_ptr, stride_ot, stride_ok, GLU, BLOCK_N,
                  EXACT_RNE)  # fmt: skip


def split_k_sum(
    topk_ids_TK: torch.Tensor, w_scale: torch.Tensor, bias_EN: torch.Tensor, out: torch.Tensor,
    partials: torch.Tensor, *, expert_offset: int, glu: str, block_n: int, fp8: bool,
) -> None:  # fmt: skip
    """The second pass of a split-K launch: ``out`` from ``partials`` (checked by the caller)."""
    T, K = topk_ids_TK.shape
    E, N = bias_EN.shape
    _sparse_gemv_split_k_sum[(N // block_n, K, T)](
        topk_ids_TK, w_scale, bias_EN, out, partials, expert_offset, E, N,
        *topk_ids_TK.stride(), bias_EN.stride(0), out.stride(0), out.stride(1),
        partials.stride(0), partials.stride(1),
        GLU=glu, BLOCK_N=block_n, EXACT_RNE=not out.is_cuda, SPLIT_K=partials.shape[2], FP8=fp8,
        num_warps=4,
    )  # fmt: skip
