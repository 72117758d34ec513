"""Scratch (sixth session): the candidate package module `moebench/kernels/prefetch.py` as the
`pkg` kind of l2pf.py ran it on the H200, then removed (the prefetch made the step slower:
PERF.md `l2_prefetch`). Ask L2 for the weights of the local experts a step's slots are routed to:
one program a slot reads its expert id and, when local, issues cp.async.bulk.prefetch.L2 for its
bytes, 64 KiB a thread."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.launch import checker, describe

CHUNK_BYTES = 64 * 1024
CHUNKS_A_PROGRAM = 128  # one a thread at 4 warps

_PREFETCH_ASM = tl.constexpr("{ cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }")


@triton.jit
def _prefetch_routed_l2(
    ids_ptr, w_ptr, sink_ptr, stride_it, stride_ik, stride_we, expert_bytes, chunk_bytes, K, E,
    expert_offset, CHUNKS: tl.constexpr,
):  # fmt: skip
    s = tl.program_id(1)
    e = tl.load(ids_ptr + (s // K) * stride_it + (s % K) * stride_ik) - expert_offset
    if (e >= 0) & (e < E):
        c = tl.program_id(0) * CHUNKS + tl.arange(0, CHUNKS)
        offset = tl.minimum(c.to(tl.int64) * chunk_bytes, expert_bytes - chunk_bytes)
        at = w_ptr + e.to(tl.int64) * stride_we + offset
        size = tl.full([CHUNKS], chunk_bytes, dtype=tl.int32)
        issued = tl.inline_asm_elementwise(
            _PREFETCH_ASM, "=r,l,r", [at, size], dtype=tl.int32, is_pure=False, pack=1
        )
        tl.store(sink_ptr + tl.arange(0, CHUNKS), issued)


_check = checker("prefetch_routed")


def prefetch_routed(topk_ids_TK, w, sink, *, expert_offset):
    _check(
        topk_ids_TK.dim() == 2 and topk_ids_TK.dtype == torch.int32,
        f"topk_ids_TK must be int32 [T, K], got {describe(topk_ids_TK)}",
    )
    _check(w.dim() >= 2 and w[0].is_contiguous(), f"w's experts must be contiguous: {describe(w)}")
    if not w.is_cuda:
        return
    per_expert = w[0].numel() * w.element_size()
    chunk = min(CHUNK_BYTES, per_expert // 16 * 16)
    chunks = triton.cdiv(per_expert, chunk)
    grid = (triton.cdiv(chunks, CHUNKS_A_PROGRAM), topk_ids_TK.numel())
    _prefetch_routed_l2[grid](
        topk_ids_TK, w.view(torch.uint8), sink, topk_ids_TK.stride(0), topk_ids_TK.stride(1),
        w.stride(0) * w.element_size(), per_expert, chunk, topk_ids_TK.shape[1], w.shape[0],
        expert_offset, CHUNKS=CHUNKS_A_PROGRAM, num_warps=4,
    )  # fmt: skip
