"""FP8 e4m3fn conversion and UE8M0 group scales as `@triton.jit` helpers shared by the kernels.

They must match `moebench.reference` bit for bit: `fp32_to_e4m3_bits` matches
`torch.Tensor.to(torch.float8_e4m3fn)` and `ue8m0_scale` matches `reference.ue8m0_exponent` and
`reference.exponent_to_scale(254 - exp)`. `fp32_to_bf16` sits here too because it answers the same
interpreter trap: the Triton interpreter (3.9) truncates fp32 -> bf16 instead of rounding to
nearest even (its "rtne" mode rounds half up and drops the carry), about half the values off by an
ulp, so the bf16 outputs of every kernel need it to be exact on the CPU.

e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7F/0xFF are NaN; normals
from 2^-6 to 448 (0x7E), subnormals k * 2^-9 for k = 1..7.
"""

from __future__ import annotations

import triton
import triton.language as tl

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
