"""(Twenty-seventh session: the twenty-sixth session's probe, docs/perf/2026-12-06-gluon-tile/,
with two options added: ``TILED``, the weights and scale words packed tile by tile so that a
program's stream is one contiguous run (`pack_weights(tiled=True)`), and ``AHEAD``, the weight
loads one step further ahead of their decode, in a third register buffer.)

A probe, not the arm: the MXFP4 grouped tile's weight loop written in Gluon (triton 3.6's
lower-level language, `triton.experimental.gluon`), to learn whether the structure that plain
Triton cannot express moves the tile's copy share (issue 28: 58% / 56% of copy at 32 / 64 tokens
on the H100, target 85%).

What it changes against the arm's tile (`moebench/kernels/grouped_dot.py`, `_grouped_dot_mxfp4`):

- the weights go from global memory straight into the registers that the tensor cores read (no
  shared-memory copy, no re-lay): each thread loads 16 contiguous bytes of each of its two rows a
  step, laid out on the host (`pack_weights`) so that its words decode, pair for pair, into the
  wgmma A fragment it holds (rows 16w + l/4 and + 8, K 2(l%4) + {0, 1} and + 8 of each 16);
- the decode is the arm's rotated one (`mx_rotated`), with the word's e8m0 scale picked out of the
  row's scale word by one byte permute and made a bf16 pair by one multiply-add (folded scales:
  every byte in 1..128);
- the slots' operand is copied asynchronously (cp.async, by slot row: a gather) into swizzled
  shared memory that the wgmma reads directly (no re-lay: the K order is the natural one);
- the wgmma is asynchronous: the next step's decode runs while it multiplies.

No bias, no GLU, fp32 out [E, BLOCK_M, N]: the weight loop only. The tail of R (2,880 = 22 x 128
+ 64) is a step of its own from a separate array (`pack_weights`), so that every main step is
whole. Not run under the interpreter (Gluon has none): checked on the GPU against a torch
reference (`check`).
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from moebench.core.reference import dequant_weight_mxfp4

ROWS, STEP = 64, 128  # host-side: weight rows a program (one warpgroup), values a step
BLOCK_N = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(STEP)
STEP_WORDS = gl.constexpr(STEP // 8)  # 16 words a row a step
MASK = 0x81C081C0

# (cp, sub, h) -> the natural nibble of the rotated word holding that value: the rotated decode's
# output pair r = 2 cp + sub holds nibbles PAIR_NIBBLES[r] (low half, high half).
PAIR_NIBBLES = ((0, 2), (4, 6), (1, 3), (5, 7))

# One rotated word and its row's scale word to four bf16 pairs (8 halves, $0..$7: pair r in
# $2r (low) and $2r+1 (high)); $8 the word, $9 the row's step scale word, $10 the byte permute
# selector putting this word's scale byte in bytes 0 and 2. Scale pair = 2^(s - 1) in bf16
# (folded: s in 1..128), the placed values being value x 2^-126.
DECODE_ASM = gl.constexpr(
    "\n".join(
        [
            "{",
            ".reg .b32 c, d;",
            "prmt.b32 d, $9, 0, $10;",
            "mad.lo.u32 d, d, 128, 0x3F003F00;",
            f"and.b32 c, $8, {MASK:#x};",
            "mul.rn.bf16x2 c, c, d;",
            "mov.b32 {$0, $1}, c;",
            "shf.l.wrap.b32 c, $8, $8, 10;",
            f"and.b32 c, c, {MASK:#x};",
            "mul.rn.bf16x2 c, c, d;",
            "mov.b32 {$2, $3}, c;",
            "shf.l.wrap.b32 c, $8, $8, 13;",
            f"and.b32 c, c, {MASK:#x};",
            "mul.rn.bf16x2 c, c, d;",
            "mov.b32 {$4, $5}, c;",
            "and.b32 c, $8, 0x001B001B;",
            "mul.lo.u32 c, c, 0x1084;",
            f"and.b32 c, c, {MASK:#x};",
            "mul.rn.bf16x2 c, c, d;",
            "mov.b32 {$6, $7}, c;",
            "}",
        ]
    )
)


# Timing-only ablation (wrong values): the placement alone, no scale and no multiply (8 of the 14
# instructions a word), to tell whether the decode's instruction count holds the loop.
PLACE_ONLY_ASM = gl.constexpr(
    "\n".join(
        ["{", ".reg .b32 c;", f"and.b32 c, $8, {MASK:#x};", "mov.b32 {$0, $1}, c;",
         "shf.l.wrap.b32 c, $8, $8, 10;", f"and.b32 c, c, {MASK:#x};", "mov.b32 {$2, $3}, c;",
         "shf.l.wrap.b32 c, $8, $8, 13;", f"and.b32 c, c, {MASK:#x};", "mov.b32 {$4, $5}, c;",
         "and.b32 c, $8, 0x001B001B;", "mul.lo.u32 c, c, 0x1084;", f"and.b32 c, c, {MASK:#x};",
         "mov.b32 {$6, $7}, c;", "}"]
    )
)  # fmt: skip


@gluon.constexpr_function
def word_layout():
    """[BLOCK_N rows, 4 words j, 4 lanes a] uint32: thread (warp w, lane l) holds rows 16w + l/4
    and + 8, lane a = l % 4, all four j (16 contiguous bytes a row)."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1, 0], [0, 2, 0], [8, 0, 0]],
        lane_bases=[[0, 0, 1], [0, 0, 2], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
        warp_bases=[[16, 0, 0], [32, 0, 0]],
        block_bases=[],
        shape=[BLOCK_N, 4, 4],
    )


