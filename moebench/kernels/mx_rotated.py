"""MXFP4 weights in the rotated layout: each 32-bit word's eight e2m1 values laid out so that the
tensor-core tile (`tile_order.mx_tile`, ``ROTATED``) decodes a pair of them with one rotation
and one mask.

Why. The tile decodes e2m1 to bf16 by bit placement: a value's magnitude bits (e1 e0 m) go to
bits 8..6 of a bf16 half and its sign to bit 15, which reads as the value times 2^-126 (bf16's
subnormals continue e2m1's), and one multiply by 2^(s - 1) applies the scale (`grouped_dot`,
folded scales). In the natural layout (value 2i in the low nibble of byte i) a nibble's magnitude
and sign need two different shifts, so a pair of values costs a mask, a multiply (two shifted
copies), a second mask and half a byte permute besides the scale's multiply: 18 instructions for
a word's eight values. Here the bits of the pair that output register ``$r`` holds sit, in both
halves, where one left rotation by ``ROTATIONS[r]`` puts them on the mask 0x81C081C0 (bits 6-8,
15, 22-24, 31). Four disjoint rotations of that mask cannot tile 32 bits (its 16-bit pattern {6,
7, 8, 15} tiles no 16 bits by translation, checked exhaustively), so the fourth pair takes another
form: masked, multiplied by a constant whose three shifted copies of its bits never overlap (no
carries), masked again. A word: 12 instructions against 18. sm_90a, triton 3.6, compiled offline
(tools/sass_grouped_decode.py, the arm's MXFP4 tile launches): the weight loop 219 instructions a
step against 276 at one pass a program (80 registers, 6 programs an SM either way), 204 against
261 for the expert loop; the words come straight from the shared-memory loads.

The layout is a permutation of the bits of each little-endian 32-bit word of a row (R / 2 bytes,
a multiple of 4: R is a multiple of the 32-value group): `rotate_mxfp4` makes it once, when an
arm builds its stages. The values, their order along a row, the words' places and the scales are
unchanged, so the tile reads the same bytes at the same addresses in the same K order, and each
value decodes to the same bf16 bits (tests/kernels/test_mx_decode_ptx.py runs the PTX on every
pattern of every pair, tests/kernels/test_grouped_decode.py the kernel bitwise against the
natural layout). The output registers hold the natural decode's values: ``$0`` values 0 and 2 of
the word (the low nibbles of bytes 0 and 1), ``$1`` values 4 and 6, ``$2`` 1 and 3, ``$3`` 5
and 7. The decode takes whole words (`rotated_tile`), not the natural decode's packs of four
bytes: which four bytes triton 3.6 packs into one inline-asm register follows the tile's layout
(at 64 rows a pack holds two bytes of row r and two of row r + 8).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import bf16_halves, e8m0_scale, row_words

# The bit of the rotated word that holds each code bit (m, e0, e1, s: bits 0..3 of the e2m1
# nibble) of each of a word's eight values (value j: nibble j of the natural little-endian word).
POSITIONS = (
    (6, 7, 8, 15),  # value 0: $0's low half, in place
    (25, 26, 27, 2),  # value 1: $2's low half, rotated left by 13
    (22, 23, 24, 31),  # value 2: $0's high half, in place
    (9, 10, 11, 18),  # value 3: $2's high half, rotated by 13
    (28, 29, 30, 5),  # value 4: $1's low half, rotated by 10
    (4, 0, 1, 3),  # value 5: $3's low half: bits 0-1 shifted by 7, 4 by 2, 3 by 12
    (12, 13, 14, 21),  # value 6: $1's high half, rotated by 10
    (20, 16, 17, 19),  # value 7: $3's high half, as value 5's plus 16
)

# $r's rotation (None: $3's masked multiply, by MULTIPLIER = 2^2 + 2^7 + 2^12 after the mask
# THIRD_PAIR_BITS; its copies of bits 0, 1, 3, 4 (and 16, 17, 19, 20) land on 2-8, 10-16, ...
# without a common bit, so the sum has no carry).
ROTATIONS = (0, 10, 13, None)
PAIR_MASK = 0x81C081C0
THIRD_PAIR_BITS = 0x001B001B
MULTIPLIER = 0x1084


def placed_pair(r: int, word: str = "$4") -> list[str]:
    """PTX putting pair ``r`` of the rotated word ``word`` (an inline-asm operand) in place in
    ``c``: each value's bits at 8..6 and 15 of its bf16 half (the value times 2^-126)."""
    mask = f"0x{PAIR_MASK:08X}"
    rot = ROTATIONS[r]
    if rot == 0:
        return [f"and.b32 c, {word}, {mask};"]
    if rot is not None:
        return [f"shf.l.wrap.b32 c, {word}, {word}, {rot};", f"and.b32 c, c, {mask};"]
    return [f"and.b32 c, {word}, 0x{THIRD_PAIR_BITS:08X};",
            f"mul.lo.u32 c, c, 0x{MULTIPLIER:04X};", f"and.b32 c, c, {mask};"]  # fmt: skip


