"""The grouped tile's weights packed tile by tile (`Launch.fp8_packed`, `Launch.mx_packed`):
each [block_n, block_k] box the tile reads in one step (FP8: one TMA copy) is one contiguous run
of block_n x block_k bytes, and a program's boxes (its expert's rows n0 .. n0 + block_n - 1, K
step after K step) follow each other.

Why: in natural order ([E, N, R] rows) a box is block_n pieces of block_k bytes, one a row, R bytes
apart (64 pieces of 64 bytes, 2,880 apart, at gpt-oss-20b's one-pass tile), and a program comes
back to each of its rows' DRAM pages once a step. Packed, a program's whole stream is one
contiguous run. The read-only kernel on the tile's grid read the packed weights 4-8 points of copy
faster on the H200 (docs/PERF.md, `read_tile`); the FP8 tile of that time did not follow
(`fp8_packed`: it was held by its instructions, before the placed decode and the 64-value step).

The bytes are only moved, never changed: `pack_tiles` composes with `fp8_placed.place_e4m3` in
either order, and the tile gives the same bits either way. Shape: the packed copy keeps the
weights' shape [E, N, R] (the launcher checks its operands by shape), its storage in tile order;
`unpack_tiles` undoes it.

The MXFP4 tile (`Launch.mx_packed`) reads 64-byte boxes too (128 values a step, two a byte), and
its R / 2 = 1,440 bytes a row at gpt-oss-20b are 22 whole boxes and half of one: with
``ragged_last`` a row block's last box is [block_n, R % block_k], after its whole ones, so that the
program's stream stays one run. Its e8m0 scale bytes pack the same way
(`Launch.mx_packed_scales`: block_k / 32 bytes a box, whole 32-bit words at block_k a multiple of
128), so that a step's scales are one run of words too.
"""

from __future__ import annotations

import torch


def _check(w: torch.Tensor, block_n: int, block_k: int, ragged_last: bool) -> tuple[int, ...]:
    if w.dim() != 3 or not w.is_contiguous():
        raise ValueError(f"pack_tiles takes contiguous [E, N, R] weights, got {tuple(w.shape)}")
    E, N, R = w.shape
    if N % block_n or (R % block_k and not ragged_last):
        raise ValueError(
            f"pack_tiles needs N ({N}) a multiple of block_n ({block_n}) and R ({R}) a multiple "
            f"of block_k ({block_k})"
        )
    return E, N, R, R // block_k * block_k


def pack_tiles(
    w: torch.Tensor, block_n: int, block_k: int, *, ragged_last: bool = False
) -> torch.Tensor:
    """A new [E, N, R] tensor whose storage holds ``w``'s [block_n, block_k] boxes one after the
    other: expert, row block, K step, then the box's rows (module docstring). ``ragged_last``: R
    need not be whole boxes; a row block's last box is then [block_n, R % block_k]."""
    E, N, R, whole = _check(w, block_n, block_k, ragged_last)
    rows = w.view(E, N // block_n, block_n, R)
    boxes = rows[..., :whole].reshape(E, N // block_n, block_n, whole // block_k, block_k)
    runs = [boxes.permute(0, 1, 3, 2, 4).reshape(E, N // block_n, block_n * whole)]
    if whole < R:
        runs.append(rows[..., whole:].reshape(E, N // block_n, block_n * (R - whole)))
    return torch.cat(runs, dim=2).contiguous().view(E, N, R)


def unpack_tiles(
    packed: torch.Tensor, block_n: int, block_k: int, *, ragged_last: bool = False
) -> torch.Tensor:
    """``pack_tiles``' inverse: the natural [E, N, R] order."""
    E, N, R, whole = _check(packed, block_n, block_k, ragged_last)
    runs = packed.view(E, N // block_n, block_n * R)
    boxes = runs[..., : block_n * whole].reshape(E, N // block_n, whole // block_k, block_n,
                                                 block_k)  # fmt: skip
    parts = [boxes.permute(0, 1, 3, 2, 4).reshape(E, N // block_n, block_n, whole)]
    if whole < R:
        parts.append(runs[..., block_n * whole :].reshape(E, N // block_n, block_n, R - whole))
    return torch.cat(parts, dim=3).contiguous().view(E, N, R)