@gluon.jit
def _decode(words, sw, sel, LAYOUT: gl.constexpr, PLACE_ONLY: gl.constexpr = False):
    """Words [64, 4, 4] (Lw), the rows' scale words broadcast, the selectors: the A operand
    [64, 128] bf16 in the wgmma register layout."""
    asm: gl.constexpr = PLACE_ONLY_ASM if PLACE_ONLY else DECODE_ASM
    v0, v1, v2, v3, v4, v5, v6, v7 = gl.inline_asm_elementwise(
        asm, "=h,=h,=h,=h,=h,=h,=h,=h,r,r,r", [words, sw, sel],
        dtype=(gl.bfloat16,) * 8, is_pure=True, pack=1,
    )  # fmt: skip
    # pair r = 2 cp + sub: (v[2r], v[2r+1]) = (h 0, h 1)
    y00 = gl.join(v0, v4)  # sub 0, h 0: cp 0, 1
    y01 = gl.join(v1, v5)  # sub 0, h 1
    y10 = gl.join(v2, v6)  # sub 1, h 0
    y11 = gl.join(v3, v7)  # sub 1, h 1
    xh0 = gl.join(y00, y10)  # [.., cp, sub] h 0
    xh1 = gl.join(y01, y11)
    t = gl.join(xh0, xh1)  # [64, j, a, cp, sub, h]
    t = gl.permute(t, (0, 1, 3, 4, 2, 5))  # [64, j, cp, sub, a, h]: k = 32j + 16cp + 8sub + 2a + h
    t = gl.reshape(t, [BLOCK_N, BLOCK_K])
    return gl.convert_layout(t, LAYOUT)


@gluon.jit
def _rows(s, like):
    """A row's scale word broadcast over its words ([64] -> [64, 4, 4])."""
    return gl.broadcast(gl.expand_dims(gl.expand_dims(s, 1), 2), like)[0]


@gluon.jit
def _slots_ready(STAGES: gl.constexpr, BARRIER: gl.constexpr):
    """The oldest step's slots in shared memory, every thread's copies, seen by the async proxy."""
    async_copy.wait_group(STAGES - 2)
    fence_async_shared()
    if BARRIER:
        gl.thread_barrier()


