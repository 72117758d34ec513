"""The grouped decode GEMV: `fc1` and `fc2` of the `grouped_decode` arm, one launcher for both.

Legend: T tokens, K top-k slots, E local experts, N output columns (2F for fc1, D for fc2),
R reduction length (D for fc1, F for fc2), M slots of one expert in one pass (BLOCK_M).

Tensors (as `moebench.kernels.sparse_gemv`):
- ``x``:           bf16, row of slot (t, k) at ``x + t * stride_xt + k * stride_xk``, R contiguous
  values: the tokens ``x_TD`` for fc1 (``stride_xk = 0``) or the activation ``a_TKF`` for fc2.
- ``topk_ids_TK``: int32 [T, K] global expert ids; the local experts are
  [expert_offset, expert_offset + E).
- ``w``:           [E, N, R] FP8 e4m3 (W8A16) or [E, N, R/2] uint8 MXFP4 (two e2m1 a byte, low
  nibble first), rows contiguous.
- ``w_scale``:     float32 [E] (FP8) or uint8 e8m0 [E, N, R/32] (MXFP4).
- ``bias_EN``:     bf16 [E, N].
- ``out``:         bf16 [T, K, N] (or N/2 with a GLU: gate = h[0::2], up = h[1::2]), one row a
  slot; rows of slots not routed to a local expert are never written.

Each touched local expert's weights are read once for all the slots routed to it: the grid is
(N / BLOCK_N, min(E, T * K)), one program a block of output columns of the j-th touched expert,
which finds that expert and its slots from the routing itself (`moebench.kernels.grouped_slots`)
and returns, having read only the routing, when fewer than j + 1 experts are touched. An untouched
expert has no program. A program takes its expert's slots BLOCK_M at a time (one pass over the
weights a group; a second pass only when an expert holds more than BLOCK_M slots). With
``Launch.pass_grid`` (the tile's default from PASS_GRID_FROM_SLOTS_PER_EXPERT) the second axis
enumerates those passes instead, min(E, T * K) + T * K // BLOCK_M programs, one pass each.
Nothing is read back to the host and no buffer is written but ``out``: one CUDA graph replays any
routing.

Two paths, the same arithmetic up to the fp32 summation order:

- ``gemv`` (CUDA cores, this file): the sparse GEMV's tiles (FP8: [BLOCK_N, BLOCK_K / 16, 16]
  bytes, a warp across a row, 16 bytes a lane; MXFP4: group-major words decoded by `kernels.jit`)
  with the pass's BLOCK_M slots as a leading dimension, so each weight value is loaded and
  converted once and multiplied into every slot of the pass. Per-lane fp32 sums, summed across
  lanes at the end; FP8 times the expert scale, MXFP4 each group's sum times its e8m0 scale.
  For few slots an expert (one token).
- ``dot`` (tensor cores, `moebench.kernels.grouped_dot`): the expert's weight tile as the
  [BLOCK_N, BLOCK_K] operand, the pass's slots as a [BLOCK_K, BLOCK_M] operand (M padded to 16
  or more with masked rows), fp32 accumulation; FP8 converted to bf16 exactly and scaled after the
  sum, MXFP4 decoded to bf16 in registers (e2m1 times its power-of-two scale, exact). For
  several slots an expert (from a few tokens), where the CUDA cores' multiply-adds would bound it.

Both store through one epilogue (`grouped_slots.slot_epilogue`): bias, the GLU in fp32 in the
reference's order, bf16 rounded to nearest even. So the outputs are those of `sparse_gemv` and
`batched_gemm` (products exact in fp32, the FP8 scale after the sum, the same epilogue) but for the
order of the fp32 sums; where every sum is exact they are bitwise equal.

The path and the blocks are launcher arguments chosen from the shapes (`default_launch`), never
from the routing, so that a step captured once serves every routing; `tools/bench_grouped_decode.py`
times the alternatives on the GPU.

Budget, from sm_90a SASS compiled offline with triton 3.6 at gpt-oss-20b's shapes
(`tools/sass_grouped_decode.py`, which also counts registers, spills and the programs an SM holds).
The one-slot GEMV's weight loop is the sparse GEMV's, instruction for instruction (FP8 5.4 a weight
byte, 66 registers; MXFP4 12.1, 128 registers against the sparse kernel's 96), the routing scan
coming before it. Each further slot of a pass adds about FP8 5.6, MXFP4 3-4 a byte (the
multiply-adds and the slot's bf16 widening; the weights are converted once), so a GEMV pass of
several slots costs as much as several one-slot passes and the arm never takes one
(`default_launch`). At 1,024 values a step it also spills: FP8 4 slots 255 registers and 200 B of
stack, 8 slots 2.8 KB of stack and 1,400 local loads and stores in the loop (7-15 ms at 8 tokens on
the H200); `path_launch` shortens the step to 1,024 / slots values (FP8 2-16 slots and MXFP4 2-16:
no spills). The tensor-core tile (64 rows, 128 values a step, 4 warps, 16 slots) is a warpgroup MMA
(HGMMA 64x16x16) fed from registers, flat in the slots up to the pass, its registers capped at 128 a
thread (4 programs an SM; no spills) while a program loops over its expert's passes, at 80 (6
programs an SM; FP8 4 bytes of stack, MXFP4 none) where it runs one pass (`Launch.pass_grid`, the
default from PASS_GRID_FROM_SLOTS_PER_EXPERT): FP8 4.4 a byte through TMA (4.2 with pointer loads,
which left fc1 136 registers and 3 programs an SM; 3.4 with ``.to(tl.bfloat16)``, whose fp16 -> bf16
F2F a value runs on the SMs' slow conversion pipe and bounded the tile on the H200, `grouped_dot`),
MXFP4 8.2 (the expert loop) and 8.6 (one pass; 8 bytes of stack) with its bytes read in the
operand's row order, its scales as words in the pipeline and folded into its decode
(``max_scale_byte`` up to FOLD_SCALES_UP_TO; 9.0 and 9.4 with the decode's two multiplies, 1.7-8.8%
slower on the H200; `scale_words`; 10.0-10.3 with the scales as byte loads a step ahead, 1.2-5.5%
slower on the H200; 9.3 in natural order, whose decoded values went through shared memory and ran
9-20% slower, `grouped_dot`; 12.3 with ``tl.dot_scaled``, whose loads were not pipelined).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import _grouped_dot_fp8, _grouped_dot_mxfp4
from moebench.kernels.grouped_slots import expert_slots, scan_width, slot_epilogue, touched_expert
from moebench.kernels.jit import (
    HAS_PDL,
    e2m1_pair,
    e8m0_scale,
    pdl_launch_dependents,
    pdl_wait,
)
from moebench.kernels.launch import check_slot_operands, checker


@triton.jit
def _grouped_gemv_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    GDC: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    # Only the routing was read so far; x may be the previous kernel's output.
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    # Tile [BLOCK_M, BLOCK_N, LANES, 16]: 16 consecutive weight bytes a lane (one 16-byte load), a
    # warp across a row, the pass's slots leading. The slots' rows are read through a pointer
    # tile broadcast over the weight rows, so that they take the product's layout (the loads are
    # the same for every row and issued once).
    LANES: tl.constexpr = BLOCK_K // 16
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, LANES)[:, None] * 16 + tl.arange(0, 16)[None, :]
    # The weights' pointer tile has the product's rank too (a leading 1), so that they are loaded
    # in the product's layout rather than shuffled into it.
    w_rows = w_ptr + e64 * stride_we + rows.to(tl.int64)[None, :, None, None] * stride_wn
    scale = tl.load(ws_ptr + e64)
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_rows = (x_ptr + t64 * stride_xt + k64 * stride_xk).to(tl.pointer_type(tl.int16))
        x_at = x_rows[:, None, None, None] + 0 * rows[None, :, None, None]
        acc = tl.zeros([BLOCK_M, BLOCK_N, LANES], dtype=tl.float32)
        for k0 in range(0, R, BLOCK_K):
            k = k0 + offs
            k = k[None, None, :, :]
            if EVEN_K:
                w = tl.load(w_rows + k)
                xv = tl.load(x_at + k)
            else:
                w = tl.load(w_rows + k, mask=k < R, other=0.0)
                xv = tl.load(x_at + k, mask=k < R, other=0)
            xf = xv.to(tl.bfloat16, bitcast=True).to(tl.float32)
            acc += tl.sum(w.to(tl.float32) * xf, axis=3)
        h = tl.sum(acc, axis=2) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


@triton.jit
def _grouped_gemv_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    PTX: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    # The sparse GEMV's group-major tile [GROUPS, BLOCK_N, 4] of uint32 words (a lane one MX
    # group of a row: 16 bytes, 32 values, one e8m0 scale), with the pass's slots leading. Word q
    # of group g holds values 32g + 8q + 2j (low nibble of byte j) and 32g + 8q + 2j + 1 (high
    # nibble), which pair with bf16-pair word 16g + 4q + j of a slot's row.
    GROUPS: tl.constexpr = BLOCK_K // 32
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_g = tl.arange(0, GROUPS)
    offs_q = tl.arange(0, 4)
    # Weights and scales are loaded with the product's rank (a leading 1), in its layout.
    w_rows = (w_ptr + e64 * stride_we).to(tl.pointer_type(tl.uint32))
    w_rows = w_rows + rows64[None, None, :, None] * (stride_wn // 4)
    s_rows = ws_ptr + e64 * stride_se + rows64[None, None, :] * stride_sn
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_pairs = (x_ptr + t64 * stride_xt + k64 * stride_xk).to(tl.pointer_type(tl.uint32))
        acc = tl.zeros([BLOCK_M, GROUPS, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, R, BLOCK_K):
            g = k0 // 32 + offs_g
            word = g[:, None] * 4 + offs_q[None, :]
            g_ok = g < R // 32
            w_at = w_rows + word[None, :, None, :]
            s_at = s_rows + g[None, :, None]
            x_at = x_pairs[:, None, None] + word[None, :, :] * 4
            if EVEN_K:
                w = tl.load(w_at)
                s = tl.load(s_at)
            else:
                w = tl.load(w_at, mask=g_ok[None, :, None, None], other=0)
                s = tl.load(s_at, mask=g_ok[None, :, None], other=0)
            w_hi = w >> 16
            part = tl.zeros([BLOCK_M, GROUPS, BLOCK_N, 4], dtype=tl.float32)
            for j in tl.static_range(4):
                if EVEN_K:
                    xp = tl.load(x_at + j)
                else:
                    xp = tl.load(x_at + j, mask=g_ok[None, :, None], other=0)
                x_lo = (xp << 16).to(tl.float32, bitcast=True)[:, :, None, :]
                x_hi = (xp & 0xFFFF0000).to(tl.float32, bitcast=True)[:, :, None, :]
                if j < 2:
                    lo, hi = e2m1_pair(w, j, PTX)
                else:
                    lo, hi = e2m1_pair(w_hi, j - 2, PTX)
                # Two separate updates keep each product a fused multiply-add.
                part += lo * x_lo
                part += hi * x_hi
            acc += tl.sum(part, axis=3) * e8m0_scale(s)
        # Undo the 2^-14 of the fp16 placement (kernels.jit); kernels read no module globals.
        h = tl.sum(acc, axis=1) * 16384.0
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


PATHS = ("gemv", "dot")


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How `grouped_gemv` launches: the path and its blocks (``block_k`` in values along R),
    warps, pipeline depth (``dot`` only; 0: the compiler's default), programmatic dependent
    launch, the FP8 tile's weights through a TMA descriptor (``tma``; where the weights allow it:
    packed rows, otherwise the pointer loads), a register cap a thread (``max_registers``; 0:
    the compiler's choice) and, for the tile, one pass of ``block_m`` slots a program
    (``pass_grid``: the grid's second axis enumerates the passes, `grouped_slots.touched_pass`)
    instead of one touched expert a program looping over its passes."""

    path: str
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 0
    pdl: bool = False
    tma: bool = False
    max_registers: int = 0
    pass_grid: bool = False


