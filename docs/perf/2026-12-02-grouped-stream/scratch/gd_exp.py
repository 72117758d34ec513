"""The grouped decode GEMV's tensor-core path: one touched expert's weight tile times all of its
slots, for `moebench.kernels.grouped_gemv` (its docstring has the tensors, the grid and the
grouping; this file only the two kernels and their tile helpers).

A program holds its expert's [BLOCK_N, BLOCK_K] weight tile as the left operand of ``tl.dot`` and
the pass's slots as the right one, [BLOCK_K, BLOCK_M] bf16 (slot m's row down column m; columns
past the expert's count are masked to zero and never stored). The weights take the operand's
large side, so a few slots pad only the small side to the 16 the tensor cores need (on sm_90 a
64-row left operand converted in registers is what a warpgroup MMA takes), and the accumulator
[BLOCK_N, BLOCK_M] is fp32. Whole K steps run unmasked and software-pipelined ``NUM_STAGES`` deep
(0: the compiler's default); the step that passes R (R = 2,880 is no multiple of 128) runs masked
after them.

- FP8: e4m3 converted to bf16 (exact: every e4m3 value is a bf16 number), the expert scale applied
  to the fp32 sums after the loop, as `sparse_gemv` and `batched_gemm` do.
- MXFP4: e2m1 times its e8m0 scale decoded to bf16 in registers (`mx_tile`; exact: two
  significant bits times a power of two), 2.75 instructions a value. Scale byte 255 (NaN in
  the format) gives a non-finite output and byte 0 gives 0, as `jit.e8m0_scale` in the GEMV.
  (``tl.dot_scaled``, the first version, ran at 4-7% of the copy ceiling on the H200: triton 3.6
  loads its bf16 operand synchronously every step, stores it to shared memory two bytes at a time
  behind a full memory barrier, and reads the scales with single-byte loads.)

K order (`dot_order`). The tensor cores' operand layout gives each thread of a quad the K pairs
2c, 2c + 1 and 2c + 8, 2c + 9 of every 16; in natural order a thread's weights are then 2-byte
(FP8) or 1-byte (MXFP4) pieces, read from shared memory one at a time (sm_90a SASS: 32 LDS.U16 a
step for 64 bytes a thread). The dot takes K in any order as long as both operands share it, so
both tiles are permuted (a reshape and a permute, free in registers) so that each thread's quarter
of a row's step is one contiguous run, read as 16-byte words; the MXFP4 tile also keeps the low
nibbles of two bytes in one register word and the high nibbles in the next (`mx_tile`), the words
the decode writes. The products are the natural order's; only the order of their fp32 sum
differs.

Under the interpreter (``INTERPRET``) the operands are widened to fp32 first: its ``tl.dot``
multiplies bf16 bit patterns (docs/DESIGN.md section 11), and it runs no PTX (the MXFP4 decode is
then `jit.e2m1_pair` in fp32). Products are exact either way.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moebench.kernels.grouped_slots import expert_slots, slot_epilogue, touched_expert
from moebench.kernels.jit import e2m1_pair, e8m0_scale, pdl_launch_dependents, pdl_wait

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



_E2M1_BF16_NATURAL_ASM = tl.constexpr("""{
.reg .b32 t, c, k, l, h;
mov.b32 k, 0x7E807E80;
prmt.b32 t, $4, 0, 0x4140;
and.b32 c, t, 0x000F000F;
mul.lo.u32 c, c, 0x1040;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 l, c, $5;
and.b32 c, t, 0x00F000F0;
mul.lo.u32 c, c, 0x0104;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 h, c, $5;
prmt.b32 $0, l, h, 0x5410;
prmt.b32 $1, l, h, 0x7632;
prmt.b32 t, $4, 0, 0x4342;
and.b32 c, t, 0x000F000F;
mul.lo.u32 c, c, 0x1040;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 l, c, $6;
and.b32 c, t, 0x00F000F0;
mul.lo.u32 c, c, 0x0104;
and.b32 c, c, 0x81C081C0;
mul.rn.bf16x2 c, c, k;
mul.rn.bf16x2 h, c, $6;
prmt.b32 $2, l, h, 0x5410;
prmt.b32 $3, l, h, 0x7632;
}""")


@triton.jit
def mx_tile_natural(w, s, INTERPRET: tl.constexpr):
    BN: tl.constexpr = w.shape[0]
    KB: tl.constexpr = w.shape[1]
    G: tl.constexpr = KB // 16
    w3 = tl.reshape(w, [BN, G, 16])
    s3 = tl.broadcast_to(tl.reshape(s, [BN, G, 1]), [BN, G, 16])
    if INTERPRET:
        lo, hi = e2m1_pair(w3.to(tl.uint32), 0)
        sc = e8m0_scale(s3) * 16384.0
        lo, hi = lo * sc, hi * sc
        return tl.reshape(tl.join(lo, hi), [BN, 2 * KB])
    else:
        sb = (s3.to(tl.int16) << 7).to(tl.bfloat16, bitcast=True)
        o0, o1 = tl.inline_asm_elementwise(
            _E2M1_BF16_NATURAL_ASM, "=r,=r,=r,=r,r,r,r", [w3, sb], dtype=(tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )
        v = tl.join(tl.reshape(o0, [BN, KB // 4, 4]), tl.reshape(o1, [BN, KB // 4, 4]))
        return tl.reshape(tl.permute(v, (0, 1, 3, 2)), [BN, 2 * KB])

_E4M3_BF16_ASM = tl.constexpr("""{
.reg .b32 a, s, k;
mov.b32 k, 0x7B807B80;
shl.b32 a, $2, 4;
and.b32 a, a, 0x07F007F0;
shl.b32 s, $2, 8;
and.b32 s, s, 0x80008000;
or.b32 a, a, s;
mul.rn.bf16x2 $0, a, k;
shr.b32 a, $2, 4;
and.b32 a, a, 0x07F007F0;
and.b32 s, $2, 0x80008000;
or.b32 a, a, s;
mul.rn.bf16x2 $1, a, k;
}""")


_E4M3_BF16_NAT_ASM = tl.constexpr("""{
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
def fp8_tile_nat(w, INTERPRET: tl.constexpr):
    if INTERPRET:
        return w.to(tl.float32)
    else:
        return tl.inline_asm_elementwise(_E4M3_BF16_NAT_ASM, "=r,=r,r", [w.to(tl.uint8, bitcast=True)],
                                         dtype=tl.bfloat16, is_pure=True, pack=4)


@triton.jit
def mx_order_cols(t):
    BN: tl.constexpr = t.shape[0]
    BK: tl.constexpr = t.shape[1]
    return tl.reshape(tl.permute(tl.reshape(t, [BN, BK // 4, 2, 2]), (0, 1, 3, 2)), [BN, BK])


@triton.jit
def fp8_tile_cheap(w, INTERPRET: tl.constexpr):
    if INTERPRET:
        return mx_order_cols(w.to(tl.float32))
    else:
        return tl.inline_asm_elementwise(_E4M3_BF16_ASM, "=r,=r,r", [w.to(tl.uint8, bitcast=True)],
                                         dtype=tl.bfloat16, is_pure=True, pack=4)


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
def mx_tile(w, s, INTERPRET: tl.constexpr):
    """Packed e2m1 bytes ``w`` [BLOCK_N, BLOCK_K / 2] (value 2j of a row in the low nibble of byte
    j) with their e8m0 scale bytes ``s`` [BLOCK_N, BLOCK_K / 32] as the [BLOCK_N, BLOCK_K] values
    in natural order: bf16 on the GPU (exact: an e2m1 value times a power of two), fp32 under the
    interpreter."""
    BN: tl.constexpr = w.shape[0]
    KB: tl.constexpr = w.shape[1]
    G: tl.constexpr = KB // 16
    w3 = tl.reshape(w, [BN, G, 16])
    s3 = tl.broadcast_to(tl.reshape(s, [BN, G, 1]), [BN, G, 16])
    if INTERPRET:
        lo, hi = e2m1_pair(w3.to(tl.uint32), 0)
        sc = e8m0_scale(s3) * 16384.0
        lo, hi = lo * sc, hi * sc
    else:
        sb = (s3.to(tl.int16) << 7).to(tl.bfloat16, bitcast=True)
        lo, hi = tl.inline_asm_elementwise(
            _E2M1_BF16_ASM, "=r,=r,=r,=r,r,r,r", [w3, sb], dtype=(tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )  # fmt: skip
    # (lo, hi) of bytes 2i and 2i + 1 as [lo, lo, hi, hi]: the pairs the decode packs in a word.
    v = tl.join(tl.reshape(lo, [BN, KB // 2, 2]), tl.reshape(hi, [BN, KB // 2, 2]))
    return tl.reshape(tl.permute(v, (0, 1, 3, 2)), [BN, 2 * KB])


@triton.jit
def mx_tile_s3(w, s3, INTERPRET: tl.constexpr):
    BN: tl.constexpr = w.shape[0]
    KB: tl.constexpr = w.shape[1]
    G: tl.constexpr = KB // 16
    w3 = tl.reshape(w, [BN, G, 16])
    if INTERPRET:
        lo, hi = e2m1_pair(w3.to(tl.uint32), 0)
        sc = e8m0_scale(s3) * 16384.0
        lo, hi = lo * sc, hi * sc
    else:
        sb = (s3.to(tl.int16) << 7).to(tl.bfloat16, bitcast=True)
        lo, hi = tl.inline_asm_elementwise(
            _E2M1_BF16_ASM, "=r,=r,=r,=r,r,r,r", [w3, sb], dtype=(tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )
    v = tl.join(tl.reshape(lo, [BN, KB // 2, 2]), tl.reshape(hi, [BN, KB // 2, 2]))
    return tl.reshape(tl.permute(v, (0, 1, 3, 2)), [BN, 2 * KB])


@triton.jit
def mx_order_rows(x):
    """The slots' operand [BLOCK_K, BLOCK_M] in `mx_tile`'s K order: values 4i, 4i + 2, 4i + 1,
    4i + 3 (the low nibbles of two bytes, then their high nibbles)."""
    BK: tl.constexpr = x.shape[0]
    BM: tl.constexpr = x.shape[1]
    x = tl.permute(tl.reshape(x, [BK // 4, 2, 2, BM]), (0, 2, 1, 3))
    return tl.reshape(x, [BK, BM])


@triton.jit
def _fp8_step(acc, w_at, x_at, k0, R, m_ok, MASKED: tl.constexpr, INTERPRET: tl.constexpr, GATHER: tl.constexpr = 0):
    """acc + one K step of the FP8 tile (natural-order pointers ``w_at`` [BLOCK_N, BLOCK_K],
    dot-order pointers ``x_at`` [BLOCK_K, BLOCK_M]); ``MASKED`` for the step that passes R."""
    BK: tl.constexpr = w_at.shape[1]
    if MASKED:
        w = tl.load(w_at + k0, mask=(k0 + tl.arange(0, BK) < R)[None, :], other=0.0)
        x_ok = m_ok[None, :] & (k0 + tl.arange(0, BK) < R)[:, None]
        xv = tl.load(x_at + k0, mask=x_ok, other=0.0)
    else:
        w = tl.load(w_at + k0)
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
    if GATHER == 3:
        wb = dot_order(fp8_tile_nat(w, INTERPRET))
        xv = dot_order_rows(xv)
    elif GATHER == 2:
        wb = dot_order(fp8_tile_cheap(w, INTERPRET))
        xv = dot_order_rows(mx_order_rows(xv))
    else:
        wb = dot_order(w.to(tl.bfloat16))
        if not GATHER:
            xv = dot_order_rows(xv)
    if INTERPRET:
        wb, xv = wb.to(tl.float32), xv.to(tl.float32)
    return tl.dot(wb, xv, acc, out_dtype=tl.float32)


@triton.jit
def _grouped_dot_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, GATHER: tl.constexpr = 0,
    SUB: tl.constexpr = 1, REG: tl.constexpr = 0,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    # Only the routing was read so far; x may be the previous kernel's output.
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    w_at = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn + tl.arange(0, BLOCK_K)[None, :]
    scale = tl.load(ws_ptr + e64)
    # Whole K steps unmasked (and software-pipelined), the step that passes R masked after them.
    r_main = R // BLOCK_K * BLOCK_K
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        kk = tl.arange(0, BLOCK_K)
        if GATHER == 1:
            kk = (BLOCK_K // 4) * ((kk // 2) % 4) + 4 * (kk // 16) + 2 * ((kk // 8) % 2) + kk % 2
        x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + kk[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        if REG:
            # Weights straight into registers (no cp.async), the next step's loaded before this
            # step's math; x through the usual path.
            kk_w = tl.arange(0, BLOCK_K)
            w_next = tl.load(w_at, mask=(kk_w < R)[None, :], other=0.0)
            for k0 in tl.range(0, r_main, BLOCK_K, num_stages=1):
                w = w_next
                k1 = k0 + BLOCK_K
                w_next = tl.load(w_at + k1, mask=(k1 + kk_w < R)[None, :], other=0.0)
                xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
                wb = dot_order(fp8_tile_nat(w, INTERPRET))
                xv = dot_order_rows(xv)
                if INTERPRET:
                    xv = xv.to(tl.float32)
                acc = tl.dot(wb, xv, acc, out_dtype=tl.float32)
        r_sub = R // (BLOCK_K * SUB) * (BLOCK_K * SUB)
        if REG:
            r_sub = 0
        for k0 in tl.range(0, r_sub, BLOCK_K * SUB, num_stages=NUM_STAGES if NUM_STAGES else None):
            for j in tl.static_range(SUB):
                acc = _fp8_step(acc, w_at, x_at, k0 + j * BLOCK_K, R, m_ok, False, INTERPRET, GATHER)
        for k0 in range(r_sub if not REG else r_main, r_main, BLOCK_K):
            acc = _fp8_step(acc, w_at, x_at, k0, R, m_ok, False, INTERPRET, GATHER)
        if not EVEN_K:
            acc = _fp8_step(acc, w_at, x_at, r_main, R, m_ok, True, INTERPRET, GATHER)
        h = tl.trans(acc) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


@triton.jit
def _mxfp4_step(acc, w_at, s, x_at, k0, R, m_ok, MASKED: tl.constexpr, INTERPRET: tl.constexpr, GATHER: tl.constexpr = 0):
    """acc + one K step of the MXFP4 tile (byte pointers ``w_at`` [BLOCK_N, BLOCK_K / 2], this
    step's scale bytes ``s``, dot-order pointers ``x_at`` [BLOCK_K, BLOCK_M])."""
    BK: tl.constexpr = x_at.shape[0]
    if MASKED:
        b_ok = (k0 // 2 + tl.arange(0, BK // 2) < R // 2)[None, :]
        w = tl.load(w_at + k0 // 2, mask=b_ok, other=0)
        x_ok = m_ok[None, :] & (k0 + tl.arange(0, BK) < R)[:, None]
        xv = tl.load(x_at + k0, mask=x_ok, other=0.0)
    else:
        w = tl.load(w_at + k0 // 2)
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
    if GATHER == 4:
        xv = dot_order_rows(mx_order_rows(xv))
        if INTERPRET:
            xv = xv.to(tl.float32)
        return tl.dot(dot_order(mx_tile_s3(w, s, INTERPRET)), xv, acc, out_dtype=tl.float32)
    elif GATHER:
        if INTERPRET:
            xv = xv.to(tl.float32)
        return tl.dot(dot_order(mx_tile_natural(w, s, INTERPRET)), xv, acc, out_dtype=tl.float32)
    else:
        xv = dot_order_rows(mx_order_rows(xv))
        if INTERPRET:
            xv = xv.to(tl.float32)
        return tl.dot(dot_order(mx_tile(w, s, INTERPRET)), xv, acc, out_dtype=tl.float32)


@triton.jit
def _grouped_dot_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, GATHER: tl.constexpr = 0,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    GROUPS: tl.constexpr = BLOCK_K // 32
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    kg = tl.arange(0, GROUPS)
    w_at = (w_ptr + e64 * stride_we + rows64[:, None] * stride_wn
            + tl.arange(0, BLOCK_K // 2)[None, :])  # fmt: skip
    s_at = ws_ptr + e64 * stride_se + rows64[:, None] * stride_sn + kg[None, :]
    r_main = R // BLOCK_K * BLOCK_K
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        kk = tl.arange(0, BLOCK_K)
        if GATHER == 1:
            kk = (BLOCK_K // 4) * ((kk // 2) % 4) + 4 * (kk // 16) + 2 * ((kk // 8) % 2) + kk % 2
        x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + kk[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        # The scale bytes (too narrow for the pipeline's asynchronous copies) are loaded a step
        # ahead into registers, so that their latency is behind a step of work.
        if GATHER == 4:
            s_at3 = s_at[:, :, None] + 0 * tl.arange(0, 16)[None, None, :]
            s_next = tl.load(s_at3, mask=(kg < R // 32)[None, :, None], other=0)
        else:
            s_next = tl.load(s_at, mask=(kg < R // 32)[None, :], other=0)
        for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            s = s_next
            g_next = (k0 + BLOCK_K) // 32
            if GATHER == 4:
                s_next = tl.load(s_at3 + g_next, mask=(g_next + kg < R // 32)[None, :, None], other=0)
            else:
                s_next = tl.load(s_at + g_next, mask=(g_next + kg < R // 32)[None, :], other=0)
            acc = _mxfp4_step(acc, w_at, s, x_at, k0, R, m_ok, False, INTERPRET, GATHER)
        if not EVEN_K:
            acc = _mxfp4_step(acc, w_at, s_next, x_at, r_main, R, m_ok, True, INTERPRET, GATHER)
        slot_epilogue(tl.trans(acc), n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be,
                      stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
