"""Scratch (issue 28, 2026-12-04, fourteenth session): the sparse FP8 GEMV with one program a
(row block, token) serving every slot of the token, instead of one a (row block, slot, token).

Why: at one token the sparse FP8 step is 14.5 us of fixed cost plus 5.9 us a local slot
(docs/perf/HISTORY.md, thirteenth session), and the fixed part tracks the grid: 17,280 one-warp
programs, half of them (the non-local slots at EP2) leaving after the routing load. Here the
grid is (N / BLOCK_N, T): a quarter of the programs at top-4, none of them empty unless the token
routes nothing to the rank, each still one warp streaming its rows, now for each local slot of
the token in the same K loop (the slots' loads in flight together). Non-local slots are masked
off: their loads are predicated (no traffic) and their rows are not stored.

Arithmetic: per (slot, row) the same per-lane products and sums in the same order as the
package's kernel at the same BLOCK_K (a lane's 16 bytes a step, then the lanes' sum, the expert
scale, the bias), so the same bits where the layouts agree; the bench checks it bit for bit.
Plain loop, no split-K; programmatic dependent launch as the package's (no peel). ``GROUP``:
the local slots compacted (in slot order) and taken GROUP a pass, so that the registers hold
GROUP slots' tiles, not K's, and a pass over slots that are not local is never run."""

import triton
import triton.language as tl

from moebench.kernels.jit import fp32_to_bf16, gated_activation, pdl_launch_dependents, pdl_wait
from moebench.kernels.launch import check_slot_operands, checker


@triton.jit
def _token_gemv_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    K: tl.constexpr, KP: tl.constexpr, GROUP: tl.constexpr, SHARED_X: tl.constexpr,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    n_block = tl.program_id(0)
    t = tl.program_id(1)
    t64 = t.to(tl.int64)
    slots = tl.arange(0, KP)
    e_k = tl.load(ids_ptr + t * stride_it + slots * stride_ik, mask=slots < K, other=-1)
    e_k = e_k - expert_offset
    local_k = ((slots < K) & (e_k >= 0) & (e_k < E)).to(tl.int32)
    n_local = tl.sum(local_k, axis=0)
    if n_local == 0:
        return
    # The local slots compacted: the one at position j is the slot whose exclusive prefix count
    # of local slots is j. GROUP of them a pass, the passes one after the other.
    before = tl.cumsum(local_k, axis=0) - local_k
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    LANES: tl.constexpr = BLOCK_K // 16
    offs4 = (tl.arange(0, LANES)[:, None] * 16 + tl.arange(0, 16)[None, :])[None, None, :, :]
    pdl_wait(GDC)
    for p0 in range(0, n_local, GROUP):
        j = p0 + tl.arange(0, GROUP)
        pick = (local_k[None, :] != 0) & (before[None, :] == j[:, None])  # [GROUP, KP]
        slot = tl.sum(tl.where(pick, slots[None, :], 0), axis=1)
        e64 = tl.sum(tl.where(pick, e_k[None, :], 0), axis=1).to(tl.int64)
        live = j < n_local
        # The epilogue's bias and scale asked for before the loop (as early_loads).
        bias = tl.load(b_ptr + e64[:, None] * stride_be + rows[None, :], mask=live[:, None],
                       other=0)  # fmt: skip
        scale = tl.load(ws_ptr + e64, mask=live, other=0.0)
        w_rows = (w_ptr + e64[:, None, None, None] * stride_we
                  + rows.to(tl.int64)[None, :, None, None] * stride_wn)  # fmt: skip
        if SHARED_X:  # fc1: every slot reads its token's row
            x_base = x_ptr + t64 * stride_xt + 0 * slot.to(tl.int64)
        else:
            x_base = x_ptr + t64 * stride_xt + slot.to(tl.int64) * stride_xk
        x_rows = (
            x_base.to(tl.pointer_type(tl.int16))[:, None, None, None]
            + 0 * rows[None, :, None, None]
        )
        on = live[:, None, None, None]
        acc = tl.zeros([GROUP, BLOCK_N, LANES], dtype=tl.float32)
        for k0 in range(0, R, BLOCK_K):
            k = k0 + offs4
            if EVEN_K:
                w = tl.load(w_rows + k, mask=on, other=0.0)
                xv = tl.load(x_rows + k, mask=on, other=0)
            else:
                w = tl.load(w_rows + k, mask=on & (k < R), other=0.0)
                xv = tl.load(x_rows + k, mask=on & (k < R), other=0)
            acc += tl.sum(w.to(tl.float32) * xv.to(tl.bfloat16, bitcast=True).to(tl.float32),
                          axis=3)  # fmt: skip
        h = tl.sum(acc, axis=2) * scale[:, None]
        h = h + bias.to(tl.float32)
        out_rows = out_ptr + t64 * stride_ot + slot.to(tl.int64)[:, None] * stride_ok
        if GLU == "none":
            tl.store(out_rows + rows[None, :], fp32_to_bf16(h, EXACT_RNE), mask=live[:, None])
        else:
            gate, up = tl.split(tl.reshape(h, [GROUP, BLOCK_N // 2, 2]))
            cols = n_block * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
            y = fp32_to_bf16(gated_activation(gate, up, GLU), EXACT_RNE)
            tl.store(out_rows + cols[None, :], y, mask=live[:, None])


_check = checker("token_gemv")


def token_gemv(x, topk_ids_TK, w, w_scale, bias_EN, out, *, expert_offset, glu="none",
               block_n=2, block_k=1024, group=0, num_warps=1, maxnreg=0, pdl=False):  # fmt: skip
    """As `sparse_gemv` (FP8 only), one program a (row block, token); ``group`` local slots a
    pass (0: all K in one); ``maxnreg`` a register cap a thread (0: none)."""
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    _check(ops.fmt == "fp8", "token_gemv is FP8 only")
    T, K, E, N, R = ops.T, ops.K, ops.E, ops.N, ops.R
    if T == 0 or K == 0 or E == 0:
        return
    kw = dict(launch_pdl=True) if pdl and out.is_cuda else {}
    gdc = bool(kw)
    if maxnreg and out.is_cuda:
        kw["maxnreg"] = maxnreg
    _token_gemv_fp8[(N // block_n, T)](
        x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
        ops.stride_xt, ops.stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
        bias_EN.stride(0), out.stride(0), out.stride(1),
        K=K, KP=triton.next_power_of_2(K), GROUP=group or triton.next_power_of_2(K), SHARED_X=ops.stride_xk == 0, GLU=glu,
        BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=R % block_k == 0, EXACT_RNE=not out.is_cuda,
        GDC=gdc, num_warps=num_warps, **kw,
    )  # fmt: skip
