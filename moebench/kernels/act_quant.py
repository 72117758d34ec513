"""The `act` stage: the gated activation of the FC1 output, quantised to FP8 or written as bf16.

Legend: M rows of the capacity buffer, F intermediate, G = F/128 column groups, G4 = ceil(G/4)
packed scale words, E local experts.

Tensors:
- ``h_M2F``   bf16 [M, 2F], the FC1 output: gate columns [0, F), up columns [F, 2F).
- ``out_MF``  float8_e4m3fn or bf16 [M, F], the activation.
- ``sf_MG4``  int32 [M, G4] (fp8 only): UE8M0 exponent bytes, four groups per word (byte j of word p
  holds group 4p+j, groups past the last are zero bytes), any strides; the layout of
  `reference.empty_packed_scales` is M-major, strides (1, M_pad).
- ``ends_E``  int32 [E] (masked only): the endpoint contract of `moebench.core.layout`.

Two launchers share one per-tile body (`_load_item` then `_store_item`), so their outputs on
live rows are bitwise identical: `act_quant_dense` covers every row of the buffer;
`act_quant_masked` walks only each expert's [start, end) and leaves every other row untouched
(data and scales), reading the endpoints on the device only, so it can be captured in a CUDA graph
once and replayed with any routing. The masked launcher has three schedules (``SCHEDULES``,
measured in docs/PERF.md): the dense grid with an early exit per row block, a persistent stride
loop over the live items, and that loop with the next item's loads issued before the current
item's stores. The arms choose one per case from the
live fraction (arms/prefill/pipeline.py, masked_act_launch).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.core.layout import check_alignment
from moebench.core.vocabulary import ACTIVATIONS
from moebench.kernels.jit import (
    expert_spans,
    fp32_to_bf16,
    fp32_to_e4m3_bits,
    gated_activation,
    ue8m0_scale,
)
from moebench.kernels.launch import programs_per_device

GROUP = 128
# Rows per tile: a [32, 128] fp32 tile per group keeps the gate and up tiles in registers at four
# warps. Per-row results do not depend on it, so dense and masked agree whatever it is.
BLOCK_ROWS = 32
SCHEDULES = ("grid", "persistent", "stream")


@triton.jit
def _load_item(h_ptr, row0, row_end, g0, F, stride_hm, BLOCK_ROWS: tl.constexpr,
               GROUPS: tl.constexpr):  # fmt: skip
    # The bf16 gate and up tiles of rows [row0, min(row0 + BLOCK_ROWS, row_end)), column groups
    # [g0, g0 + GROUPS); rows outside read nothing (0). An item with row_end <= row0 is empty and
    # costs no memory traffic. They stay bf16 until `_store_item` uses them, so a prefetched
    # item's loads are not waited for before the current item's math.
    rows = row0 + tl.arange(0, BLOCK_ROWS)
    # 64-bit row offsets: M * 2F passes 2^31 elements for large capacity buffers.
    rows64 = rows.to(tl.int64)
    col = g0 * 128 + tl.arange(0, GROUPS * 128)
    # Full-shape mask: the interpreter rejects a [rows, 1] mask broadcast against the tile.
    mask = (rows < row_end)[:, None] & (col[None, :] < F)
    h_rows = h_ptr + rows64[:, None] * stride_hm + col[None, :]
    gate = tl.load(h_rows, mask=mask, other=0.0)
    up = tl.load(h_rows + F, mask=mask, other=0.0)
    return gate, up


@triton.jit
def _store_item(
    gate,
    up,
    out_ptr,
    sf_ptr,
    row0,
    row_end,
    g0,
    F,
    stride_om,
    stride_sm,
    stride_sw,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    GROUPS: tl.constexpr,
):
    # The activation of an item loaded by `_load_item`, quantised and stored. The math is
    # elementwise per (row, group), so a row's bytes do not depend on which kernel wrote them,
    # on GROUPS, or on when its tiles were loaded.
    rows = row0 + tl.arange(0, BLOCK_ROWS)
    row_ok = rows < row_end
    rows64 = rows.to(tl.int64)
    col = g0 * 128 + tl.arange(0, GROUPS * 128)
    mask = row_ok[:, None] & (col[None, :] < F)
    a = gated_activation(gate.to(tl.float32), up.to(tl.float32), ACTIVATION)
    out_ptrs = out_ptr + rows64[:, None] * stride_om + col[None, :]
    if OUT_FP8:
        # One power-of-two scale per (row, group): the division by it is an exact multiply, so only
        # the e4m3 rounding is lossy.
        a3 = tl.reshape(a, [BLOCK_ROWS, GROUPS, 128])
        exp, inv = ue8m0_scale(tl.max(tl.abs(a3), axis=2))
        q = tl.reshape(a3 * inv[:, :, None], [BLOCK_ROWS, GROUPS * 128])
        tl.store(out_ptrs, fp32_to_e4m3_bits(q, EXACT_RNE), mask=mask)
        # The exponent of group g is byte g % 4 of packed word g // 4 (little-endian int32): each
        # item stores its own bytes, no program waits for the rest of a word.
        groups = F // 128
        g = g0 + tl.arange(0, GROUPS)
        word = rows64[:, None] * stride_sm + (g // 4)[None, :] * stride_sw
        sf_bytes = sf_ptr.to(tl.pointer_type(tl.uint8))
        tl.store(
            sf_bytes + word * 4 + (g % 4)[None, :],
            exp.to(tl.uint8),
            mask=row_ok[:, None] & (g < groups)[None, :],
        )
        # The item holding the last group also writes the zero bytes past it in its word.
        last = groups - 1
        if (g0 <= last) & (last < g0 + GROUPS):
            last_word = rows64 * stride_sm + (last // 4) * stride_sw
            for j in tl.static_range(1, 4):
                pad_ok = tl.full([BLOCK_ROWS], 0, tl.int32) + (last % 4) + j < 4
                tl.store(
                    sf_bytes + last_word * 4 + (last % 4) + j,
                    tl.zeros([BLOCK_ROWS], tl.uint8),
                    mask=row_ok & pad_ok,
                )
    else:
        tl.store(out_ptrs, fp32_to_bf16(a, EXACT_RNE), mask=mask)


@triton.jit
def _act_quant_item(
    h_ptr,
    out_ptr,
    sf_ptr,
    row0,
    row_end,
    g0,
    F,
    stride_hm,
    stride_om,
    stride_sm,
    stride_sw,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    GROUPS: tl.constexpr,
):
    # Rows [row0, min(row0 + BLOCK_ROWS, row_end)) of column groups [g0, g0 + GROUPS), 128 columns
    # each: loaded, then computed and stored.
    gate, up = _load_item(h_ptr, row0, row_end, g0, F, stride_hm, BLOCK_ROWS, GROUPS)
    _store_item(
        gate, up, out_ptr, sf_ptr, row0, row_end, g0, F, stride_om, stride_sm, stride_sw,
        ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS, GROUPS,
    )  # fmt: skip


@triton.jit
def _act_quant_dense_kernel(
    h_ptr,
    out_ptr,
    sf_ptr,
    M,
    F,
    stride_hm,
    stride_om,
    stride_sm,
    stride_sw,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    GROUPS: tl.constexpr,
):
    # Grid (ceil(M / BLOCK_ROWS), ceil(G / GROUPS)): one item a program, every row.
    _act_quant_item(
        h_ptr, out_ptr, sf_ptr, tl.program_id(0) * BLOCK_ROWS, M, tl.program_id(1) * GROUPS, F,
        stride_hm, stride_om, stride_sm, stride_sw,
        ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS, GROUPS,
    )  # fmt: skip


@triton.jit
def _locate(w, items, ex, starts, ends, tiles, tiles_end, BLOCK_ROWS: tl.constexpr,
            GROUPS: tl.constexpr):  # fmt: skip
    # (first row, row end, first group) of live work item w: item w is (tile, group) with the
    # tiles of all experts numbered one after another. Past the last item no expert matches and
    # the item is (0, 0, g0): empty, so loading it reads nothing.
    tile = w // items
    g0 = (w % items) * GROUPS
    # The expert owning this tile: how many experts' tiles end at or before it.
    e = tl.sum((tiles_end <= tile).to(tl.int32), axis=0)
    mine = ex == e
    first_tile = tl.sum(tl.where(mine, tiles_end - tiles, 0), axis=0)
    start = tl.sum(tl.where(mine, starts, 0), axis=0)
    end = tl.sum(tl.where(mine, ends, 0), axis=0)
    return start + (tile - first_tile) * BLOCK_ROWS, end, g0


@triton.jit
def _act_quant_masked_kernel(
    h_ptr,
    out_ptr,
    sf_ptr,
    ends_ptr,
    M,
    F,
    E,
    stride_hm,
    stride_om,
    stride_sm,
    stride_sw,
    ALIGNMENT: tl.constexpr,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_E: tl.constexpr,
    GROUPS: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    # A fixed grid of programs walks the live work only (see `_locate`). Each program recomputes,
    # from the endpoints alone, every expert's [start, end) and its tile count
    # (start[e] = align_up(end[e-1], A)), so no padding row is visited, no program is spent on an
    # empty expert, and one expert holding every row is spread over the whole grid as evenly as
    # many small experts are.
    ex, in_e, starts, ends = expert_spans(ends_ptr, E, ALIGNMENT, BLOCK_E)
    # Endpoints past the buffer are a scatter bug that the correctness gates report; the clamp only
    # keeps such a routing from writing out of bounds.
    ends = tl.minimum(ends, M)
    tiles = tl.where(in_e, (tl.maximum(ends - starts, 0) + BLOCK_ROWS - 1) // BLOCK_ROWS, 0)
    tiles_end = tl.cumsum(tiles, axis=0)
    items = (F // 128 + GROUPS - 1) // GROUPS
    work = tl.sum(tiles, axis=0) * items
    step = tl.num_programs(0)
    if PREFETCH:
        # Software pipelining by hand: the next item's tiles are loaded before this item's math
        # and stores, so each program keeps a load in flight while it computes. The loads of the
        # item past the last one are masked off (`_locate` makes it empty).
        row0, end, g0 = _locate(tl.program_id(0), items, ex, starts, ends, tiles, tiles_end,
                                BLOCK_ROWS, GROUPS)  # fmt: skip
        gate, up = _load_item(h_ptr, row0, end, g0, F, stride_hm, BLOCK_ROWS, GROUPS)
        for w in range(tl.program_id(0), work, step):
            n_row0, n_end, n_g0 = _locate(w + step, items, ex, starts, ends, tiles, tiles_end,
                                          BLOCK_ROWS, GROUPS)  # fmt: skip
            n_gate, n_up = _load_item(h_ptr, n_row0, n_end, n_g0, F, stride_hm, BLOCK_ROWS, GROUPS)
            _store_item(
                gate, up, out_ptr, sf_ptr, row0, end, g0, F, stride_om, stride_sm, stride_sw,
                ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS, GROUPS,
            )  # fmt: skip
            row0, end, g0, gate, up = n_row0, n_end, n_g0, n_gate, n_up
    else:
        for w in range(tl.program_id(0), work, step):
            row0, end, g0 = _locate(w, items, ex, starts, ends, tiles, tiles_end, BLOCK_ROWS,
                                    GROUPS)  # fmt: skip
            _act_quant_item(
                h_ptr, out_ptr, sf_ptr, row0, end, g0, F,
                stride_hm, stride_om, stride_sm, stride_sw,
                ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS, GROUPS,
            )  # fmt: skip


@triton.jit
def _block_end(ends_ptr, row0, M, E, ALIGNMENT: tl.constexpr, BLOCK_E: tl.constexpr):
    # The end of the expert whose aligned span holds row row0: the expert whose start is the last
    # at or before it (start[e] = align_up(end[e-1], A)). Both endpoint vectors come in one round
    # of loads and the expert's end is picked from the vector instead of a second, dependent load
    # once the expert is known (on a full buffer every program pays this round trip before its
    # first row load).
    ex, in_e, starts, ends = expert_spans(ends_ptr, E, ALIGNMENT, BLOCK_E)
    e = tl.sum(((starts <= row0) & in_e).to(tl.int32), axis=0) - 1
    # Endpoints past the buffer are a scatter bug the gates report; the clamp keeps it in bounds.
    return tl.minimum(tl.sum(tl.where(ex == e, ends, 0), axis=0), M)


@triton.jit
def _act_quant_masked_grid_kernel(
    h_ptr,
    out_ptr,
    sf_ptr,
    ends_ptr,
    M,
    F,
    E,
    stride_hm,
    stride_om,
    stride_sm,
    stride_sw,
    ALIGNMENT: tl.constexpr,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_E: tl.constexpr,
    GROUPS: tl.constexpr,
):
    # The dense grid, masked: grid (ceil(M / BLOCK_ROWS), ceil(G / GROUPS)). BLOCK_ROWS divides the
    # alignment, so a row block lies in one expert's aligned span: the expert whose start is the
    # last at or before the block's first row (start[e] = align_up(end[e-1], A)). A block past
    # that expert's end (padding, tail) returns before loading anything; a live block stops at the
    # end. On a full buffer this is the dense kernel plus one lookup a program.
    row0 = tl.program_id(0) * BLOCK_ROWS
    g0 = tl.program_id(1) * GROUPS
    end = _block_end(ends_ptr, row0, M, E, ALIGNMENT, BLOCK_E)
    if row0 < end:
        _act_quant_item(
            h_ptr, out_ptr, sf_ptr, row0, end, g0, F,
            stride_hm, stride_om, stride_sm, stride_sw,
            ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS, GROUPS,
        )  # fmt: skip


def _check(h_M2F: torch.Tensor, out_MF: torch.Tensor, sf_MG4, activation: str) -> bool:
    """Validate the shared arguments; True when the output is FP8."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if h_M2F.dim() != 2 or h_M2F.dtype != torch.bfloat16:
        raise ValueError(f"h_M2F must be a 2-D bf16 tensor, got {h_M2F.dtype}{tuple(h_M2F.shape)}")
    M, F2 = h_M2F.shape
    F = F2 // 2
    if F2 % 2 or F == 0 or F % GROUP:
        raise ValueError(f"h_M2F must have 2F columns with F a multiple of {GROUP}, got {F2}")
    if out_MF.shape != (M, F):
        raise ValueError(f"out_MF must be [{M}, {F}], got {tuple(out_MF.shape)}")
    if out_MF.dtype not in (torch.float8_e4m3fn, torch.bfloat16):
        raise ValueError(f"out_MF must be float8_e4m3fn or bfloat16, got {out_MF.dtype}")
    if h_M2F.stride(1) != 1 or out_MF.stride(1) != 1:
        raise ValueError("h_M2F and out_MF must have unit column stride")
    if out_MF.device != h_M2F.device:
        raise ValueError(f"out_MF is on {out_MF.device}, h_M2F on {h_M2F.device}")
    fp8 = out_MF.dtype == torch.float8_e4m3fn
    if fp8:
        G4 = -(-(F // GROUP) // 4)
        if sf_MG4 is None or sf_MG4.dtype != torch.int32 or sf_MG4.shape != (M, G4):
            got = None if sf_MG4 is None else f"{sf_MG4.dtype}{tuple(sf_MG4.shape)}"
            raise ValueError(f"fp8 output needs sf_MG4 int32 [{M}, {G4}], got {got}")
        if sf_MG4.device != h_M2F.device:
            raise ValueError(f"sf_MG4 is on {sf_MG4.device}, h_M2F on {h_M2F.device}")
    elif sf_MG4 is not None:
        raise ValueError("bf16 output takes no scales: pass sf_MG4=None")
    return fp8


def act_quant_dense(
    h_M2F: torch.Tensor,
    out_MF: torch.Tensor,
    sf_MG4: torch.Tensor | None = None,
    *,
    activation: str = "silu",
    block_rows: int = BLOCK_ROWS,
    groups: int = 1,
    num_warps: int = 4,
) -> None:
    """Activation (and FP8 quantisation when ``out_MF`` is float8_e4m3fn) of every row.

    A program covers ``block_rows`` rows of ``groups`` 128-column groups."""
    fp8 = _check(h_M2F, out_MF, sf_MG4, activation)
    M, F = out_MF.shape
    if M == 0:
        return
    grid = (triton.cdiv(M, block_rows), triton.cdiv(F // GROUP, groups))
    _act_quant_dense_kernel[grid](
        h_M2F,
        out_MF.view(torch.uint8) if fp8 else out_MF,
        sf_MG4,
        M,
        F,
        h_M2F.stride(0),
        out_MF.stride(0),
        sf_MG4.stride(0) if fp8 else 0,
        sf_MG4.stride(1) if fp8 else 0,
        ACTIVATION=activation,
        OUT_FP8=fp8,
        # The interpreter's native fp8 and bf16 conversions misround (docs/DESIGN.md section 11).
        EXACT_RNE=not h_M2F.is_cuda,
        BLOCK_ROWS=block_rows,
        GROUPS=groups,
        num_warps=num_warps,
    )


def act_quant_masked(
    h_M2F: torch.Tensor,
    out_MF: torch.Tensor,
    sf_MG4: torch.Tensor | None,
    ends_E: torch.Tensor,
    *,
    alignment: int,
    activation: str = "silu",
    block_rows: int = BLOCK_ROWS,
    groups: int = 1,
    schedule: str = "grid",
    programs: int | None = None,
    programs_per_sm: int = 8,
    num_warps: int = 4,
) -> None:
    """As `act_quant_dense` on the live rows [start[e], end[e]) only; other rows stay untouched.

    A persistent grid (``programs_per_sm`` programs per SM) strides over the live (tile, group)
    work items; the grid depends on the device alone, never on the routing, so one CUDA graph
    serves every routing, and a skewed routing costs what its live rows cost. ``programs`` sets
    the grid size directly (tests use it to exercise the stride loop).

    ``schedule="grid"`` instead launches the dense kernel's grid and lets each row block look up
    its expert and return at once when it holds no live row (row blocks are capped at the
    alignment); ``"persistent"`` is the stride loop above; ``"stream"`` is that loop with the next
    item's loads issued before the current item's math and stores (one item in flight while
    another is computed).
    """
    fp8 = _check(h_M2F, out_MF, sf_MG4, activation)
    check_alignment(alignment)
    if ends_E.dim() != 1 or ends_E.dtype != torch.int32 or ends_E.device != h_M2F.device:
        raise ValueError(
            f"ends_E must be int32 [E] on {h_M2F.device}, "
            f"got {ends_E.dtype}{tuple(ends_E.shape)} on {ends_E.device}"
        )
    if programs is not None and programs < 1:
        raise ValueError(f"programs must be >= 1, got {programs}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule == "grid":
        if programs is not None:
            raise ValueError("programs applies to the 'persistent' and 'stream' schedules only")
        # A row block must not straddle two experts: no taller than the alignment (both are
        # powers of two, so the smaller divides the larger).
        block_rows = min(block_rows, alignment)
    M, F = out_MF.shape
    E = ends_E.shape[0]
    if M == 0 or E == 0:
        return
    args = (
        h_M2F,
        out_MF.view(torch.uint8) if fp8 else out_MF,
        sf_MG4,
        ends_E,
        M,
        F,
        E,
        h_M2F.stride(0),
        out_MF.stride(0),
        sf_MG4.stride(0) if fp8 else 0,
        sf_MG4.stride(1) if fp8 else 0,
    )
    meta = dict(
        ALIGNMENT=alignment,
        ACTIVATION=activation,
        OUT_FP8=fp8,
        EXACT_RNE=not h_M2F.is_cuda,
        BLOCK_ROWS=block_rows,
        BLOCK_E=triton.next_power_of_2(E),
        GROUPS=groups,
        num_warps=num_warps,
    )
    if schedule == "grid":
        grid = (triton.cdiv(M, block_rows), triton.cdiv(F // GROUP, groups))
        _act_quant_masked_grid_kernel[grid](*args, **meta)
        return
    if programs is None:
        # More programs than work items in a full buffer would only exit at once.
        programs = min(
            programs_per_device(h_M2F.device, programs_per_sm),
            triton.cdiv(M, block_rows) * triton.cdiv(F // GROUP, groups),
        )
    _act_quant_masked_kernel[(programs,)](*args, **meta, PREFETCH=schedule == "stream")
