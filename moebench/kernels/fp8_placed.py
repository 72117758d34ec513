"""FP8 weights in the placed layout: each 32-bit word's four e4m3 values laid out so that the
tensor-core tile (`grouped_dot`, ``PLACED``) puts two of them in bf16 place with one mask and the
other two with two shifts and two masks.

Why. The tile widens e4m3 to bf16 by bit placement (`jit.e4m3_to_bf16`): a value's magnitude
bits (e3..e0 m2..m0) go to bits 10..4 of a bf16 half and its sign to bit 15, which reads as the
value times 2^-120, and one multiply by 2^120 makes it exact. In the natural layout (value j in
byte j) a pair costs a byte permute, a shift, two masks, an or and the multiply: sm_90a, triton
3.6, 11 instructions for a word's four values (4 LOP3, 3 PRMT, 2 SHF, 2 HMUL2 in the one-pass
tile's weight loop, 176 of its 278 instructions a step; tools/sass_grouped_decode.py), 9 of them
on the integer pipe, which runs at half the FMA pipe's rate. Here the word's bits are where the
decode wants them:

- values 0 and 1 (``$0``) sit in place: the word masked with 0x87F087F0 (bits 4..10 and 15 of
  each half) is the pair;
- values 2 and 3 (``$1``) sit in the other 16 bits: each value's m2..m0 e0 four bits below
  their place and its sign four below bit 15 (bits 0..3 and 11 of its half), its e3..e1 four
  above their place (bits 12..14). The word shifted left by 4 and masked, or'ed with the word
  shifted right by 4 and masked, is the pair.

A word: 7 instructions against 11, and 4 of them on the integer pipe against 9 (a left shift can
be a multiply). One mask and one shift pair cannot do both pairs: the 16 bits a pair takes are
no translate of the other 16 (their runs are 7, 1, 7, 1 against 4, 4, 4, 4), and no constant's
shifted copies move them without a carry (searched exhaustively in the session that built this).

The layout is a permutation of the bits of each little-endian 32-bit word of a row (R bytes, a
multiple of 4): `place_e4m3` makes it once, when an arm builds its stages. The values, their
order along a row and the words' places are unchanged, so the tile reads the same bytes at the
same addresses in the same K order, and every value decodes to the natural decode's bits,
NaN bytes to +-480 as there (tests/kernels/test_fp8_placed.py runs the PTX on every byte in every
position; tests/kernels/test_grouped_decode.py the kernel bitwise against the natural layout).
The decode takes whole words built from the bytes (`jit.row_words`), as `mx_rotated.rotated_tile`
does, not triton's packs of four elements, whose bytes follow the tile's layout.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import bf16_halves, bf16_pairs, row_words

# The bit of the placed word that holds each bit (m0, m1, m2, e0, e1, e2, e3, s: bits 0..7 of the
# e4m3 byte) of each of a word's four values (value j: byte j of the natural little-endian word).
POSITIONS = (
    (4, 5, 6, 7, 8, 9, 10, 15),  # value 0: $0's low half, in place
    (20, 21, 22, 23, 24, 25, 26, 31),  # value 1: $0's high half, in place
    (0, 1, 2, 3, 12, 13, 14, 11),  # value 2: $1's low half, m e0 s from << 4, e3..e1 from >> 4
    (16, 17, 18, 19, 28, 29, 30, 27),  # value 3: $1's high half, as value 2's plus 16
)

PAIR_MASK = 0x87F087F0  # a bf16 pair's placed bits: 10..4 and 15 of each half
FROM_LEFT_SHIFT = 0x80F080F0  # of them, those the left shift by 4 fills: 7..4 and 15
FROM_RIGHT_SHIFT = 0x07000700  # those the right shift by 4 fills: 10..8
TWO_TO_120 = 0x7B807B80  # 2^120, a bf16 pair

# The tile's decode of one placed word ($2) into two bf16 pairs: $0 values 0 and 1, $1 values 2
# and 3 (low half first), each the placed bits times 2^120.
E4M3_BF16_PLACED_ASM = tl.constexpr(f"""{{
.reg .b32 a, b, k;
mov.b32 k, 0x{TWO_TO_120:08X};
and.b32 a, $2, 0x{PAIR_MASK:08X};
mul.rn.bf16x2 $0, a, k;
shl.b32 a, $2, 4;
and.b32 a, a, 0x{FROM_LEFT_SHIFT:08X};
shr.b32 b, $2, 4;
and.b32 b, b, 0x{FROM_RIGHT_SHIFT:08X};
or.b32 a, a, b;
mul.rn.bf16x2 $1, a, k;
}}""")


def place_e4m3(w: torch.Tensor) -> torch.Tensor:
    """FP8 weights ``w`` [..., R] (e4m3 or their uint8 bytes; R a multiple of 4, rows
    contiguous) in the placed layout: a new tensor of the same shape and dtype, each 4-byte word's
    bits permuted (`POSITIONS`)."""
    if w.dtype not in (torch.float8_e4m3fn, torch.uint8) or w.shape[-1] % 4:
        raise ValueError(f"place_e4m3 takes e4m3 (or uint8) rows of a multiple of 4 bytes, got "
                         f"{w.dtype} {tuple(w.shape)}")  # fmt: skip
    b = w.contiguous().view(torch.uint8)
    b = b.reshape(*b.shape[:-1], b.shape[-1] // 4, 4).to(torch.int64)
    out = torch.zeros(b.shape[:-1], dtype=torch.int64, device=b.device)
    for j, places in enumerate(POSITIONS):
        for bit, place in enumerate(places):
            out |= ((b[..., j] >> bit) & 1) << place
    placed = torch.stack([(out >> (8 * i)) & 0xFF for i in range(4)], -1).to(torch.uint8)
    return placed.reshape(w.shape).view(w.dtype)


@triton.jit
def _placed_pairs(word):
    """The interpreter's integer steps of `E4M3_BF16_PLACED_ASM`: a placed uint32 word's two
    bf16 pairs, each value as itself times 2^-120 (before the multiply)."""
    p0 = word & 0x87F087F0
    p1 = ((word << 4) & 0x80F080F0) | ((word >> 4) & 0x07000700)
    return p0, p1


@triton.jit
def _values(placed):
    """A placed pair's two values as fp32 [..., 2] (low half first), exact: 2^120 is a power of
    two, and numpy keeps the subnormals."""
    lo, hi = bf16_pairs(placed)
    return tl.join(lo * 1.329227995784916e36, hi * 1.329227995784916e36)


@triton.jit
def placed_tile(w, INTERPRET: tl.constexpr):
    """Placed e4m3 bytes ``w`` [BLOCK_N, BLOCK_K] as their values in natural order: bf16 on the
    GPU, one decode (`E4M3_BF16_PLACED_ASM`) a memory word of a row, fp32 under the interpreter
    (its integer steps and an exact fp32 multiply). The words come from the bytes and the pairs
    go back to values by ops the compiler turns into register names (`jit.row_words`)."""
    BN: tl.constexpr = w.shape[0]
    BK: tl.constexpr = w.shape[1]
    word = row_words(w.to(tl.uint8, bitcast=True))
    if INTERPRET:
        p0, p1 = _placed_pairs(word)
        v = tl.join(_values(p0), _values(p1))
    else:
        p0, p1 = tl.inline_asm_elementwise(
            E4M3_BF16_PLACED_ASM, "=r,=r,r", [word], dtype=(tl.uint32, tl.uint32), is_pure=True,
            pack=1,
        )  # fmt: skip
        v = tl.join(bf16_halves(p0), bf16_halves(p1))
    # v [BN, BK / 4, half, pair]: value 4 i + 2 pair + half of the row.
    return tl.reshape(tl.permute(v, (0, 1, 3, 2)), [BN, BK])