# Slots an expert (T * K / E, all taken as local) above which the default launch takes the
# tensor-core tile, from 2 tokens; below, a one-slot GEMV pass. H200, gpt-oss-20b: at one slot an
# expert (4 tokens) the GEMV lost (FP8 102.6 against 72.7 us for the sparse arm), at 2 the tile won
# (119.7 against 131.9); at half (2 tokens) FP8's TMA tile won in every bench since 2026-12-02
# (48.2-48.6 against 58.7-62.1 us), MXFP4's GEMV won 35.4 against 43.3 and lost 44.0 against 43.0.
DOT_FROM_SLOTS_PER_EXPERT = {"fp8": 0.25, "mxfp4": 0.5}


# The MXFP4 tile takes 128 values a step on 4 stages at every count, its bytes read in the
# operand's row order (`grouped_dot.loaded_rows`). Measured on the H200 (gpt-oss-20b EP2, the step
# as one graph, docs/perf/2026-12-02-grouped-rows/ab_rows.log): 150.2 us against 164.2 for the
# 64-value, 6-stage tile (the default from 16 tokens before) at 64 tokens, 145.0 against 155.6 at
# 32, 110.8 against 133.3 at 8; 3 and 5 stages within 1.5% of 4 from 8 tokens up. At 4 tokens the
# two measurements disagree on 5 stages: 3.8% faster in that A/B (uniform routing), 1.7% slower in
# the bench with the scenario's routing (58.6 against 57.6 us, bench_stages.log, same folder).

