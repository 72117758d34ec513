"""Scratch: the FP8 tile with its first PF K steps of weights prefetched into L2 before the
programmatic-dependent-launch wait."""
import triton
import triton.language as tl
from moebench.kernels.grouped_dot import dot_order, dot_order_rows
from moebench.kernels.grouped_slots import expert_slots, slot_epilogue, touched_expert
from moebench.kernels.jit import e4m3_to_bf16, pdl_launch_dependents, pdl_wait


@triton.jit
def _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, MASKED: tl.constexpr, TMA: tl.constexpr,
              INTERPRET: tl.constexpr):  # fmt: skip
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
    else:
        xv = tl.load(x_at + k0, mask=m_ok[None, :], other=0.0)
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
    stride_ot, stride_ok, w_raw,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, TMA: tl.constexpr,
    PF: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    if PF > 0:
        # the first PF K steps of each of the tile's rows into L2 before waiting on the
        # previous kernel (weights never depend on it)
        rows_pf = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        at = w_raw + e64 * stride_we + rows_pf * stride_wn
        if PF == 2:
            tl.inline_asm_elementwise("{ cp.async.bulk.prefetch.L2.global [$1], 256; mov.u32 $0, 0; }", "=r,l", [at], dtype=tl.int32, is_pure=False, pack=1)
        elif PF == 4:
            tl.inline_asm_elementwise("{ cp.async.bulk.prefetch.L2.global [$1], 512; mov.u32 $0, 0; }", "=r,l", [at], dtype=tl.int32, is_pure=False, pack=1)
        else:
            tl.inline_asm_elementwise("{ cp.async.bulk.prefetch.L2.global [$1], 1024; mov.u32 $0, 0; }", "=r,l", [at], dtype=tl.int32, is_pure=False, pack=1)
    # Only the routing was read so far; x may be the previous kernel's output.
    pdl_wait(GDC)
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
            acc = _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, False, TMA, INTERPRET)
        if not EVEN_K:
            acc = _fp8_step(acc, w_src, w_row, x_at, r_main, R, m_ok, True, TMA, INTERPRET)
        h = tl.trans(acc) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip




class PfShim:
    def __init__(self, pf, **extra):
        self.pf, self.extra = pf, extra

    def __getitem__(self, grid):
        def launch(*a, **k):
            w = a[2]
            raw = getattr(w, "base", w)
            return _grouped_dot_fp8[grid](*a, raw, PF=self.pf, **self.extra, **k)
        return launch
