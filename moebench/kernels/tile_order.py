"""The tensor-core tile's operand orders, and the MXFP4 decode that writes into them, for
`moebench.kernels.grouped_dot` (its docstring has the tile; this file the orders the tile's
operands take and why).

K order (`dot_order`). The tensor cores' operand layout gives each thread of a quad the K pairs
2c, 2c + 1 and 2c + 8, 2c + 9 of every 16; in natural order a thread's weights are then 2-byte
(FP8) or 1-byte (MXFP4) pieces, read from shared memory one at a time (sm_90a SASS: 32 LDS.U16 a
step for 64 bytes a thread). The dot takes K in any order as long as both operands share it, so
both tiles are permuted (a reshape and a permute, free in registers) so that each thread's quarter
of a row's step is one contiguous run, read as 16-byte words; the MXFP4 tile also keeps the low
nibbles of two bytes in one register word and the high nibbles in the next (`mx_tile`), the words
the decode writes. The products are the natural order's; only the order of their fp32 sum
differs.

Row order (`loaded_rows`, `operand_rows`; the MXFP4 tile). Loads take a blocked layout: a
[64, 64-byte] tile on 4 warps gives lanes 8 rows by 4 runs of 16 bytes, the warps the next 2 row
bits and each thread's registers the top one (rows r and r + 32). The operand wants a thread's two
rows 8 apart (r and r + 8) and each warp 16 whole rows. The MXFP4 tile's bytes and scale bytes
are therefore read in `loaded_rows` order, which puts memory rows r and r + 8 where the load
layout gives one thread rows r and r + 32, and put back in natural order by `operand_rows` (a
reshape and a permute, free in registers) before the decode: the decode then runs in the
operand's layout and its values need no move (sm_90a SASS, compiled offline: no shuffle, no
shared-memory round trip in the weight loop; 10.3 instructions a weight byte). In natural order
the compiler moved each decoded value into that layout with warp shuffles and selects (64 values
a step: 16 SHFL and 33 SEL of 217 instructions, 13.6 a byte) or through shared memory (128
values: 8 STSM and 8 LDSM, 9.3 a byte). On the H200 the row order at 128 values a step was
9-20% faster than natural order at 128 and 7-22% faster than at 64 values (gpt-oss-20b EP2,
1-64 tokens, 2026-12-02, docs/perf/HISTORY.md). The FP8 tile needs no such order: its
conversion is elementwise on the loaded bytes, which the compiler reads from shared memory in
the operand's layout directly.

Folded scales (the MXFP4 tile). The decode places a nibble's bits in a bf16 word, which reads
as the value times 2^-126 (bf16's subnormals continue e2m1's), so it multiplies by 2^126 and then
by the scale 2^(s - 127). Both are powers of two and the product e2m1 x 2^(s - 127) is rounded
once either way, so where every scale byte is at most 128 (``FOLD_SCALES``: 2^(s - 1) is then a
bf16 number) one multiply by 2^(s - 1) gives the same bits (tests/kernels/test_mx_decode_ptx.py
runs both forms' PTX on every byte and scale). The launcher takes the scales' largest byte from
its caller, who reads it once (`grouped_gemv.max_scale_byte`; the arm when it builds its stages);
a scale above 2 means a group of 32 weights reaching past 12 in magnitude, and a tensor holding
one keeps the two multiplies (the bench's random weights: largest byte 122). sm_90a: 8.6
instructions a weight byte for one pass and 8.2 for the expert loop against 9.4 and 9.0; on the
H200 the MXFP4 step 1.7-8.8% faster at 4-64 tokens in two routing draws, bitwise the same
(docs/perf/HISTORY.md, 2026-12-03).
"""

from __future__ import annotations

import triton
import triton.language as tl

from moebench.kernels.jit import e2m1_pair, e8m0_scale
from moebench.kernels.mx_rotated import rotated_tile

