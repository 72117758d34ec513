"""MXFP4 weights laid out for the Gluon tile (`moebench.kernels.mx_gluon`, ``Launch.gluon``):
each thread of the tile loads, from global memory straight into registers, the words that decode
into the wgmma A fragment it holds, and a program's stream is one contiguous run.

Why. Triton 3.6 cannot give a loaded tensor the warpgroup MMA's register-operand layout: the
Triton tile (`grouped_dot`) copies its weights through shared memory and re-lays them, about 241
instructions a K step at gpt-oss-20b's shapes. The Gluon tile decodes its own words into the
operand: thread (warp w, lane l) of the 64-row tile holds rows 16w + l/4 and + 8, and in each
16-value slice of K the values 2(l % 4) + {0, 1} and + 8 (the fragment of an m64n16k16 MMA). Here
that thread's 16 bytes of a row and a 128-value step are four words j = 0..3, word j of lane
a = l % 4 holding the eight values K = 32j + 16cp + 8sub + 2a + h (cp, sub, h in {0, 1}), so that
the rotated decode's four output pairs (`mx_rotated`: $0..$3) are the fragment's, pair for pair.

Storage (N a multiple of 64; R = 128 S + T with S even, at least 4, and T 0 or 64):
- ``main``: int32 [E, N / 64, S, 64 rows, 16 words], one program's steps one after the other,
  word (row, a, j) of a step at 256 (row // 16) + 128 ((row // 8) % 2) + 16 (row % 8) + 4a + j:
  a warp's load of one half of its rows (16w + 8h + l / 4) is 128 contiguous words;
- ``tail`` (T = 64): int32 [E, N, 8], the last 64 values of a row as 8 words, word 2a + j (j in
  {0, 1}) holding K = 32j + ... as above;
- ``scales``: int32 [E, N / 64, S, 64], a row's four e8m0 bytes of a step as one little-endian
  word, in the program's step order; ``tail_scales``: int32 [E, N], the tail's two bytes.

The bits of each word are `mx_rotated.rotate_mxfp4`'s, so the decode is the rotated one (a
rotation and a mask a pair) with the step's scale byte picked out of the row's scale word by one
byte permute. Values and scales are only moved: `unpack_gluon` undoes the layout. The copy is made
once, when the arm builds its stages (`arms/decode/grouped_decode.py`), and is the size of the
problem's bytes and scales (scales one byte a group, as before).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from moebench.kernels.mx_rotated import POSITIONS, rotate_mxfp4

ROWS = 64  # weight rows of a program (one warpgroup's MMA)
STEP = 128  # values a K step
TAIL = 64  # values of the last step where R is no multiple of STEP


class GluonWeights(NamedTuple):
    """One stage's MXFP4 weights in the Gluon tile's layout (module docstring)."""

    main: torch.Tensor
    tail: torch.Tensor
    scales: torch.Tensor
    tail_scales: torch.Tensor


def fits(columns: int, reduction: int) -> bool:
    """Whether a stage of ``columns`` output rows (N) and ``reduction`` values a row (R) takes the
    layout: N whole tiles of 64 rows, R an even number of 128-value steps, at least 4, and
    possibly one 64-value tail (the tile's loop runs two steps a turn; at two steps, one turn,
    triton 3.6's lowering to LLVM fails, H100, docs/perf/2026-12-07-ws-readonly/call1/)."""
    steps, tail = divmod(reduction, STEP)
    whole_tiles = columns % ROWS == 0 and columns > 0
    return whole_tiles and tail in (0, TAIL) and steps >= 4 and steps % 2 == 0


def _lane_k(words: int) -> torch.Tensor:
    """int64 [4 * words * 8]: the K inside a step of each value of a thread lane's words, in
    storage order (word 4a + j, or 2a + j for the tail, then the natural nibble). Nibble n of a
    word is its value n; the rotated decode's pair r = 2cp + sub holds nibbles (0, 2), (4, 6),
    (1, 3), (5, 7), its low half h = 0."""
    pair_nibbles = ((0, 2), (4, 6), (1, 3), (5, 7))
    k = torch.empty(4 * words * 8, dtype=torch.long)
    for a in range(4):
        for j in range(words):
            for r, (lo, hi) in enumerate(pair_nibbles):
                cp, sub = divmod(r, 2)
                for h, nib in enumerate((lo, hi)):
                    k[(words * a + j) * 8 + nib] = 32 * j + 16 * cp + 8 * sub + 2 * a + h
    return k


def _codes(w: torch.Tensor) -> torch.Tensor:
    """e2m1 codes [E, N, R] (uint8 0..15) of natural bytes [E, N, R / 2]."""
    return torch.stack((w & 0xF, w >> 4), dim=-1).reshape(*w.shape[:-1], -1)


def _words(codes: torch.Tensor) -> torch.Tensor:
    """Codes [E, ..., 8 W] in each word's natural nibble order -> rotated int32 words [E, ..., W],
    an expert at a time (`rotate_mxfp4`'s int64 steps hold about 12 times the bytes)."""
    b = codes[..., 0::2] | (codes[..., 1::2] << 4)
    out = torch.empty_like(b)
    for e in range(b.shape[0]):
        out[e] = rotate_mxfp4(b[e].reshape(-1, b.shape[-1])).reshape(b.shape[1:])
    return out.view(torch.int32)


def _unrotated(words: torch.Tensor) -> torch.Tensor:
    """`rotate_mxfp4`'s inverse on int32 words: natural uint8 bytes [..., 4 W]."""
    word = words.to(torch.int64) & 0xFFFFFFFF
    out = torch.zeros_like(word)
    for j, places in enumerate(POSITIONS):
        for bit, place in enumerate(places):
            out |= ((word >> place) & 1) << (4 * j + bit)
    b = torch.stack([(out >> (8 * i)) & 0xFF for i in range(4)], -1).to(torch.uint8)
    return b.reshape(*words.shape[:-1], -1)


def _scale_words(s: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 4 W] -> little-endian int32 words [..., W]."""
    return s.contiguous().view(torch.int32)


def _check_fits(N: int, R: int, what: str) -> None:
    if not fits(N, R):
        raise ValueError(
            f"{what} needs N a multiple of {ROWS} and R an even number of {STEP}-"
            f"value steps and at most one {TAIL}-value tail, got N {N}, R {R}"
        )


def gluon_words(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(main, tail) of natural MXFP4 bytes ``w`` [E, N, R / 2] (value 2i in the low nibble of
    byte i) in the Gluon tile's layout (module docstring)."""
    if w.dtype != torch.uint8 or w.dim() != 3:
        raise ValueError(f"gluon_words takes uint8 [E, N, R / 2] bytes, got {w.dtype} "
                         f"{tuple(w.shape)}")  # fmt: skip
    E, N, half = w.shape
    R = 2 * half
    _check_fits(N, R, "gluon_words")
    S = R // STEP
    codes = _codes(w)
    main = codes[..., : S * STEP].reshape(E, N, S, STEP)[..., _lane_k(4).to(w.device)]
    main = _words(main).reshape(E, N // ROWS, 4, 2, 8, S, 4, 4)  # [E, nb, w, h, r, S, a, j]
    main = main.permute(0, 1, 5, 2, 3, 4, 6, 7).reshape(E, N // ROWS, S, ROWS, 16)
    if R > S * STEP:
        tail = _words(codes[..., S * STEP :][..., _lane_k(2).to(w.device)])
    else:  # nothing to read: zeros, so that the pointers stay valid
        tail = torch.zeros(E, N, 8, dtype=torch.int32, device=w.device)
    return main.contiguous(), tail.contiguous()


def gluon_scales(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scales, tail_scales) of e8m0 bytes ``scales`` [E, N, R / 32] in the Gluon tile's layout
    (module docstring)."""
    if scales.dtype != torch.uint8 or scales.dim() != 3:
        raise ValueError(f"gluon_scales takes uint8 [E, N, R / 32] scales, got {scales.dtype} "
                         f"{tuple(scales.shape)}")  # fmt: skip
    E, N, G = scales.shape
    R = 32 * G
    _check_fits(N, R, "gluon_scales")
    S = R // STEP
    sc = scales[..., : S * 4].reshape(E, N // ROWS, ROWS, S, 4)
    sc = _scale_words(sc).reshape(E, N // ROWS, ROWS, S).permute(0, 1, 3, 2)
    if R > S * STEP:
        ts = scales[..., S * 4 :].to(torch.int32)
        tail_scales = ts[..., 0] | (ts[..., 1] << 8)
    else:
        tail_scales = torch.zeros(E, N, dtype=torch.int32, device=scales.device)
    return sc.contiguous(), tail_scales.contiguous()


def pack_gluon(w: torch.Tensor, scales: torch.Tensor) -> GluonWeights:
    """Natural MXFP4 bytes ``w`` [E, N, R / 2] and their e8m0 ``scales`` [E, N, R / 32] in the
    Gluon tile's layout (`gluon_words`, `gluon_scales`)."""
    E, N, half = w.shape
    if tuple(scales.shape) != (E, N, half // 16):
        raise ValueError(f"pack_gluon: scales must be [E, N, R / 32] = {(E, N, half // 16)}, got "
                         f"{tuple(scales.shape)}")  # fmt: skip
    return GluonWeights(*gluon_words(w), *gluon_scales(scales))


def unpack_gluon(g: GluonWeights, R: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`pack_gluon`'s inverse: (natural bytes [E, N, R / 2], scales [E, N, R / 32])."""
    E, nb, S = g.main.shape[:3]
    N = nb * ROWS
    main = g.main.reshape(E, nb, S, 4, 2, 8, 4, 4).permute(0, 1, 3, 4, 5, 2, 6, 7)
    main = main.reshape(E, N, S, 16)

    def codes_of(words: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        b = _unrotated(words)
        c = torch.stack((b & 0xF, b >> 4), dim=-1).reshape(*b.shape[:-1], -1)
        out = torch.empty_like(c)
        out[..., order.to(c.device)] = c
        return out

    codes = codes_of(main, _lane_k(4)).reshape(E, N, S * STEP)
    sc = g.scales.permute(0, 1, 3, 2).reshape(E, N, S).contiguous().view(torch.uint8)
    if R > S * STEP:
        codes = torch.cat((codes, codes_of(g.tail, _lane_k(2))), dim=-1)
        ts = g.tail_scales
        sc = torch.cat((sc, torch.stack((ts & 0xFF, (ts >> 8) & 0xFF), -1).to(torch.uint8)), -1)
    w = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)
    return w, sc.reshape(E, N, R // 32)
