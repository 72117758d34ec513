"""FP8 weights laid out for the Gluon tile (`moebench.kernels.fp8_gluon`, ``Launch.fp8_gluon``):
each thread of the tile loads, from global memory straight into registers, the words that decode
into the wgmma A fragment it holds, and a program's stream is one contiguous run. The FP8
counterpart of `mx_gluon_layout` (its docstring says why: triton 3.6 cannot give a loaded tensor
the warpgroup MMA's register-operand layout, so the Triton tile goes through shared memory).

Thread (warp w, lane l) of the 64-row tile holds rows 16w + l/4 and + 8 and, in each 16-value
slice of K, the values 2a + {0, 1} and 2a + 8 + {0, 1} (a = l % 4; the A fragment of an
m64n16k16 MMA). A 128-value step is eight slices: that thread's 32 bytes of a row are eight words
j = 0..7, word j of lane a holding the four values K = 16j + 8p + 2a + h (p, h in {0, 1}; value
2p + h in byte 2p + h) in `fp8_placed`'s bit layout, so that the placed decode's two output pairs
(``$0``: p = 0, ``$1``: p = 1) are the fragment's, pair for pair.

Storage (N a multiple of 64; R = 128 S + T with S even, at least 4, and T 0 or 64; the shapes
`mx_gluon_layout.fits` takes, the two tiles' loops being the same):
- ``main``: int32 [E, N / 64, S, 2048], one program's steps one after the other, word (row, a,
  j) of a step at 512 (row // 16) + 256 ((row // 8) % 2) + 128 (j // 4) + 16 (row % 8) + 4a +
  j % 4: a warp's 16-byte load of one half of its rows and one half of its words is 128
  contiguous words;
- ``tail`` (T = 64): int32 [E, N, 16], the last 64 values of a row as 16 words, word 4a + j
  (j in 0..3) holding K = 16j + ... as above; zeros where T = 0.

Values are only moved and their bits placed (`fp8_placed.place_e4m3`, word by word):
`unpack_fp8_gluon` undoes both. The copy is made once, when the arm builds its stages
(`arms/decode/grouped_decode.py`), and is the size of the weights.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from moebench.kernels.fp8_placed import POSITIONS, place_e4m3
from moebench.kernels.mx_gluon_layout import ROWS, STEP, fits

WORDS = STEP // 4  # words a row a step (32 bytes)
TAIL_WORDS = 16  # words a row of the 64-value tail


class Fp8GluonWeights(NamedTuple):
    """One stage's FP8 weights in the Gluon tile's layout (module docstring)."""

    main: torch.Tensor
    tail: torch.Tensor


def _lane_k(words: int) -> torch.Tensor:
    """int64 [4 * words * 4]: the K inside a step (or the tail) of each byte of a row's words in
    storage order (lane a's words 0..words - 1, then the byte): K = 16j + 8p + 2a + h for byte
    2p + h of word j of lane a."""
    k = torch.empty(4 * words * 4, dtype=torch.long)
    for a in range(4):
        for j in range(words):
            for b in range(4):
                p, h = divmod(b, 2)
                k[(words * a + j) * 4 + b] = 16 * j + 8 * p + 2 * a + h
    return k


def _check_fits(N: int, R: int) -> None:
    if not fits(N, R):
        raise ValueError(
            f"fp8_gluon_layout needs N a multiple of {ROWS} and R an even number of {STEP}-value "
            f"steps (at least 4) and at most one {STEP // 2}-value tail, got N {N}, R {R}"
        )


def pack_fp8_gluon(w: torch.Tensor) -> Fp8GluonWeights:
    """FP8 weights ``w`` [E, N, R] (e4m3 or their uint8 bytes) in the Gluon tile's layout
    (module docstring)."""
    if w.dtype not in (torch.float8_e4m3fn, torch.uint8) or w.dim() != 3:
        raise ValueError(f"pack_fp8_gluon takes e4m3 (or uint8) [E, N, R] weights, got {w.dtype} "
                         f"{tuple(w.shape)}")  # fmt: skip
    E, N, R = w.shape
    _check_fits(N, R)
    S = R // STEP
    b = w.contiguous().view(torch.uint8)
    main = b[..., : S * STEP].reshape(E, N, S, STEP)[..., _lane_k(8).to(b.device)]
    main = place_e4m3(main).contiguous().view(torch.int32)  # [E, N, S, 32]: word 8a + j
    main = main.reshape(E, N // ROWS, 4, 2, 8, S, 4, 2, 4)  # [E, nb, w, h, r, S, a, jh, jl]
    main = main.permute(0, 1, 5, 2, 3, 7, 4, 6, 8).reshape(E, N // ROWS, S, ROWS * WORDS)
    if R > S * STEP:
        tail = b[..., S * STEP :][..., _lane_k(4).to(b.device)]
        tail = place_e4m3(tail).contiguous().view(torch.int32)
    else:  # nothing to read: zeros, so that the pointers stay valid
        tail = torch.zeros(E, N, TAIL_WORDS, dtype=torch.int32, device=w.device)
    return Fp8GluonWeights(main.contiguous(), tail.contiguous())


def _unplaced(words: torch.Tensor) -> torch.Tensor:
    """`place_e4m3`'s inverse on int32 words: natural uint8 bytes [..., 4 W]."""
    b = words.contiguous().view(torch.uint8)
    b = b.reshape(*b.shape[:-1], b.shape[-1] // 4, 4).to(torch.int64)
    word = sum(b[..., i] << (8 * i) for i in range(4))
    out = torch.zeros_like(word)
    for j, places in enumerate(POSITIONS):
        for bit, place in enumerate(places):
            out |= ((word >> place) & 1) << (8 * j + bit)
    nat = torch.stack([(out >> (8 * i)) & 0xFF for i in range(4)], -1).to(torch.uint8)
    return nat.reshape(*words.shape[:-1], -1)


def unpack_fp8_gluon(g: Fp8GluonWeights, R: int) -> torch.Tensor:
    """`pack_fp8_gluon`'s inverse: the natural uint8 bytes [E, N, R]."""
    E, nb, S = g.main.shape[:3]
    N = nb * ROWS
    main = g.main.reshape(E, nb, S, 4, 2, 2, 8, 4, 4).permute(0, 1, 3, 4, 6, 2, 7, 5, 8)
    main = _unplaced(main.reshape(E, N, S, WORDS))  # [E, N, S, 128] in storage order

    def natural(stored: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(stored)
        out[..., order.to(stored.device)] = stored
        return out

    w = natural(main, _lane_k(8)).reshape(E, N, S * STEP)
    if R > S * STEP:
        w = torch.cat((w, natural(_unplaced(g.tail), _lane_k(4))), dim=-1)
    return w