@gluon.jit
def _copy_slots(x_smem, x_at, ok_main, ok_tail, q, MAIN_STEPS: gl.constexpr,
                STAGES: gl.constexpr, BLOCK_K: gl.constexpr):  # fmt: skip
    """Step q's slots into stage q % STAGES, as one copy group (empty past the tail step): the
    masks are loop constants, the main steps' the slots', the tail's also K < R."""
    if q < MAIN_STEPS:
        async_copy.async_copy_global_to_shared(x_smem.index(q % STAGES), x_at + q * BLOCK_K,
                                               mask=ok_main)  # fmt: skip
    elif q == MAIN_STEPS:
        async_copy.async_copy_global_to_shared(x_smem.index(q % STAGES), x_at + q * BLOCK_K,
                                               mask=ok_tail)  # fmt: skip
    async_copy.commit_group()


@gluon.jit
def _copy_step(x_smem, x_at, ok_main, ok_tail, w_smem, w_at, s_smem, s_ra, q,
               MAIN_STEPS: gl.constexpr, STAGES: gl.constexpr, BLOCK_K: gl.constexpr,
               STEP_WORDS: gl.constexpr):  # fmt: skip
    """Step q's slots, weight words and scale words into stage q % STAGES, one copy group
    (weights only for the main steps; the tail's are registers)."""
    if q < MAIN_STEPS:
        async_copy.async_copy_global_to_shared(w_smem.index(q % STAGES), w_at + q * STEP_WORDS)
        async_copy.async_copy_global_to_shared(s_smem.index(q % STAGES), s_ra + q)
    _copy_slots(x_smem, x_at, ok_main, ok_tail, q, MAIN_STEPS, STAGES, BLOCK_K)


@gluon.jit
def _ring_decode(w_smem, s_smem, stage, sel, LW: gl.constexpr, A_LAYOUT: gl.constexpr):
    """A stage's weight words (each thread's own) decoded into the wgmma operand."""
    w = w_smem.index(stage).load(LW)
    s = s_smem.index(stage).load(gl.SliceLayout(1, LW))
    sw = gl.broadcast(gl.expand_dims(s, 1), w)[0]
    return _decode(w, sw, sel, A_LAYOUT)


