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
enumerates those passes instead, min(E, T * K) + T * K // BLOCK_M programs, one pass each. With
``Launch.slot_grid`` (the one-slot GEMV) it enumerates the slots, T * K programs, each reading
the routing once before its weights, as the sparse GEMV does (`grouped_slots.slot_expert`).
BLOCK_N divides N, but for the FP8 tile through TMA, whose grid takes ceil(N / BLOCK_N) blocks:
an expert's last one reaches past its rows, which a 3-D descriptor [E, N, R] zero-fills without
reading them, its bias and store masked (`grouped_dot`, RAGGED).
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

The path and the blocks are launcher arguments (`Launch`) chosen from the shapes
(`moebench.kernels.grouped_launch.default_launch`, with the measurements behind each choice), never
from the routing, so that a step captured once serves every routing; `tools/bench_grouped_decode.py`
times the alternatives on the GPU.

Budget, from sm_90a SASS compiled offline with triton 3.6 at gpt-oss-20b's shapes
(`tools/sass_grouped_decode.py`, which also counts registers, spills and the programs an SM holds).
The one-slot GEMV's weight loop is the sparse GEMV's, instruction for instruction (FP8 5.4 a weight
byte, 66 registers; MXFP4 12.1, 128 registers against the sparse kernel's 96), the routing scan
coming before it. Each further slot of a pass adds about FP8 5.6, MXFP4 3-4 a byte (the
multiply-adds and the slot's bf16 widening; the weights are converted once), so a GEMV pass of
several slots costs as much as several one-slot passes and the arm never takes one
(`grouped_launch`). At 1,024 values a step it also spills: FP8 4 slots 255 registers and 200 B of
stack, 8 slots 2.8 KB of stack and 1,400 local loads and stores in the loop (7-15 ms at 8 tokens on
the H200); `grouped_launch.path_launch` shortens the step to 1,024 / slots values (FP8 2-16 slots
and MXFP4 2-16: no spills). The tensor-core tile (64 rows, 128 values a step, 4 warps, 16 slots) is
a warpgroup MMA (HGMMA 64x16x16) fed from registers, flat in the slots up to the pass, its registers
capped at 128 a thread (4 programs an SM; no spills) while a program loops over its expert's passes,
at 80 (6 programs an SM; FP8 4 bytes of stack, MXFP4 none; FP8 now steps 64 values on 6
stages there, at 77 registers and no stack: `grouped_launch.PASS_GRID_FP8_BLOCK_K`) where it runs
one pass (`Launch.pass_grid`, the default from PASS_GRID_FROM_SLOTS_PER_EXPERT): FP8 4.4 a byte
through TMA (4.2 with pointer loads, which left fc1 136 registers and 3 programs an SM; 3.4 with
``.to(tl.bfloat16)``, whose fp16 -> bf16 F2F a value runs on the SMs' slow conversion pipe and
bounded the tile on the H200, `grouped_dot`), MXFP4 8.2 (the expert loop) and 8.6 (one pass; 8 bytes
of stack) with its bytes read in the operand's row order, its scales as words in the pipeline and
folded into its decode (``max_scale_byte`` up to FOLD_SCALES_UP_TO; 9.0 and 9.4 with the decode's
two multiplies, 1.7-8.8% slower on the H200; `scale_words`; 10.0-10.3 with the scales as byte loads
a step ahead, 1.2-5.5% slower on the H200; 9.3 in natural order, whose decoded values went through
shared memory and ran 9-20% slower, `grouped_dot`; 12.3 with ``tl.dot_scaled``, whose loads were not
pipelined). Those MXFP4 figures are the natural layout's: the arm reads its weights in
`mx_rotated`'s layout (`grouped_launch.MXFP4_ROTATED`), 6.4 and 6.8 a byte for the tile and 8.9
for the one-slot GEMV capped at 96 registers, against 12.1 above.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.expert_ready import READY_ROLES, check_ready
from moebench.kernels.gemv_parts import row_bias
from moebench.kernels.grouped_dot import _grouped_dot_fp8, _grouped_dot_mxfp4
from moebench.kernels.grouped_launch import PATHS, Launch
from moebench.kernels.grouped_slots import pass_slots, program_work, scan_width, slot_epilogue
from moebench.kernels.jit import (
    HAS_PDL,
    PREFETCH_MAX_BOXES,
    bf16_pairs,
    e2m1_pair,
    e8m0_scale,
    pdl_launch_dependents,
    pdl_wait,
)
from moebench.kernels.launch import check_slot_operands, checker
from moebench.kernels.mx_dot_order import fits as fits_dot_order
from moebench.kernels.mx_rotated import FOLD_SCALES_UP_TO, rotated_word_values
from moebench.kernels.split_k import check_split
from moebench.kernels.stream_k import _grouped_dot_mxfp4_stream, check_stream, stream_programs


@triton.jit
def _grouped_gemv_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    GDC: tl.constexpr, EARLY_BIAS: tl.constexpr, SLOT_GRID: tl.constexpr,
):  # fmt: skip
    # The next kernel may launch from the start, or on the slot grid once there is work to do.
    pdl_launch_dependents(GDC and not SLOT_GRID)
    e, count, _ = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E,
                               SCAN, BLOCK_M, False, SLOT_GRID)  # fmt: skip
    if count == 0:
        return
    pdl_launch_dependents(GDC and SLOT_GRID)
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
    if EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = pass_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                              BLOCK_M, SCAN, SLOT_GRID)  # fmt: skip
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
        if not EARLY_BIAS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        slot_epilogue(h, bias, n_block, t64, k64, m_ok, out_ptr, stride_ot, stride_ok, GLU,
                      BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


@triton.jit
def _grouped_gemv_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    PTX: tl.constexpr, GDC: tl.constexpr, EARLY_BIAS: tl.constexpr, ROTATED: tl.constexpr,
    SLOT_GRID: tl.constexpr,
):  # fmt: skip
    # The next kernel may launch from the start, or on the slot grid once there is work to do.
    pdl_launch_dependents(GDC and not SLOT_GRID)
    e, count, _ = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E,
                               SCAN, BLOCK_M, False, SLOT_GRID)  # fmt: skip
    if count == 0:
        return
    pdl_launch_dependents(GDC and SLOT_GRID)
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
    if EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = pass_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                              BLOCK_M, SCAN, SLOT_GRID)  # fmt: skip
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
            if not ROTATED:
                w_hi = w >> 16
            part = tl.zeros([BLOCK_M, GROUPS, BLOCK_N, 4], dtype=tl.float32)
            for j in tl.static_range(4):
                if EVEN_K:
                    xp = tl.load(x_at + j)
                else:
                    xp = tl.load(x_at + j, mask=g_ok[None, :, None], other=0)
                x_lo, x_hi = bf16_pairs(xp)
                x_lo, x_hi = x_lo[:, :, None, :], x_hi[:, :, None, :]
                if ROTATED:  # `mx_rotated`'s layout, as the sparse GEMV (no 2^-14 to undo)
                    if j % 2 == 0:
                        lo, hi, lo_next, hi_next = rotated_word_values(w, j // 2, PTX)
                    else:
                        lo, hi = lo_next, hi_next
                elif j < 2:
                    lo, hi = e2m1_pair(w, j, PTX)
                else:
                    lo, hi = e2m1_pair(w_hi, j - 2, PTX)
                # Two separate updates keep each product a fused multiply-add.
                part += lo * x_lo
                part += hi * x_hi
            acc += tl.sum(part, axis=3) * e8m0_scale(s)
        h = tl.sum(acc, axis=1)
        if not ROTATED:  # undo the 2^-14 of the fp16 placement (kernels.jit); no module globals
            h = h * 16384.0
        if not EARLY_BIAS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        slot_epilogue(h, bias, n_block, t64, k64, m_ok, out_ptr, stride_ot, stride_ok, GLU,
                      BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


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


def max_scale_byte(w_scale: torch.Tensor) -> int | None:
    """The largest byte of MXFP4 scales ``w_scale`` (one read back from the device: for when
    stages are built, never inside a step), None for other scales."""
    if w_scale.dtype != torch.uint8 or w_scale.numel() == 0:
        return None
    return int(w_scale.max())


_check = checker("grouped_gemv")


def grid_programs(T: int, K: int, E: int, launch: Launch) -> int:
    """The grid's second axis: one program a touched expert (at most min(E, T * K) of them) or,
    with pass_grid, one a pass of block_m slots: at most one a touched expert plus one for every
    further block_m slots; with slot_grid one a slot (T * K), those of a slot that is not its
    local expert's first leaving at once."""
    if launch.slot_grid:
        return T * K
    return min(E, T * K) + (T * K // launch.block_m if launch.pass_grid else 0)


def grid_tiles(T: int, K: int, E: int, N: int, launch: Launch) -> int:
    """The most tiles, (pass, row block) pairs, a launch over N rows has: those a ``split_k``
    launch sums (`split_k`) and a ``stream_k`` grid shares out (`stream_k`)."""
    return grid_programs(T, K, E, launch) * triton.cdiv(N, launch.block_n)


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
    ready: torch.Tensor | None = None,
    split: tuple[torch.Tensor, torch.Tensor] | None = None,
    stream: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """Every touched local expert times all of its slots (module docstring). ``x`` is [T, R]
    (fc1: each slot reads its token) or [T, K, R] (fc2: each slot its own row); ``out`` is
    [T, K, N] or, with ``glu``, [T, K, N/2]; both bf16 with unit stride along the last dimension.
    Rows of ``out`` of slots not routed to a local expert are left untouched.

    ``max_scale_byte``: the largest byte of MXFP4 ``w_scale`` if the caller knows it (read once
    when an arm builds its stages; the launcher reads nothing back from a device). At most
    FOLD_SCALES_UP_TO, the tile decodes with one multiply a pair of values (`grouped_dot`,
    FOLD_SCALES), the same bits; one below the true largest byte would give wrong outputs, which
    the launcher checks where no device is read (tensors on the CPU).

    ``ready``: the counters (`expert_ready.ready_counters`) fc1 and fc2 share when their launches
    set ``expert_ready``. ``split``: (partials, counters), `split_k.split_scratch`'s for the
    launch's pairs (`grid_tiles`), where ``launch.split_k`` > 1. ``stream``: (partials,
    counters), `stream_k.stream_scratch`'s for `stream_k.stream_programs` programs and
    `grid_tiles` tiles, where ``launch.stream_k`` > 0."""
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    fmt, T, K, E, N, R = ops.fmt, ops.T, ops.K, ops.E, ops.N, ops.R
    stride_xt, stride_xk = ops.stride_xt, ops.stride_xk
    scale_strides = (w_scale.stride(0), w_scale.stride(1)) if fmt == "mxfp4" else ()

    L = launch
    _check(L.path in PATHS, f"path must be one of {PATHS}, got {L.path!r}")
    pow2 = lambda v: v >= 1 and v & (v - 1) == 0
    _check(pow2(L.block_m), f"block_m must be a power of two, got {L.block_m}")
    # A block_n that does not divide N: the FP8 tile through TMA only (checked below, where the
    # launcher knows whether TMA reads the weights), its expert's last row block masked.
    ragged = N % L.block_n != 0
    _check(
        pow2(L.block_n) and L.block_n >= 2 and (N % L.block_n == 0 or L.tma),
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
    _check(not L.slot_grid or (L.path == "gemv" and L.block_m == 1), "slot_grid is for the GEMV "
           f"with one slot a pass, got path {L.path!r}, block_m {L.block_m}")  # fmt: skip
    _check(not L.mx_rotated or fmt == "mxfp4", "mx_rotated is for MXFP4 weights (in "
           "mx_rotated's layout)")  # fmt: skip
    _check(not L.fp8_placed or (L.path, fmt) == ("dot", "fp8"), "fp8_placed is for the FP8 dot "
           "path (weights in fp8_placed's layout)")  # fmt: skip
    _check(not L.fp8_packed or ((L.path, fmt) == ("dot", "fp8") and L.tma and R % L.block_k == 0),
           f"fp8_packed is for the FP8 dot path through TMA with R ({R}) a multiple of block_k "
           f"({L.block_k}) (weights in tile_packed's order)")  # fmt: skip
    _check(not L.mx_packed or (L.path, fmt) == ("dot", "mxfp4"), "mx_packed is for the MXFP4 "
           "dot path (weights in tile_packed's order, the last box ragged)")  # fmt: skip
    _check(not L.mx_packed or w.is_contiguous(), "mx_packed weights must be contiguous (the "
           "tile's boxes are one run a program)")  # fmt: skip
    _check(not L.mx_packed_scales or ((L.path, fmt) == ("dot", "mxfp4") and L.block_k % 128 == 0),
           f"mx_packed_scales is for the MXFP4 dot path with block_k a multiple of 128, got "
           f"{L.block_k} (scales in tile_packed's order, a box's rows whole words)")  # fmt: skip
    _check(not L.mx_packed_scales or (w_scale.is_contiguous() and w_scale.data_ptr() % 4 == 0),
           "mx_packed_scales scales must be contiguous on a 4-byte boundary (the tile reads "
           "each step's as one run of words)")  # fmt: skip
    _check(
        not L.mx_dot_order or ((L.path, fmt) == ("dot", "mxfp4") and L.mx_rotated),
        "mx_dot_order is for the MXFP4 dot path on rotated bytes (mx_dot_order's layout)",
    )
    _check(not L.mx_dot_order or fits_dot_order(R, L.block_k), f"mx_dot_order needs R ({R}) "
           f"a multiple of block_k ({L.block_k}) or its last step a power of two of at least 32 "
           "values")  # fmt: skip
    _check(not L.mx_biased_scales or ((L.path, fmt) == ("dot", "mxfp4") and L.mx_rotated),
           "mx_biased_scales is for the MXFP4 dot path on rotated bytes")  # fmt: skip
    most = PREFETCH_MAX_BOXES.value
    _check(0 <= L.fp8_prefetch <= most and (not L.fp8_prefetch or L.fp8_packed),
           f"fp8_prefetch must be 0 or, with fp8_packed, 1 to {most} boxes, got "
           f"{L.fp8_prefetch}")  # fmt: skip
    _check(L.fp8_prefetch_ahead >= 0 and (not L.fp8_prefetch_ahead or L.fp8_packed),
           f"fp8_prefetch_ahead must be 0 or, with fp8_packed, a number of steps, got "
           f"{L.fp8_prefetch_ahead}")  # fmt: skip
    _check(L.expert_ready in READY_ROLES, f"expert_ready must be one of {list(READY_ROLES)}, got "
           f"{L.expert_ready!r}")  # fmt: skip
    if L.expert_ready:
        _check(L.path == "dot", "expert_ready is for the dot path")
        check_ready(ready, E, out.device, _check)
    if L.stream_k:
        check_stream(stream, L, fmt, R, grid_tiles(T, K, E, N, L), out.device, _check)
    if L.split_k != 1:
        _check(
            pow2(L.split_k) and (L.path, fmt) == ("dot", "mxfp4") and L.pass_grid
            and L.mx_packed_scales and glu == "none" and L.expert_ready != "signal"
            and R // L.block_k >= L.split_k,
            f"split_k must be 1 or, for the MXFP4 one-pass tile with packed scales on a stage with "
            f"no GLU (not signalling), a power of two up to its whole steps ({R // L.block_k}), "
            f"got {L.split_k}",
        )  # fmt: skip
        check_split(split, grid_tiles(T, K, E, N, L), L.split_k, L.block_n, L.block_m,
                    out.device, _check)  # fmt: skip
    _check(L.max_registers == 0 or 24 <= L.max_registers <= 255,
           f"max_registers must be 0 or in [24, 255], got {L.max_registers}")  # fmt: skip
    fold = fmt == "mxfp4" and max_scale_byte is not None and max_scale_byte <= FOLD_SCALES_UP_TO
    _check(not L.mx_biased_scales or fold, f"mx_biased_scales needs max_scale_byte (of the scales "
           f"before biasing) at most {FOLD_SCALES_UP_TO}, got {max_scale_byte}")  # fmt: skip
    if max_scale_byte is not None and not w_scale.is_cuda and fmt == "mxfp4":
        largest = int(w_scale.max())
        if L.mx_biased_scales:  # the bytes before biasing (byte 0 kept)
            largest = max(largest - 126, 0)
        _check(largest <= max_scale_byte, f"max_scale_byte ({max_scale_byte}) is below w_scale's "
               f"largest byte ({largest})")  # fmt: skip
    # TMA needs the weights as packed [E * N, R] rows on a 16-byte boundary (R is a multiple of
    # 32, so the rows' 16-byte stride holds); other weights take the pointer loads.
    tma = L.tma and w.is_contiguous() and w.data_ptr() % 16 == 0
    _check(tma or not L.fp8_packed, "fp8_packed weights must be contiguous on a 16-byte boundary "
           "(the tile reads them through TMA only)")  # fmt: skip
    _check(not ragged or (tma and not L.fp8_packed), f"block_n ({L.block_n}) not dividing N "
           f"({N}) is for the FP8 tile reading contiguous, unpacked weights by TMA")  # fmt: skip
    if T == 0 or K == 0 or E == 0:
        return
    block_e = triton.next_power_of_2(E)
    common = dict(
        GLU=glu, BLOCK_M=L.block_m, BLOCK_N=L.block_n, BLOCK_K=L.block_k, EVEN_K=R % L.block_k == 0,
        EXACT_RNE=not out.is_cuda, BLOCK_E=block_e, SCAN=scan_width(T * K, block_e, L.block_m),
        GDC=L.pdl and HAS_PDL and out.is_cuda, EARLY_BIAS=L.early_bias, num_warps=L.num_warps,
    )  # fmt: skip
    if common["GDC"]:
        common["launch_pdl"] = True
    if L.max_registers:
        common["maxnreg"] = L.max_registers
    w_rows = w.view(E * N, w.shape[2])  # the weight bytes of a row (R, or R / 2 for MXFP4)
    box = [L.block_n, L.block_k]
    if L.fp8_packed:  # `tile_packed`: one [block_n, block_k] box after the other
        w_rows = w.view(-1, L.block_k)
    elif ragged:  # [E, N, R]: an expert's rows past N zero-filled by the copy engine, not read
        w_rows, box = w, [1, *box]
    w_arg = TensorDescriptor.from_tensor(w_rows, box) if tma else w
    args = (
        x, topk_ids_TK, w_arg, w_scale, bias_EN, out, T * K, K, expert_offset, E, R,
        stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1), *scale_strides,
        bias_EN.stride(0), out.stride(0), out.stride(1),
    )  # fmt: skip
    programs = grid_programs(T, K, E, L)
    grid = (triton.cdiv(N, L.block_n) * L.split_k, programs)
    ready_arg = w if ready is None else ready  # any pointer: unread without expert_ready
    if L.path == "dot" and fmt == "fp8":
        _grouped_dot_fp8[grid](*args, w, ready_arg, NUM_STAGES=L.num_stages,
                               INTERPRET=not out.is_cuda, TMA=tma, PASS_GRID=L.pass_grid,
                               PLACED=L.fp8_placed, PACKED=L.fp8_packed, RAGGED=ragged,
                               PREFETCH=L.fp8_prefetch, AHEAD=L.fp8_prefetch_ahead,
                               READY=READY_ROLES[L.expert_ready], **common)  # fmt: skip
    elif L.path == "dot":
        # The MXFP4 tile's options, on either grid.
        tile = dict(NUM_STAGES=L.num_stages, INTERPRET=not out.is_cuda,
                    FOLD_SCALES=2 if L.mx_biased_scales else fold, ROTATED=L.mx_rotated,
                    PACKED=L.mx_packed, PACKED_SCALES=L.mx_packed_scales,
                    DOT_ORDER=L.mx_dot_order, TAIL_K=R % L.block_k)  # fmt: skip
        if L.stream_k:
            _grouped_dot_mxfp4_stream[(stream_programs(out.device, L.stream_k),)](
                *args[:11], triton.cdiv(N, L.block_n), *args[11:], *stream, **tile, **common
            )
        else:
            split_args = (w, w) if split is None else split  # any pointers: unread without split_k
            _grouped_dot_mxfp4[grid](
                *args,
                ready_arg,
                *split_args,
                SPLIT_K=L.split_k,
                READY=READY_ROLES[L.expert_ready],
                PASS_GRID=L.pass_grid,
                SCALE_WORDS=(L.mx_packed_scales or scale_words(w_scale)) and L.block_k % 128 == 0,
                **tile,
                **common,
            )
    elif fmt == "fp8":
        _grouped_gemv_fp8[grid](*args, SLOT_GRID=L.slot_grid, **common)
    else:
        _grouped_gemv_mxfp4[grid](*args, PTX=out.is_cuda, ROTATED=L.mx_rotated,
                                  SLOT_GRID=L.slot_grid, **common)  # fmt: skip
