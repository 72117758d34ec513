"""The `act` stage: the gated activation of the FC1 output, quantised to FP8 or written as bf16.

Legend: M rows of the capacity buffer, F intermediate, G = F/128 column groups, G4 = ceil(G/4)
packed scale words, E local experts.

Tensors:
- ``h_M2F``   bf16 [M, 2F], the FC1 output: gate columns [0, F), up columns [F, 2F).
- ``out_MF``  float8_e4m3fn or bf16 [M, F], the activation.
- ``sf_MG4``  int32 [M, G4] (fp8 only): UE8M0 exponent bytes, four groups per word (byte j of word p
  holds group 4p+j, groups past the last are zero bytes), any strides; the layout of
  `reference.empty_packed_scales` is M-major, strides (1, M_pad).
- ``ends_E``  int32 [E] (masked only): the endpoint contract of `moebench.layout`.

Two launchers share one per-tile body, so their outputs on live rows are bitwise identical:
`act_quant_dense` covers every row of the buffer; `act_quant_masked` walks only each expert's
[start, end) and leaves every other row untouched (data and scales), reading the endpoints on the
device only, so it can be captured in a CUDA graph once and replayed with any routing.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.fp8 import fp32_to_bf16, fp32_to_e4m3_bits, ue8m0_scale
from moebench.layout import check_alignment

GROUP = 128
# Rows per tile: a [32, 128] fp32 tile per group keeps the gate and up tiles in registers at four
# warps. Per-row results do not depend on it, so dense and masked agree whatever it is.
BLOCK_ROWS = 32
ACTIVATIONS = ("silu", "swiglu_oai")


@triton.jit
def _activation(gate, up, ACTIVATION: tl.constexpr):
    # fp32 in, fp32 out, evaluated in the order of `reference.activation` (gate * sigmoid * up).
    if ACTIVATION == "silu":
        return gate * tl.sigmoid(gate) * up
    else:
        # swiglu_oai (gpt-oss): limit 7.0 and alpha 1.702 as in `reference`; the gate is clamped
        # from above only, the up projection both ways.
        gate = tl.minimum(gate, 7.0)
        up = tl.minimum(tl.maximum(up, -7.0), 7.0)
        return gate * tl.sigmoid(1.702 * gate) * (up + 1.0)


@triton.jit
def _act_quant_tile(
    h_ptr,
    out_ptr,
    sf_ptr,
    row0,
    row_end,
    word,
    F,
    stride_hm,
    stride_om,
    stride_sm,
    stride_sw,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
):
    # Rows [row0, min(row0 + BLOCK_ROWS, row_end)) and the four groups of packed word `word`.
    rows = row0 + tl.arange(0, BLOCK_ROWS)
    row_ok = rows < row_end
    # 64-bit row offsets: M * 2F passes 2^31 elements for large capacity buffers.
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, 128)
    groups = F // 128
    packed = tl.zeros([BLOCK_ROWS], dtype=tl.int32)
    for j in tl.static_range(4):
        # Group 4*word + j; in the last word the groups past G are masked off (no loads, no stores)
        # and contribute a zero byte to the packed scales.
        g = word * 4 + j
        col = g * 128 + cols
        mask = row_ok[:, None] & (col[None, :] < F)
        h_rows = h_ptr + rows64[:, None] * stride_hm + col[None, :]
        gate = tl.load(h_rows, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(h_rows + F, mask=mask, other=0.0).to(tl.float32)
        a = _activation(gate, up, ACTIVATION)
        out_ptrs = out_ptr + rows64[:, None] * stride_om + col[None, :]
        if OUT_FP8:
            # One power-of-two scale per (row, group): the division by it is an exact multiply,
            # so only the e4m3 rounding is lossy.
            exp, inv = ue8m0_scale(tl.max(tl.abs(a), axis=1))
            q = fp32_to_e4m3_bits(a * inv[:, None], EXACT_RNE)
            tl.store(out_ptrs, q, mask=mask)
            packed = packed | (tl.where(g < groups, exp, 0) << (8 * j))
        else:
            tl.store(out_ptrs, fp32_to_bf16(a, EXACT_RNE), mask=mask)
    if OUT_FP8:
        # The four exponent bytes leave as one int32 store per row.
        tl.store(sf_ptr + rows64 * stride_sm + word * stride_sw, packed, mask=row_ok)


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
):
    # Grid (ceil(M / BLOCK_ROWS), G4): one row block and one packed word a program.
    row0 = tl.program_id(0) * BLOCK_ROWS
    word = tl.program_id(1)
    _act_quant_tile(
        h_ptr, out_ptr, sf_ptr, row0, M, word, F,
        stride_hm, stride_om, stride_sm, stride_sw,
        ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS,
    )  # fmt: skip


@triton.jit
def _act_quant_masked_kernel(
    h_ptr,
    out_ptr,
    sf_ptr,
    ends_ptr,
    M,
    F,
    stride_hm,
    stride_om,
    stride_sm,
    stride_sw,
    ALIGNMENT: tl.constexpr,
    ACTIVATION: tl.constexpr,
    OUT_FP8: tl.constexpr,
    EXACT_RNE: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
):
    # Grid (row programs, G4, E). The expert's range comes from the endpoints alone:
    # start[e] = align_up(end[e-1], A), start[0] = 0 (moebench.layout).
    word = tl.program_id(1)
    e = tl.program_id(2)
    end = tl.load(ends_ptr + e)
    prev = tl.load(ends_ptr + e - 1, mask=e > 0, other=0)
    start = (prev + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    # Endpoints past the buffer are a scatter bug that the correctness gates report; the clamp
    # only keeps such a routing from writing out of bounds.
    end = tl.minimum(end, M)
    # Grid-stride walk over the live rows: the grid is fixed, the routing decides the trip count.
    step = tl.num_programs(0) * BLOCK_ROWS
    for row0 in range(start + tl.program_id(0) * BLOCK_ROWS, end, step):
        _act_quant_tile(
            h_ptr, out_ptr, sf_ptr, row0, end, word, F,
            stride_hm, stride_om, stride_sm, stride_sw,
            ACTIVATION, OUT_FP8, EXACT_RNE, BLOCK_ROWS,
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
) -> None:
    """Activation (and FP8 quantisation when ``out_MF`` is float8_e4m3fn) of every row."""
    fp8 = _check(h_M2F, out_MF, sf_MG4, activation)
    M, F = out_MF.shape
    if M == 0:
        return
    G4 = -(-(F // GROUP) // 4)
    grid = (triton.cdiv(M, BLOCK_ROWS), G4)
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
        # The interpreter's native fp8 and bf16 conversions misround (DESIGN section 11).
        EXACT_RNE=not h_M2F.is_cuda,
        BLOCK_ROWS=BLOCK_ROWS,
    )


def act_quant_masked(
    h_M2F: torch.Tensor,
    out_MF: torch.Tensor,
    sf_MG4: torch.Tensor | None,
    ends_E: torch.Tensor,
    *,
    alignment: int,
    activation: str = "silu",
    row_programs: int = 64,
) -> None:
    """As `act_quant_dense` on the live rows [start[e], end[e]) only; other rows stay untouched.

    ``row_programs`` row programs per (expert, packed word) stride over the expert's rows; the
    grid does not depend on the routing. Programs of an empty or short expert exit at once, so the
    default leans high: it bounds how slowly a skewed routing (one expert holding every row) runs.
    On an H200 (M=28672, F=2048, E=32) 64 took 83 us on uniform routing and 119 us with one expert
    holding 24576 rows, where 16 took 86 us and 350 us (dense: 92 us).
    """
    fp8 = _check(h_M2F, out_MF, sf_MG4, activation)
    check_alignment(alignment)
    if ends_E.dim() != 1 or ends_E.dtype != torch.int32 or ends_E.device != h_M2F.device:
        raise ValueError(
            f"ends_E must be int32 [E] on {h_M2F.device}, "
            f"got {ends_E.dtype}{tuple(ends_E.shape)} on {ends_E.device}"
        )
    if row_programs < 1:
        raise ValueError(f"row_programs must be >= 1, got {row_programs}")
    M, F = out_MF.shape
    E = ends_E.shape[0]
    if M == 0 or E == 0:
        return
    G4 = -(-(F // GROUP) // 4)
    # No expert can hold more than M rows, so more than cdiv(M, BLOCK_ROWS) programs per expert
    # would only exit at once (and cost the interpreter a program each). Depends on M alone, so
    # the grid still does not depend on the routing.
    row_programs = min(row_programs, -(-M // BLOCK_ROWS))
    grid = (row_programs, G4, E)
    _act_quant_masked_kernel[grid](
        h_M2F,
        out_MF.view(torch.uint8) if fp8 else out_MF,
        sf_MG4,
        ends_E,
        M,
        F,
        h_M2F.stride(0),
        out_MF.stride(0),
        sf_MG4.stride(0) if fp8 else 0,
        sf_MG4.stride(1) if fp8 else 0,
        ALIGNMENT=alignment,
        ACTIVATION=activation,
        OUT_FP8=fp8,
        EXACT_RNE=not h_M2F.is_cuda,
        BLOCK_ROWS=BLOCK_ROWS,
    )
