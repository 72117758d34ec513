"""The `@triton.jit` device helpers that several kernel files share, one section per topic.

Kernels read no module globals: the helpers take every choice as an argument (a ``tl.constexpr``
where it picks code), and the host-side constants the launchers check against live in
`moebench.kernels.launch`.

FP8 e4m3fn conversion and UE8M0 group scales (`fp32_to_e4m3_bits`, `ue8m0_scale`). They must match
`moebench.core.reference` bit for bit: `fp32_to_e4m3_bits` matches
`torch.Tensor.to(torch.float8_e4m3fn)` and `ue8m0_scale` matches `reference.ue8m0_exponent` and
`reference.exponent_to_scale(254 - exp)`. `fp32_to_bf16` sits with them because it answers the same
interpreter trap: the Triton interpreter (3.9) truncates fp32 -> bf16 instead of rounding to
nearest even (its "rtne" mode rounds half up and drops the carry), about half the values off by an
ulp, so the bf16 outputs of every kernel need it to be exact on the CPU.

e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7F/0xFF are NaN; normals
from 2^-6 to 448 (0x7E), subnormals k * 2^-9 for k = 1..7.

FP8 weights widened to bf16 for the tensor cores (`e4m3_to_bf16`) by bit placement rather than
``.to(tl.bfloat16)``: triton 3.6 converts e4m3 -> fp16 -> bf16, one F2F a value for the second
step, an instruction of the SMs' slow conversion pipe that bounded the decode tiles on the H200
(docs/perf/HISTORY.md, 2026-12-02). The placement gives value * 2^-120 as a bf16 for every code,
subnormals included (bf16's subnormals continue e4m3's); one bf16 multiply by 2^120 (exact)
restores it. A NaN byte (0x7F, 0xFF) gives +-480 there, where torch gives NaN: weights holding
one fail the reference gate rather than poison the output.

MXFP4 weights dequantised in registers (`e2m1_pair`, `e8m0_scale`), for the decode kernels. They
must match `reference.dequant_weight_mxfp4` exactly. A byte holds two e2m1 values, the low nibble
first (value 2j of a row in the low nibble of byte j); a block of 32 values along K shares one
e8m0 scale byte, 2^(byte - 127).

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

The endpoint contract on the device (`expert_spans`): every kernel that reads the capacity
buffer's endpoints derives each expert's [start, end) from ``ends`` alone with the same rule as
`moebench.core.layout` (start[0] = 0, start[e] = align_up(end[e-1], A)), here and nowhere else.

The gated activation (`gated_activation`) of a (gate, up) pair in fp32, shared by the prefill
`act` stage and the decode kernels' fused GLU, in the order of `reference.activation`.

Programmatic dependent launch (`pdl_launch_dependents`, `pdl_wait`; ``HAS_PDL``): a kernel
launched with ``launch_pdl=True`` may start while the kernel before it in the stream (or CUDA
graph) still runs; it must call `pdl_wait` before it reads anything that kernel writes, and
everything it does before the wait may only read data no kernel of the step writes (weights,
routing). `pdl_launch_dependents` lets the next such kernel start once every program of this one
has begun. Both compile to nothing with ``GDC`` False (the interpreter has no grid dependency
control), and `pdl_wait` is a no-op in a kernel launched without the attribute.
"""

from __future__ import annotations

import triton
import triton.language as tl

try:  # griddepcontrol (sm_90+), triton >= 3.4
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

    HAS_PDL = True
except ImportError:  # an older triton: launchers never ask for it
    HAS_PDL = False

# --- FP8 e4m3fn, UE8M0 scales and bf16 rounding ---------------------------------------------------

# fp32 +inf; larger magnitudes are NaN.
_F32_BITS_INF = tl.constexpr(0x7F800000)
# 2^-6, the smallest e4m3 normal: below it the step is fixed at 2^-9 (subnormals).
_F32_EXP_MIN_NORMAL = tl.constexpr(121)