def _decode_asm(fold: bool) -> str:
    """The tile's e2m1 x e8m0 -> bf16 decode of one rotated word (``$4``) into four bf16 pairs
    (``$0``..``$3``, the natural decode's registers); ``$5`` the word's scale (its eight values
    are in one group of 32) as a bf16 pair: 2^(s - 1) where ``fold`` (scale bytes up to 128),
    else 2^(s - 127), after a multiply by 2^126."""
    lines = ["{", ".reg .b32 c;"] if fold else ["{", ".reg .b32 c, k;", "mov.b32 k, 0x7E807E80;"]
    for r in range(len(ROTATIONS)):
        lines += placed_pair(r)
        if not fold:
            lines.append("mul.rn.bf16x2 c, c, k;")  # times 2^126
        lines.append(f"mul.rn.bf16x2 ${r}, c, $5;")
    return "\n".join(lines + ["}"])


E2M1_BF16_ROTATED_ASM = tl.constexpr(_decode_asm(fold=False))
E2M1_BF16_ROTATED_FOLDED_ASM = tl.constexpr(_decode_asm(fold=True))


def _values_asm(pairs: tuple[int, int]) -> str:
    """The CUDA-core GEMVs' decode of two of a rotated word's (``$4``) four pairs (``pairs``:
    (0, 2), values 0, 2, 1, 3, or (1, 3), values 4, 6, 5, 7) into four fp32 values (``$0``..``$3``
    in that order), unscaled (the GEMVs scale a group's sum): each pair placed as the tile's,
    times 2^126 in bf16 (exact), then widened, the low half by a shift and the high half by a
    mask (a bf16 number is the top half of its fp32). 20 instructions a word in the two halves;
    the natural layout's fp16 placement takes about 34. In halves so that a step's values are
    live half at a time, as the natural decode's bytes."""
    lines = ["{", ".reg .b32 c, k;", "mov.b32 k, 0x7E807E80;"]
    for i, r in enumerate(pairs):
        lines += placed_pair(r)
        lines += ["mul.rn.bf16x2 c, c, k;", f"shl.b32 ${2 * i}, c, 16;",
                  f"and.b32 ${2 * i + 1}, c, 0xFFFF0000;"]  # fmt: skip
    return "\n".join(lines + ["}"])


E2M1_F32_ROTATED_LOW_ASM = tl.constexpr(_values_asm((0, 2)))
E2M1_F32_ROTATED_HIGH_ASM = tl.constexpr(_values_asm((1, 3)))


