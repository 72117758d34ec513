"""The `scatter` stage: group each token's top-k slots by local expert into the capacity buffer.

Legend: T tokens, K top-k, E local experts, D hidden, M rows of the capacity buffer,
G4 packed scale words per row (ceil(ceil(D/128)/4), fp8 pipeline only).

Local experts are [expert_offset, expert_offset + E). The stage writes, exactly as
`reference.scatter_plan` does, the endpoint contract of docs/DESIGN.md section 2 and the index maps
that the later stages read, then copies the token rows:

    counts_E      int32 [E]    live rows of each expert (scratch for the stage)
    ends_E        int32 [E]    end[e] = start[e] + count[e], start[e] = sum_{f<e} align_up(count[f])
    row_expert_M  int32 [M]    expert of each live row; -1 for padding and for the capacity tail
    row_src_M     int32 [M]    t*K + k of the slot in each live row; -1 elsewhere
    slot_row_TK   int32 [T, K] row of each slot; -1 when the slot's expert is not local
    xs_MD         bf16 | e4m3 [M, D]  xs[row] = x[t] for live rows; other rows are left untouched
    xs_sf_MG4     int32 [M, G4]       the token's packed scale words for live rows (any strides)

Within an expert, slots keep increasing t*K + k order (a stable counting sort). Launches in
sequence, no atomics, so every output is a pure function of the routing:

1. `_scatter_count`: a grid over (expert, chunk of the T*K ids) counts each expert's slots per
   chunk into scratch_EC; expert 0's programs mark the slots of non-local experts -1.
2. `_scatter_assign_maps`: the same grid; each program takes its expert's start from the counts
   (prefix sum of aligned counts) plus the expert's slots in earlier chunks and places its chunk's
   slots with a cumulative sum, so every chunk is placed in parallel and t*K + k order is kept. It
   also writes the row maps of a share of the rows: its expert's padding rows and a stride of the
   capacity tail get -1, its expert's live rows the expert.
3. `_scatter_copy`: a grid over (token blocks, column blocks) reads each token row once and writes
   it to the rows of its local slots (and its scale words); padding rows are never touched.
   Token-major rather than row-major, so no program is spent on the (mostly dead) capacity rows.

Other launch plans, selectable for the benchmark (`scatter`'s ``fusion``), write the same bytes:
"none" is the original four launches (`_scatter_assign`, then `_scatter_maps` over the capacity
rows deriving each row's expert from the endpoints); "maps_copy" folds the copy into step 2, each
program copying the rows it placed (two launches, but a token is read once per local slot and the
copy work follows the routing: a hot expert's rows are copied by its C programs only).

Nothing reads back to the host and every buffer comes from the caller, so the stage can be captured
in a CUDA graph and replayed with any routing.

Overflow: the caller checks capacity before launching (the reference raises). If the routing would
still need rows past M, no row >= M is written: slots whose row would be >= M get slot_row -1 (so
`combine` skips them instead of reading out of bounds), while `ends_E` keeps the true endpoints, so
`ends_E[-1] > M` shows the overflow after the fact.
"""

from __future__ import annotations

import torch
import triton

from moebench.core.layout import check_alignment
from moebench.kernels.scatter_phases import (
    _scatter_assign,
    _scatter_assign_maps,
    _scatter_copy,
    _scatter_count,
    _scatter_maps,
)

_ROW_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)
# Rows are copied as raw integers of the same width, so every bit pattern (NaN payloads included)
# travels unchanged and the kernel never converts a float.
_RAW = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8}


MAX_CHUNKS = 64
FUSIONS = ("none", "maps", "maps_copy")


def chunking(n_slots: int, chunk: int | None = None) -> tuple[int, int]:
    """(slots per chunk, chunks): by default chunks of at least 2048 slots, at most MAX_CHUNKS of
    them; ``chunk`` (a power of two) fixes the chunk size instead."""
    if chunk is None:
        chunk = max(2048, triton.next_power_of_2(triton.cdiv(max(n_slots, 1), MAX_CHUNKS)))
    elif chunk < 16 or chunk & (chunk - 1):
        raise ValueError(f"chunk must be a power of two >= 16, got {chunk}")
    return chunk, max(1, triton.cdiv(n_slots, chunk))


def scatter_scratch(
    tokens: int, top_k: int, experts: int, device, chunk: int | None = None
) -> torch.Tensor:
    """The scratch buffer `scatter` needs for T tokens of K slots and E local experts."""
    return torch.empty(
        experts * chunking(tokens * top_k, chunk)[1], dtype=torch.int32, device=device
    )


