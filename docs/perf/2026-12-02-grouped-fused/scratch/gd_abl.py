"""Scratch: ablations of the FP8 tile (ABL 1: x hoisted, 2: no e4m3 conversion, 3: no dot;
sixth session: 4, the conversion cut to one byte permute a pair, 5: the same conversion as
`jit._E4M3_BF16_ASM` in four instructions a pair instead of five, 6: the slots' operand fed to
the dot as loaded, not permuted to the dot's K order in registers, so that the pipeliner may
copy it asynchronously into shared memory as it does the weights).
Timing only: ablations 1-4 compute wrong outputs on purpose; 5 must be bitwise the committed tile."""
import triton
import triton.language as tl
from moebench.kernels.grouped_dot import dot_order, dot_order_rows
from moebench.kernels.grouped_slots import expert_slots, slot_epilogue, touched_expert
from moebench.kernels.jit import e4m3_to_bf16, pdl_launch_dependents, pdl_wait

# ABL 4: each byte moved to bits 8..15 of its bf16 (one prmt a pair): wrong values, the cheapest
# data flow from the fp8 bytes to the MMA's bf16 operand.
_PERMUTE_ONLY_ASM = tl.constexpr("""{
prmt.b32 $0, $2, 0, 0x1404;
prmt.b32 $1, $2, 0, 0x3424;
}""")

# ABL 5: jit._E4M3_BF16_ASM's values with one logic instruction fewer a pair. prmt's sign mode
# (selector bit 3) fills the byte above each e4m3 byte with its sign, so a lane is
# [s x 8 | s eeee mmm]; shifted left by 4 its bit 15 is the sign and bits 4..10 the magnitude,
# and one mask (0x87F0 a lane) clears bits 11..14 and the four bits the shift carried in from
# the lane below. The masked lane is bit for bit the committed asm's, so is the product.
_E4M3_BF16_SIGN_ASM = tl.constexpr("""{
.reg .b32 t, k;
mov.b32 k, 0x7B807B80;
prmt.b32 t, $2, 0, 0x9180;
shl.b32 t, t, 4;
and.b32 t, t, 0x87F087F0;
mul.rn.bf16x2 $0, t, k;
prmt.b32 t, $2, 0, 0xB3A2;
shl.b32 t, t, 4;
and.b32 t, t, 0x87F087F0;
mul.rn.bf16x2 $1, t, k;
}""")


@triton.jit
def e4m3_cvt(w, ASM: tl.constexpr):
    return tl.inline_asm_elementwise(ASM, "=r,=r,r", [w.to(tl.uint8, bitcast=True)],
                                     dtype=tl.bfloat16, is_pure=True, pack=4)


@triton.jit
def _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, MASKED: tl.constexpr, TMA: tl.constexpr,
              INTERPRET: tl.constexpr, ABL: tl.constexpr = 0):  # fmt: skip
    """acc + one K step of the FP8 tile: the weights from TMA descriptor ``w_src`` at row
    ``w_row`` (``TMA``; columns past R read as zeros) or natural-order pointers ``w_src``
    [BLOCK_N, BLOCK_K]; dot-order pointers ``x_at`` [BLOCK_K, BLOCK_M]; ``MASKED`` for the step
    that passes R."""
    BK: tl.constexpr = x_at.shape[0]
    if TMA:
        w = w_src.load([w_row, k0])
    elif MASKED:
        w = tl.load(w_src + k0, mask=(k0 + tl.arange(0, BK) < R)[None, :], other=0.0)
    else:
        w = tl.load(w_src + k0)
    if MASKED:
        x_ok = m_ok[None, :] & (k0 + tl.arange(0, BK) < R)[:, None]
        xv = tl.load(x_at + k0, mask=x_ok, other=0.0)
    elif ABL == 1:
        xv = tl.load(x_at, mask=m_ok[None, :], other=0.0)  # x of step 0 every step (hoistable)
    else:
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
    if ABL == 2:
        # no e4m3 conversion: byte pairs reinterpreted as bf16, half the K
        w2 = tl.reshape(w.to(tl.uint8, bitcast=True), [w.shape[0], BK // 2, 2])
        lo, hi = tl.split(w2)
        wb = (lo.to(tl.uint16) | (hi.to(tl.uint16) << 8)).to(tl.bfloat16, bitcast=True)
        xh = tl.reshape(xv, [2, BK // 2, xv.shape[1]])
        xh = tl.permute(xh, (1, 2, 0))
        xa, xb = tl.split(xh)
        return tl.dot(wb, xa, acc, out_dtype=tl.float32)
    if ABL == 3:
        # no dot: the weights folded into the accumulator's first column by a cheap integer sum
        s = tl.sum(w.to(tl.uint8, bitcast=True).to(tl.int32), axis=1).to(tl.float32)
        return acc + s[:, None] * tl.sum(xv.to(tl.float32), axis=0)[None, :] * 0.0 + s[:, None]
    if ABL == 6:
        wb = dot_order(e4m3_to_bf16(w, INTERPRET))
        if INTERPRET:
            xv = xv.to(tl.float32)
        return tl.dot(wb, xv, acc, out_dtype=tl.float32)
    if ABL == 4 and not INTERPRET:
        wb = dot_order(e4m3_cvt(w, _PERMUTE_ONLY_ASM))
    elif ABL == 5 and not INTERPRET:
        wb = dot_order(e4m3_cvt(w, _E4M3_BF16_SIGN_ASM))
    else:
        wb = dot_order(e4m3_to_bf16(w, INTERPRET))
    xv = dot_order_rows(xv)
    if INTERPRET:
        xv = xv.to(tl.float32)
    return tl.dot(wb, xv, acc, out_dtype=tl.float32)


@triton.jit
def _grouped_dot_fp8(
    x_ptr, ids_ptr, w, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, TMA: tl.constexpr, ABL: tl.constexpr,
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
    if TMA:
        # ``w``: a descriptor over the weights as [E * N, R] rows, [BLOCK_N, BLOCK_K] a box.
        w_src = w
        w_row = e * (stride_we // stride_wn) + n_block * BLOCK_N
    else:
        rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        w_src = w + e64 * stride_we + rows64[:, None] * stride_wn + tl.arange(0, BLOCK_K)[None, :]
        w_row = 0
    scale = tl.load(ws_ptr + e64)
    # Whole K steps unmasked (and software-pipelined), the step that passes R masked after them.
    r_main = R // BLOCK_K * BLOCK_K
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            acc = _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, False, TMA, INTERPRET, ABL)
        if not EVEN_K:
            acc = _fp8_step(acc, w_src, w_row, x_at, r_main, R, m_ok, True, TMA, INTERPRET)
        h = tl.trans(acc) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