@triton.jit
def fp32_to_e4m3_bits(x, EXACT_RNE: tl.constexpr):
    """uint8 e4m3fn bit patterns of fp32 ``x`` (any shape), rounded to nearest even.

    ``x`` should already lie in [-448, 448]. With ``EXACT_RNE`` the rounding is done on the fp32
    bits with integers only (for the Triton interpreter, whose native conversion misrounds ~3% of
    values); otherwise the native conversion is used (the GPU: cvt.rn.satfinite).
    Out of range both saturate as torch does (+-inf and |x| > 448 give +-448); NaN stays NaN.
    """
    if EXACT_RNE:
        bits = x.to(tl.int32, bitcast=True)
        sign = (bits >> 24) & 0x80
        mag = bits & 0x7FFFFFFF
        exp = mag >> 23
        # Normal range: rebias the exponent (127 -> 7) and round the 23-bit mantissa to 3 bits by
        # adding just under half an ulp plus the lowest kept bit (ties go to even); a carry out of
        # the mantissa correctly bumps the exponent.
        keep_odd = (mag >> 20) & 1
        normal = (mag - (120 << 23) + 0x7FFFF + keep_odd) >> 20
        # Subnormal range: the value is mant * 2^(exp - 150) and the result counts steps of 2^-9,
        # i.e. mant >> (141 - exp), rounded half to even. Shifts of 25 or more all give 0 (the
        # 24-bit mantissa is below half a step), so the shift is clamped to [1, 25] to stay defined
        # also in lanes whose (normal) result is discarded.
        mant = (mag & 0x7FFFFF) | 0x800000
        shift = tl.maximum(tl.minimum(141 - exp, 25), 1)
        q = mant >> shift
        rem = mant & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        round_up = (rem > half) | ((rem == half) & ((q & 1) == 1))
        sub = q + round_up.to(tl.int32)
        out = tl.where(exp >= _F32_EXP_MIN_NORMAL, normal, sub)
        # Saturate like torch and the GPU's satfinite conversion: finite or infinite magnitudes past
        # 448 give 448 (0x7E), NaN gives NaN (0x7F), each keeping its sign.
        out = tl.minimum(out, 0x7E)
        out = tl.where(mag > _F32_BITS_INF, 0x7F, out)
        return (out | sign).to(tl.uint8)
    else:
        return x.to(tl.float8e4nv).to(tl.uint8, bitcast=True)


@triton.jit
def ue8m0_scale(amax):
    """(exponent byte int32, inverse scale fp32) of the power-of-two scale of group maxima ``amax``.

    The scale is the smallest power of two >= max(amax, 1e-4) / 448: the fp32 exponent field of the
    quotient, plus one when any mantissa bit is set. The division is the IEEE one (div_rn), as in
    torch; Triton's `/` is approximate on the GPU and could move a quotient across a power of two.
    The inverse 2^(127 - exp) is built from its bits, so multiplying by it is exact.
    """
    s = tl.math.div_rn(tl.maximum(amax, 1e-4), 448.0)
    bits = s.to(tl.int32, bitcast=True)
    exp = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0).to(tl.int32)
    inv = ((254 - exp) << 23).to(tl.float32, bitcast=True)
    return exp, inv


