"""The MXFP4 one-pass tile on a persistent grid that splits the K steps of every tile evenly over
its programs (`Launch.stream_k`; "Stream-K", Osama et al., 2023), the parts of a tile that two or
more programs share added on the device in a fixed order.

Why: a one-pass MXFP4 tile's time hardly depends on how many tiles share its SM (H100,
2026-12-07: fc2 36.0 us with 495 tiles, at most 4 an SM, against 38.0 with 720, 6 an SM;
docs/perf/HISTORY.md), so a launch takes about as many tile times as the waves its grid needs.
At 32-64 tokens gpt-oss-20b EP2 fc1 has 1,440 tiles on 792 places (6 an SM on 132 SMs): two
waves, the second 82% full; fc2 has 720, one wave 91% full. Spread evenly, the same work takes
1.82 and 0.91 tile times, and at 8 an SM (64 registers) 1.36 and 0.68, where the grid of one
tile a program still needs two waves and one. The whole steps' bytes do not change.

Measured, the grid does not gain (H100, 2026-12-07, docs/perf/2026-12-07-stream-k/): it is
31-41% slower than the one-pass grid at 16-64 tokens at 6 programs an SM and 45-58% at 8 (fc1
alone +23%, fc2 +35% at 64 tokens), far more than its weight loop's 251 instructions a step
against 241 explain. Nsight Compute (docs/perf/2026-12-07-h100-ceilings/call4/, 64 tokens): both
grids move DRAM at the same rate, but this one moves 21% (fc1) and 27% (fc2) more bytes, its
partial sums' writes 5-6 times the one-pass grid's, and takes about as much longer; the one-pass
grid's busiest SM was only 5-6% past the mean. Kept as a launch option, off
(`grouped_launch.PASS_GRID_MXFP4_STREAM_K`).

The work: U = J * NB * S units, J the routing's passes (`grouped_slots.touched_passes`, read by
every program from the routing alone, as the one-pass grid does), NB row blocks, S whole K steps a
tile; unit u is step u % S of tile u // S, tile t = j * NB + n_block. Program p of P (the grid, or U
where that is fewer, the other programs idle) takes units p * U // P up to (p + 1) * U // P: at
least one, a run of whole tiles between at most two partial ones. A tile's
last unit also runs the step past R's whole steps (R = 2,880 is 22.5 steps of 128 values).

A tile whole in one program is stored through the slot epilogue as the one-pass tile stores it
(the same bits). A tile that q_first .. q_last share: each part stores its fp32 sums in its
program's block of ``partials`` ([P, 2] blocks: a program's first segment in its block 0, its
last in block 1; the middle ones are whole tiles), then, behind a CTA barrier, counts itself on
the tile's counter with acquire-release semantics. The part that counts last reads the parts from
the L2 and adds them in program order (the same bits whichever part ends last), runs the epilogue
and sets the counter back to zero: no other program touches it again in this launch, and the next
launch reads it only after its dependent-launch wait (every counter and partial access is after
it). A launch that stops midway (a device error) can leave a counter off zero: the next launch's
sums on that tile are then wrong and the reference gate fails, it never hangs (no program waits
for another). Under the interpreter programs run one at a time in order, so a shared tile's last
program is the last to count.

Sums: a shared tile's products are the whole tile's, summed per part and the parts then added, so
the last fp32 bits differ from the one-pass tile's where the sums are not exact (the decode
gates compare arms within tolerance; a launch's bits are the same from run to run for one
routing, which the post-timing check needs).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.gemv_parts import row_bias
from moebench.kernels.grouped_dot import mx_tile_pointers, mxfp4_sums
from moebench.kernels.grouped_slots import expert_slots, pass_of, slot_epilogue, touched_passes
from moebench.kernels.jit import pdl_launch_dependents, pdl_wait
from moebench.kernels.split_k import scratch_fits, store_part


def stream_programs(device: torch.device, per_sm: int) -> int:
    """P, the persistent grid: ``per_sm`` programs an SM on the GPU (as many as the launch's
    registers let an SM hold, or the waves come back), ``per_sm`` in the interpreter (tests pick
    the grid to split tiles where they like)."""
    if device.type != "cuda":
        return per_sm
    return torch.cuda.get_device_properties(device).multi_processor_count * per_sm


def stream_scratch(programs: int, tiles: int, block_n: int, block_m: int, device):
    """(partials, counters) for a launch of ``programs`` programs over at most ``tiles`` tiles:
    fp32 [programs * 2, block_n * block_m] and int32 [tiles], zero. Made when the stages are
    built, never in a step."""
    partials = torch.zeros(programs * 2, block_n * block_m, dtype=torch.float32, device=device)
    return partials, torch.zeros(tiles, dtype=torch.int32, device=device)


def check_stream(scratch, L, fmt: str, R: int, tiles: int, device, check):
    """The launcher's check of a ``stream_k`` launch ``L`` (a `grouped_launch.Launch`) of format
    ``fmt`` over R values a row and at most ``tiles`` tiles, and of its ``scratch``
    (`stream_scratch`'s pair) for `stream_programs`' grid."""
    check(
        L.stream_k > 0 and (L.path, fmt) == ("dot", "mxfp4") and L.pass_grid
        and L.mx_packed_scales and L.block_k % 128 == 0 and L.split_k == 1
        and not L.expert_ready and R // L.block_k >= 1,
        f"stream_k must be 0 or, for the MXFP4 one-pass tile with packed scales, no split_k "
        f"and no expert_ready, R ({R}) at least one step of block_k, a number of programs an "
        f"SM, got {L.stream_k}",
    )  # fmt: skip
    programs = stream_programs(device, L.stream_k)
    # The kernel's unit arithmetic is int32: at most U * P = tiles * steps * programs.
    check(tiles * (R // L.block_k) * programs < 2**31, f"stream_k: {tiles} tiles of "
          f"{R // L.block_k} steps over {programs} programs pass the kernel's int32 "
          "arithmetic")  # fmt: skip
    ok = scratch_fits(scratch, programs * 2 * L.block_n * L.block_m, tiles, device)
    got = None if scratch is None else [(t.dtype, tuple(t.shape), str(t.device)) for t in scratch]
    check(ok, f"stream_k needs (partials, counters) for {programs} programs and {tiles} tiles on "
          f"{device} (stream_k.stream_scratch), got {got}")  # fmt: skip


@triton.jit
def warp_uniform(value, PTX: tl.constexpr):
    """``value`` (an int32 scalar, the same in every thread) through a warp reduction, whose
    result ptxas knows to be the same across the warp: a K loop bounded by it keeps its counter
    and its ring arithmetic on the uniform datapath, as the one-pass tile's loop bounded by R
    does, where a bound read from the routing put both in vector registers (sm_90a: 16
    conversions a step to uniform registers, 260 instructions a step against 241)."""
    if PTX:
        return tl.inline_asm_elementwise("redux.sync.max.s32 $0, $1, 0xffffffff;", "=r,r",
                                         [value], dtype=tl.int32, is_pure=True,
                                         pack=1)  # fmt: skip
    return value


@triton.jit
def owner(u, P, U):
    """The program whose units hold unit ``u`` of ``U`` over ``P`` programs: the largest p with
    p * U // P <= u (module docstring)."""
    return ((u + 1) * P - 1) // U


@triton.jit
def _sum_shared(part_ptr, first, q_first, q_last, P, U, BLOCK_N: tl.constexpr,
                BLOCK_M: tl.constexpr):  # fmt: skip
    """The fp32 sums of the tile whose first unit is ``first``, shared by programs q_first ..
    q_last: their parts read from the L2 (other programs wrote them) and added in program
    order."""
    at = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
    total = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    for q in range(q_first, q_last + 1):
        block = 2 * q + (q * U // P < first).to(tl.int32)  # its last segment where it began before
        total += tl.load(part_ptr + block * (BLOCK_N * BLOCK_M) + at, cache_modifier=".cg")
    return total


@triton.jit
def _grouped_dot_mxfp4_stream(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R, NB,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok, part_ptr, count_ptr,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr,
    FOLD_SCALES: tl.constexpr, EARLY_BIAS: tl.constexpr, ROTATED: tl.constexpr,
    PACKED: tl.constexpr, PACKED_SCALES: tl.constexpr, DOT_ORDER: tl.constexpr,
    TAIL_K: tl.constexpr,
):  # fmt: skip
    """The MXFP4 one-pass tile (scales as words, `grouped_dot._grouped_dot_mxfp4`'s other
    options alike) on P = ``num_programs(0)`` persistent programs, NB row blocks a pass, each
    program a contiguous share of the units (module docstring)."""
    pdl_launch_dependents(GDC)
    hits, J = touched_passes(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E,
                             SCAN, BLOCK_M)  # fmt: skip
    S = R // BLOCK_K
    # int32: the launcher keeps U * P below 2^31 (`check_stream`), and every int64 held
    # across the K loop is two more registers of the 80 the tile has.
    U = J * NB * S
    # At most one program a unit, so that every program in use has at least one (a tile's parts
    # are then the programs owner() gives from its first unit to its last).
    P = tl.minimum(tl.num_programs(0), U)
    p = tl.program_id(0)
    if p >= P:
        return
    start = p * U // P
    end = (p + 1) * U // P
    # Only the routing was read so far; x, the partials and the counters may be the previous
    # kernel's.
    pdl_wait(GDC)
    u = start
    # No hoisting out of this loop: its invariants (the tile's offset tensors) held across it
    # took the tile from 93 registers to 204 (sm_90a, uncapped) and spilled it at 80.
    while tl.condition(u < end, disable_licm=True):
        t = u // S
        first = t * S
        seg_end = tl.minimum(end, first + S)
        j = t // NB
        n_block = t % NB
        e, count, m0 = pass_of(hits, j, BLOCK_M)
        e64 = e.to(tl.int64)
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count,
                                m0, BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        if EARLY_BIAS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        w_at, w_last, s_at, s_words, s_last_at, w_tail, s_tail_at = mx_tile_pointers(
            w_ptr, ws_ptr, e64, n_block, R, stride_we, stride_wn, stride_se, stride_sn, BLOCK_N,
            BLOCK_K, EVEN_K, True, PACKED, PACKED_SCALES, DOT_ORDER, TAIL_K)  # fmt: skip
        x_rows = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :]
        k_lo = (u - first) * BLOCK_K
        k_len = warp_uniform((seg_end - u) * BLOCK_K, not INTERPRET)
        tail = seg_end == first + S
        acc = mxfp4_sums(x_rows, m_ok, w_at, w_last, s_at, s_words, s_last_at, w_tail, s_tail_at,
                         R, k_lo, k_len, tail, BLOCK_N, BLOCK_M, BLOCK_K, EVEN_K, NUM_STAGES,
                         INTERPRET, True, FOLD_SCALES, ROTATED, PACKED, PACKED_SCALES, DOT_ORDER,
                         TAIL_K)  # fmt: skip
        if not EARLY_BIAS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        if (u == first) & tail:  # the whole tile is this program's
            slot_epilogue(tl.trans(acc), bias, n_block, t64, k64, m_ok, out_ptr, stride_ot,
                          stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
        else:
            block = 2 * p + (start < first).to(tl.int32)  # this program's last segment: block 1
            counter_at = count_ptr + t
            before = store_part(acc, part_ptr + block * (BLOCK_N * BLOCK_M), counter_at,
                                BLOCK_N, BLOCK_M)  # fmt: skip
            q_first = owner(first, P, U)
            q_last = owner(first + S - 1, P, U)
            if before == q_last - q_first:  # the tile's last part to count
                total = _sum_shared(part_ptr, first, q_first, q_last, P, U, BLOCK_N, BLOCK_M)
                slot_epilogue(tl.trans(total), bias, n_block, t64, k64, m_ok, out_ptr, stride_ot,
                              stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
                tl.atomic_xchg(counter_at, 0, sem="relaxed")
        u = seg_end