@gluon.jit
def mx_probe_kernel(
    w_ptr, wt_ptr, s_ptr, st_ptr, x_ptr, idx_ptr, cnt_ptr, out_ptr, N,
    R: gl.constexpr, MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
    BARRIER: gl.constexpr, RING: gl.constexpr, PLACE_ONLY: gl.constexpr,
    num_warps: gl.constexpr, TILED: gl.constexpr = False, AHEAD: gl.constexpr = 0,
):  # fmt: skip
    LW: gl.constexpr = word_layout()
    MMA: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16]
    )
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    X_LOAD: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    X_SMEM: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    ROW_WORDS: gl.constexpr = MAIN_STEPS * STEP_WORDS

    nb = gl.program_id(0)
    e = gl.program_id(1)
    count = gl.load(cnt_ptr + e)
    if count == 0:
        return

    # Weight words: (row, j, a) -> word row*ROW_WORDS + step*16 + 4a + j (tail: row*8 + 2a + j).
    L_RJ: gl.constexpr = gl.SliceLayout(2, LW)
    L_R: gl.constexpr = gl.SliceLayout(1, L_RJ)
    L_J: gl.constexpr = gl.SliceLayout(0, L_RJ)
    L_A: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, LW))
    rows = gl.arange(0, BLOCK_N, layout=L_R)
    jj = gl.arange(0, 4, layout=L_J)
    aa = gl.arange(0, 4, layout=L_A)
    grow = (e * N + nb * BLOCK_N + rows).to(gl.int64)  # the expert's row in [E * N]
    r3 = gl.expand_dims(gl.expand_dims(grow, 1), 2)
    j3 = gl.expand_dims(gl.expand_dims(jj, 0), 2)
    a3 = gl.expand_dims(gl.expand_dims(aa, 0), 1)
    if TILED:
        # A program's steps one after the other, a step 64 rows x 16 words: warp w's load of row
        # half h (rows 16w + 8h + l / 4) is 128 contiguous words (lane l's four at 4l).
        TILE_WORDS: gl.constexpr = BLOCK_N * STEP_WORDS
        W_STRIDE: gl.constexpr = TILE_WORDS
        S_STRIDE: gl.constexpr = BLOCK_N
        tile = ((e * (N // BLOCK_N) + nb) * MAIN_STEPS).to(gl.int64)
        lr = gl.expand_dims(gl.expand_dims(rows, 1), 2)
        within = (lr // 16) * 256 + ((lr // 8) % 2) * 128 + (lr % 8) * 16 + 4 * a3 + j3
        w_at = w_ptr + tile * TILE_WORDS + within
        s_at = s_ptr + tile * BLOCK_N + rows
    else:
        W_STRIDE: gl.constexpr = STEP_WORDS
        S_STRIDE: gl.constexpr = 1
        w_at = w_ptr + r3 * ROW_WORDS + (4 * a3 + j3)
        s_at = s_ptr + grow * MAIN_STEPS
    wt_at = wt_ptr + r3 * 8 + (2 * a3 + j3)
    wt_ok = (j3 < 2) & (a3 >= 0) & (r3 >= 0)
    st_at = st_ptr + grow
    sel = gl.full([BLOCK_N, 4, 4], 0x4040, gl.uint32, LW) + (j3 * 0x0101).to(gl.uint32)

    # The slots' rows of x: [BLOCK_M, BLOCK_K] a step, gathered by cp.async.
    mm = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, X_LOAD))
    kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, X_LOAD))
    m_ok = mm < count
    xrow = gl.load(idx_ptr + e * BLOCK_M + mm, mask=m_ok, other=0).to(gl.int64)
    x_at = x_ptr + gl.expand_dims(xrow * R, 1) + gl.expand_dims(kk, 0)
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_M, BLOCK_K], X_SMEM)

    ok_main = gl.expand_dims(m_ok, 1) & gl.expand_dims(kk >= 0, 0)
    ok_tail = gl.expand_dims(m_ok, 1) & gl.expand_dims(MAIN_STEPS * BLOCK_K + kk < R, 0)
    wt = gl.load(wt_at, mask=wt_ok, other=0)
    st = gl.load(st_at)
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, MMA)
    if not RING and AHEAD:
        for p in gl.static_range(STAGES - 1):
            _copy_slots(x_smem, x_at, ok_main, ok_tail, p, MAIN_STEPS, STAGES, BLOCK_K)
        # AHEAD: three steps' words in registers (w1, w2 and the one loading), so that a load is
        # issued about two steps before its decode instead of one.
        w0 = gl.load(w_at)
        s0 = gl.load(s_at)
        w1 = gl.load(w_at + W_STRIDE)
        s1 = gl.load(s_at + S_STRIDE)
        w2 = gl.load(w_at + 2 * W_STRIDE)
        s2 = gl.load(s_at + 2 * S_STRIDE)
        a0 = _decode(w0, _rows(s0, w0), sel, A_LAYOUT)
        a1 = gl.zeros([BLOCK_N, BLOCK_K], gl.bfloat16, A_LAYOUT)
        for it in range(MAIN_STEPS // 2):
            i = 2 * it
            n3 = gl.minimum(i + 3, MAIN_STEPS - 1)
            n4 = gl.minimum(i + 4, MAIN_STEPS - 1)
            w3 = gl.load(w_at + n3 * W_STRIDE)
            s3 = gl.load(s_at + n3 * S_STRIDE)
            _slots_ready(STAGES, BARRIER)
            acc = warpgroup_mma(a0, x_smem.index(i % STAGES).permute((1, 0)), acc, is_async=True)
            acc, a1 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a1))
            _copy_slots(x_smem, x_at, ok_main, ok_tail, i + STAGES - 1, MAIN_STEPS, STAGES, BLOCK_K)
            a1 = _decode(w1, _rows(s1, w1), sel, A_LAYOUT, PLACE_ONLY)
            w4 = gl.load(w_at + n4 * W_STRIDE)
            s4 = gl.load(s_at + n4 * S_STRIDE)
            _slots_ready(STAGES, BARRIER)
            acc = warpgroup_mma(a1, x_smem.index((i + 1) % STAGES).permute((1, 0)), acc,
                                is_async=True)  # fmt: skip
            acc, a0 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a0))
            _copy_slots(x_smem, x_at, ok_main, ok_tail, i + STAGES, MAIN_STEPS, STAGES, BLOCK_K)
            a0 = _decode(w2, _rows(s2, w2), sel, A_LAYOUT, PLACE_ONLY)
            w1 = w3
            s1 = s3
            w2 = w4
            s2 = s4

    elif not RING:
        for p in gl.static_range(STAGES - 1):
            _copy_slots(x_smem, x_at, ok_main, ok_tail, p, MAIN_STEPS, STAGES, BLOCK_K)

        # Steps 0 and 1's weights and the tail's; step 0 decoded. Unrolled by two, so that the two
        # steps' operands live in two register blocks and need no moves (an HGMMA reads its A from
        # consecutive registers).
        w0 = gl.load(w_at)
        s0 = gl.load(s_at)
        w1 = gl.load(w_at + W_STRIDE)
        s1 = gl.load(s_at + S_STRIDE)
        a0 = _decode(w0, _rows(s0, w0), sel, A_LAYOUT)
        a1 = gl.zeros([BLOCK_N, BLOCK_K], gl.bfloat16, A_LAYOUT)

        for it in range(MAIN_STEPS // 2):
            i = 2 * it
            # Past the last main step the loads read it again (an L2 hit; decoded, never used).
            n0 = gl.minimum(i + 2, MAIN_STEPS - 1)
            n1 = gl.minimum(i + 3, MAIN_STEPS - 1)
            w0 = gl.load(w_at + n0 * W_STRIDE)
            s0 = gl.load(s_at + n0 * S_STRIDE)
            # Step i: its slots ready, its wgmma issued; the one before it (step i - 1, a1) done.
            _slots_ready(STAGES, BARRIER)
            acc = warpgroup_mma(a0, x_smem.index(i % STAGES).permute((1, 0)), acc, is_async=True)
            acc, a1 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a1))
            _copy_slots(x_smem, x_at, ok_main, ok_tail, i + STAGES - 1, MAIN_STEPS, STAGES, BLOCK_K)
            # Step i + 1 decoded while step i multiplies, then issued.
            a1 = _decode(w1, _rows(s1, w1), sel, A_LAYOUT, PLACE_ONLY)
            w1 = gl.load(w_at + n1 * W_STRIDE)
            s1 = gl.load(s_at + n1 * S_STRIDE)
            _slots_ready(STAGES, BARRIER)
            acc = warpgroup_mma(a1, x_smem.index((i + 1) % STAGES).permute((1, 0)), acc,
                                is_async=True)  # fmt: skip
            acc, a0 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a0))
            _copy_slots(x_smem, x_at, ok_main, ok_tail, i + STAGES, MAIN_STEPS, STAGES, BLOCK_K)
            # Step i + 2 decoded while step i + 1 multiplies (past the last main step: zeros).
            a0 = _decode(w0, _rows(s0, w0), sel, A_LAYOUT, PLACE_ONLY)

    else:
        gl.static_assert(not TILED, "the ring reads the natural layout")
        # RING: each step's weights and scale words come by cp.async too, in the step's copy
        # group, into a ring of STAGES stages: STAGES - 2 steps ahead of their decode instead of
        # one. Each thread copies and reads back only its own words (no barrier for them).
        W_SMEM: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 2, 0])
        S_SMEM: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
        w_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BLOCK_N, 4, 4], W_SMEM)
        s_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BLOCK_N, 4], S_SMEM)
        rows_ra = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, gl.SliceLayout(1, LW)))
        grow_ra = (e * N + nb * BLOCK_N + rows_ra).to(gl.int64)
        s_ra = s_ptr + gl.expand_dims(grow_ra * MAIN_STEPS, 1) + gl.expand_dims(aa * 0, 0)
        for p in gl.static_range(STAGES - 1):
            _copy_step(x_smem, x_at, ok_main, ok_tail, w_smem, w_at, s_smem, s_ra, p,
                       MAIN_STEPS, STAGES, BLOCK_K, STEP_WORDS)  # fmt: skip
        async_copy.wait_group(STAGES - 2)
        a0 = _ring_decode(w_smem, s_smem, 0, sel, LW, A_LAYOUT)
        a1 = gl.zeros([BLOCK_N, BLOCK_K], gl.bfloat16, A_LAYOUT)
        for it in range(MAIN_STEPS // 2):
            i = 2 * it
            _slots_ready(STAGES, BARRIER)
            acc = warpgroup_mma(a0, x_smem.index(i % STAGES).permute((1, 0)), acc,
                                is_async=True)  # fmt: skip
            acc, a1 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a1))
            _copy_step(x_smem, x_at, ok_main, ok_tail, w_smem, w_at, s_smem, s_ra,
                       i + STAGES - 1, MAIN_STEPS, STAGES, BLOCK_K, STEP_WORDS)  # fmt: skip
            async_copy.wait_group(STAGES - 2)  # step i + 1's group
            a1 = _ring_decode(w_smem, s_smem, (i + 1) % STAGES, sel, LW, A_LAYOUT)
            _slots_ready(STAGES, BARRIER)
            acc = warpgroup_mma(a1, x_smem.index((i + 1) % STAGES).permute((1, 0)), acc,
                                is_async=True)  # fmt: skip
            acc, a0 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a0))
            _copy_step(x_smem, x_at, ok_main, ok_tail, w_smem, w_at, s_smem, s_ra,
                       i + STAGES, MAIN_STEPS, STAGES, BLOCK_K, STEP_WORDS)  # fmt: skip
            async_copy.wait_group(STAGES - 2)  # step i + 2's group (past the main steps: stale)
            a0 = _ring_decode(w_smem, s_smem, (i + 2) % STAGES, sel, LW, A_LAYOUT)

    # The tail step (64 values from its own array; the rest of its operand zeros).
    a0 = _decode(wt, _rows(st, wt), sel, A_LAYOUT)
    _slots_ready(STAGES, BARRIER)
    acc = warpgroup_mma(a0, x_smem.index(MAIN_STEPS % STAGES).permute((1, 0)), acc,
                        is_async=True)  # fmt: skip
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a0, a1))[0]
    async_copy.wait_group(0)
    # fp32 out [E, BLOCK_M, N]: out[e, m, nb * 64 + row] = acc[row, m].
    orow = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, MMA))
    ocol = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, MMA))
    o_at = (out_ptr + (e * BLOCK_M).to(gl.int64) * N + gl.expand_dims(ocol, 0).to(gl.int64) * N
            + nb * BLOCK_N + gl.expand_dims(orow, 1))  # fmt: skip
    gl.store(o_at, acc, mask=gl.expand_dims(ocol < count, 0) & gl.expand_dims(orow >= 0, 1))


