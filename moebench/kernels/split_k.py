"""A stage's K split over SPLIT_K programs a row block (`Launch.split_k`; the MXFP4 one-pass
tile, a stage with no GLU: fc2), the parts' fp32 sums added on the device in a fixed order.

Why: an MXFP4 tile's time hardly depends on how many tiles share its SM (H100, 2026-12-07: fc2
36.0 us with 495 tiles against 38.0 with 720, docs/perf/HISTORY.md), so a kernel moves bytes in
proportion to the tiles in flight; fc2 at 32-64 tokens has 720 (16 experts, 45 row blocks), at
most 6 an SM. Split in K, each tile streams half the bytes and twice as many are in flight.

The protocol: each part-program stores its fp32 sums [BLOCK_N, BLOCK_M] in its own block of
``partials`` (one block a part of each (pass, row block) pair), then, behind a CTA barrier, counts
itself on its pair's counter with acquire-release semantics (`store_part`). The part that counts
last (the counter's old value's low bits SPLIT_K - 1) reads every part's sums from the L2
and adds them in part order 0, 1, ... (`sum_parts`): the same bits whichever part ends last. It
alone runs the epilogue. Counters only grow (each launch adds SPLIT_K to every pair whose pass
has slots and nothing to the others), so a launch, an interrupted launch excepted, leaves them
where the next one starts right, with no reset between launches or graph replays; SPLIT_K a power
of two keeps the residue across the int32 wrap. Under the interpreter programs run one at a time
and the last part of a pair is the last to run.

Sums: a row's products are the unsplit tile's, summed per part and the parts then added, so the
last fp32 bits differ from the unsplit tile's where the sums are not exact.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def store_part(acc, part_at, counter_at, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    """Store this part's sums ``acc`` [BLOCK_N, BLOCK_M] at ``part_at`` and count it on its
    pair's counter ``counter_at``: the counter's value before (module docstring)."""
    at = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
    tl.store(part_at + at, acc)
    tl.debug_barrier()  # every thread's stores before the count
    return tl.atomic_add(counter_at, 1, sem="acq_rel")


@triton.jit
def sum_parts(pair_at, SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    """The pair's SPLIT_K parts' sums added in part order, read from the L2 (other programs
    wrote them)."""
    at = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
    total = tl.load(pair_at + at, cache_modifier=".cg")
    for p in tl.static_range(1, SPLIT_K):
        total += tl.load(pair_at + p * BLOCK_N * BLOCK_M + at, cache_modifier=".cg")
    return total


def split_scratch(pairs: int, split_k: int, block_n: int, block_m: int, device):
    """(partials, counters) for ``pairs`` (pass, row block) pairs: fp32 [pairs * split_k,
    block_n * block_m] and int32 [pairs], zero. Made when the stages are built, never in a step."""
    partials = torch.zeros(pairs * split_k, block_n * block_m, dtype=torch.float32, device=device)
    return partials, torch.zeros(pairs, dtype=torch.int32, device=device)


def check_split(split, pairs: int, split_k: int, block_n: int, block_m: int, device, check):
    """The launcher's check of ``split`` (`split_scratch`'s pair) for a launch of ``pairs``
    pairs."""
    ok = scratch_fits(split, pairs * split_k * block_n * block_m, pairs, device)
    got = None if split is None else [(t.dtype, tuple(t.shape), str(t.device)) for t in split]
    check(ok, f"split_k {split_k} needs (partials, counters) for {pairs} pairs on {device} "
          f"(split_k.split_scratch), got {got}")  # fmt: skip


def scratch_fits(scratch, partials: int, counters: int, device) -> bool:
    """Whether ``scratch`` is (partials, counters): contiguous fp32 of at least ``partials``
    elements and int32 of at least ``counters``, both on ``device`` (`check_split`, and
    `stream_k.check_stream` for its own)."""
    if scratch is None or len(scratch) != 2:
        return False
    sums, counts = scratch
    return (
        sums.dtype == torch.float32
        and counts.dtype == torch.int32
        and sums.is_contiguous()
        and counts.is_contiguous()
        and sums.device == device
        and counts.device == device
        and sums.numel() >= partials
        and counts.numel() >= counters
    )