# The tile's registers are capped at 128 a thread (4 programs an SM at 4 warps; no spills in the
# sm_90a SASS) and the FP8 tile reads its weights through a TMA descriptor, both on 4 stages at
# every count. Measured on the H200 (gpt-oss-20b EP2, the step as one graph, two routing draws,
# docs/perf/2026-12-02-grouped-rows/ab_regs_{fp8,mxfp4}_seed{0,1}.log): MXFP4 capped 138.0
# against 149.7 us at 64 tokens and 132.7 against 144.3 at 32 (the cap frees a fourth program an
# SM: fc1 took 137 registers), the same within 1.2% at 1-16 tokens. FP8 through TMA and capped
# 146.6 against 152.9 (the 5-stage pointer tile that was the default from 32 tokens) at 64 tokens,
# 143.6 against 149.3 at 32, 122.0 and 130.5 against 127.2 and 138.1 at 16 (the two draws), 116.0
# and 98.4 against 121.5 and 99.5 at 8; at 4 tokens 96.2 against 95.0 (the 5-stage pointer tile:
# 93.2). 5 stages through TMA: slower at 32 and 64 tokens, faster at 8 (113.4), mixed at 16. At 4
# tokens (one slot an expert) the pointer tile uncapped was the default until 2026-12-03: over six
# routing draws and both ranks (bench, docs/perf/2026-12-03-rank/) it won by 2-6% where a rank
# touched 5 or 7 experts and lost by 4-9% where it touched 4, 6, 9 or 10 (at 9-10, a reading:
# fc2's 405-450 programs past the 396 it holds at once, 3 an SM); on the slowest rank, the step's,
# TMA's mean 78.6 us against 80.2 and worst 87.4 against 95.8, the two equal over all twelve (71.1
# and 71.4).
TILE_MAX_REGISTERS = 128

