"""Scratch: the FP8 grouped tile over weights packed tile-contiguous at build time.

Packed layout [E, N/BN, KB, BN, BK] (KB = ceil(R / BK), R zero-padded to KB * BK): the BN x BK
tile of each K step is one contiguous run of BN * BK bytes, and a program's KB steps follow each
other, so a program streams one contiguous chunk of BN * KB * BK bytes."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import dot_order, dot_order_rows
from moebench.kernels.grouped_slots import expert_slots, slot_epilogue, touched_expert
from moebench.kernels.jit import e4m3_to_bf16, pdl_launch_dependents, pdl_wait


def pack(w, BN, BK):
    E, N, R = w.shape
    KB = -(-R // BK)
    u = w.view(torch.uint8)
    p = torch.zeros(E, N, KB * BK, dtype=torch.uint8, device=w.device)
    p[..., :R] = u
    p = p.view(E, N // BN, BN, KB, BK).permute(0, 1, 3, 2, 4).contiguous()
    return p.view(torch.float8_e4m3fn), KB


@triton.jit
def _step(acc, w_src, row, x_at, k0, R, m_ok, MASKED: tl.constexpr, TMA: tl.constexpr,
          INTERPRET: tl.constexpr, BN: tl.constexpr):
    BK: tl.constexpr = x_at.shape[0]
    if TMA:
        w = w_src.load([row, 0])
    else:
        w = tl.load(w_src + row.to(tl.int64) * BK)
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
def _grouped_dot_fp8_packed(
    x_ptr, ids_ptr, w, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok, KB,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, TMA: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                              tl.program_id(1), BLOCK_E, SCAN)  # fmt: skip
    if count == 0:
        return
    pdl_wait(GDC)
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    NB = tl.num_programs(0)
    row0 = (e * NB + n_block) * KB * BLOCK_N  # first packed row of this program's chunk
    if TMA:
        w_src = w
    else:
        w_src = w + tl.arange(0, BLOCK_N)[:, None] * BLOCK_K + tl.arange(0, BLOCK_K)[None, :]
    scale = tl.load(ws_ptr + e64)
    r_main = R // BLOCK_K * BLOCK_K
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            acc = _step(acc, w_src, row0 + k0 // BLOCK_K * BLOCK_N, x_at, k0, R, m_ok, False, TMA,
                        INTERPRET, BLOCK_N)
        if not EVEN_K:
            acc = _step(acc, w_src, row0 + r_main // BLOCK_K * BLOCK_N, x_at, r_main, R, m_ok,
                        True, TMA, INTERPRET, BLOCK_N)
        h = tl.trans(acc) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip


class PackShim:
    """grouped_gemv's launch of _grouped_dot_fp8, redirected to the packed kernel."""
    def __init__(self, tma, **extra):
        self.tma, self.extra, self.cache = tma, extra, {}

    def __getitem__(self, grid):
        def launch(*a, **k):
            a = list(a)
            w = a[2]
            BN, BK = k["BLOCK_N"], k["BLOCK_K"]
            key = (w.data_ptr(), tuple(w.shape), BN, BK)
            if key not in self.cache:
                self.cache[key] = pack(w, BN, BK)
            p, KB = self.cache[key]
            flat = p.view(-1, BK)
            a[2] = TensorDescriptor.from_tensor(flat, [BN, BK]) if self.tma else flat
            k = dict(k, TMA=self.tma)
            return _grouped_dot_fp8_packed[grid](*a, KB, **self.extra, **k)
        return launch


# --- read-only: the same grid and tile, strided (natural rows) against packed ---------------------
@triton.jit
def _read(w, out_ptr, KB, stride_e_rows, PACKED: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
          NS: tl.constexpr):
    n = tl.program_id(0)
    e = tl.program_id(1)
    NB = tl.num_programs(0)
    acc = tl.zeros([BN, BK // 4], dtype=tl.int32)  # the tile read as int32 words
    for kb in tl.range(0, KB, num_stages=NS):
        if PACKED:
            t = w.load([((e * NB + n) * KB + kb) * BN, 0])
        else:
            t = w.load([e * stride_e_rows + n * BN, kb * (BK // 4)])
        acc ^= t
    tl.store(out_ptr + (e * NB + n) * BN + tl.arange(0, BN), tl.xor_sum(acc, 1))


def read_only(w, BN, BK, NS, packed, out, nw=4):
    E, N, R = w.shape
    u = w.view(torch.uint8)
    if packed:
        p, KB = pack(w, BN, BK)
        desc = TensorDescriptor.from_tensor(p.view(torch.uint8).view(-1, BK).view(torch.int32), [BN, BK // 4])
    else:
        KB = R // BK
        desc = TensorDescriptor.from_tensor(u.view(E * N, R).view(torch.int32), [BN, BK // 4])
    grid = (N // BN, E)
    return lambda: _read[grid](desc, out, KB, N, PACKED=packed, BN=BN, BK=BK, NS=NS, num_warps=nw), KB
