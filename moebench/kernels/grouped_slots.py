"""Tokens grouped by expert on the device, for the grouped decode kernels (`grouped_gemv`).

Legend: T tokens, K top-k slots, E local experts, M slots of one expert in one pass (BLOCK_M),
N output columns, S slots scanned at once (SCAN).

A slot is one (token, top-k position) pair, numbered ``s = t * K + k``; ``topk_ids_TK`` is int32
[T, K] of global expert ids and the local experts are [expert_offset, expert_offset + E). A
grouped program serves the j-th *touched* local expert (j = ``program_id(1)``; experts in
increasing id, touched when at least one slot routes to it) and every slot routed to it. It finds
them from the routing alone, with no buffer written by another kernel and nothing read back to the
host, so the launch is graph-capturable and any routing replays correctly:

- `touched_expert`: the slots' per-expert counts (a [BLOCK_E, SCAN] comparison summed over the
  slots, S at a time), a running count of the touched experts, and the j-th of them. A program
  whose j is past the last touched expert gets count 0 and returns having read only the routing;
  an untouched expert has no program at all (the grid's second axis is min(E, T * K), a bound
  from the shapes).
- `touched_pass`: the same counts, for a grid whose second axis enumerates *passes*: program j
  serves the j-th pass of BLOCK_M slots over the touched experts (experts in increasing id, an
  expert's passes in order), so that a program runs one pass and never loops over an expert's
  slots (the loop's registers held the tiles to 4 programs an SM; one pass fits 6). The axis
  is then min(E, T * K) + T * K // BLOCK_M long, a bound on the passes of any routing; programs
  past the last pass return having read only the routing.
- `program_work`: a program's (expert, count, first slot) by any of these rules, the kernels' one
  call.
- `slot_expert`: for a grid whose second axis enumerates *slots* (the one-slot GEMV's
  ``Launch.slot_grid``): program j serves slot j's local expert where j is that expert's first
  slot, and returns having read only the routing otherwise (a remote slot, or an expert's later
  slot). Slot j's id and the routing come back in one round trip, and the first pass's slot is j
  itself (`pass_slots`), so the weights' loads wait for one read of the routing, not for the
  experts' counts, their running sum and a second read.
- `expert_slots`: the expert's slots number m0 .. m0 + BLOCK_M - 1, in increasing s: each slot's
  rank among the expert's slots is a running prefix sum, and a [BLOCK_M, SCAN] match picks the
  slot of each rank. A slot routed twice to one expert (a token's duplicate ids) is two slots,
  as in `reference.moe_ffn_decode`.
- `slot_epilogue`: bias, the GLU of the interleaved (gate, up) rows, the bf16 store (rounded to
  nearest even, on the bits under the interpreter) of one pass's [BLOCK_M, BLOCK_N] outputs into
  the slots' rows; rows past the expert's count are masked, so nothing but the routed slots is
  ever written. The bias comes loaded (`gemv_parts.row_bias`), so that a kernel can ask for it
  before its K loop (``EARLY_BIAS``) rather than after it.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moebench.kernels.jit import fp32_to_bf16, gated_activation


def scan_width(slots: int, block_e: int, block_m: int) -> int:
    """Slots compared at once (a power of two): all of them up to a [256, 16]-element match, fewer
    when the experts or the pass are wider, so that the match tile stays about 4,096 elements."""
    return max(
        1, min(triton.next_power_of_2(max(slots, 1)), max(16, 4096 // max(block_e, block_m)))
    )


@triton.jit
def _slot_ids(ids_ptr, stride_it, stride_ik, s, ok, K, expert_offset):
    """Local expert ids of slots ``s`` (anything where not ``ok``)."""
    return tl.load(ids_ptr + (s // K) * stride_it + (s % K) * stride_ik, mask=ok, other=0) - (
        expert_offset
    )


@triton.jit
def touched_expert(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
    BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
):  # fmt: skip
    """(e, count): the j-th touched local expert and its number of slots; count is 0 when fewer
    than j + 1 local experts are touched (e is then meaningless)."""
    ex = tl.arange(0, BLOCK_E)
    hits = _expert_hits(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E, SCAN)
    touched = hits > 0
    rank = tl.cumsum(touched.to(tl.int32), 0) - 1
    mine = touched & (rank == j)
    return tl.sum(tl.where(mine, ex, 0), 0), tl.sum(tl.where(mine, hits, 0), 0)


@triton.jit
def slot_expert(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j, SCAN: tl.constexpr,
):  # fmt: skip
    """(e, count): the local expert of slot j and its number of slots, where slot j is that
    expert's first (lowest-numbered) slot; count is 0 where slot j routes to another rank or an
    earlier slot routes to the same expert (e is then meaningless). Slot j's own id and the scan
    are independent loads, so that e, the count and slot j's token are known one round trip after
    the program starts (`touched_expert` needs its scan's counts summed over the experts first)."""
    # The first SCAN slots' ids and slot j's own are loaded together, before either is used (one
    # round trip); the loop below runs only where the routing holds more than SCAN slots.
    s = tl.arange(0, SCAN)
    ok = s < TK
    ids = _slot_ids(ids_ptr, stride_it, stride_ik, s, ok, K, expert_offset)
    e = _slot_ids(ids_ptr, stride_it, stride_ik, j, j < TK, K, expert_offset)
    same = ok & (ids == e)
    count = tl.sum(same.to(tl.int32), 0)
    earlier = tl.sum((same & (s < j)).to(tl.int32), 0)
    for s0 in range(SCAN, TK, SCAN):
        s = s0 + tl.arange(0, SCAN)
        ok = s < TK
        same = ok & (_slot_ids(ids_ptr, stride_it, stride_ik, s, ok, K, expert_offset) == e)
        count += tl.sum(same.to(tl.int32), 0)
        earlier += tl.sum((same & (s < j)).to(tl.int32), 0)
    first = (e >= 0) & (e < E) & (earlier == 0)
    return e, tl.where(first, count, 0)


@triton.jit
def pass_slots(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
    BLOCK_M: tl.constexpr, SCAN: tl.constexpr, SLOT_GRID: tl.constexpr,
):  # fmt: skip
    """`expert_slots` of the pass from slot number m0 of expert ``e``; on the slot grid
    (``SLOT_GRID``, `slot_expert`, one slot a pass) the first pass's slot is the program's own
    (j = ``program_id(1)``), known with no second read of the routing, and a later pass (an
    expert that holds a token's duplicate ids) scans for its slot."""
    if SLOT_GRID:
        j = tl.program_id(1)
        t64 = tl.full([BLOCK_M], j // K, tl.int64)
        k64 = tl.full([BLOCK_M], j % K, tl.int64)
        if m0 > 0:
            t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e,
                                    count, m0, BLOCK_M, SCAN)  # fmt: skip
    else:
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count,
                                m0, BLOCK_M, SCAN)  # fmt: skip
    return t64, k64