@triton.jit
def fp32_to_bf16(x, EXACT_RNE: tl.constexpr):
    """bf16 of fp32 ``x`` (any shape), rounded to nearest even as torch and the GPU do.

    With ``EXACT_RNE`` the rounding is done on the fp32 bits (for the interpreter, whose native
    conversion truncates); otherwise the native conversion. NaN stays NaN (payload not kept).
    """
    if EXACT_RNE:
        # Add just under half an ulp of bf16 plus the lowest kept bit (ties to even); a carry
        # correctly bumps the exponent, up to inf. Two's complement leaves the sign bit alone.
        bits = x.to(tl.int32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        nan = (bits & 0x7FFFFFFF) > _F32_BITS_INF
        out = tl.where(nan, (bits >> 16) | 0x40, rounded)
        return out.to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


# --- MXFP4: e2m1 values, e8m0 scales --------------------------------------------------------------


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


# e4m3 -> bf16 on four bytes (four values, natural order) in 10 integer and bf16 instructions,
# compiled only (the interpreter runs no PTX; `e4m3_to_bf16` does the same bits there). Operands:
# $0, $1 the bf16 pairs of bytes 0-1 and 2-3, $2 the four bytes. A byte pair is spread to the top
# bytes of the two halves of a word (prmt); the magnitude bits shift down to bits 4..10 of each half
# and the sign stays at bit 15: the bf16 of value * 2^-120 exactly (exponent field e4m3's, bias 7
# read as 127; e4m3 subnormals land on bf16 subnormals), times 2^120, exact (a power of two). Each
# value depends only on its own byte, so the result does not depend on which four elements the
# compiler packs together.
_E4M3_BF16_ASM = tl.constexpr("""{
.reg .b32 t, a, k;
mov.b32 k, 0x7B807B80;
prmt.b32 t, $2, 0, 0x1404;
shr.b32 a, t, 4;
and.b32 a, a, 0x07F007F0;
and.b32 t, t, 0x80008000;
or.b32 a, a, t;
mul.rn.bf16x2 $0, a, k;
prmt.b32 t, $2, 0, 0x3424;
shr.b32 a, t, 4;
and.b32 a, a, 0x07F007F0;
and.b32 t, t, 0x80008000;
or.b32 a, a, t;
mul.rn.bf16x2 $1, a, k;
}""")


@triton.jit
def e4m3_to_bf16(w, INTERPRET: tl.constexpr):
    """e4m3 tensor ``w`` as bf16 on the GPU (`_E4M3_BF16_ASM`), as fp32 under the interpreter
    by the same placement in an fp32 (magnitude bits at 20..26, the sign at 31; the interpreter's
    bf16 loses subnormals), times 2^120. Exact; a NaN byte (0x7F, 0xFF) gives +-480 (section
    docstring)."""
    if INTERPRET:
        b = w.to(tl.uint8, bitcast=True).to(tl.int32)
        bits = ((b & 0x7F) << 20) | ((b & 0x80) << 24)
        return bits.to(tl.float32, bitcast=True) * 1.329227995784916e36
    else:
        return tl.inline_asm_elementwise(
            _E4M3_BF16_ASM, "=r,=r,r", [w.to(tl.uint8, bitcast=True)], dtype=tl.bfloat16,
            is_pure=True, pack=4,
        )  # fmt: skip


@triton.jit
def e8m0_scale(s):
    """fp32 2^(s - 127) of e8m0 bytes ``s``, built from the bits: exact for bytes 1..254; byte 255
    (NaN in the format) gives inf, so the output turns non-finite as NaN would; byte 0 (2^-127)
    gives 0."""
    return (s.to(tl.int32) << 23).to(tl.float32, bitcast=True)


# --- programmatic dependent launch ---------------------------------------------------------------


@triton.jit
def pdl_launch_dependents(GDC: tl.constexpr):
    if GDC:
        gdc_launch_dependents()


@triton.jit
def pdl_wait(GDC: tl.constexpr):
    if GDC:
        gdc_wait()


@triton.jit
def pdl_launch_dependents_after(value, GDC: tl.constexpr):
    """`pdl_launch_dependents` issued only once ``value`` (an int32 scalar, e.g. an atomic's
    result) is in this thread's registers: the trigger takes it as an operand, so what produced
    it (the atomic's round trip to the L2) is complete before the next kernel may launch."""
    if GDC:
        tl.inline_asm_elementwise("griddepcontrol.launch_dependents; mov.b32 $0, $1;", "=r,r",
                                  [value.to(tl.int32)], dtype=tl.int32, is_pure=False,
                                  pack=1)  # fmt: skip


PREFETCH_MAX_BOXES = tl.constexpr(128)  # one box a thread at 4 warps


@triton.jit
def prefetch_l2(base, BOXES: tl.constexpr, BOX_BYTES: tl.constexpr, PTX: tl.constexpr):
    """Asks the L2 for ``BOXES`` (at most PREFETCH_MAX_BOXES) runs of ``BOX_BYTES`` bytes one after
    the other from ``base`` (a byte pointer, 16-byte aligned; BOX_BYTES a multiple of 16), one bulk
    prefetch a run (``cp.async.bulk.prefetch.L2``, sm_90; at 4 warps one a thread), and returns
    at once: nothing waits for the bytes or reads them here. Without ``PTX`` (the interpreter)
    nothing: a prefetch changes no value."""
    if PTX and BOXES > 0:
        i = tl.arange(0, PREFETCH_MAX_BOXES)
        addr = (base + i.to(tl.int64) * BOX_BYTES).to(tl.int64, bitcast=True)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $3;"
            " mov.b32 $0, 0; }",
            "=r,l,r,r", [addr, (i < BOXES).to(tl.int32), tl.full(i.shape, BOX_BYTES, tl.int32)],
            dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip


@triton.jit
def prefetch_l2_box(addr, ok, BOX_BYTES: tl.constexpr, PTX: tl.constexpr):
    """`prefetch_l2` of one run of ``BOX_BYTES`` bytes at byte pointer ``addr`` where ``ok``, asked
    by the program's first thread only (every thread computes the same scalar ``addr``: inside a
    loop that is one bulk prefetch a step, not one a warp). Without ``PTX`` nothing."""
    if PTX:
        tl.inline_asm_elementwise(
            "{ .reg .pred p, q; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0;"
            " setp.ne.b32 q, $2, 0; and.pred p, p, q;"
            " @p cp.async.bulk.prefetch.L2.global [$1], $3; mov.b32 $0, 0; }",
            "=r,l,r,r", [addr.to(tl.int64, bitcast=True), ok.to(tl.int32),
                         tl.full([], BOX_BYTES, tl.int32)],
            dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip


# --- bf16 pairs and a row's words ----------------------------------------------------------------


@triton.jit
def bf16_pairs(words):
    """32-bit words each holding two bf16 values (the even one in the low half, as a bf16 row read
    as words) widened to fp32: (low, high), each by its place in the word, exact."""
    return (words << 16).to(tl.float32, bitcast=True), (words & 0xFFFF0000).to(
        tl.float32, bitcast=True
    )


@triton.jit
def bf16_halves(pairs):
    """uint32 bf16 pairs as [..., 2] bf16 (low half first): the register as it is."""
    lo = pairs.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    hi = (pairs >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.join(lo, hi)


@triton.jit
def row_words(b):
    """uint8 tile ``b`` [N, C] (C a multiple of 4) as the little-endian uint32 words of its rows
    [N, C / 4]. Where a thread holds a word's four bytes (a tile loaded in its rows' order), the
    compiler turns the reshape, splits, shifts and ors into register names (sm_90a: the
    decodes that take these words read the shared-memory loads' words)."""
    N: tl.constexpr = b.shape[0]
    C: tl.constexpr = b.shape[1]
    b02, b13 = tl.split(tl.reshape(b, [N, C // 4, 2, 2]))
    b0, b2 = tl.split(b02)
    b1, b3 = tl.split(b13)
    return (b0.to(tl.uint32) | (b1.to(tl.uint32) << 8) | (b2.to(tl.uint32) << 16)
            | (b3.to(tl.uint32) << 24))  # fmt: skip


# --- 32-bit words loaded as inline PTX ------------------------------------------------------------


@triton.jit
def load_words(ptrs, ok, EVEN: tl.constexpr, PTX: tl.constexpr):
    """The 32-bit words at ``ptrs`` where ``ok`` (0 elsewhere; everywhere with ``EVEN``). With
    ``PTX`` as inline PTX, which the compiler lays out as arithmetic, in the layout of the words'
    use, where a ``tl.load`` takes a layout of its own (`sparse_gemv_mxfp4`'s docstring); without,
    ``tl.load`` (the interpreter runs no PTX). The same values either way."""
    if not PTX:
        return tl.load(ptrs) if EVEN else tl.load(ptrs, mask=ok, other=0)
    addr = ptrs.to(tl.int64, bitcast=True)
    if EVEN:
        return tl.inline_asm_elementwise("ld.global.b32 $0, [$1];", "=r,l", [addr],
                                         dtype=tl.uint32, is_pure=False, pack=1)  # fmt: skip
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; mov.b32 $0, 0; @p ld.global.b32 $0, [$1]; }",
        "=r,l,r", [addr, tl.broadcast_to(ok, ptrs.shape).to(tl.int32)], dtype=tl.uint32,
        is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def load_word_quads(ptrs, ok, EVEN: tl.constexpr, PTX: tl.constexpr):
    """`load_words` 16 bytes at a time: ``ptrs`` [..., 4], the last dimension 4 consecutive
    words whose first is 16-byte aligned (the caller's to ensure), ``ok`` the same for the 4."""
    if not PTX:
        ok = tl.broadcast_to(ok, ptrs.shape)
        return tl.load(ptrs) if EVEN else tl.load(ptrs, mask=ok, other=0)
    addr = ptrs.to(tl.int64, bitcast=True)
    if EVEN:
        return tl.inline_asm_elementwise(
            "ld.global.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l,l,l,l", [addr],
            dtype=tl.uint32, is_pure=False, pack=4,
        )  # fmt: skip
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $8, 0; mov.b32 $0, 0; mov.b32 $1, 0; mov.b32 $2, 0;"
        " mov.b32 $3, 0; @p ld.global.v4.b32 {$0, $1, $2, $3}, [$4]; }",
        "=r,=r,=r,=r,l,l,l,l,r,r,r,r", [addr, tl.broadcast_to(ok, ptrs.shape).to(tl.int32)],
        dtype=tl.uint32, is_pure=False, pack=4,
    )  # fmt: skip


# --- the gated activation -------------------------------------------------------------------------


@triton.jit
def gated_activation(gate, up, ACTIVATION: tl.constexpr):
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
def expert_spans(ends_ptr, E, ALIGNMENT: tl.constexpr, BLOCK_E: tl.constexpr):
    """(expert index ex [BLOCK_E], ex < E, starts, ends) of the local experts, from the endpoints
    alone: start[0] = 0, start[e] = align_up(end[e-1], A) (``core.layout``). Both endpoint vectors
    come in one round of loads; lanes past E read 0. Starts are non-decreasing, so the expert
    whose aligned span holds row r is the number of experts starting at or before r, minus one."""
    ex = tl.arange(0, BLOCK_E)
    in_e = ex < E
    ends = tl.load(ends_ptr + ex, mask=in_e, other=0)
    prev = tl.load(ends_ptr + ex - 1, mask=in_e & (ex > 0), other=0)
    starts = (prev + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    return ex, in_e, starts, ends
