"""MXFP4 weights with each K step's values stored in the tensor-core tile's K order
(`Launch.mx_dot_order`), so that the slots' operand is read in its natural order.

Why. The MXFP4 tile (`grouped_dot`) decodes a row's bytes in the order it loads them and then
permutes K in registers (`tile_order.dot_order` after `mx_tile`'s own order), so that each
thread's share of a row is one contiguous 16-byte run; the dot takes K in any order as long as
both operands share it, so the slots' operand took the same permutation (`mx_order_rows`,
`dot_order_rows`). That permutation is not a view of shared memory: triton 3.6 loaded the slots'
operand into registers, permuted it and stored it back into shared memory for the tensor cores
every step (sm_90a SASS of the one-pass tile: 2 LDS.128, 8 STS, a memory barrier and a second
block barrier a step). Here the host stores each step's values already permuted, so that the
kernel's same decode and `dot_order` give position k the natural value k: the slots' operand needs
no permutation and the tensor cores read it where the pipeline's copy put it.

The layout, for a step of BK values (BK = block_k, and the last step of a row R % block_k wide
when R is no multiple of block_k: a power of two of at least 32 values): `dot_order` puts at
position k = 16 a + 8 b + 2 c + r the decoded value q = BK / 4 c + 4 a + 2 b + r, and the decode
(`mx_tile`'s order) gives position q = 4 i + t the stored value 4 i + (0, 2, 1, 3)[t]; stored value
``source(k)`` therefore holds natural value k. A stored word (8 values) j of a step then holds
natural values of group j % (BK / 32) only (k's group is a // 2, its word BK / 32 c + a // 2), so
the decode takes each word's scale byte cyclically (`mx_rotated.rotated_tile`, ``DOT_ORDER``)
instead of one byte a group of four words. Scales are unchanged.

Offline (sm_90a, triton 3.6.0; docs/perf/2026-12-06-packed-scales/offline/dot_order_loops.txt):
the one-pass tile's loop has no STS and no memory barrier left, and its 8 HGMMA overlap the next
decode (each waits with 7 in flight, where the natural order waited for all of them), at 261
instructions a step against 218. Measured on an H100 (docs/perf/2026-12-06-packed-scales/call3/),
the grouped MXFP4 step is 1.5-8.4% faster at 4-64 tokens: the MXFP4 tiles' default where R allows
it (`grouped_launch.MX_DOT_ORDER`).

The values are only moved: `dot_order_mxfp4` works on natural bytes (value 2i in the low nibble
of byte i), before `mx_rotated.rotate_mxfp4` and `tile_packed.pack_tiles`, and
`natural_order_mxfp4` undoes it. The tile's products are the natural layout's; their fp32 sum runs
in another order (exact where the sums are, as in the kernel tests).
"""

from __future__ import annotations

import torch

# The values a step of the tile's decode and dot order (tile_order: mx_tile's order 4i, 4i + 2,
# 4i + 1, 4i + 3 within each four).
_DECODE_ORDER = (0, 2, 1, 3)


def source(k: int, step: int) -> int:
    """The stored position (within a step of ``step`` values) that the tile reads as value k."""
    a, rest = divmod(k, 16)
    b, rest = divmod(rest, 8)
    c, r = divmod(rest, 2)
    q = step // 4 * c + 4 * a + 2 * b + r
    return q - q % 4 + _DECODE_ORDER[q % 4]


def fits(R: int, block_k: int) -> bool:
    """Whether rows of R values take the layout at steps of ``block_k``: R whole steps, or its
    last, partial step a power of two of at least 32 values (the tile runs it as a step of its
    own)."""
    tail = R % block_k
    return tail == 0 or (tail >= 32 and tail & (tail - 1) == 0)


def _steps(R: int, block_k: int) -> list[tuple[int, int]]:
    """(first value, width) of each step of a row."""
    if not fits(R, block_k):
        raise ValueError(f"mx_dot_order needs R ({R}) a multiple of block_k ({block_k}) or its "
                         f"last step a power of two of at least 32 values")  # fmt: skip
    tail = R % block_k
    steps = [(k0, block_k) for k0 in range(0, R - tail, block_k)]
    return steps + ([(R - tail, tail)] if tail else [])


def _order(R: int, block_k: int) -> torch.Tensor:
    """perm [R]: stored value p of a row holds natural value perm[p]."""
    perm = torch.empty(R, dtype=torch.long)
    for k0, width in _steps(R, block_k):
        for k in range(width):
            perm[k0 + source(k, width)] = k0 + k
    return perm


def _codes(w: torch.Tensor) -> torch.Tensor:
    return torch.stack([w & 0xF, w >> 4], -1).reshape(*w.shape[:-1], 2 * w.shape[-1])


def _bytes(codes: torch.Tensor) -> torch.Tensor:
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).contiguous()


def _check(w: torch.Tensor, block_k: int) -> None:
    if w.dtype != torch.uint8 or block_k < 32 or block_k & (block_k - 1):
        raise ValueError(f"mx_dot_order takes MXFP4 bytes (uint8) and a power-of-two block_k >= "
                         f"32, got {w.dtype} and {block_k}")  # fmt: skip


def dot_order_mxfp4(w: torch.Tensor, block_k: int) -> torch.Tensor:
    """Natural MXFP4 bytes ``w`` [..., R / 2] with each step's values in the tile's K order for
    steps of ``block_k`` values (module docstring): a new tensor of the same shape."""
    _check(w, block_k)
    perm = _order(2 * w.shape[-1], block_k).to(w.device)
    if w.dim() < 3:
        return _bytes(_codes(w)[..., perm])
    # A leading slice (an expert) at a time, so that the codes (twice the bytes, twice again
    # permuted) are never a whole layer's.
    out = torch.empty_like(w)
    for i in range(w.shape[0]):
        out[i] = _bytes(_codes(w[i])[..., perm])
    return out


def natural_order_mxfp4(w: torch.Tensor, block_k: int) -> torch.Tensor:
    """`dot_order_mxfp4`'s inverse."""
    _check(w, block_k)
    perm = _order(2 * w.shape[-1], block_k).to(w.device)
    codes = _codes(w)
    out = torch.empty_like(codes)
    out[..., perm] = codes
    return _bytes(out)
