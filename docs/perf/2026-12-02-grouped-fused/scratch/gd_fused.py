"""Scratch (the fifth session's next/gd_fused.py with a STATIC tile order added): fc1 and fc2 of the grouped decode's FP8 and MXFP4 tiles in ONE persistent launch.

Programs pull tiles from a device queue (an atomic counter): first every fc1 tile (j-th touched
expert, column block), then every fc2 tile. An fc1 tile, once stored, adds 1 to its expert's
counter (release); an fc2 tile of expert j waits until that counter holds all of expert j's fc1
tiles (acquire) before reading the activations. Tiles go only to running programs and an fc1 tile
never waits, so the launch always progresses, whatever the grid; under the interpreter program 0
takes every tile in order. The last program to finish zeroes the queue and the counters, so that
a CUDA graph replays the launch as is. Why: fc2's launch pays the ramp and drain of a launch
again (the read-only kernel at the tile's grid: about 11 us a launch, HISTORY.md, fifth session)
and fc2's programs cannot start until fc1's last one ends; here fc2's tiles start as soon as
their own expert is done.

The per-tile arithmetic is that of `grouped_dot`'s kernels, so the outputs are bitwise theirs."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import _fp8_step, _mxfp4_step, loaded_rows
from moebench.kernels.grouped_slots import expert_slots, scan_width, slot_epilogue, touched_expert


@triton.jit
def _tile(x_ptr, ids_ptr, w, ws_ptr, b_ptr, out_ptr, e, count, n_block,
          TK, K, expert_offset, R, stride_xt, stride_xk, stride_it, stride_ik, stride_we,
          stride_wn, stride_be, stride_ot, stride_ok,
          GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, SCAN: tl.constexpr,
          NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, TMA: tl.constexpr):
    e64 = e.to(tl.int64)
    if TMA:
        w_src = w
        w_row = e * (stride_we // stride_wn) + n_block * BLOCK_N
    else:
        rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        w_src = w + e64 * stride_we + rows64[:, None] * stride_wn + tl.arange(0, BLOCK_K)[None, :]
        w_row = 0
    scale = tl.load(ws_ptr + e64)
    r_main = R // BLOCK_K * BLOCK_K
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            acc = _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, False, TMA, INTERPRET)
        if not EVEN_K:
            acc = _fp8_step(acc, w_src, w_row, x_at, r_main, R, m_ok, True, TMA, INTERPRET)
        h = tl.trans(acc) * scale
        slot_epilogue(h, n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be, stride_ot,
                      stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)


@triton.jit
def _tile_mx(x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, e, count, n_block,
             TK, K, expert_offset, R, stride_xt, stride_xk, stride_it, stride_ik, stride_we,
             stride_wn, stride_se, stride_sn, stride_be, stride_ot, stride_ok,
             GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr,
             SCAN: tl.constexpr, NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr):
    """`grouped_dot._grouped_dot_mxfp4`'s body for one (expert, column block)."""
    e64 = e.to(tl.int64)
    GROUPS: tl.constexpr = BLOCK_K // 32
    rows64 = (n_block * BLOCK_N + loaded_rows(BLOCK_N)).to(tl.int64)
    kg = tl.arange(0, GROUPS)
    w_at = (w_ptr + e64 * stride_we + rows64[:, None] * stride_wn
            + tl.arange(0, BLOCK_K // 2)[None, :])
    s_at = ws_ptr + e64 * stride_se + rows64[:, None] * stride_sn + kg[None, :]
    r_main = R // BLOCK_K * BLOCK_K
    for m0 in range(0, count, BLOCK_M):
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        s_next = tl.load(s_at, mask=(kg < R // 32)[None, :], other=0)
        for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
            s = s_next
            g_next = (k0 + BLOCK_K) // 32
            s_next = tl.load(s_at + g_next, mask=(g_next + kg < R // 32)[None, :], other=0)
            acc = _mxfp4_step(acc, w_at, s, x_at, k0, R, m_ok, False, INTERPRET)
        if not EVEN_K:
            acc = _mxfp4_step(acc, w_at, s_next, x_at, r_main, R, m_ok, True, INTERPRET)
        slot_epilogue(tl.trans(acc), n_block, e64, t64, k64, m_ok, b_ptr, out_ptr, stride_be,
                      stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)


@triton.jit
def _fused(
    x_ptr, ids_ptr, w1, ws1_ptr, b1_ptr, a_ptr, w2, ws2_ptr, b2_ptr, o_ptr, sync_ptr,
    TK, K, expert_offset, E, D, F, J, NB1, NB2,
    stride_xt, stride_it, stride_ik, stride_w1e, stride_w1n, stride_b1e,
    stride_at, stride_ak, stride_w2e, stride_w2n, stride_b2e, stride_ot, stride_ok,
    stride_s1e, stride_s1n, stride_s2e, stride_s2n,
    MX: tl.constexpr, GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN1: tl.constexpr, EVEN2: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr,
    SCAN: tl.constexpr, NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, TMA: tl.constexpr,
    STATIC: tl.constexpr = False,
):
    # sync_ptr (int32): [0] the tile queue, [1] programs finished, [2 + j] fc1 tiles done of
    # the j-th touched expert.
    T1 = J * NB1
    total = T1 + J * NB2
    # STATIC (sixth session's A/B): program p takes tiles p, p + P, ... with no queue; it cannot
    # deadlock only while every program is resident (the grid at most the SMs' occupancy).
    if STATIC:
        tile = tl.program_id(0)
    else:
        tile = tl.atomic_add(sync_ptr, 1)
    while tile < total:
        if tile < T1:
            j = tile // NB1
            e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                      BLOCK_E, SCAN)
            if count > 0:
                if MX:
                    _tile_mx(x_ptr, ids_ptr, w1, ws1_ptr, b1_ptr, a_ptr, e, count, tile % NB1,
                             TK, K, expert_offset, D, stride_xt, 0, stride_it, stride_ik,
                             stride_w1e, stride_w1n, stride_s1e, stride_s1n, stride_b1e,
                             stride_at, stride_ak, GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN1,
                             EXACT_RNE, SCAN, NUM_STAGES, INTERPRET)
                else:
                    _tile(x_ptr, ids_ptr, w1, ws1_ptr, b1_ptr, a_ptr, e, count, tile % NB1,
                          TK, K, expert_offset, D, stride_xt, 0, stride_it, stride_ik, stride_w1e,
                          stride_w1n, stride_b1e, stride_at, stride_ak,
                          GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN1, EXACT_RNE, SCAN, NUM_STAGES,
                          INTERPRET, TMA)
                # every thread's stores before the one release that publishes them
                tl.debug_barrier()
                tl.atomic_add(sync_ptr + 2 + j, 1, sem="release")
        else:
            j = (tile - T1) // NB2
            e, count = touched_expert(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                      BLOCK_E, SCAN)
            if count > 0:
                done = tl.atomic_add(sync_ptr + 2 + j, 0, sem="acquire")
                while done < NB1:
                    done = tl.atomic_add(sync_ptr + 2 + j, 0, sem="acquire")
                if MX:
                    _tile_mx(a_ptr, ids_ptr, w2, ws2_ptr, b2_ptr, o_ptr, e, count,
                             (tile - T1) % NB2, TK, K, expert_offset, F, stride_at, stride_ak,
                             stride_it, stride_ik, stride_w2e, stride_w2n, stride_s2e,
                             stride_s2n, stride_b2e, stride_ot, stride_ok, "none", BLOCK_M,
                             BLOCK_N, BLOCK_K, EVEN2, EXACT_RNE, SCAN, NUM_STAGES, INTERPRET)
                else:
                    _tile(a_ptr, ids_ptr, w2, ws2_ptr, b2_ptr, o_ptr, e, count,
                          (tile - T1) % NB2, TK, K, expert_offset, F, stride_at, stride_ak,
                          stride_it, stride_ik, stride_w2e, stride_w2n, stride_b2e, stride_ot,
                          stride_ok, "none", BLOCK_M, BLOCK_N, BLOCK_K, EVEN2, EXACT_RNE, SCAN,
                          NUM_STAGES, INTERPRET, TMA)
        if STATIC:
            tile += tl.num_programs(0)
        else:
            tile = tl.atomic_add(sync_ptr, 1)
    tl.debug_barrier()
    finished = tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel")
    if finished == tl.num_programs(0) - 1:
        # the last program out: every tile is done and every queue pull made
        offs = tl.arange(0, BLOCK_E * 2)
        tl.store(sync_ptr + offs, tl.zeros([BLOCK_E * 2], dtype=tl.int32), mask=offs < 2 + E)


def fused_ffn(x, ids, w1, s1, b1, a, w2, s2, b2, o, sync, *, expert_offset, glu, block_m=16,
              block_n=64, block_k=128, num_warps=4, num_stages=4, tma=True, maxnreg=128,
              programs=None, static=False):
    """FP8 [E, N, R] or MXFP4 uint8 [E, N, R/2] weights (scales [E] fp32 or [E, N, R/32] e8m0).
    fc1 (+ GLU) into ``a`` [T, K, F] and fc2 into ``o`` [T, K, D] in one launch; ``sync``
    int32 zeros of at least 2 + E (left zero after every launch)."""
    mx = w1.dtype == torch.uint8
    E, N1, D = w1.shape
    _, N2, F = w2.shape
    if mx:
        D, F = 2 * D, 2 * F
    T, K = ids.shape
    J = min(E, T * K)
    assert N1 % block_n == 0 and N2 % block_n == 0, (N1, N2, block_n)
    NB1, NB2 = N1 // block_n, N2 // block_n
    block_e = triton.next_power_of_2(E)
    assert sync.numel() >= 2 + E and sync.dtype == torch.int32
    if programs is None:
        programs = (torch.cuda.get_device_properties(o.device).multi_processor_count * 4
                    if o.is_cuda else 2)
    grid = (min(programs, J * (NB1 + NB2)),)
    tma = tma and not mx and o.is_cuda and w1.is_contiguous() and w2.is_contiguous()
    d1 = TensorDescriptor.from_tensor(w1.view(E * N1, D), [block_n, block_k]) if tma else w1
    d2 = TensorDescriptor.from_tensor(w2.view(E * N2, F), [block_n, block_k]) if tma else w2
    extra = {"maxnreg": maxnreg} if (maxnreg and o.is_cuda) else {}
    scales = (s1.stride(0), s1.stride(1), s2.stride(0), s2.stride(1)) if mx else (0, 0, 0, 0)
    _fused[grid](
        x, ids, d1, s1, b1, a, d2, s2, b2, o, sync,
        T * K, K, expert_offset, E, D, F, J, NB1, NB2,
        x.stride(0), ids.stride(0), ids.stride(1), w1.stride(0), w1.stride(1), b1.stride(0),
        a.stride(0), a.stride(1), w2.stride(0), w2.stride(1), b2.stride(0), o.stride(0),
        o.stride(1), *scales,
        MX=mx, GLU=glu, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, EVEN1=D % block_k == 0,
        EVEN2=F % block_k == 0, EXACT_RNE=not o.is_cuda, BLOCK_E=block_e,
        SCAN=scan_width(T * K, block_e, block_m), NUM_STAGES=num_stages,
        INTERPRET=not o.is_cuda, TMA=tma, STATIC=static, num_warps=num_warps, **extra,
    )
