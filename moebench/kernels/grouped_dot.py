"""The grouped decode GEMV's tensor-core path: one touched expert's weight tile times all of its
slots, for `moebench.kernels.grouped_gemv` (its docstring has the tensors, the grid and the
grouping; this file only the two kernels and their tile helpers).

A program holds its expert's [BLOCK_N, BLOCK_K] weight tile as the left operand of ``tl.dot`` and
the pass's slots as the right one, [BLOCK_K, BLOCK_M] bf16 (slot m's row down column m; columns
past the expert's count are masked to zero and never stored). The weights take the operand's
large side, so a few slots pad only the small side to the 16 the tensor cores need (on sm_90 a
64-row left operand converted in registers is what a warpgroup MMA takes), and the accumulator
[BLOCK_N, BLOCK_M] is fp32. Whole K steps run unmasked and software-pipelined ``NUM_STAGES`` deep
(0: the compiler's default); the step that passes R (R = 2,880 is no multiple of 128) runs masked
after them, but for the FP8 tile through TMA, where it stays in the pipelined loop (`_fp8_pass`).
A program runs its expert's passes of BLOCK_M slots in a loop, or with ``PASS_GRID`` the one pass
the grid gives it (`grouped_slots.program_work`).

- FP8: the weights read through a TMA descriptor where the launcher can build one (``TMA``: one
  bulk copy a step for the [BLOCK_N, BLOCK_K] box, the columns past R zero-filled by the copy
  engine; 4% faster than the threads' pointer copies at 16-64 tokens on the H200,
  docs/perf/HISTORY.md), by pointers otherwise; e4m3 converted to bf16 by bit placement
  (`jit.e4m3_to_bf16`; exact: every e4m3 value is a bf16 number), the expert scale applied to
  the fp32 sums after the loop, as `sparse_gemv` and `batched_gemm` do. With the weights in
  `fp8_placed`'s layout (``PLACED``) a word's four values take 7 instructions against 11 (sm_90a,
  the one-pass launch: 214 a step against 278), the same bits; likewise `tile_packed`'s order
  (``PACKED``, `_fp8_step`). Not ``.to(tl.bfloat16)``:
  triton 3.6 goes through fp16 and converts each value fp16 -> bf16 with one F2F, an instruction
  of the SMs' slow conversion pipe; at gpt-oss-20b decode shapes that pipe bounded the tile
  (H200, 2026-12-02: the step 3-17% faster without it, docs/perf/HISTORY.md). An e4m3 NaN byte
  (0x7F, 0xFF) decodes as +-480 on both the GPU and the interpreter, where torch gives NaN: such
  weights fail the reference gate rather than poison the output.
- MXFP4: e2m1 times its e8m0 scale decoded to bf16 in registers (`mx_tile`; exact: two
  significant bits times a power of two), 2.25 instructions a value where every scale byte is at
  most 128 (``FOLD_SCALES``; folded scales, below), 2.75 otherwise; 1.5 and 2.25 with the weights
  in `mx_rotated`'s layout (``ROTATED``, the arm's: a rotation and a mask a pair; sm_90a, the
  one-pass launch: 219 instructions a step against 276); with the bytes in `tile_packed`'s order
  (``PACKED``, the last box ragged) a program's steps are one run of DRAM instead of 64 pieces a
  step (`grouped_launch.MX_PACKED`: the step 9-18% faster on an H100). Scale byte 255 (NaN in the
  format) gives a non-finite output and byte 0 gives 0, as `jit.e8m0_scale` in the GEMV.
  (``tl.dot_scaled``, the first version, ran at 4-7% of the copy ceiling on the H200: triton 3.6
  loads its bf16 operand synchronously every step, stores it to shared memory two bytes at a time
  behind a full memory barrier, and reads the scales with single-byte loads.)

The operand orders (K order, row order) and the MXFP4 decode into them, folded scales included,
are `moebench.kernels.tile_order`'s (its docstring says why each order and what it saves).

Scales (the MXFP4 tile). A step's e8m0 scale bytes of a row (BLOCK_K / 32 of them) are too
few for the pipeline's asynchronous copies unless they are whole 32-bit words, which needs the
rows of scales on 4-byte boundaries (gpt-oss-20b's 90 bytes a row are not). Where they are
(``SCALE_WORDS``; `grouped_gemv.scale_words`, and the arm builds them so,
`grouped_gemv.word_aligned_scales`) a step's scales load as words inside the pipelined loop,
copied asynchronously with the weights (sm_90a SASS: four-byte LDGSTS, no synchronous load left
in the loop, 9.0 instructions a weight byte against 10.0). Otherwise they are byte loads, which
the pipeline leaves synchronous: loaded a step ahead into registers, so that their latency hides
behind one step of work; a program with few neighbours on its SM (a few tokens a rank) then
waits on them every step. (A window of two or three steps ahead made triton 3.6 drop the
pipeline of the weights altogether: synchronous loads, 4 KB of shared memory instead of 28.)
Packed like the weights (``PACKED_SCALES``, `tile_packed` with BLOCK_K / 32 bytes a box: no
padding needed, a step's scales one run of BLOCK_N words instead of BLOCK_N words a padded row
apart) they are words wherever a step is (`grouped_launch.MX_PACKED_SCALES`: the step 1-4%
faster on an H100).

Under the interpreter (``INTERPRET``) the operands are widened to fp32 first: its ``tl.dot``
multiplies bf16 bit patterns (docs/DESIGN.md section 11), and it runs no PTX (the MXFP4 decode is
then `jit.e2m1_pair` in fp32). Products are exact either way.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moebench.kernels.expert_ready import signal_done, wait_for_inputs
from moebench.kernels.fp8_placed import placed_tile
from moebench.kernels.gemv_parts import row_bias
from moebench.kernels.grouped_slots import expert_slots, program_work, slot_epilogue
from moebench.kernels.jit import (
    e4m3_to_bf16,
    pdl_launch_dependents,
    prefetch_l2,
    prefetch_l2_box,
)
from moebench.kernels.split_k import store_part, sum_parts
from moebench.kernels.tile_order import (
    dot_order,
    dot_order_rows,
    loaded_rows,
    mx_order_rows,
    mx_tile,
    operand_rows,
)


@triton.jit
def _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, MASKED: tl.constexpr, TMA: tl.constexpr,
              INTERPRET: tl.constexpr, PLACED: tl.constexpr,
              PACKED: tl.constexpr = False, RAGGED: tl.constexpr = False, e=0):  # fmt: skip
    """acc + one K step of the FP8 tile: the weights from TMA descriptor ``w_src`` at row
    ``w_row`` (``TMA``; columns past R read as zeros) or natural-order pointers ``w_src``
    [BLOCK_N, BLOCK_K]; dot-order pointers ``x_at`` [BLOCK_K, BLOCK_M]; ``MASKED`` for the step
    that passes R; ``PLACED``: weights in `fp8_placed`'s layout (zero bytes read zero in both);
    ``PACKED`` (TMA, whole steps): in `tile_packed`'s order, a descriptor over [E * N * R /
    BLOCK_K, BLOCK_K] rows: row ``w_row``'s first box at w_row * R / BLOCK_K, BLOCK_N a step;
    ``RAGGED`` (TMA): a descriptor over [E, N, R], expert ``e``'s row ``w_row``, rows past N
    read as zeros."""
    BK: tl.constexpr = x_at.shape[0]
    if TMA and RAGGED:
        w = tl.reshape(w_src.load([e, w_row, k0]), [acc.shape[0], BK])
    elif TMA and PACKED:
        w = w_src.load([w_row * (R // BK) + k0 // BK * acc.shape[0], 0])
    elif TMA:
        w = w_src.load([w_row, k0])
    elif MASKED:
        w = tl.load(w_src + k0, mask=(k0 + tl.arange(0, BK) < R)[None, :], other=0.0)
    else:
        w = tl.load(w_src + k0)
    if MASKED:
        x_ok = m_ok[None, :] & (k0 + tl.arange(0, BK) < R)[:, None]
        xv = tl.load(x_at + k0, mask=x_ok, other=0.0)
    else:
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
    wb = dot_order(placed_tile(w, INTERPRET) if PLACED else e4m3_to_bf16(w, INTERPRET))
    xv = dot_order_rows(xv)
    if INTERPRET:
        xv = xv.to(tl.float32)
    return tl.dot(wb, xv, acc, out_dtype=tl.float32)


@triton.jit
def _fp8_pass(
    x_ptr, ids_ptr, w_src, w_row, scale, b_ptr, out_ptr, TK, K, expert_offset, R, e, e64, count,
    m0, n_block, stride_xt, stride_xk, stride_it, stride_ik, stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, TMA: tl.constexpr,
    EARLY_BIAS: tl.constexpr, PLACED: tl.constexpr, PACKED: tl.constexpr, N,
    RAGGED: tl.constexpr, w_stream=None, AHEAD: tl.constexpr = 0,
):  # fmt: skip
    """One pass of the FP8 tile: expert ``e``'s slots m0 .. m0 + BLOCK_M - 1 times its weights'
    column block ``n_block``, stored through the slot epilogue. ``AHEAD`` (packed weights, whose
    program's boxes are one run from byte pointer ``w_stream``): each step asks the L2 for the box
    AHEAD steps on, past the pipeline's copies (`Launch.fp8_prefetch_ahead`).

    Pointer loads: whole K steps unmasked (and software-pipelined), the step that passes R masked
    after them. Through TMA the copy engine zero-fills the weights past R, so that step stays in
    the pipelined loop, the slots' rows masked at every step: after the loop it exposed a load's
    whole latency before each tile's epilogue (docs/perf/HISTORY.md, 2026-12-02, seventh
    session). The products and their order are the same either way."""
    t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                            BLOCK_M, SCAN)  # fmt: skip
    m_ok = m0 + tl.arange(0, BLOCK_M) < count
    if EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N, N, RAGGED)
    x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    r_main = R if TMA else R // BLOCK_K * BLOCK_K
    for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        if AHEAD > 0:
            k_ahead = k0 + AHEAD * BLOCK_K
            prefetch_l2_box(w_stream + k_ahead * BLOCK_N, k_ahead < R, BLOCK_N * BLOCK_K,
                            not INTERPRET)  # fmt: skip
        acc = _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, TMA and not EVEN_K, TMA, INTERPRET,
                        PLACED, PACKED, RAGGED, e)  # fmt: skip
    if not EVEN_K and not TMA:
        acc = _fp8_step(acc, w_src, w_row, x_at, r_main, R, m_ok, True, TMA, INTERPRET, PLACED)
    h = tl.trans(acc) * scale
    if not EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N, N, RAGGED)
    slot_epilogue(h, bias, n_block, t64, k64, m_ok, out_ptr, stride_ot, stride_ok, GLU, BLOCK_M,
                  BLOCK_N, EXACT_RNE, N, RAGGED)  # fmt: skip


@triton.jit
def _grouped_dot_fp8(
    x_ptr, ids_ptr, w, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok, w_bytes, ready_ptr,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, TMA: tl.constexpr,
    PASS_GRID: tl.constexpr, EARLY_BIAS: tl.constexpr, PLACED: tl.constexpr,
    PACKED: tl.constexpr, RAGGED: tl.constexpr, PREFETCH: tl.constexpr = 0,
    AHEAD: tl.constexpr = 0, READY: tl.constexpr = 0,
):  # fmt: skip
    """The FP8 tile. ``PASS_GRID``: program j of the grid's second axis runs the j-th pass
    (`grouped_slots.touched_pass`), one pass a program; else the j-th touched expert, all of its
    passes in a loop, whose registers (121-128 a thread against 85-89 for one pass, sm_90a)
    cost the launch programs an SM. ``RAGGED`` (TMA only): BLOCK_N need not divide N, an
    expert's last row block masked (its rows past N zero-filled by the copy engine, not read).
    ``PREFETCH`` (``PACKED``): the program's first PREFETCH boxes asked of the L2 (``w_bytes``,
    the packed weights' bytes) before the dependent-launch wait, while the previous kernel still
    streams (`Launch.fp8_prefetch`); ``AHEAD`` (``PACKED``): each K step asks for the box AHEAD
    steps on (`_fp8_pass`). ``READY`` 1 (fc1) or 2 (fc2): fc2 waits for fc1 expert by expert
    through the counters at ``ready_ptr`` (`expert_ready`), not for the whole of fc1."""
    pdl_launch_dependents(GDC and READY != 1)  # fc1 with READY: once counted (`expert_ready`)
    e, count, m_first = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                                     BLOCK_E, SCAN, BLOCK_M, PASS_GRID)  # fmt: skip
    if count == 0:
        return
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    N = stride_we // stride_wn  # the weights are packed rows wherever TMA reads them
    # Packed, a program's boxes are one run from its first row's R-th byte (`tile_packed`).
    w_stream = w_bytes + (e64 * N + n_block * BLOCK_N) * R
    if PREFETCH > 0:
        # The weights are constant: their first boxes can be on their way before x is ready.
        prefetch_l2(w_stream, PREFETCH, BLOCK_N * BLOCK_K, not INTERPRET)
    # Only the routing was read so far; x may be the previous kernel's output.
    wait_for_inputs(ready_ptr, e, E, READY, GDC)
    if TMA:
        # ``w``: a descriptor over [E * N, R] rows (packed, ragged: `_fp8_step`), [BLOCK_N,
        # BLOCK_K] a box.
        w_src = w
        w_row = (0 if RAGGED else e * N) + n_block * BLOCK_N
    else:
        rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        w_src = w + e64 * stride_we + rows64[:, None] * stride_wn + tl.arange(0, BLOCK_K)[None, :]
        w_row = 0
    scale = tl.load(ws_ptr + e64)
    if PASS_GRID:
        _fp8_pass(x_ptr, ids_ptr, w_src, w_row, scale, b_ptr, out_ptr, TK, K, expert_offset, R,
                  e, e64, count, m_first, n_block, stride_xt, stride_xk, stride_it, stride_ik,
                  stride_be, stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
                  EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, TMA, EARLY_BIAS, PLACED,
                  PACKED, N, RAGGED, w_stream, AHEAD)  # fmt: skip
    else:
        for m0 in range(0, count, BLOCK_M):
            _fp8_pass(x_ptr, ids_ptr, w_src, w_row, scale, b_ptr, out_ptr, TK, K, expert_offset,
                      R, e, e64, count, m0, n_block, stride_xt, stride_xk, stride_it, stride_ik,
                      stride_be, stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
                      EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, TMA, EARLY_BIAS,
                      PLACED, PACKED, N, RAGGED, w_stream, AHEAD)  # fmt: skip
    if READY == 1:
        signal_done(ready_ptr, e, E)


@triton.jit
def _mxfp4_step(acc, w_step, s, x_at, k0, R, m_ok, MASKED: tl.constexpr, INTERPRET: tl.constexpr,
                FOLD_SCALES: tl.constexpr, ROTATED: tl.constexpr,
                DOT_ORDER: tl.constexpr = False):  # fmt: skip
    """acc + one K step of the MXFP4 tile (this step's byte pointers ``w_step`` [BLOCK_N,
    BLOCK_K / 2], a row's bytes at unit stride, and its scale bytes ``s``, both in `loaded_rows`
    order; natural-order pointers ``x_at`` [BLOCK_K, BLOCK_M], put in the dot's order here unless
    the bytes are in it already, ``DOT_ORDER``: `mx_dot_order`). BLOCK_K is the step's, x_at's
    first dimension."""
    BK: tl.constexpr = x_at.shape[0]
    if MASKED:
        b_ok = (tl.arange(0, BK // 2) < (R - k0) // 2)[None, :]
        w = tl.load(w_step, mask=b_ok, other=0)
        x_ok = m_ok[None, :] & (k0 + tl.arange(0, BK) < R)[:, None]
        xv = tl.load(x_at + k0, mask=x_ok, other=0.0)
    else:
        w = tl.load(w_step)
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
    if not DOT_ORDER:
        xv = dot_order_rows(mx_order_rows(xv))
    if INTERPRET:
        xv = xv.to(tl.float32)
    wv = mx_tile(operand_rows(w), operand_rows(s), INTERPRET, FOLD_SCALES, ROTATED, DOT_ORDER)
    return tl.dot(dot_order(wv), xv, acc, out_dtype=tl.float32)


@triton.jit
def mxfp4_sums(
    x_rows, m_ok, w_at, w_last, s_at, s_words, s_last_at, w_tail, s_tail_at, R, k_lo, k_len,
    tail, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr,
    SCALE_WORDS: tl.constexpr, FOLD_SCALES: tl.constexpr, ROTATED: tl.constexpr,
    PACKED: tl.constexpr, PACKED_SCALES: tl.constexpr, DOT_ORDER: tl.constexpr,
    TAIL_K: tl.constexpr,
):  # fmt: skip
    """The fp32 sums [BLOCK_N, BLOCK_M] of the MXFP4 tile's whole K steps k_lo .. k_lo + k_len
    - 1 (values; multiples of BLOCK_K; with ``SCALE_WORDS``, else every whole step) and, where
    ``tail``, the step past them that passes R (`_mxfp4_pass` names the pointers; ``x_rows``
    [1, BLOCK_M]: each slot's first value of x)."""
    kg = tl.arange(0, BLOCK_K // 32)
    x_at = x_rows + tl.arange(0, BLOCK_K)[:, None]
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    r_main = R // BLOCK_K * BLOCK_K
    # Step k0's bytes lie k0 / 2 bytes on along a row (natural), BLOCK_N times that when the
    # program's boxes follow each other (packed).
    w_step = BLOCK_N if PACKED else 1
    s_step = BLOCK_N if PACKED_SCALES else 1
    if SCALE_WORDS:
        # A step's scale bytes of a row as whole 32-bit words, which the pipeline copies
        # asynchronously with the weights (module docstring: scales).
        # The loop's bound a length from 0, not k_lo's end: where the caller makes it warp-uniform
        # (`stream_k.warp_uniform`) the loop counter and its ring arithmetic are too.
        for i in tl.range(0, k_len, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            k0 = k_lo + i
            words = tl.load(s_words + k0 // 128 * s_step)
            s = tl.reshape((words[:, :, None] >> (8 * tl.arange(0, 4))[None, None, :]) & 0xFF,
                           [BLOCK_N, BLOCK_K // 32]).to(tl.uint8)  # fmt: skip
            acc = _mxfp4_step(acc, w_at + k0 // 2 * w_step, s, x_at, k0, R, m_ok, False,
                              INTERPRET, FOLD_SCALES, ROTATED, DOT_ORDER)  # fmt: skip
        s_last = tl.load(s_last_at, mask=(kg < (R - r_main) // 32)[None, :], other=0)
    else:
        # Byte loads (a row's step of scales at any offset), which the pipeline leaves
        # synchronous: loaded a step ahead into registers, their latency behind a step of work.
        s_last = tl.load(s_at, mask=(kg < R // 32)[None, :], other=0)
        for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            s = s_last
            g_next = (k0 + BLOCK_K) // 32
            s_last = tl.load(s_at + g_next, mask=(g_next + kg < R // 32)[None, :], other=0)
            acc = _mxfp4_step(acc, w_at + k0 // 2 * w_step, s, x_at, k0, R, m_ok, False,
                              INTERPRET, FOLD_SCALES, ROTATED, DOT_ORDER)  # fmt: skip
    if not EVEN_K and DOT_ORDER:
        if tail:
            x_tail = x_rows + (r_main + tl.arange(0, TAIL_K))[:, None]
            acc = _mxfp4_step(acc, w_tail, tl.load(s_tail_at), x_tail, 0, R, m_ok, False,
                              INTERPRET, FOLD_SCALES, ROTATED, True)  # fmt: skip
    elif not EVEN_K:
        if tail:
            acc = _mxfp4_step(acc, w_last, s_last, x_at, r_main, R, m_ok, True, INTERPRET,
                              FOLD_SCALES, ROTATED)  # fmt: skip
    return acc


@triton.jit
def _mxfp4_pass(
    x_ptr, ids_ptr, w_at, w_last, s_at, s_words, b_ptr, out_ptr, TK, K, expert_offset, R, e, e64,
    count, m0, n_block, stride_xt, stride_xk, stride_it, stride_ik, stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, SCALE_WORDS: tl.constexpr,
    FOLD_SCALES: tl.constexpr, EARLY_BIAS: tl.constexpr, ROTATED: tl.constexpr,
    PACKED: tl.constexpr = False, s_last_at=None, PACKED_SCALES: tl.constexpr = False,
    DOT_ORDER: tl.constexpr = False, TAIL_K: tl.constexpr = 0, w_tail=None, s_tail_at=None,
    SPLIT_K: tl.constexpr = 1, part=0, pair_at=None, counter_at=None,
):  # fmt: skip
    """One pass of the MXFP4 tile: expert ``e``'s slots m0 .. m0 + BLOCK_M - 1 times its weights'
    column block ``n_block`` (bytes ``w_at`` of the first step and ``w_last`` of the step that
    passes R, scale bytes ``s_at`` of the first step and ``s_last_at`` of the step that passes R,
    in `loaded_rows` order; with ``SCALE_WORDS`` also ``s_words``, the first step's scales as
    32-bit words, [BLOCK_N, BLOCK_K / 128]), stored through the slot epilogue. ``PACKED``: a
    step's bytes are BLOCK_N * BLOCK_K / 2 further on (`tile_packed`), not BLOCK_K / 2;
    ``PACKED_SCALES``: a step's scale words BLOCK_N * BLOCK_K / 128 further on, not BLOCK_K /
    128. ``DOT_ORDER`` (`mx_dot_order`'s bytes): the last step, R - TAIL_K .. R - 1 when R is no
    multiple of BLOCK_K, is a step of its own TAIL_K values (bytes ``w_tail``, scale bytes
    ``s_tail_at``), not a masked BLOCK_K one. ``SPLIT_K`` > 1 (`split_k`; with ``SCALE_WORDS``):
    this program is part ``part`` of the pair's whole steps (the last part also the step past
    them), its sums stored at ``pair_at`` and counted on ``counter_at``; the pair's last part adds
    the parts and runs the epilogue."""
    t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                            BLOCK_M, SCAN)  # fmt: skip
    m_ok = m0 + tl.arange(0, BLOCK_M) < count
    if EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    x_rows = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :]
    if SPLIT_K == 1:
        k_lo = 0
        k_len = R // BLOCK_K * BLOCK_K
        tail = True
    else:  # this part's whole steps (`split_k`)
        steps = R // BLOCK_K
        k_lo = part * steps // SPLIT_K * BLOCK_K
        k_len = (part + 1) * steps // SPLIT_K * BLOCK_K - k_lo
        tail = part == SPLIT_K - 1
    acc = mxfp4_sums(x_rows, m_ok, w_at, w_last, s_at, s_words, s_last_at, w_tail,
                      s_tail_at, R, k_lo, k_len, tail, BLOCK_N, BLOCK_M, BLOCK_K, EVEN_K,
                      NUM_STAGES, INTERPRET, SCALE_WORDS, FOLD_SCALES, ROTATED, PACKED,
                      PACKED_SCALES, DOT_ORDER, TAIL_K)  # fmt: skip
    if not EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    if SPLIT_K == 1:
        slot_epilogue(tl.trans(acc), bias, n_block, t64, k64, m_ok, out_ptr, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
    else:
        step = BLOCK_N * BLOCK_M
        before = store_part(acc, pair_at + part * step, counter_at, BLOCK_N, BLOCK_M)
        # The pair's last part (`split_k`); SPLIT_K a power of two, so the low bits hold the
        # count across the counter's wrap.
        if (before & (SPLIT_K - 1)) == SPLIT_K - 1:
            total = sum_parts(pair_at, SPLIT_K, BLOCK_N, BLOCK_M)
            slot_epilogue(tl.trans(total), bias, n_block, t64, k64, m_ok, out_ptr, stride_ot,
                          stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


@triton.jit
def mx_tile_pointers(
    w_ptr, ws_ptr, e64, n_block, R, stride_we, stride_wn, stride_se, stride_sn,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    SCALE_WORDS: tl.constexpr, PACKED: tl.constexpr, PACKED_SCALES: tl.constexpr,
    DOT_ORDER: tl.constexpr, TAIL_K: tl.constexpr,
):  # fmt: skip
    """(w_at, w_last, s_at, s_words, s_last_at, w_tail, s_tail_at): expert ``e64``'s row block
    ``n_block`` as `_mxfp4_pass` reads it (its docstring names each)."""
    rows64 = (n_block * BLOCK_N + loaded_rows(BLOCK_N)).to(tl.int64)
    b = tl.arange(0, BLOCK_K // 2)[None, :]
    r_main = R // BLOCK_K * BLOCK_K
    if PACKED:
        # `tile_packed` (ragged last box): the program's boxes are one run from its first row's
        # byte; a whole box's rows BLOCK_K / 2 bytes apart, the last box's (R - r_main) / 2.
        run = w_ptr + e64 * stride_we + (n_block * BLOCK_N).to(tl.int64) * stride_wn
        local = loaded_rows(BLOCK_N)[:, None]
        w_at = run + local * (BLOCK_K // 2) + b
        last_rows = run + BLOCK_N * (r_main // 2) + local * ((R - r_main) // 2)
    else:
        w_rows = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn  # each row's first byte
        w_at = w_rows + b
        last_rows = w_rows + r_main // 2
    w_last = last_rows + b  # each row's bytes of the step that passes R
    kg = tl.arange(0, BLOCK_K // 32)[None, :]
    if PACKED_SCALES:
        # The scale bytes in the weights' box order: a step's are BLOCK_N whole words, one run.
        s_run = ws_ptr + e64 * stride_se + (n_block * BLOCK_N).to(tl.int64) * stride_sn
        local = loaded_rows(BLOCK_N)[:, None]
        s_at = s_run + local * (BLOCK_K // 32) + kg
        s_last_rows = s_run + BLOCK_N * (r_main // 32) + local * ((R - r_main) // 32)
        s_words = (s_run.to(tl.pointer_type(tl.int32)) + local * (BLOCK_K // 128)
                   + tl.arange(0, BLOCK_K // 128)[None, :])  # fmt: skip
    else:
        s_rows = ws_ptr + e64 * stride_se + rows64 * stride_sn  # each row's first scale byte
        s_at = s_rows[:, None] + kg
        s_last_rows = s_rows[:, None] + r_main // 32
        s_words = s_at
        if SCALE_WORDS:
            s_words = (s_rows.to(tl.pointer_type(tl.int32))[:, None]
                       + tl.arange(0, BLOCK_K // 128)[None, :])  # fmt: skip
    s_last_at = s_last_rows + kg
    w_tail = w_last
    s_tail_at = s_last_at
    if DOT_ORDER and not EVEN_K:
        # The last step's TAIL_K values as a step of their own: each row's first TAIL_K / 2 bytes
        # and TAIL_K / 32 scale bytes of the step that passes R (packed: the row block's last,
        # narrower box, whole).
        w_tail = last_rows + tl.arange(0, TAIL_K // 2)[None, :]
        s_tail_at = s_last_rows + tl.arange(0, TAIL_K // 32)[None, :]
    return w_at, w_last, s_at, s_words, s_last_at, w_tail, s_tail_at


@triton.jit
def _grouped_dot_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok, ready_ptr, split_ptr, count_ptr,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr,
    PASS_GRID: tl.constexpr, SCALE_WORDS: tl.constexpr, FOLD_SCALES: tl.constexpr,
    EARLY_BIAS: tl.constexpr, ROTATED: tl.constexpr, READY: tl.constexpr = 0,
    PACKED: tl.constexpr = False, PACKED_SCALES: tl.constexpr = False,
    DOT_ORDER: tl.constexpr = False, TAIL_K: tl.constexpr = 0, SPLIT_K: tl.constexpr = 1,
):  # fmt: skip
    """The MXFP4 tile; ``PASS_GRID`` as in `_grouped_dot_fp8` (one pass a program: 90-91
    registers a thread against 116-137 for the expert loop, sm_90a). ``SCALE_WORDS``: the scale
    rows are 4-byte aligned (row and expert strides multiples of 4 bytes, the base too) and a step
    is whole words (BLOCK_K a multiple of 128), so a step's scales load as words.
    ``FOLD_SCALES``: every scale byte is at most 128 (the launcher's ``max_scale_byte``), so the
    decode multiplies once a pair of values (`tile_order`: folded scales); 2: folded, the scale
    bytes `mx_rotated.biased_scales`' (``Launch.mx_biased_scales``, rotated). ``READY`` as in
    `_grouped_dot_fp8`. ``PACKED``: the weight bytes in `tile_packed`'s order for BLOCK_N rows
    and BLOCK_K / 2 bytes a box, the last box ragged (``Launch.mx_packed``); ``PACKED_SCALES``
    (with ``SCALE_WORDS``): the scale bytes likewise, BLOCK_K / 32 bytes a box
    (``Launch.mx_packed_scales``). ``DOT_ORDER``: the bytes in `mx_dot_order`'s layout (rotated),
    the last TAIL_K = R % BLOCK_K values a step of their own (``Launch.mx_dot_order``).
    ``SPLIT_K`` > 1 (``PASS_GRID``, ``SCALE_WORDS``, no GLU; ``Launch.split_k``): the grid's first
    axis SPLIT_K programs a row block, each a part of its K steps, their sums added through
    ``split_ptr`` (fp32) and ``count_ptr`` (int32 counters), `split_k`."""
    pdl_launch_dependents(GDC and READY != 1)
    e, count, m_first = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                                     BLOCK_E, SCAN, BLOCK_M, PASS_GRID)  # fmt: skip
    if count == 0:
        return
    wait_for_inputs(ready_ptr, e, E, READY, GDC)
    e64 = e.to(tl.int64)
    if SPLIT_K == 1:
        n_block = tl.program_id(0)
        part = 0
        pair_at = split_ptr
        counter_at = count_ptr
    else:  # SPLIT_K programs a row block, each a part of its steps (`split_k`)
        n_block = tl.program_id(0) // SPLIT_K
        part = tl.program_id(0) % SPLIT_K
        pair = tl.program_id(1) * (tl.num_programs(0) // SPLIT_K) + n_block
        pair_at = split_ptr + pair.to(tl.int64) * (SPLIT_K * BLOCK_N * BLOCK_M)
        counter_at = count_ptr + pair
    w_at, w_last, s_at, s_words, s_last_at, w_tail, s_tail_at = mx_tile_pointers(
        w_ptr, ws_ptr, e64, n_block, R, stride_we, stride_wn, stride_se, stride_sn, BLOCK_N,
        BLOCK_K, EVEN_K, SCALE_WORDS, PACKED, PACKED_SCALES, DOT_ORDER, TAIL_K)  # fmt: skip
    if PASS_GRID:
        _mxfp4_pass(x_ptr, ids_ptr, w_at, w_last, s_at, s_words, b_ptr, out_ptr, TK, K,
                    expert_offset, R, e, e64, count, m_first, n_block, stride_xt, stride_xk,
                    stride_it, stride_ik, stride_be, stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N,
                    BLOCK_K, EVEN_K, EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, SCALE_WORDS,
                    FOLD_SCALES, EARLY_BIAS, ROTATED, PACKED, s_last_at,
                    PACKED_SCALES, DOT_ORDER, TAIL_K, w_tail, s_tail_at, SPLIT_K, part, pair_at,
                    counter_at)  # fmt: skip
    else:
        for m0 in range(0, count, BLOCK_M):
            _mxfp4_pass(x_ptr, ids_ptr, w_at, w_last, s_at, s_words, b_ptr, out_ptr, TK, K,
                        expert_offset, R, e, e64, count, m0, n_block, stride_xt, stride_xk,
                        stride_it, stride_ik, stride_be, stride_ot, stride_ok, GLU, BLOCK_M,
                        BLOCK_N, BLOCK_K, EVEN_K, EXACT_RNE, SCAN, NUM_STAGES, INTERPRET,
                        SCALE_WORDS, FOLD_SCALES, EARLY_BIAS, ROTATED, PACKED, s_last_at,
                        PACKED_SCALES, DOT_ORDER, TAIL_K, w_tail, s_tail_at)  # fmt: skip
    if READY == 1:
        signal_done(ready_ptr, e, E)
