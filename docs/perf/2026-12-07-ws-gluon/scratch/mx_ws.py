"""A probe, not the arm (thirty-fourth session): the MXFP4 grouped tile's weight loop written in
Gluon with its warps specialised, to learn whether taking every load off the warps that decode
and multiply moves the tile's share of copy (issue 28: the arm's MXFP4 kernels 70-71% (fc1) and
63-65% (fc2) of copy at 32/64 tokens on the H100, target 85%; the arm's weight loop issues 241
instructions a step and the tile is bound by issuing them, not by waves or DRAM).

What it changes against the twenty-sixth/seventh sessions' Gluon probe
(`../../2026-12-06-packed-mx/scratch/mx_gluon.py`, whose decode and host packing it reuses):

- one **producer warp** (a worker partition) streams each step into a ring of STAGES stages in
  shared memory by TMA, one copy a kind: the step's weight words (64 rows x 16 words, 4 KB, a
  step's box contiguous in global memory), its scale words (64), and the slots' two [BLOCK_M, 64]
  halves of x; the stage's `ready` barrier counts the bytes;
- the **four consumer warps** (the default partition, one warpgroup) only wait on `ready`, read
  their own words back from shared memory (16 bytes of each of two rows a step), decode them into
  the wgmma A fragment (the arm's rotated decode, scales folded) and multiply asynchronously; a
  stage is given back (`empty`) once the wgmmas that read its x have finished;
- x is read by TMA from a copy gathered by expert ([E * BLOCK_M, R], zero rows past an expert's
  count), so the producer needs no addresses: the bench times that gather on its own.

No bias, no GLU, fp32 out [E, BLOCK_M, N]: the weight loop only, as the earlier probe. The tail
of R (2,880 = 22 x 128 + 64) is a half step from its own arrays. Not run under the interpreter
(Gluon has none): checked on the GPU against the dequantised fp32 reference (`ws_bench.py`).
"""

from __future__ import annotations

import os
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../2026-12-06-packed-mx/scratch"))
import mx_gluon as g  # noqa: E402  (the earlier probe: decode asm, host packing, reference)

ROWS, STEP = 64, 128  # rows a consumer warpgroup, values a step
DECODE_ASM = g.DECODE_ASM