# e2m1 x e8m0 -> bf16 on four bytes (eight values) in 22 instructions, compiled only (the
# interpreter runs no PTX). Operands: $0, $1 the low nibbles' bf16 pairs of bytes 0-1 and 2-3, $2,
# $3 the high nibbles', $4 the four bytes, $5, $6 the bf16 scales of bytes 0-1 and 2-3. A byte
# pair is spread to the two halves of a word (prmt); a nibble's magnitude bits land at bits 6..8
# of its half and its sign at bit 15 through a mask, a multiply (its two shifted copies of the
# nibble do not overlap) and a mask: the bf16 of value * 2^-126 exactly (bf16 subnormals continue
# e2m1's); times 2^126, then times the scale, both exact (powers of two). A scale byte of 255
# (inf) gives a non-finite value and byte 0 gives 0, as `jit.e8m0_scale`.
_E2M1_BF16_ASM = tl.constexpr("""{
.reg .b32 t, c, k;
mov.b32 k, 0x7E807E80;
prmt.b32 t, $4, 0, 0x4140;
and.b32 c, t, 0x000F000F;
mul.lo.u32 c, c, 0x1040;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 $0, c, $5;
and.b32 c, t, 0x00F000F0;
mul.lo.u32 c, c, 0x0104;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 $2, c, $5;
prmt.b32 t, $4, 0, 0x4342;
and.b32 c, t, 0x000F000F;
mul.lo.u32 c, c, 0x1040;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 $1, c, $6;
and.b32 c, t, 0x00F000F0;
mul.lo.u32 c, c, 0x0104;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 $3, c, $6;
}""")

# The same decode with the constant 2^126 folded into the scale (``FOLD_SCALES``: $5, $6 are the
# bf16 pairs of 2^(s - 1), which bf16 holds for scale bytes up to 128): one multiply a pair, 18
# instructions for eight values. The one product rounds the same exact value the two above round
# (e2m1 x 2^-126, times 2^(s - 1), is e2m1 x 2^(s - 127)), so the bits are the same.
_E2M1_BF16_FOLDED_ASM = tl.constexpr("""{
.reg .b32 t, c;
prmt.b32 t, $4, 0, 0x4140;
and.b32 c, t, 0x000F000F;
mul.lo.u32 c, c, 0x1040;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 $0, c, $5;
and.b32 c, t, 0x00F000F0;
mul.lo.u32 c, c, 0x0104;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 $2, c, $5;
prmt.b32 t, $4, 0, 0x4342;
and.b32 c, t, 0x000F000F;
mul.lo.u32 c, c, 0x1040;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 $1, c, $6;
and.b32 c, t, 0x00F000F0;
mul.lo.u32 c, c, 0x0104;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 $3, c, $6;
}""")