# From PASS_GRID_FROM_SLOTS_PER_EXPERT slots an expert (16 tokens at gpt-oss-20b EP2) the tile
# runs one pass of 16 slots a program (`Launch.pass_grid`) on 3 stages, capped at 80 registers: 6
# programs an SM (sm_90a: FP8 80 registers and 4 bytes of stack, MXFP4 80 and none; 28.7 and 20.5
# KB of shared memory), where a program looping over its expert's passes needs 116-128 and holds
# 4, and fc2's 720 tiles at 32-64 tokens fill one wave of 792 places instead of 1.4 waves of 528.
# Measured on the H200 (gpt-oss-20b EP2, the step as one graph), one pass against the loop: FP8
# 139.3-140.8 against 145.0-146.4 us at 64 tokens and 136.8-139.0 against 142.9-143.9 at 32 (three
# routing draws), MXFP4 1.3-4.1% faster at 16-64 (two; docs/perf/2026-12-02-one-launch/); FP8 at 16
# tokens faster in five of six draws by 3.5-4.1%, 0.6% slower in one, mean 126.7 against 130.9 us
# (both ranks, the slowest; docs/perf/2026-12-03-passes/). At 8 tokens one pass lost in most
# draws in both formats (FP8, six draws: mean 109.2 against 99.0), so below 16 the tile keeps the
# loop. Against 3 stages and 80 registers, one pass was slower uncapped (5 programs an SM; FP8
# 145.8-157.6 at 32-64 tokens), on 4 or 5 stages (FP8 3-14%, MXFP4 within 0.3%) and capped at 72
# or 64 registers (7 or 8 programs an SM, spilling: 6-47%; docs/perf/2026-12-03-passes/).
PASS_GRID_FROM_SLOTS_PER_EXPERT = 4
PASS_GRID_STAGES = 3
PASS_GRID_MAX_REGISTERS = 80


