"""MXFP4 weights dequantised in registers: `@triton.jit` helpers shared by the decode kernels.

They must match `reference.dequant_weight_mxfp4` exactly. A byte holds two e2m1 values, the low
nibble first (value 2j of a row in the low nibble of byte j); a block of 32 values along K shares
one e8m0 scale byte, 2^(byte - 127).

e2m1 is 1 sign, 2 exponent (bias 1) and 1 mantissa bit: magnitudes 0, 0.5 (the one subnormal),
1, 1.5, 2, 3, 4, 6. Placing the three magnitude bits at bits 11..9 of an fp16 (exponent field e,
top mantissa bit m) gives exactly value * 2^-14 for every code, the subnormal included, because
fp16's own subnormals continue e2m1's; the fp16 -> fp32 conversion is exact and one instruction.
The 2^14 is put back once per output row (an exact power of two), and the block scale is built
from its bits, so nothing here rounds.

The GEMV decodes a 32-bit word (four bytes, eight values) at a time: for one byte of the word, a
mask and one integer multiply move both nibbles' magnitude bits into the two fp16 halves of a
word (low nibble to bits 11..9, high nibble to bits 27..25; the cross terms of the multiply land
outside the kept bits), and the same for the two sign bits; one bit-select keeps the wanted
bits. Five integer instructions give two values when compiled (the bit-select as one inline-PTX
``lop3``; the compiler's own form takes two); a nibble-at-a-time decode took about eleven (sm_90a
SASS compiled offline).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _halves(mag, sgn, ASM: tl.constexpr):
    """(mag & 0x0E080E00) | (sgn & ~0x0E080E00) on uint32. ASM (compiled only; the interpreter
    runs no PTX): one ``lop3`` with the mask as its immediate (LUT 0xE4: c ? a : b), which the
    compiler does not find by itself (it emits two logic instructions)."""
    if ASM:
        return tl.inline_asm_elementwise(
            "lop3.b32 $0, $1, $2, 0x0E080E00, 0xE4;", "=r,r,r", [mag, sgn], dtype=tl.uint32,
            is_pure=True, pack=1,
        )  # fmt: skip
    else:
        return (mag & 0x0E080E00) | (sgn & 0xF1F7F1FF)


@triton.jit
def e2m1_pair(word, BYTE: tl.constexpr, ASM: tl.constexpr = False):
    """(low, high) nibble of byte ``BYTE`` (0 or 1) of uint32 ``word`` as fp32 values * 2^-14.

    Bytes 2 and 3 are bytes 0 and 1 of ``word >> 16``. With t the byte's magnitude bits
    (mask 0x77 at the byte), t * (2^9 + 2^21) >> 8*BYTE puts the low nibble's bits 0..2 at 9..11
    and the high nibble's bits 4..6 at 25..27; the sign bits (mask 0x88) times
    (2^12 + 2^24) >> 8*BYTE land at 15 and 31. Everything else is dropped by one bit-select.
    """
    mag = (word & (0x77 << (8 * BYTE))) * (0x00200200 >> (8 * BYTE))
    sgn = (word & (0x88 << (8 * BYTE))) * (0x01001000 >> (8 * BYTE))
    # mag's bits are 9-11, 13-15, 21-23 and 25-27; sgn's 15, 19, 27 and 31. One bit-select with
    # a mask holding mag's wanted bits and bit 19 keeps mag's 9-11, 25-27 and sgn's 15, 31.
    halves = _halves(mag, sgn, ASM)
    lo = halves.to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    hi = (halves >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def e8m0_scale(s):
    """fp32 2^(s - 127) of e8m0 bytes ``s``, built from the bits: exact for bytes 1..254; byte 255
    (NaN in the format) gives inf, so the output turns non-finite as NaN would; byte 0 (2^-127)
    gives 0."""
    return (s.to(tl.int32) << 23).to(tl.float32, bitcast=True)