@gluon.constexpr_function
def word_layout(rows, words):
    """[rows, words j, 4 lanes a] uint32 over rows / 16 warps: thread (warp w, lane l) holds rows
    16w + l/4 and + 8, a = l % 4, every j (word 4a + j of its row's step, or 2a + j of the tail's:
    contiguous bytes)."""
    reg = [[0, 1 << b, 0] for b in range(words.bit_length() - 1)] + [[8, 0, 0]]
    warps = [[16 << b, 0, 0] for b in range((rows // 16).bit_length() - 1)]
    return gl.DistributedLinearLayout(
        reg_bases=reg,
        lane_bases=[[0, 0, 1], [0, 0, 2], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
        warp_bases=warps,
        block_bases=[],
        shape=[rows, words, 4],
    )


@gluon.jit
def _decode(words, s, sel, A_LAYOUT: gl.constexpr):
    """Words [rows, j, a] (word_layout), the rows' scale words [rows], the scale-byte selectors:
    the A operand [rows, 32 J] bf16, K = 32j + 16cp + 8sub + 2a + h (the earlier probe's decode:
    `mx_gluon.DECODE_ASM`, pair r = 2 cp + sub in halves (2r, 2r + 1))."""
    sw = gl.broadcast(gl.expand_dims(gl.expand_dims(s, 1), 2), words)[0]
    v0, v1, v2, v3, v4, v5, v6, v7 = gl.inline_asm_elementwise(
        DECODE_ASM, "=h,=h,=h,=h,=h,=h,=h,=h,r,r,r", [words, sw, sel],
        dtype=(gl.bfloat16,) * 8, is_pure=True, pack=1,
    )  # fmt: skip
    y00 = gl.join(v0, v4)  # sub 0, h 0: cp 0, 1
    y01 = gl.join(v1, v5)
    y10 = gl.join(v2, v6)
    y11 = gl.join(v3, v7)
    xh0 = gl.join(y00, y10)  # [.., cp, sub] h 0
    xh1 = gl.join(y01, y11)
    t = gl.join(xh0, xh1)  # [rows, j, a, cp, sub, h]
    t = gl.permute(t, (0, 1, 3, 4, 2, 5))  # [rows, j, cp, sub, a, h]
    t = gl.reshape(t, [words.shape[0], words.shape[1] * 32])
    return gl.convert_layout(t, A_LAYOUT)


@gluon.jit
def _selectors(LW: gl.constexpr):
    """Scale byte j of the row's step word, for word j: the byte-permute selector."""
    rows: gl.constexpr = LW.shape[0]
    words: gl.constexpr = LW.shape[1]
    jj = gl.arange(0, words, layout=gl.SliceLayout(0, gl.SliceLayout(2, LW)))
    j3 = gl.expand_dims(gl.expand_dims(jj, 0), 2)
    return gl.full([rows, words, 4], 0x4040, gl.uint32, LW) + (j3 * 0x0101).to(gl.uint32)


@gluon.jit
def _step_operand(wv, sv, stage, sel, LW: gl.constexpr, A_LAYOUT: gl.constexpr):
    """A stage's A operand [rows, 128], from the thread's own words in shared memory: one
    16-byte read of each of its two rows (the box is row-major: [row, a, j])."""
    s = sv.index(stage).load(gl.SliceLayout(1, gl.SliceLayout(2, LW)))
    w = wv.index(stage).permute((0, 2, 1)).load(LW)  # [rows, j, a]
    return _decode(w, s, sel, A_LAYOUT)


@gluon.jit
def _store_out(acc, out_ptr, e, nb, N, count, MMA: gl.constexpr):
    """fp32 out [E, BLOCK_M, N]: out[e, m, nb * rows + row] = acc[row, m], slots below count."""
    rows: gl.constexpr = acc.shape[0]
    block_m: gl.constexpr = acc.shape[1]
    orow = gl.arange(0, rows, layout=gl.SliceLayout(1, MMA))
    ocol = gl.arange(0, block_m, layout=gl.SliceLayout(0, MMA))
    o_at = (out_ptr + (e * block_m).to(gl.int64) * N + gl.expand_dims(ocol, 0).to(gl.int64) * N
            + nb * rows + gl.expand_dims(orow, 1))  # fmt: skip
    gl.store(o_at, acc, mask=gl.expand_dims(ocol < count, 0) & gl.expand_dims(orow >= 0, 1))


@gluon.jit
def _consume(w_smem, s_smem, x_smem, wt_smem, ready, empty, out_ptr, e, nb, N, count,
             MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
             TILE_ROWS: gl.constexpr, READ_ONLY: gl.constexpr):  # fmt: skip
    """The default partition (TILE_ROWS / 64 warpgroups): decode and multiply, step by step, the
    next step's decode while the last one's wgmma runs (two register buffers, the loop unrolled
    by two)."""
    LW: gl.constexpr = word_layout(TILE_ROWS, 4)
    LT: gl.constexpr = word_layout(TILE_ROWS, 2)
    MMA: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[TILE_ROWS // 16, 1], instr_shape=[16, BLOCK_M, 16]
    )
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    # The TMA's unswizzled boxes read back as plain row-major words: [stage, row, a, j] (a ring's
    # layout has the rank of one stage).
    PLAIN3: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])
    wv = w_smem._reinterpret(gl.int32, [STAGES, TILE_ROWS, 4, 4], PLAIN3)
    sv = s_smem._reinterpret(gl.int32, [STAGES, TILE_ROWS],
                             gl.SwizzledSharedLayout(1, 1, 1, order=[0]))  # fmt: skip
    # A stage's two [BLOCK_M, 64] halves of x, each a 128-byte-swizzled block, one after the
    # other: the [BLOCK_M, 128] tile the wgmma reads in one go (one wgmma op a step; two would
    # have the second's operand packed after the first is issued, and ptxas then serialises
    # every wgmma).
    x_mma = x_smem._reinterpret(gl.bfloat16, [STAGES, BLOCK_M, 128], x_smem.layout)
    sel = _selectors(LW)

    if READ_ONLY:
        # Timing only (zeros out): the producer's stream alone, each stage given back as soon as
        # it lands, on the same grid, ring and occupancy.
        for i in range(MAIN_STEPS):
            mbarrier.wait(ready.index(i % STAGES), (i // STAGES) & 1)
            mbarrier.arrive(empty.index(i % STAGES))
        mbarrier.wait(ready.index(MAIN_STEPS % STAGES), (MAIN_STEPS // STAGES) & 1)
        acc = gl.zeros([TILE_ROWS, BLOCK_M], gl.float32, MMA)
    else:
        acc = gl.zeros([TILE_ROWS, BLOCK_M], gl.float32, MMA)
        mbarrier.wait(ready.index(0), 0)
        a0 = _step_operand(wv, sv, 0, sel, LW, A_LAYOUT)
        a1 = gl.zeros([TILE_ROWS, 128], gl.bfloat16, A_LAYOUT)
        for it in range(MAIN_STEPS // 2):
            i = 2 * it
            st0 = i % STAGES
            st1 = (i + 1) % STAGES
            acc = warpgroup_mma(a0, x_mma.index(st0).permute((1, 0)), acc, is_async=True)
            acc, a1 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a1))
            # step i - 1's wgmma is done: its stage goes back to the producer
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
            mbarrier.wait(ready.index(st1), ((i + 1) // STAGES) & 1)
            a1 = _step_operand(wv, sv, st1, sel, LW, A_LAYOUT)
            acc = warpgroup_mma(a1, x_mma.index(st1).permute((1, 0)), acc, is_async=True)
            acc, a0 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a0))
            mbarrier.arrive(empty.index(st0))
            # Step i + 2 decoded while step i + 1 multiplies. Past the last main step this is the
            # tail's stage, its weight words stale (decoded, never used): a branch here would make
            # the operands' registers moves, and ptxas then serialises every wgmma.
            st2 = (i + 2) % STAGES
            mbarrier.wait(ready.index(st2), ((i + 2) // STAGES) & 1)
            a0 = _step_operand(wv, sv, st2, sel, LW, A_LAYOUT)

        # The tail: half a step, its words [rows, 8] (word 2a + j) and scale word from their
        # own arrays. The last main step's wgmma drained first: issued behind it, the tail's
        # (its operand decoded while that one runs) has ptxas serialise every wgmma.
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a0, a1))[0]
        stt: gl.constexpr = MAIN_STEPS % STAGES
        mbarrier.wait(ready.index(stt), (MAIN_STEPS // STAGES) & 1)
        wtv = wt_smem._reinterpret(gl.int32, [TILE_ROWS, 4, 2], PLAIN3)
        s = sv.index(stt).load(gl.SliceLayout(1, gl.SliceLayout(2, LT)))
        at = _decode(wtv.permute((0, 2, 1)).load(LT), s, _selectors(LT), A_LAYOUT)
        acc = warpgroup_mma(at, x_smem.index(2 * stt).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, at))[0]

    _store_out(acc, out_ptr, e, nb, N, count, MMA)


@gluon.jit
def _produce(w_desc, s_desc, wt_desc, st_desc, x_desc, w_smem, s_smem, x_smem, wt_smem, ready,
             empty, tile, e, MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr,
             STAGES: gl.constexpr, TILE_ROWS: gl.constexpr):  # fmt: skip
    """The worker partition (one warp): every step's boxes by TMA into the ring, a stage reused
    once the consumers give it back."""
    x_row = e * BLOCK_M
    w_row = tile * (MAIN_STEPS * TILE_ROWS)
    s_row = tile * MAIN_STEPS
    STEP_BYTES: gl.constexpr = (w_desc.block_type.nbytes + s_desc.block_type.nbytes
                                + 2 * x_desc.block_type.nbytes)  # fmt: skip
    for i in range(MAIN_STEPS):
        st = i % STAGES
        mbarrier.wait(empty.index(st), ((i // STAGES) & 1) ^ 1)
        bar = ready.index(st)
        mbarrier.expect(bar, STEP_BYTES)
        tma.async_copy_global_to_shared(w_desc, [w_row + i * TILE_ROWS, 0], bar, w_smem.index(st))
        tma.async_copy_global_to_shared(s_desc, [s_row + i, 0], bar, s_smem.index(st))
        tma.async_copy_global_to_shared(x_desc, [x_row, i * 128], bar, x_smem.index(2 * st))
        tma.async_copy_global_to_shared(x_desc, [x_row, i * 128 + 64], bar,
                                        x_smem.index(2 * st + 1))  # fmt: skip
    st = MAIN_STEPS % STAGES
    mbarrier.wait(empty.index(st), ((MAIN_STEPS // STAGES) & 1) ^ 1)
    bar = ready.index(st)
    TAIL_BYTES: gl.constexpr = (wt_desc.block_type.nbytes + st_desc.block_type.nbytes
                                + x_desc.block_type.nbytes)  # fmt: skip
    mbarrier.expect(bar, TAIL_BYTES)
    tma.async_copy_global_to_shared(wt_desc, [tile * TILE_ROWS, 0], bar, wt_smem)
    tma.async_copy_global_to_shared(st_desc, [tile, 0], bar, s_smem.index(st))
    tma.async_copy_global_to_shared(x_desc, [x_row, MAIN_STEPS * 128], bar, x_smem.index(2 * st))


@gluon.jit
def mx_ws_kernel(w_desc, s_desc, wt_desc, st_desc, x_desc, cnt_ptr, out_ptr, N,
                 MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                 PRODUCER_REGS: gl.constexpr, TILE_ROWS: gl.constexpr,
                 READ_ONLY: gl.constexpr = False):  # fmt: skip
    nb = gl.program_id(0)
    e = gl.program_id(1)
    count = gl.load(cnt_ptr + e)
    if count == 0:
        return
    tile = e * (N // TILE_ROWS) + nb
    w_smem = gl.allocate_shared_memory(gl.int32, [STAGES, TILE_ROWS, 16], w_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.int32, [STAGES, 1, TILE_ROWS], s_desc.layout)
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [2 * STAGES, BLOCK_M, 64], x_desc.layout)
    wt_smem = gl.allocate_shared_memory(gl.int32, [TILE_ROWS, 8], wt_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    fence_async_shared()
    gl.warp_specialize(
        [
            (_consume, (w_smem, s_smem, x_smem, wt_smem, ready, empty, out_ptr, e, nb, N, count,
                        MAIN_STEPS, BLOCK_M, STAGES, TILE_ROWS, READ_ONLY)),
            (_produce, (w_desc, s_desc, wt_desc, st_desc, x_desc, w_smem, s_smem, x_smem,
                        wt_smem, ready, empty, tile, e, MAIN_STEPS, BLOCK_M, STAGES, TILE_ROWS)),
        ],
        [1],
        [PRODUCER_REGS],
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Two K steps a stage (thirty-fourth session, prepared, not yet run on a GPU): the same tile, its
# ring holding two steps a stage (an 8 KB weight box, two rows of scale words, four x halves), so
# that a consumer waits on `ready` and arrives on `empty` once every two steps, and the producer
# issues a copy of each kind once every two: half the barrier traffic, each of which costs the
# consumer warpgroup a partition-wide bar.sync (the barrier stall of `ws_gluon_ncu`).


@gluon.jit
def _consume_pairs(w_smem, s_smem, x_smem, wt_smem, st_smem, ready, empty, out_ptr, e, nb, N,
                   count, MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr,
                   STAGES: gl.constexpr, TILE_ROWS: gl.constexpr):  # fmt: skip
    LW: gl.constexpr = word_layout(TILE_ROWS, 4)
    LT: gl.constexpr = word_layout(TILE_ROWS, 2)
    MMA: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[TILE_ROWS // 16, 1], instr_shape=[16, BLOCK_M, 16]
    )
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    PLAIN3: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])
    # step 2 st + h of the ring (h: the stage's first or second step)
    wv = w_smem._reinterpret(gl.int32, [2 * STAGES, TILE_ROWS, 4, 4], PLAIN3)
    sv = s_smem._reinterpret(gl.int32, [2 * STAGES, TILE_ROWS],
                             gl.SwizzledSharedLayout(1, 1, 1, order=[0]))  # fmt: skip
    x_mma = x_smem._reinterpret(gl.bfloat16, [2 * STAGES, BLOCK_M, 128], x_smem.layout)
    sel = _selectors(LW)

    acc = gl.zeros([TILE_ROWS, BLOCK_M], gl.float32, MMA)
    mbarrier.wait(ready.index(0), 0)
    a0 = _step_operand(wv, sv, 0, sel, LW, A_LAYOUT)
    a1 = gl.zeros([TILE_ROWS, 128], gl.bfloat16, A_LAYOUT)
    for p in range(MAIN_STEPS // 2):
        st = p % STAGES
        acc = warpgroup_mma(a0, x_mma.index(2 * st).permute((1, 0)), acc, is_async=True)
        acc, a1 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a1))
        # the stage before's second wgmma is done: the whole stage goes back to the producer
        mbarrier.arrive(empty.index((p + STAGES - 1) % STAGES), pred=p > 0)
        a1 = _step_operand(wv, sv, 2 * st + 1, sel, LW, A_LAYOUT)
        acc = warpgroup_mma(a1, x_mma.index(2 * st + 1).permute((1, 0)), acc, is_async=True)
        acc, a0 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a0))
        # the next stage's first step decoded while this one's second multiplies (past the last
        # main stage: the tail's, stale words, never used; no branch, see `_consume`)
        nx = (p + 1) % STAGES
        mbarrier.wait(ready.index(nx), ((p + 1) // STAGES) & 1)
        a0 = _step_operand(wv, sv, 2 * nx, sel, LW, A_LAYOUT)

    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a0, a1))[0]
    stt: gl.constexpr = (MAIN_STEPS // 2) % STAGES
    wtv = wt_smem._reinterpret(gl.int32, [TILE_ROWS, 4, 2], PLAIN3)
    stv = st_smem._reinterpret(gl.int32, [TILE_ROWS], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    s = stv.load(gl.SliceLayout(1, gl.SliceLayout(2, LT)))
    at = _decode(wtv.permute((0, 2, 1)).load(LT), s, _selectors(LT), A_LAYOUT)
    acc = warpgroup_mma(at, x_smem.index(4 * stt).permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, at))[0]
    _store_out(acc, out_ptr, e, nb, N, count, MMA)


@gluon.jit
def _produce_pairs(w_desc, s_desc, wt_desc, st_desc, x_desc, w_smem, s_smem, x_smem, wt_smem,
                   st_smem, ready, empty, tile, e, MAIN_STEPS: gl.constexpr,
                   BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                   TILE_ROWS: gl.constexpr):  # fmt: skip
    x_row = e * BLOCK_M
    w_row = tile * (MAIN_STEPS * TILE_ROWS)
    s_row = tile * MAIN_STEPS
    STAGE_BYTES: gl.constexpr = (w_desc.block_type.nbytes + s_desc.block_type.nbytes
                                 + 4 * x_desc.block_type.nbytes)  # fmt: skip
    for p in range(MAIN_STEPS // 2):
        st = p % STAGES
        mbarrier.wait(empty.index(st), ((p // STAGES) & 1) ^ 1)
        bar = ready.index(st)
        mbarrier.expect(bar, STAGE_BYTES)
        tma.async_copy_global_to_shared(w_desc, [w_row + p * 2 * TILE_ROWS, 0], bar,
                                        w_smem.index(st))  # fmt: skip
        tma.async_copy_global_to_shared(s_desc, [s_row + 2 * p, 0], bar, s_smem.index(st))
        for h in gl.static_range(4):
            tma.async_copy_global_to_shared(x_desc, [x_row, p * 256 + h * 64], bar,
                                            x_smem.index(4 * st + h))  # fmt: skip
    # the tail's stage: its words, its scale words (in their own buffers) and its x half
    st = (MAIN_STEPS // 2) % STAGES
    mbarrier.wait(empty.index(st), (((MAIN_STEPS // 2) // STAGES) & 1) ^ 1)
    bar = ready.index(st)
    TAIL_BYTES: gl.constexpr = (wt_desc.block_type.nbytes + st_desc.block_type.nbytes
                                + x_desc.block_type.nbytes)  # fmt: skip
    mbarrier.expect(bar, TAIL_BYTES)
    tma.async_copy_global_to_shared(wt_desc, [tile * TILE_ROWS, 0], bar, wt_smem)
    tma.async_copy_global_to_shared(st_desc, [tile, 0], bar, st_smem)
    tma.async_copy_global_to_shared(x_desc, [x_row, MAIN_STEPS * 128], bar, x_smem.index(4 * st))


@gluon.jit
def mx_ws_pairs_kernel(w_desc, s_desc, wt_desc, st_desc, x_desc, cnt_ptr, out_ptr, N,
                       MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                       PRODUCER_REGS: gl.constexpr, TILE_ROWS: gl.constexpr):  # fmt: skip
    """`mx_ws_kernel` with two K steps a stage (w_desc's box 2 x TILE_ROWS rows, s_desc's two
    rows of scale words); MAIN_STEPS even."""
    gl.static_assert(MAIN_STEPS % 2 == 0, "two steps a stage")
    nb = gl.program_id(0)
    e = gl.program_id(1)
    count = gl.load(cnt_ptr + e)
    if count == 0:
        return
    tile = e * (N // TILE_ROWS) + nb
    w_smem = gl.allocate_shared_memory(gl.int32, [STAGES, 2 * TILE_ROWS, 16], w_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.int32, [STAGES, 2, TILE_ROWS], s_desc.layout)
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [4 * STAGES, BLOCK_M, 64], x_desc.layout)
    wt_smem = gl.allocate_shared_memory(gl.int32, [TILE_ROWS, 8], wt_desc.layout)
    st_smem = gl.allocate_shared_memory(gl.int32, [1, TILE_ROWS], st_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    fence_async_shared()
    gl.warp_specialize(
        [
            (_consume_pairs, (w_smem, s_smem, x_smem, wt_smem, st_smem, ready, empty, out_ptr,
                              e, nb, N, count, MAIN_STEPS, BLOCK_M, STAGES, TILE_ROWS)),
            (_produce_pairs, (w_desc, s_desc, wt_desc, st_desc, x_desc, w_smem, s_smem, x_smem,
                              wt_smem, st_smem, ready, empty, tile, e, MAIN_STEPS, BLOCK_M,
                              STAGES, TILE_ROWS)),
        ],
        [1],
        [PRODUCER_REGS],
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Host side.

W_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)
X_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)


def pack(codes: torch.Tensor, scales: torch.Tensor, rows: int = ROWS) -> dict:
    """codes [E, N, R] (0..15), e8m0 scales [E, N, R / 32] -> the probe's arrays: a step's box of
    ``rows`` rows x 16 words contiguous ([E * nb * steps * rows, 16]), its scale words ([E * nb *
    steps, rows]), the tail's words ([E * N, 8]) and scale words ([E * nb, rows]); int32, from
    `mx_gluon.pack_weights`' natural order."""
    w_main, w_tail, s_main, s_tail = g.pack_weights(codes, scales)
    E, N, _ = codes.shape
    nb, steps = N // rows, w_main.shape[-1] // 16
    w = w_main.reshape(E, nb, rows, steps, 16).permute(0, 1, 3, 2, 4).reshape(-1, 16)
    s = s_main.reshape(E, nb, rows, steps).permute(0, 1, 3, 2).reshape(-1, rows)
    return {
        "w": w.contiguous(),
        "s": s.contiguous(),
        "wt": w_tail.reshape(-1, 8).contiguous(),
        "st": s_tail.reshape(-1, rows).contiguous(),
        "steps": steps,
        "rows": rows,
        "N": N,
    }


def gather_x(x: torch.Tensor, idx: torch.Tensor, cnt: torch.Tensor, out: torch.Tensor) -> None:
    """out [E * BLOCK_M, R] bf16: expert e's slot m the row idx[e, m] of x, zeros past its count
    (what the producer's TMA reads)."""
    E, block_m = idx.shape
    keep = (torch.arange(block_m, device=x.device)[None, :] < cnt[:, None]).reshape(-1, 1)
    torch.mul(x.index_select(0, idx.reshape(-1).long()), keep, out=out)


def descriptors(p: dict, xg: torch.Tensor, block_m: int, pairs: bool = False) -> dict:
    """The TMA descriptors; ``pairs``: two K steps a box (`mx_ws_pairs_kernel`)."""
    d, rows, k = TensorDescriptor.from_tensor, p["rows"], 2 if pairs else 1
    return {
        "w": d(p["w"], [k * rows, 16], W_LAYOUT),
        "s": d(p["s"], [k, rows], W_LAYOUT),
        "wt": d(p["wt"], [rows, 8], W_LAYOUT),
        "st": d(p["st"], [1, rows], W_LAYOUT),
        "x": d(xg, [block_m, 64], X_LAYOUT),
    }


def launch(p: dict, desc: dict, cnt, out, stages=4, maxnreg=None, producer_regs=24,
           read_only=False, pairs=False) -> None:  # fmt: skip
    """The probe over every local expert: ``out`` fp32 [E, BLOCK_M, N]; a program's tile
    p["rows"] rows (64 a consumer warpgroup); ``pairs``: two K steps a stage (``desc`` made with
    ``pairs``; ``stages`` then counts pairs)."""
    E, block_m, N = out.shape
    rows = p["rows"]
    args = (desc["w"], desc["s"], desc["wt"], desc["st"], desc["x"], cnt, out, N)
    opts = dict(MAIN_STEPS=p["steps"], BLOCK_M=block_m, STAGES=stages,
                PRODUCER_REGS=producer_regs, TILE_ROWS=rows, num_warps=rows // 16,
                **({"maxnreg": maxnreg} if maxnreg else {}))  # fmt: skip
    if pairs:
        assert not read_only, "the read-only form is the one-step ring's"
        mx_ws_pairs_kernel[(N // rows, E)](*args, **opts)
    else:
        mx_ws_kernel[(N // rows, E)](*args, READ_ONLY=read_only, **opts)