def rotate_mxfp4(w: torch.Tensor) -> torch.Tensor:
    """MXFP4 weight bytes ``w`` [..., B] (B a multiple of 4, rows contiguous) in the rotated
    layout: a new tensor of the same shape, each 4-byte word's bits permuted (`POSITIONS`)."""
    if w.dtype != torch.uint8 or w.shape[-1] % 4:
        raise ValueError(f"rotate_mxfp4 takes uint8 rows of a multiple of 4 bytes, got {w.dtype} "
                         f"{tuple(w.shape)}")  # fmt: skip
    if w.dim() > 2:
        # A leading slice (an expert) at a time: the int64 steps below hold about 12 times the
        # bytes they repack, which whole layers of a large model (gpt-oss-120b: 1 GB a tensor)
        # would need on the device at once.
        out = torch.empty_like(w)
        for i in range(w.shape[0]):
            out[i] = rotate_mxfp4(w[i])
        return out
    b = w.reshape(*w.shape[:-1], w.shape[-1] // 4, 4).to(torch.int64)
    word = sum(b[..., i] << (8 * i) for i in range(4))
    out = torch.zeros_like(word)
    for j, places in enumerate(POSITIONS):
        for bit, place in enumerate(places):
            out |= ((word >> (4 * j + bit)) & 1) << place
    return (
        torch.stack([(out >> (8 * i)) & 0xFF for i in range(4)], -1)
        .to(torch.uint8)
        .reshape(w.shape)
    )


# The largest e8m0 scale byte (scale 2^(s - 127)) for which the MXFP4 tile folds its decode's
# constant 2^126 into the scale: 2^(s - 1) is a bf16 number up to s = 128 (`grouped_dot`,
# FOLD_SCALES; the launcher's bound, and `biased_scales`'). A scale above 2 (a byte past 128)
# means a group of 32 weights reaching past 12.
FOLD_SCALES_UP_TO = 128


def biased_scales(s: torch.Tensor) -> torch.Tensor:
    """MXFP4 scale bytes ``s`` (uint8, each at most FOLD_SCALES_UP_TO) as the folded decode's
    exponent fields: s + 126 (2^(s - 1) as a bf16's exponent), byte 0 (which the decode maps to 0)
    kept 0; a new tensor of the same shape. The rotated tile reads them with ``FOLD_SCALES`` 2
    (`rotated_tile`; ``Launch.mx_biased_scales``)."""
    if s.dtype != torch.uint8:
        raise ValueError(f"biased_scales takes uint8 scale bytes, got {s.dtype}")
    if s.numel() and int(s.max()) > FOLD_SCALES_UP_TO:
        raise ValueError(f"biased_scales takes scale bytes up to {FOLD_SCALES_UP_TO}, got "
                         f"{int(s.max())}")  # fmt: skip
    return torch.where(s == 0, s, s + 126)


@triton.jit
def _rotl(word, n: tl.constexpr):
    return (word << n) | (word >> (32 - n))


@triton.jit
def _placed(word):
    """The interpreter's integer steps of the decodes: a rotated uint32 word's four bf16 pairs,
    each value placed as itself times 2^-126 ($0..$3 of `E2M1_BF16_ROTATED_ASM`, unscaled)."""
    p0 = word & 0x81C081C0
    p1 = _rotl(word, 10) & 0x81C081C0
    p2 = _rotl(word, 13) & 0x81C081C0
    p3 = ((word & 0x001B001B) * 0x1084) & 0x81C081C0
    return p0, p1, p2, p3


@triton.jit
def _widened(placed):
    """A placed pair's two values as fp32 e2m1 values (low, high): exact (bf16 bits are the top
    half of fp32's; times 2^126, a power of two)."""
    lo = (placed << 16).to(tl.float32, bitcast=True) * 8.507059173023462e37
    hi = (placed & 0xFFFF0000).to(tl.float32, bitcast=True) * 8.507059173023462e37
    return lo, hi


@triton.jit
def rotated_word_values(word, HALF: tl.constexpr, PTX: tl.constexpr):
    """Four of rotated uint32 words ``word``'s eight e2m1 values as fp32, unscaled: for HALF 0
    values 0, 1, 2, 3 (the low and high nibble of bytes 0 and 1 of the natural word, as
    `jit.e2m1_pair`'s pairs but exact rather than times 2^-14), for HALF 1 values 4-7 (bytes 2
    and 3). ``PTX`` (compiled): `E2M1_F32_ROTATED_LOW_ASM` or its high half; else their integer
    steps."""
    if PTX:
        asm: tl.constexpr = E2M1_F32_ROTATED_HIGH_ASM if HALF else E2M1_F32_ROTATED_LOW_ASM
        a0, a1, b0, b1 = tl.inline_asm_elementwise(
            asm, "=r,=r,=r,=r,r", [word], dtype=(tl.float32,) * 4, is_pure=True, pack=1
        )
    else:
        p0, p1, p2, p3 = _placed(word)
        a0, a1 = _widened(p1 if HALF else p0)
        b0, b1 = _widened(p3 if HALF else p2)
    # (a0, a1) the pair of even values (byte 2 HALF's low nibble, then the next byte's), (b0, b1)
    # the odd ones: in value order a0, b0, a1, b1.
    return a0, b0, a1, b1


@triton.jit
def _scaled(placed, sc):
    """The interpreter's ``mul.rn.bf16x2``: uint32 bf16 pairs ``placed`` (e2m1 x 2^-126) times
    2^126 times fp32 ``sc``, as bf16 pairs. In fp32, exact, and so are the bf16 bits, the top half
    of the fp32 ones: a value with two significant bits times a power of two (0 x inf a NaN)."""
    lo, hi = _widened(placed)
    lo, hi = lo * sc, hi * sc
    lo_bits = lo.to(tl.uint32, bitcast=True) >> 16
    return lo_bits | (hi.to(tl.uint32, bitcast=True) & 0xFFFF0000)


@triton.jit
def _per_word(t):
    """[BN, G] values of a row's groups, one a memory word: [BN, G * 4] (4 words a group)."""
    BN: tl.constexpr = t.shape[0]
    G: tl.constexpr = t.shape[1]
    return tl.reshape(tl.broadcast_to(tl.reshape(t, [BN, G, 1]), [BN, G, 4]), [BN, G * 4])


@triton.jit
def _cyclic_per_word(t):
    """[BN, G] values of a row's groups as one a memory word, word j taking group j % G: [BN,
    G * 4] (`mx_dot_order`: a stored word of a step holds one group's values, the groups in
    turn)."""
    BN: tl.constexpr = t.shape[0]
    G: tl.constexpr = t.shape[1]
    return tl.reshape(tl.broadcast_to(tl.reshape(t, [BN, 1, G]), [BN, 4, G]), [BN, G * 4])


@triton.jit
def _word_scales(t, DOT_ORDER: tl.constexpr):
    """A row's group values [BN, G] as one a memory word (`_per_word`, or `_cyclic_per_word` for
    `mx_dot_order`'s layout)."""
    if DOT_ORDER:
        out = _cyclic_per_word(t)
    else:
        out = _per_word(t)
    return out


@triton.jit
def rotated_tile(w, s, FOLD_SCALES: tl.constexpr, INTERPRET: tl.constexpr,
                 DOT_ORDER: tl.constexpr = False):  # fmt: skip
    """`tile_order.mx_tile` for rotated bytes ``w`` [BLOCK_N, BLOCK_K / 2] and their scale bytes
    ``s`` [BLOCK_N, BLOCK_K / 32]: one decode (`E2M1_BF16_ROTATED_ASM`) a memory word of a row,
    the words built from the bytes, the values bf16 (fp32 under the interpreter) in mx_tile's K
    order (values 4i, 4i + 2, 4i + 1, 4i + 3). The word building and the split back into bf16
    pairs are ops the compiler turns into register names (sm_90a: the decode reads the
    shared-memory loads' words, and its pairs are the dot's operand). Under the interpreter the
    same steps but the PTX, which runs as its integer steps and an exact fp32 multiply.
    ``DOT_ORDER``: the bytes in `mx_dot_order`'s layout, word j of a step scaled by its group j %
    G (G = BLOCK_K / 32) instead of j // 4. ``FOLD_SCALES`` 2: folded, and the scale bytes are
    `biased_scales`' (s + 126, the exponent field of 2^(s - 1), 0 kept), so that a scale's bf16
    pair is one multiply instead of an add, a compare and a select more."""
    BN: tl.constexpr = w.shape[0]
    KB: tl.constexpr = w.shape[1]
    word = row_words(w)
    if INTERPRET:
        if FOLD_SCALES == 2:
            s = tl.where(s == 0, 0, s.to(tl.int32) - 126)  # the e8m0 bytes again
        sc = _word_scales(e8m0_scale(s), DOT_ORDER)
        p0, p1, p2, p3 = _placed(word)
        r0, r1, r2, r3 = _scaled(p0, sc), _scaled(p1, sc), _scaled(p2, sc), _scaled(p3, sc)
    else:
        s32 = s.to(tl.uint32)
        # A scale's bf16 pair, (f << 7) | (f << 23) for its exponent field f, as one multiply by
        # 2^7 + 2^23 (f < 256: the two copies never overlap, so no carry). sm_90a, the arm's
        # one-pass tile: 241 instructions a step against 249 for the shifts and the or, which took
        # a shift, a mask and a multiply-add a scale after the byte's extraction.
        if FOLD_SCALES == 2:
            pair = s32 * 0x00800080  # biased bytes: 2^(s - 1), byte 0 still 0
            asm: tl.constexpr = E2M1_BF16_ROTATED_FOLDED_ASM
        elif FOLD_SCALES:
            pair = tl.where(s32 == 0, 0, (s32 + 126) * 0x00800080)  # 2^(s - 1); byte 0 gives 0
            asm: tl.constexpr = E2M1_BF16_ROTATED_FOLDED_ASM
        else:
            pair = s32 * 0x00800080  # 2^(s - 127); 0 and inf as jit.e8m0_scale
            asm: tl.constexpr = E2M1_BF16_ROTATED_ASM
        r0, r1, r2, r3 = tl.inline_asm_elementwise(
            asm, "=r,=r,=r,=r,r,r", [word, _word_scales(pair, DOT_ORDER)],
            dtype=(tl.uint32,) * 4, is_pure=True, pack=1,
        )  # fmt: skip
    # A word's values in mx_tile's order: $0 (values 0, 2), $2 (1, 3), $1 (4, 6), $3 (5, 7).
    v = tl.join(tl.join(bf16_halves(r0), bf16_halves(r2)),
                tl.join(bf16_halves(r1), bf16_halves(r3)))  # fmt: skip
    out = tl.reshape(tl.permute(v, (0, 1, 4, 3, 2)), [BN, 2 * KB])
    if INTERPRET:
        out = out.to(tl.float32)
    return out