def path_launch(
    path: str, fmt: str, *, columns: int, block_m: int | None = None, pdl: bool = False
) -> Launch:
    """A path's default blocks for a stage of ``columns`` output columns (N).

    ``gemv``: the sparse GEMV's measured tiles (docs/PERF.md; `sparse_gemv.default_blocks`), one
    slot a pass unless ``block_m`` says more, 1,024 values a step divided by the slots (at least
    64), so that the slots' widened values fit in registers (module docstring: budget).
    ``dot``: 64 weight rows and 128 values a step, 16 slots a pass unless ``block_m`` says more,
    4 warps, 4 pipeline stages, at most 128 registers a thread, FP8 weights through TMA (module
    docstring: budget). Row blocks shrink to the largest power of two dividing N."""
    fits = lambda bn: min(bn, columns & -columns)
    if path == "dot":
        return Launch(path="dot", block_m=block_m or 16, block_n=fits(64), block_k=128,
                      num_warps=4, num_stages=4, pdl=pdl, tma=fmt == "fp8",
                      max_registers=TILE_MAX_REGISTERS)  # fmt: skip
    n, warps = (2, 1) if fmt == "fp8" else (16, 4)
    m = block_m or 1
    return Launch(path="gemv", block_m=m, block_n=fits(n), block_k=max(64, 1024 // m),
                  num_warps=warps, pdl=pdl)  # fmt: skip


def one_pass_launch(tile: Launch) -> Launch:
    """The tile ``tile`` running one pass a program, on the stages and register cap measured for
    it (PASS_GRID_STAGES, PASS_GRID_MAX_REGISTERS)."""
    return replace(tile, pass_grid=True, num_stages=PASS_GRID_STAGES,
                   max_registers=PASS_GRID_MAX_REGISTERS)  # fmt: skip


def default_launch(
    fmt: str, *, tokens: int, top_k: int, experts: int, columns: int, pdl: bool = False
) -> Launch:
    """The launch the `grouped_decode` arm uses for a stage of ``columns`` output columns (N),
    from the shapes alone (never the routing): the one-slot GEMV at one token (its top-k experts
    are distinct: no expert holds two slots) and up to DOT_FROM_SLOTS_PER_EXPERT slots an expert
    (a second slot of an expert is a second pass over its tile, from L2), the tensor-core tile
    above (`path_launch`; from PASS_GRID_FROM_SLOTS_PER_EXPERT slots an expert, one pass a
    program on 3 stages, 80 registers), 16 slots a pass at every count: 32 slots a pass lost at
    32 and 64 tokens in both formats on the H200 (64 tokens, gpt-oss-20b EP2: FP8 220.8 against
    179.4 us, MXFP4 253.7 against 177.3; docs/perf/2026-12-01-integrity/bench_grouped_decode.log),
    a second pass over an expert's tile reading it from L2. A tile needs 16 rows, so an N with
    fewer takes the GEMV. A GEMV of several slots a pass is never chosen (module docstring:
    budget)."""
    slots = tokens * top_k
    many = tokens > 1 and slots > DOT_FROM_SLOTS_PER_EXPERT[fmt] * experts
    if many and columns & -columns >= 16:
        tile = path_launch("dot", fmt, columns=columns, block_m=16, pdl=pdl)
        if slots >= PASS_GRID_FROM_SLOTS_PER_EXPERT * experts:
            return one_pass_launch(tile)
        return tile
    return path_launch("gemv", fmt, columns=columns, pdl=pdl)


def scale_words(w_scale: torch.Tensor) -> bool:
    """Whether MXFP4 scales ``w_scale`` [E, N, R/32] can be read as 32-bit words: every row (and
    expert) starting on a 4-byte boundary. The tile then loads a step's scales as words, which the
    software pipeline copies asynchronously with the weights (`grouped_dot`, module docstring:
    scales); byte loads otherwise."""
    return w_scale.dtype == torch.uint8 and w_scale.dim() == 3 and _rows_on(w_scale, 4)


def _rows_on(t: torch.Tensor, boundary: int) -> bool:
    """Whether every row of 3-D ``t`` (unit stride along it) starts on a ``boundary``-byte
    boundary: the base and the row and expert strides multiples of it."""
    return (t.stride(2) == 1 and t.stride(1) % boundary == 0 and t.stride(0) % boundary == 0
            and t.data_ptr() % boundary == 0)  # fmt: skip


def word_aligned_scales(w_scale: torch.Tensor) -> torch.Tensor:
    """MXFP4 scales ``w_scale`` [E, N, G] as a view whose rows start on 16-byte boundaries (G
    padded to a multiple of 16 bytes with zeros, the pad never read as a scale): the tensor
    itself when it already is one, else a copy. For `scale_words`; an arm makes it once, when its
    stages are built (gpt-oss-20b: G = 90, 96 bytes a row, 6.7% more scale bytes held)."""
    E, N, G = w_scale.shape
    if _rows_on(w_scale, 16):
        return w_scale
    padded = torch.zeros(E, N, -(-G // 16) * 16, dtype=w_scale.dtype, device=w_scale.device)
    padded[:, :, :G] = w_scale
    return padded[:, :, :G]


# The largest e8m0 scale byte (scale 2^(s - 127)) for which the MXFP4 tile folds its decode's
# constant 2^126 into the scale: 2^(s - 1) is a bf16 number up to s = 128 (`grouped_dot`,
# FOLD_SCALES). A scale above 2 (a byte past 128) means a group of 32 weights reaching past 12.
FOLD_SCALES_UP_TO = 128


def max_scale_byte(w_scale: torch.Tensor) -> int | None:
    """The largest byte of MXFP4 scales ``w_scale`` (one read back from the device: for when
    stages are built, never inside a step), None for other scales."""
    if w_scale.dtype != torch.uint8 or w_scale.numel() == 0:
        return None
    return int(w_scale.max())


_check = checker("grouped_gemv")


def grouped_gemv(
    x: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    bias_EN: torch.Tensor,
    out: torch.Tensor,
    *,
    expert_offset: int,
    launch: Launch,
    glu: str = "none",
    max_scale_byte: int | None = None,
) -> None:
    """Every touched local expert times all of its slots (module docstring). ``x`` is [T, R]
    (fc1: each slot reads its token) or [T, K, R] (fc2: each slot its own row); ``out`` is
    [T, K, N] or, with ``glu``, [T, K, N/2]; both bf16 with unit stride along the last dimension.
    Rows of ``out`` of slots not routed to a local expert are left untouched.

    ``max_scale_byte``: the largest byte of MXFP4 ``w_scale`` if the caller knows it (read once
    when an arm builds its stages; the launcher reads nothing back from a device). At most
    FOLD_SCALES_UP_TO, the tile decodes with one multiply a pair of values (`grouped_dot`,
    FOLD_SCALES), the same bits; one below the true largest byte would give wrong outputs, which
    the launcher checks where no device is read (tensors on the CPU)."""
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    fmt, T, K, E, N, R = ops.fmt, ops.T, ops.K, ops.E, ops.N, ops.R
    stride_xt, stride_xk = ops.stride_xt, ops.stride_xk
    scale_strides = (w_scale.stride(0), w_scale.stride(1)) if fmt == "mxfp4" else ()

    L = launch
    _check(L.path in PATHS, f"path must be one of {PATHS}, got {L.path!r}")
    pow2 = lambda v: v >= 1 and v & (v - 1) == 0
    _check(pow2(L.block_m), f"block_m must be a power of two, got {L.block_m}")
    _check(
        pow2(L.block_n) and L.block_n >= 2 and N % L.block_n == 0,
        f"block_n must be a power of two >= 2 dividing N ({N}), got {L.block_n}",
    )
    _check(pow2(L.block_k) and L.block_k >= 32, f"block_k must be a power of two >= 32, got "
           f"{L.block_k}")  # fmt: skip
    _check(L.num_stages >= 0, f"num_stages must be >= 0, got {L.num_stages}")
    if L.path == "dot":
        _check(
            min(L.block_m, L.block_n) >= 16 and L.block_k >= (64 if fmt == "mxfp4" else 16),
            f"the dot path needs block_m, block_n >= 16 and block_k >= "
            f"{64 if fmt == 'mxfp4' else 16}, got {L.block_m}, {L.block_n}, {L.block_k}",
        )
    else:
        _check(L.num_stages == 0, "num_stages is for the dot path")
    _check(not L.tma or (L.path, fmt) == ("dot", "fp8"), "tma is for the FP8 dot path")
    _check(not L.pass_grid or L.path == "dot", "pass_grid is for the dot path")
    _check(L.max_registers == 0 or 24 <= L.max_registers <= 255,
           f"max_registers must be 0 or in [24, 255], got {L.max_registers}")  # fmt: skip
    fold = fmt == "mxfp4" and max_scale_byte is not None and max_scale_byte <= FOLD_SCALES_UP_TO
    if max_scale_byte is not None and not w_scale.is_cuda and fmt == "mxfp4":
        largest = int(w_scale.max())
        _check(largest <= max_scale_byte, f"max_scale_byte ({max_scale_byte}) is below w_scale's "
               f"largest byte ({largest})")  # fmt: skip
    if T == 0 or K == 0 or E == 0:
        return
    block_e = triton.next_power_of_2(E)
    common = dict(
        GLU=glu, BLOCK_M=L.block_m, BLOCK_N=L.block_n, BLOCK_K=L.block_k, EVEN_K=R % L.block_k == 0,
        EXACT_RNE=not out.is_cuda, BLOCK_E=block_e, SCAN=scan_width(T * K, block_e, L.block_m),
        GDC=L.pdl and HAS_PDL and out.is_cuda, num_warps=L.num_warps,
    )  # fmt: skip
    if common["GDC"]:
        common["launch_pdl"] = True
    if L.max_registers:
        common["maxnreg"] = L.max_registers
    # TMA needs the weights as packed [E * N, R] rows on a 16-byte boundary (R is a multiple of
    # 32, so the rows' 16-byte stride holds); other weights take the pointer loads.
    tma = L.tma and w.is_contiguous() and w.data_ptr() % 16 == 0
    w_rows = w.view(E * N, w.shape[2])  # the weight bytes of a row (R, or R / 2 for MXFP4)
    w_arg = TensorDescriptor.from_tensor(w_rows, [L.block_n, L.block_k]) if tma else w
    args = (
        x, topk_ids_TK, w_arg, w_scale, bias_EN, out, T * K, K, expert_offset, E, R,
        stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1), *scale_strides,
        bias_EN.stride(0), out.stride(0), out.stride(1),
    )  # fmt: skip
    # One program a touched expert (at most min(E, T * K) of them) or, with pass_grid, one a pass
    # of block_m slots: at most one a touched expert plus one for every further block_m slots.
    programs = min(E, T * K) + (T * K // L.block_m if L.pass_grid else 0)
    grid = (N // L.block_n, programs)
    if L.path == "dot" and fmt == "fp8":
        _grouped_dot_fp8[grid](*args, NUM_STAGES=L.num_stages, INTERPRET=not out.is_cuda, TMA=tma,
                               PASS_GRID=L.pass_grid, **common)  # fmt: skip
    elif L.path == "dot":
        _grouped_dot_mxfp4[grid](
            *args,
            NUM_STAGES=L.num_stages,
            INTERPRET=not out.is_cuda,
            PASS_GRID=L.pass_grid,
            SCALE_WORDS=scale_words(w_scale) and L.block_k % 128 == 0,
            FOLD_SCALES=fold,
            **common,
        )
    elif fmt == "fp8":
        _grouped_gemv_fp8[grid](*args, **common)
    else:
        _grouped_gemv_mxfp4[grid](*args, PTX=out.is_cuda, **common)