@triton.jit
def loaded_rows(BLOCK_N: tl.constexpr):
    """The memory row (within the block) that each of a tile's BLOCK_N loaded rows reads: row
    i = g + 8 w + 8 W h (g < 8, w < W = BLOCK_N / 16, h < 2) reads row g + 16 w + 8 h, so that a
    load's layout gives each thread the two rows, 8 apart, that the operand gives it (module
    docstring: row order). `operand_rows` puts the loaded tile back in natural order."""
    W: tl.constexpr = BLOCK_N // 16
    i = tl.arange(0, BLOCK_N)
    return i % 8 + 16 * (i // 8 % W) + 8 * (i // (8 * W))


@triton.jit
def operand_rows(t):
    """Tile ``t`` [BLOCK_N, C] loaded in `loaded_rows` order, in natural row order."""
    BN: tl.constexpr = t.shape[0]
    C: tl.constexpr = t.shape[1]
    t = tl.permute(tl.reshape(t, [2, BN // 16, 8, C]), (1, 0, 2, 3))
    return tl.reshape(t, [BN, C])


@triton.jit
def dot_order(t):
    """[BLOCK_N, BLOCK_K] tile ``t`` with its K positions permuted as the dot reads them, so that
    each thread's share of a row's K (a quarter: in the tensor cores' operand layout thread c of a
    quad holds K pairs 2c, 2c + 1 and 2c + 8, 2c + 9 of every 16) is one contiguous run of the
    row: position k' = 16 a + 8 b + 2 c + r holds value BLOCK_K / 4 c + 4 a + 2 b + r. The slots'
    operand takes the same order (`dot_order_rows`), so the products are the natural order's,
    summed in another order."""
    BN: tl.constexpr = t.shape[0]
    BK: tl.constexpr = t.shape[1]
    t = tl.permute(tl.reshape(t, [BN, 4, BK // 16, 2, 2]), (0, 2, 3, 1, 4))
    return tl.reshape(t, [BN, BK])


@triton.jit
def dot_order_rows(x):
    """The slots' operand [BLOCK_K, BLOCK_M] in `dot_order`'s K order."""
    BK: tl.constexpr = x.shape[0]
    BM: tl.constexpr = x.shape[1]
    x = tl.permute(tl.reshape(x, [4, BK // 16, 2, 2, BM]), (1, 2, 0, 3, 4))
    return tl.reshape(x, [BK, BM])


@triton.jit
def mx_tile(w, s, INTERPRET: tl.constexpr, FOLD_SCALES: tl.constexpr, ROTATED: tl.constexpr,
            DOT_ORDER: tl.constexpr = False):  # fmt: skip
    """Packed e2m1 bytes ``w`` [BLOCK_N, BLOCK_K / 2] (value 2j of a row in the low nibble of byte
    j; with ``ROTATED`` each 4-byte word in `mx_rotated`'s layout) with their e8m0 scale bytes
    ``s`` [BLOCK_N, BLOCK_K / 32] as the [BLOCK_N, BLOCK_K] values in natural order: bf16 on the
    GPU (exact: an e2m1 value times a power of two), fp32 under the interpreter. ``FOLD_SCALES``:
    every scale byte is at most 128, so the decode multiplies once (module docstring: folded
    scales); the same values. ``DOT_ORDER`` (``ROTATED`` only): the bytes in `mx_dot_order`'s
    layout, each word scaled by its own group (`mx_rotated.rotated_tile`). ``FOLD_SCALES`` 2
    (``ROTATED`` only): folded, the scale bytes `mx_rotated.biased_scales`'."""
    tl.static_assert(ROTATED or not DOT_ORDER, "mx_dot_order's layout is decoded rotated")
    tl.static_assert(ROTATED or FOLD_SCALES != 2, "biased scale bytes are decoded rotated")
    BN: tl.constexpr = w.shape[0]
    KB: tl.constexpr = w.shape[1]
    G: tl.constexpr = KB // 16
    if ROTATED:
        out = rotated_tile(w, s, FOLD_SCALES, INTERPRET, DOT_ORDER)
    else:
        w3 = tl.reshape(w, [BN, G, 16])
        s3 = tl.broadcast_to(tl.reshape(s, [BN, G, 1]), [BN, G, 16])
        if INTERPRET:
            lo, hi = e2m1_pair(w3.to(tl.uint32), 0)
            sc = e8m0_scale(s3) * 16384.0
            lo, hi = lo * sc, hi * sc
        else:
            s16 = s3.to(tl.int16)
            if FOLD_SCALES:
                # 2^(s - 1) as bf16 bits (exponent field s + 126); byte 0 gives 0 as below.
                sb = tl.where(s16 == 0, 0, (s16 + 126) << 7).to(tl.int16)
                sb = sb.to(tl.bfloat16, bitcast=True)
                lo, hi = tl.inline_asm_elementwise(
                    _E2M1_BF16_FOLDED_ASM, "=r,=r,=r,=r,r,r,r", [w3, sb],
                    dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4,
                )  # fmt: skip
            else:
                sb = (s16 << 7).to(tl.bfloat16, bitcast=True)  # 2^(s - 127); 0, inf: e8m0_scale
                lo, hi = tl.inline_asm_elementwise(
                    _E2M1_BF16_ASM, "=r,=r,=r,=r,r,r,r", [w3, sb],
                    dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4,
                )  # fmt: skip
        # (lo, hi) of bytes 2i and 2i + 1 as [lo, lo, hi, hi]: the pairs the decode packs.
        v = tl.join(tl.reshape(lo, [BN, KB // 2, 2]), tl.reshape(hi, [BN, KB // 2, 2]))
        out = tl.reshape(tl.permute(v, (0, 1, 3, 2)), [BN, 2 * KB])
    return out


@triton.jit
def mx_order_rows(x):
    """The slots' operand [BLOCK_K, BLOCK_M] in `mx_tile`'s K order: values 4i, 4i + 2, 4i + 1,
    4i + 3 (the low nibbles of two bytes, then their high nibbles)."""
    BK: tl.constexpr = x.shape[0]
    BM: tl.constexpr = x.shape[1]
    x = tl.permute(tl.reshape(x, [BK // 4, 2, 2, BM]), (0, 2, 1, 3))
    return tl.reshape(x, [BK, BM])