@triton.jit
def _expert_hits(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
    BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
):  # fmt: skip
    """int32 [BLOCK_E]: the slots routed to each local expert (0 past E)."""
    ex = tl.arange(0, BLOCK_E)
    hits = tl.zeros([BLOCK_E], dtype=tl.int32)
    for s0 in range(0, TK, SCAN):
        s = s0 + tl.arange(0, SCAN)
        ok = s < TK
        loc = _slot_ids(ids_ptr, stride_it, stride_ik, s, ok, K, expert_offset)
        live = ok & (loc >= 0) & (loc < E)
        hits += tl.sum((live[None, :] & (loc[None, :] == ex[:, None])).to(tl.int32), axis=1)
    return hits


@triton.jit
def touched_pass(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
    BLOCK_E: tl.constexpr, SCAN: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    """(e, count, m0): the j-th pass of BLOCK_M slots over the touched local experts, experts in
    increasing id and an expert's passes in order: its expert, that expert's number of slots and
    the pass's first slot number among them. count is 0 when there are fewer than j + 1 passes
    (e and m0 are then meaningless)."""
    hits = _expert_hits(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E, SCAN)
    return pass_of(hits, j, BLOCK_M)


@triton.jit
def pass_of(hits, j, BLOCK_M: tl.constexpr):
    """(e, count, m0) of the j-th pass given the experts' slot counts ``hits`` (`touched_pass`)."""
    ex = tl.arange(0, hits.shape[0])
    passes = (hits + BLOCK_M - 1) // BLOCK_M
    end = tl.cumsum(passes, 0)  # passes of the experts up to and including each
    mine = (end - passes <= j) & (j < end)  # at most one expert; none past the last pass
    first = tl.sum(tl.where(mine, end - passes, 0), 0)
    count = tl.sum(tl.where(mine, hits, 0), 0)
    return tl.sum(tl.where(mine, ex, 0), 0), count, (j - first) * BLOCK_M


@triton.jit
def touched_passes(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
    BLOCK_E: tl.constexpr, SCAN: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    """(hits, passes): the experts' slot counts int32 [BLOCK_E] (for `pass_of`) and the number of
    passes of BLOCK_M slots over the touched experts."""
    hits = _expert_hits(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E, SCAN)
    return hits, tl.sum((hits + BLOCK_M - 1) // BLOCK_M, 0)


@triton.jit
def program_work(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
    BLOCK_E: tl.constexpr, SCAN: tl.constexpr, BLOCK_M: tl.constexpr, PASS_GRID: tl.constexpr,
    SLOT_GRID: tl.constexpr = False,
):  # fmt: skip
    """(e, count, m0) of this program (j = ``program_id(1)``): with ``PASS_GRID`` its pass
    (`touched_pass`), with ``SLOT_GRID`` slot j's expert where j is its first slot
    (`slot_expert`, m0 = 0), else its touched expert from the expert's first slot
    (`touched_expert`, m0 = 0); with either of the last two the program then loops over the
    expert's passes (`pass_slots`). count 0: nothing to do."""
    j = tl.program_id(1)
    if PASS_GRID:
        e, count, m0 = touched_pass(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                    BLOCK_E, SCAN, BLOCK_M)  # fmt: skip
    elif SLOT_GRID:
        e, count = slot_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j, SCAN)
        m0 = 0
    else:
        e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                  BLOCK_E, SCAN)  # fmt: skip
        m0 = 0
    return e, count, m0


@triton.jit
def expert_slots(
    ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
    BLOCK_M: tl.constexpr, SCAN: tl.constexpr,
):  # fmt: skip
    """(t, k) int64 [BLOCK_M]: token and top-k position of local expert ``e``'s slots m0,
    m0 + 1, ... in increasing slot number. Past the expert's last slot (``count`` of them) the
    last one is repeated, so that every row a pass addresses is one of the expert's own: the GEMV
    loads them unmasked (the repeats hit L1), the tensor-core tile masks them (its copies bypass
    L1, and a masked copy moves nothing); every caller masks those rows' stores."""
    want = tl.minimum(m0 + tl.arange(0, BLOCK_M), count - 1)
    slot = tl.zeros([BLOCK_M], dtype=tl.int32)
    # Slots of e before the current scan block; a tensor from the start so that its type is the
    # same on every iteration of the compiled loop.
    before = tl.sum(tl.zeros([SCAN], dtype=tl.int32), 0)
    for s0 in range(0, TK, SCAN):
        s = s0 + tl.arange(0, SCAN)
        ok = s < TK
        mine = ok & (_slot_ids(ids_ptr, stride_it, stride_ik, s, ok, K, expert_offset) == e)
        rank = before + tl.cumsum(mine.to(tl.int32), 0) - 1
        match = mine[None, :] & (rank[None, :] == want[:, None])
        slot += tl.sum(tl.where(match, s[None, :], 0), axis=1)
        before += tl.sum(mine.to(tl.int32), 0)
    slot64 = slot.to(tl.int64)
    return slot64 // K, slot64 % K


@triton.jit
def slot_epilogue(
    h, bias, n_block, t64, k64, m_ok, out_ptr, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXACT_RNE: tl.constexpr,
    N=0, RAGGED: tl.constexpr = False,
):  # fmt: skip
    """Bias (``gemv_parts.row_bias``'s, bf16 [BLOCK_N]), optional GLU over the interleaved (gate,
    up) columns, bf16 store of the fp32 sums ``h`` [BLOCK_M, BLOCK_N] (already scaled) of column
    block ``n_block`` into the rows of slots (t64, k64) where ``m_ok``; with ``RAGGED`` only the
    block's columns below ``N``."""
    cols = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    h = h + bias.to(tl.float32)[None, :]
    out_rows = out_ptr + t64 * stride_ot + k64 * stride_ok
    if GLU == "none":
        ok = m_ok[:, None] & (cols < N)[None, :] if RAGGED else m_ok[:, None]
        tl.store(out_rows[:, None] + cols[None, :], fp32_to_bf16(h, EXACT_RNE), mask=ok)
    else:
        gate, up = tl.split(tl.reshape(h, [BLOCK_M, BLOCK_N // 2, 2]))
        half = n_block * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        a = fp32_to_bf16(gated_activation(gate, up, GLU), EXACT_RNE)
        ok = m_ok[:, None] & (half < N // 2)[None, :] if RAGGED else m_ok[:, None]
        tl.store(out_rows[:, None] + half[None, :], a, mask=ok)