# ---------------------------------------------------------------------------------------------
# Host side: the layout, the launch, the reference.


def _k_of(j: int, nib: int, a: int) -> int:
    """K inside a step of the value in natural nibble ``nib`` of thread-lane a's word j."""
    for r, (lo, hi) in enumerate(PAIR_NIBBLES):
        for h, n in enumerate((lo, hi)):
            if n == nib:
                cp, sub = divmod(r, 2)
                return 32 * j + 16 * cp + 8 * sub + 2 * a + h
    raise AssertionError(nib)


def _pack_words(codes: torch.Tensor) -> torch.Tensor:
    """e2m1 codes [..., 8 * W] in natural nibble order -> rotated uint32 words [..., W]."""
    from moebench.kernels.mx_rotated import rotate_mxfp4

    c = codes.to(torch.uint8)
    b = c[..., 0::2] | (c[..., 1::2] << 4)  # byte i: value 2i low, 2i + 1 high
    rot = rotate_mxfp4(b.contiguous())
    return rot.view(torch.int32) if rot.is_contiguous() else rot.contiguous().view(torch.int32)


def pack_weights(codes: torch.Tensor, scales: torch.Tensor, tiled: bool = False):
    """codes [E, N, R] uint8 (0..15), scales [E, N, R / 32] uint8 -> (main words [E, N, 22 * 16],
    tail words [E, N, 8], main scale words [E, N, 22], tail scale words [E, N]) as int32.
    ``tiled``: the main words and scale words in the kernel's TILED order (the same shapes, the
    storage one program's steps after the other)."""
    E, N, R = codes.shape
    main = R // STEP
    tail = R - main * STEP
    assert tail == 64, "the probe is for R = 128 * k + 64"
    perm = torch.empty(STEP // 8 * 8, dtype=torch.long)
    for a in range(4):
        for j in range(4):
            for nib in range(8):
                perm[(4 * a + j) * 8 + nib] = _k_of(j, nib, a)
    cm = codes[..., : main * STEP].reshape(E, N, main, STEP)[..., perm]
    w_main = _pack_words(cm.reshape(E, N, main * STEP))
    permt = torch.empty(8 * 8, dtype=torch.long)
    for a in range(4):
        for j in range(2):
            for nib in range(8):
                permt[(2 * a + j) * 8 + nib] = _k_of(j, nib, a)
    ct = codes[..., main * STEP :][..., permt]
    w_tail = _pack_words(ct)
    sm = scales[..., : main * 4].reshape(E, N, main, 4).to(torch.int32)
    s_main = sm[..., 0] | (sm[..., 1] << 8) | (sm[..., 2] << 16) | (sm[..., 3] << 24)
    st = scales[..., main * 4 :].to(torch.int32)
    s_tail = st[..., 0] | (st[..., 1] << 8)
    if tiled:
        nb = N // ROWS
        # row = 16 w + 8 h + r; word = step * 16 + 4 a + j -> [E, nb, step, w, h, r, a, j]
        w_main = (w_main.reshape(E, nb, 4, 2, 8, main, 4, 4).permute(0, 1, 5, 2, 3, 4, 6, 7)
                  .reshape(E, N, main * 16))  # fmt: skip
        s_main = s_main.reshape(E, nb, ROWS, main).permute(0, 1, 3, 2).reshape(E, N, main)
    return w_main.contiguous(), w_tail.contiguous(), s_main.contiguous(), s_tail.contiguous()


def launch(packed, x, idx, cnt, out, R, stages=4, barrier=1, ring=0, place_only=0, maxnreg=None,
           tiled=0, ahead=0):  # fmt: skip
    """The probe over every local expert: ``out`` fp32 [E, BLOCK_M, N] (its BLOCK_M the slots a
    pass; rows past an expert's count untouched)."""
    w_main, w_tail, s_main, s_tail = packed
    E, block_m, N = out.shape
    grid = (N // ROWS, E)
    mx_probe_kernel[grid](w_main, w_tail, s_main, s_tail, x, idx, cnt, out, N, R=R,
                          MAIN_STEPS=R // STEP, BLOCK_M=block_m, STAGES=stages,
                          BARRIER=barrier, RING=ring, PLACE_ONLY=place_only, num_warps=4,
                          TILED=bool(tiled), AHEAD=ahead,
                          **({"maxnreg": maxnreg} if maxnreg else {}))  # fmt: skip


def reference(w, scales, x, idx, cnt, block_m):
    """fp32 [E, block_m, N]: each expert's slots' rows of ``x`` times its weights (natural MXFP4
    bytes ``w``, e8m0 ``scales``) dequantised by the project's reference."""
    W = dequant_weight_mxfp4(w, scales)
    E, N, R = W.shape
    out = torch.zeros(E, block_m, N, dtype=torch.float32, device=x.device)
    for e in range(E):
        c = int(cnt[e])
        if c:
            xs = x[idx[e, :c].long()].float()
            out[e, :c] = xs @ W[e].T
    return out