def _check_pow2(name: str, v: int) -> None:
    if v < 1 or v & (v - 1):
        raise ValueError(f"{name} must be a power of two, got {v}")


def _check_int32(name: str, t: torch.Tensor, shape: tuple[int, ...], device: torch.device) -> None:
    if t.dtype != torch.int32 or tuple(t.shape) != shape or t.device != device:
        raise ValueError(
            f"{name} must be int32 {list(shape)} on {device}, got {t.dtype} "
            f"{list(t.shape)} on {t.device}"
        )
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")


def scatter(
    x_TD: torch.Tensor,
    x_sf_TG4: torch.Tensor | None,
    topk_ids_TK: torch.Tensor,
    *,
    expert_offset: int,
    alignment: int,
    xs_MD: torch.Tensor,
    xs_sf_MG4: torch.Tensor | None,
    counts_E: torch.Tensor,
    ends_E: torch.Tensor,
    row_expert_M: torch.Tensor,
    row_src_M: torch.Tensor,
    slot_row_TK: torch.Tensor,
    scratch_EC: torch.Tensor | None = None,
    fusion: str = "maps",
    chunk: int | None = None,
    copy_block_t: int = 4,
    copy_block_d: int = 1024,
    copy_warps: int = 4,
) -> None:
    """Scatter the tokens into the capacity buffer and write the index maps (module docstring).

    x_TD bf16 or float8_e4m3fn [T, D]; x_sf_TG4 int32 [T, G4] or None; topk_ids_TK int32 or int64
    [T, K] (contiguous); xs_MD [M, D] of x's dtype; xs_sf_MG4 int32 [M, G4] or None (with x_sf);
    counts_E, ends_E int32 [E]; row_expert_M, row_src_M int32 [M]; slot_row_TK int32 [T, K].
    scratch_EC is the int32 per-(expert, chunk) count buffer from `scatter_scratch`.
    Every output is preallocated by the caller; nothing is read back to the host.

    Launch variants (every one writes the same outputs, bit for bit):
    fusion "none": count, assign, maps, copy (four launches); "maps" (default): count, assign
    with the maps, copy (three); "maps_copy": count, then assign with the maps and the copy
    (two; the copy follows the routing, see `_scatter_assign_maps`). chunk: slots per chunk of
    the count/assign grid (default `chunking`; scratch_EC must be sized for it). copy_block_t,
    copy_block_d, copy_warps: tokens and columns per copy program and its warps (with
    "maps_copy": rows and columns per step of the fused copy, and the warps of that launch).
    """
    check_alignment(alignment)
    if x_TD.dim() != 2 or x_TD.dtype not in _ROW_DTYPES:
        raise ValueError(f"x_TD must be 2-D bf16 or float8_e4m3fn, got {x_TD.dtype} {x_TD.dim()}-D")
    T, D = x_TD.shape
    dev = x_TD.device
    if topk_ids_TK.dim() != 2 or topk_ids_TK.shape[0] != T:
        raise ValueError(f"topk_ids_TK must be [T={T}, K], got {list(topk_ids_TK.shape)}")
    if topk_ids_TK.dtype not in (torch.int32, torch.int64) or topk_ids_TK.device != dev:
        raise ValueError(f"topk_ids_TK must be int32 or int64 on {dev}, got {topk_ids_TK.dtype}")
    if not topk_ids_TK.is_contiguous():
        raise ValueError("topk_ids_TK must be contiguous")
    K = topk_ids_TK.shape[1]
    if xs_MD.dim() != 2 or xs_MD.shape[1] != D or xs_MD.dtype != x_TD.dtype or xs_MD.device != dev:
        raise ValueError(
            f"xs_MD must be [M, D={D}] {x_TD.dtype} on {dev}, got {xs_MD.dtype} {list(xs_MD.shape)}"
        )
    M = xs_MD.shape[0]
    E = ends_E.numel()
    if E == 0:
        raise ValueError("ends_E must hold at least one local expert")
    _check_int32("counts_E", counts_E, (E,), dev)
    _check_int32("ends_E", ends_E, (E,), dev)
    _check_int32("row_expert_M", row_expert_M, (M,), dev)
    _check_int32("row_src_M", row_src_M, (M,), dev)
    _check_int32("slot_row_TK", slot_row_TK, (T, K), dev)
    if (x_sf_TG4 is None) != (xs_sf_MG4 is None):
        raise ValueError("x_sf_TG4 and xs_sf_MG4 must be given together (fp8) or both be None")
    has_sf = x_sf_TG4 is not None
    G4 = triton.cdiv(triton.cdiv(D, 128), 4)  # 128-column groups, four per word
    if has_sf:
        for name, t, n in (("x_sf_TG4", x_sf_TG4, T), ("xs_sf_MG4", xs_sf_MG4, M)):
            if t.dtype != torch.int32 or tuple(t.shape) != (n, G4) or t.device != dev:
                raise ValueError(
                    f"{name} must be int32 [{n}, G4={G4}] on {dev}, got {t.dtype} {list(t.shape)}"
                )
    sf_in = x_sf_TG4 if has_sf else counts_E  # placeholders, never read when HAS_SF is False
    sf_out = xs_sf_MG4 if has_sf else counts_E
    sf_in_strides = x_sf_TG4.stride() if has_sf else (0, 0)
    sf_out_strides = xs_sf_MG4.stride() if has_sf else (0, 0)

    # Launch shapes: the ids are cut into at most MAX_CHUNKS chunks placed in parallel (each a
    # short serial scan); map rows per program shrink as E grows to bound the [rows, E] tile.
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
    for name, v in (("copy_block_t", copy_block_t), ("copy_block_d", copy_block_d),
                    ("copy_warps", copy_warps)):  # fmt: skip
        _check_pow2(name, v)
    n_slots = T * K
    chunk, n_chunks = chunking(n_slots, chunk)
    if scratch_EC is None or scratch_EC.numel() < E * n_chunks or scratch_EC.dtype != torch.int32:
        raise ValueError(
            f"scratch_EC must be int32 with >= {E * n_chunks} elements (see scatter_scratch)"
        )
    block_s = min(chunk, 2048)
    block_e = triton.next_power_of_2(E)
    block_c = triton.next_power_of_2(n_chunks)
    if block_e * block_c > 32768:
        raise ValueError(f"{E} experts x {n_chunks} chunks is too large a count table; raise chunk")
    _scatter_count[(E, n_chunks)](
        topk_ids_TK, scratch_EC, slot_row_TK, n_slots, expert_offset, E, n_chunks,
        CHUNK=chunk, BLOCK_S=block_s, num_warps=4,
    )  # fmt: skip
    x_raw = x_TD.view(_RAW[x_TD.dtype])
    xs_raw = xs_MD.view(_RAW[xs_MD.dtype])
    block_g4 = triton.next_power_of_2(G4)
    if fusion == "none":
        _scatter_assign[(E, n_chunks)](
            topk_ids_TK, scratch_EC, counts_E, ends_E, row_src_M, slot_row_TK,
            n_slots, expert_offset, E, n_chunks, M,
            ALIGNMENT=alignment, CHUNK=chunk, BLOCK_S=block_s, BLOCK_E=block_e,
            BLOCK_C=block_c, num_warps=4,
        )  # fmt: skip
        block_m = max(16, 8192 // block_e)
        _scatter_maps[(triton.cdiv(M, block_m),)](
            counts_E, ends_E, row_expert_M, row_src_M, M, E, BLOCK_M=block_m, BLOCK_E=block_e
        )
    else:
        fused_copy = fusion == "maps_copy"
        _scatter_assign_maps[(E, n_chunks)](
            topk_ids_TK, scratch_EC, counts_E, ends_E, row_expert_M, row_src_M, slot_row_TK,
            x_raw, xs_raw, sf_in, sf_out,
            n_slots, expert_offset, E, n_chunks, M, D, G4,
            *x_raw.stride(), *xs_raw.stride(), *sf_in_strides, *sf_out_strides,
            K=K, ALIGNMENT=alignment, CHUNK=chunk, BLOCK_S=block_s, BLOCK_E=block_e,
            BLOCK_C=block_c, BLOCK_M=64, COPY=fused_copy, HAS_SF=has_sf,
            BLOCK_R=copy_block_t, BLOCK_D=min(copy_block_d, triton.next_power_of_2(D)),
            BLOCK_G4=block_g4, num_warps=copy_warps if fused_copy else 4,
        )  # fmt: skip
        if fused_copy:
            return
    block_d = min(copy_block_d, triton.next_power_of_2(D))
    _scatter_copy[(triton.cdiv(T, copy_block_t), triton.cdiv(D, block_d))](
        x_raw,
        xs_raw,
        sf_in,
        sf_out,
        slot_row_TK,
        T,
        D,
        G4,
        *x_raw.stride(),
        *xs_raw.stride(),
        *sf_in_strides,
        *sf_out_strides,
        K=K,
        HAS_SF=has_sf,
        BLOCK_T=copy_block_t,
        BLOCK_D=block_d,
        BLOCK_G4=block_g4,
        num_warps=copy_warps,
    )
