"""The decode combine folded into fc2's GEMV (`sparse_gemv(combine=...)`): the last of a row
block's local slots to finish writes the token's combined rows, so the step needs no combine
launch (issue 28: at one token every launch boundary of the step costs about 2 us under the
event timer, docs/PERF.md `step_floor_h100`).

Legend as in `kernels.combine_topk`: T tokens, K top-k slots, E local experts, D hidden (fc2's N).

    counters_TB  int32 [T * (D / BLOCK_N)], zero before the launch and zero after it: one a
                 (token, row block), the fc2 programs of that token's local slots that have
                 stored their rows of ``o``

Each fc2 program of a local slot stores its rows of ``o`` as without the fold, then every thread
fences (its stores visible at GPU scope), the program meets at a barrier, and one atomic add
(acquire-release, GPU scope) counts it in. The program that sees the count reach the token's local
slots has every other slot's stores before it: it computes y[t, rows] as `combine_topk` does (the
local slots in increasing k, w[t, k] * o[t, k, rows] in fp32, each product and each sum rounded
apart, then rounded once at the store: `combine_topk.slots_sum` and `store_sum`, the same code),
reading ``o`` past the L1, and puts the counter back to zero for the next step (a CUDA graph replays
the same buffer). The GEMV kernels compile with fused multiply-add allowed (their sums' bits depend
on it), so on the GPU the product and the sum are explicit ``mul.rn.f32`` and ``add.rn.f32``
(`combine_topk.mul_add_rn`), which ptxas does not fuse. A token with no local slot gets no fc2
program past its expert check: there slot 0's program of each row block writes the block's rows of y
as zeros, as `combine_topk` writes them. So y holds `combine_topk`'s bits.

Built and checked under the interpreter, where programs run one after another; the fences and
the counters are untested on a GPU until a device call runs tests/kernels/test_gemv_combine.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.combine_topk import slots_sum, store_sum


@triton.jit
def _local_slots(ids_ptr, t64, stride_it, stride_ik, expert_offset, E, K: tl.constexpr):
    """How many of token ``t64``'s K slots are routed to a local expert."""
    n = 0
    for k in tl.static_range(K):
        e = tl.load(ids_ptr + t64 * stride_it + k * stride_ik) - expert_offset
        n += ((e >= 0) & (e < E)).to(tl.int32)
    return n


@triton.jit
def combine_last(
    o_ptr, ids_ptr, cw_ptr, y_ptr, cnt_ptr, t, n_block, N, expert_offset, E,
    stride_ot, stride_ok, stride_it, stride_ik, stride_cwt, stride_cwk, stride_yt,
    K: tl.constexpr, BLOCK_N: tl.constexpr, Y_BF16: tl.constexpr, EXACT_RNE: tl.constexpr,
    PTX: tl.constexpr,
):  # fmt: skip
    """Called by an fc2 program of a local slot after it stored its rows of ``o``: counts it in
    and, where it is the last of its token's local slots for row block ``n_block``, writes the
    block's rows of y and zeroes the counter (the module docstring)."""
    t64 = t.to(tl.int64)
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    if PTX:
        # Every thread's stores of o visible at GPU scope before the program is counted in.
        tl.inline_asm_elementwise("fence.acq_rel.gpu; mov.b32 $0, $1;", "=r,r", [rows],
                                  dtype=tl.int32, is_pure=False, pack=1)  # fmt: skip
    tl.debug_barrier()
    counter = cnt_ptr + t64 * tl.num_programs(0) + n_block
    seen = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    if seen == _local_slots(ids_ptr, t64, stride_it, stride_ik, expert_offset, E, K) - 1:
        d_ok = rows < N
        acc = slots_sum(o_ptr, ids_ptr, cw_ptr, t64, rows, d_ok, expert_offset, E, stride_ot,
                        stride_ok, 0, stride_it, stride_ik, stride_cwt, stride_cwk, K, BLOCK_N,
                        True, PTX)  # fmt: skip
        store_sum(y_ptr, t64, rows, d_ok, stride_yt, acc, Y_BF16, EXACT_RNE)
        tl.store(counter, 0)


@triton.jit
def combine_none(
    ids_ptr, y_ptr, t, slot, n_block, N, expert_offset, E, stride_it, stride_ik, stride_yt,
    K: tl.constexpr, BLOCK_N: tl.constexpr, Y_BF16: tl.constexpr, EXACT_RNE: tl.constexpr,
):  # fmt: skip
    """Called by an fc2 program whose slot is not local, as it leaves: slot 0's program of a
    token with no local slot writes row block ``n_block`` of y as zeros."""
    t64 = t.to(tl.int64)
    if slot == 0:
        if _local_slots(ids_ptr, t64, stride_it, stride_ik, expert_offset, E, K) == 0:
            rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
            store_sum(y_ptr, t64, rows, rows < N, stride_yt, tl.zeros([BLOCK_N], dtype=tl.float32),
                      Y_BF16, EXACT_RNE)  # fmt: skip


def combine_counters(tokens: int, hidden: int, device: torch.device) -> torch.Tensor:
    """The zeroed counters a folded fc2 needs for ``tokens`` tokens of ``hidden`` columns (one a
    (token, row) at most: enough for any row block)."""
    return torch.zeros(tokens * hidden, dtype=torch.int32, device=device)


def fold_args(check, combine, topk_ids_TK, out, glu, split_k, tensor_cores, block_n) -> dict:
    """The GEMV kernels' arguments for `sparse_gemv`'s ``combine`` (its docstring), checked with
    the launcher's ``check`` (a one-line error naming what is wrong)."""
    check(isinstance(combine, tuple) and len(combine) == 3,
          "combine must be (topk_weights_TK, y_TD, counters)")  # fmt: skip
    cw, y, counters = combine
    T, K = topk_ids_TK.shape
    N = out.shape[-1]
    check(glu == "none" and split_k == 1 and not tensor_cores,
          "combine is fc2's (no glu), on the CUDA-core loop with no split_k")  # fmt: skip
    check(tuple(cw.shape) == (T, K) and cw.dtype in (torch.float32, torch.bfloat16),
          f"combine: topk_weights_TK must be float32 or bf16 [{T}, {K}], got "
          f"{cw.dtype} {list(cw.shape)}")  # fmt: skip
    check(y.dtype in (torch.bfloat16, torch.float32) and tuple(y.shape) == (T, N)
          and y.stride(1) == 1,
          f"combine: y_TD must be bf16 or float32 [{T}, {N}] with unit column stride, got "
          f"{y.dtype} {list(y.shape)}")  # fmt: skip
    need = T * N // block_n
    check(counters.dtype == torch.int32 and counters.dim() == 1 and counters.numel() >= need,
          f"combine: counters must be int32 with at least {need} values, got "
          f"{counters.dtype} {list(counters.shape)}")  # fmt: skip
    check(len({t.device for t in (cw, y, counters, out)}) == 1,
          "combine: its tensors must be on out's device")  # fmt: skip
    return dict(cw_ptr=cw, y_ptr=y, cnt_ptr=counters, stride_cwt=cw.stride(0),
                stride_cwk=cw.stride(1), stride_yt=y.stride(0), COMBINE_K=K,
                Y_BF16=y.dtype == torch.bfloat16)  # fmt: skip
