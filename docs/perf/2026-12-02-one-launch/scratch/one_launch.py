"""Scratch (seventh session): the sparse decode's fc1 and fc2 in ONE persistent launch at 1-4
tokens, FP8.

The sparse step is two GEMV launches of thousands of one-warp programs (fc1: 2,880 x K, fc2:
1,440 x K at gpt-oss-20b), and at one token each launch ramps up and drains on a few experts'
bytes: fc1 19.5 us and fc2 13.1 us alone, where a read of the same bytes takes 15.2 and 9.9 and
one read of all of them about 20 (docs/perf/HISTORY.md, 2026-12-01 second session). Here one
launch of P programs an SM (all resident: a persistent grid, so a program may wait on another
without deadlock) walks fc1's items (column block, slot) round robin, then fc2's. An fc1 item
stores its activations and counts itself done for its slot (a release atomic after a barrier);
an fc2 item of a slot waits until all of that slot's fc1 items are done (an acquire poll), then
reads the slot's activation row (bypassing L1) and runs the same GEMV. The last fc2 item of a
slot resets the slot's two counters, so the launch leaves its sync buffer as it found it (zero)
and a graph replays it. The item's arithmetic is `sparse_gemv`'s plain FP8 loop, step for step,
so the outputs must be bitwise `sparse_gemv`'s (the harness checks them before timing).

Kinds: ``base`` (the arm's two `sparse_gemv` launches, FP8 without PDL as the arm runs it),
``oneP`` (one launch, P programs an SM), ``preP`` (the same, each fc2 item's first weight step
loaded before its wait), ``twoP`` (the same persistent kernel as two launches, fc1 then fc2, no
counters: how much the persistent loop itself costs). Harness as `l2pf.py` (sixth session): one
CUDA graph a step, L2 flushed before each replay, median of 40 interleaved replays.

Under the interpreter (``python3 one_launch.py check``) the grid is one program, so its fc1
items all run before its fc2 items and every wait is already met."""
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

from moebench.kernels.gemv_parts import gemv_epilogue
from moebench.kernels.sparse_gemv import sparse_gemv

_SLEEP = tl.constexpr("{ nanosleep.u32 100; mov.u32 $0, 0; }")


@triton.jit
def _rows_fp8(x_row, w_rows, offs, R, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              PRE: tl.constexpr, w_pre, CG: tl.constexpr):
    """`_sparse_gemv_fp8`'s plain loop: the fp32 row sums of BLOCK_N weight rows times the
    token row, BLOCK_K values a step (``w_pre``: the first step's weights, loaded already)."""
    x_rows = x_row + 0 * tl.arange(0, BLOCK_N)[:, None, None]
    acc = tl.zeros([BLOCK_N, BLOCK_K // 16], dtype=tl.float32)
    k_first = 0
    if PRE:
        k = offs[None, :, :]
        if CG:
            xv = tl.load(x_rows + k, mask=k < R, other=0, cache_modifier=".cg")
        else:
            xv = tl.load(x_rows + k, mask=k < R, other=0)
        acc += tl.sum(w_pre.to(tl.float32) * xv.to(tl.bfloat16, bitcast=True).to(tl.float32),
                      axis=2)
        k_first = BLOCK_K
    for k0 in range(k_first, R, BLOCK_K):
        k = k0 + offs[None, :, :]
        w = tl.load(w_rows + k, mask=k < R, other=0.0)
        if CG:
            xv = tl.load(x_rows + k, mask=k < R, other=0, cache_modifier=".cg")
        else:
            xv = tl.load(x_rows + k, mask=k < R, other=0)
        acc += tl.sum(w.to(tl.float32) * xv.to(tl.bfloat16, bitcast=True).to(tl.float32), axis=2)
    return tl.sum(acc, axis=1)


@triton.jit
def _one_launch_fp8(
    x_ptr, ids_ptr, w1_ptr, s1_ptr, b1_ptr, a_ptr, w2_ptr, s2_ptr, b2_ptr, o_ptr, sync_ptr,
    expert_offset, E, D, F, T, K, NPROG,
    stride_xt, stride_it, stride_ik, stride_w1e, stride_w1n, stride_b1e, stride_at, stride_ak,
    stride_w2e, stride_w2n, stride_b2e, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EXACT_RNE: tl.constexpr,
    STAGE: tl.constexpr, PRE: tl.constexpr, SLEEP: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    S = T * K
    nb1 = (2 * F) // BLOCK_N
    nb2 = D // BLOCK_N
    offs = tl.arange(0, BLOCK_K // 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    if STAGE != 2:
        for item in range(pid, nb1 * S, NPROG):
            s = item // nb1
            n_block = item % nb1
            t = s // K
            slot = s % K
            e = tl.load(ids_ptr + t * stride_it + slot * stride_ik) - expert_offset
            if (e >= 0) & (e < E):
                e64 = e.to(tl.int64)
                rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
                w_rows = w1_ptr + e64 * stride_w1e + rows.to(tl.int64)[:, None, None] * stride_w1n
                x_row = (x_ptr + t.to(tl.int64) * stride_xt).to(tl.pointer_type(tl.int16))
                h = _rows_fp8(x_row, w_rows, offs, D, BLOCK_N, BLOCK_K, False, 0, False)
                gemv_epilogue(h * tl.load(s1_ptr + e64), n_block, e64, t, slot, b1_ptr, a_ptr,
                              stride_b1e, stride_at, stride_ak, GLU, BLOCK_N, EXACT_RNE)
                if STAGE == 0:
                    tl.debug_barrier()
                    tl.atomic_add(sync_ptr + s, 1, sem="release", scope="gpu")
    if STAGE != 1:
        for item in range(pid, nb2 * S, NPROG):
            s = item // nb2
            n_block = item % nb2
            t = s // K
            slot = s % K
            e = tl.load(ids_ptr + t * stride_it + slot * stride_ik) - expert_offset
            if (e >= 0) & (e < E):
                e64 = e.to(tl.int64)
                rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
                w_rows = w2_ptr + e64 * stride_w2e + rows.to(tl.int64)[:, None, None] * stride_w2n
                w_pre = tl.zeros([BLOCK_N, BLOCK_K // 16, 16], dtype=tl.float8e4nv)
                if PRE:
                    k = offs[None, :, :]
                    w_pre = tl.load(w_rows + k, mask=k < F, other=0.0)
                if STAGE == 0:
                    done = tl.atomic_add(sync_ptr + s, 0, sem="acquire", scope="gpu")
                    while done < nb1:
                        if SLEEP:
                            tl.inline_asm_elementwise(_SLEEP, "=r", [], dtype=tl.int32,
                                                      is_pure=False, pack=1)
                        done = tl.atomic_add(sync_ptr + s, 0, sem="acquire", scope="gpu")
                    tl.debug_barrier()
                x_row = (a_ptr + t.to(tl.int64) * stride_at + slot.to(tl.int64) * stride_ak).to(
                    tl.pointer_type(tl.int16))
                h = _rows_fp8(x_row, w_rows, offs, F, BLOCK_N, BLOCK_K, PRE, w_pre, STAGE == 0)
                gemv_epilogue(h * tl.load(s2_ptr + e64), n_block, e64, t, slot, b2_ptr, o_ptr,
                              stride_b2e, stride_ot, stride_ok, "none", BLOCK_N, EXACT_RNE)
                if STAGE == 0:
                    tl.debug_barrier()
                    n2 = tl.atomic_add(sync_ptr + S + s, 1, sem="relaxed", scope="gpu")
                    if n2 == nb2 - 1:
                        tl.atomic_xchg(sync_ptr + s, 0, sem="relaxed", scope="gpu")
                        tl.atomic_xchg(sync_ptr + S + s, 0, sem="relaxed", scope="gpu")


def one_launch(x, ids, w1, s1, b1, a, w2, s2, b2, o, sync, *, nprog, stage=0, pre=False,
               block_n=2, block_k=1024, glu="swiglu_oai"):
    T, K = ids.shape
    E, N1, D = w1.shape
    F = w2.shape[2]
    assert sync.numel() >= 2 * T * K and sync.dtype == torch.int32
    interp = not o.is_cuda
    _one_launch_fp8[(nprog,)](
        x, ids, w1, s1, b1, a, w2, s2, b2, o, sync, 0, E, D, F, T, K, nprog,
        x.stride(0), ids.stride(0), ids.stride(1), w1.stride(0), w1.stride(1), b1.stride(0),
        a.stride(0), a.stride(1), w2.stride(0), w2.stride(1), b2.stride(0), o.stride(0),
        o.stride(1), GLU=glu, BLOCK_N=block_n, BLOCK_K=block_k, EXACT_RNE=interp, STAGE=stage,
        PRE=pre, SLEEP=not interp, num_warps=1)


def weights(dev, E, N, R):
    w = (torch.randn(E, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
    s = torch.rand(E, device=dev) * 0.01 + 0.001
    return w, s, (torch.randn(E, N, device=dev) * 0.1).to(torch.bfloat16)


def check():
    """CPU, interpreter: one program; outputs against sparse_gemv's, bit for bit."""
    torch.manual_seed(0)
    dev = torch.device("cpu")
    D = F = 96
    E, E_ALL, T, K = 4, 8, 3, 2
    w1, s1, b1 = weights(dev, E, 2 * F, D)
    w2, s2, b2 = weights(dev, E, D, F)
    ids = torch.stack([torch.randperm(E_ALL)[:K] for _ in range(T)]).int()
    x = torch.randn(T, D).to(torch.bfloat16)
    ref_a = torch.zeros(T, K, F, dtype=torch.bfloat16)
    ref_o = torch.zeros(T, K, D, dtype=torch.bfloat16)
    sparse_gemv(x, ids, w1, s1, b1, ref_a, expert_offset=0, glu="swiglu_oai", block_k=32)
    sparse_gemv(ref_a, ids, w2, s2, b2, ref_o, expert_offset=0, block_k=32)
    for stage, pre in ((0, False), (0, True)):
        a = torch.zeros_like(ref_a)
        o = torch.zeros_like(ref_o)
        sync = torch.zeros(2 * T * K, dtype=torch.int32)
        one_launch(x, ids, w1, s1, b1, a, w2, s2, b2, o, sync, nprog=1, stage=stage, pre=pre,
                   block_k=32)
        print(f"stage={stage} pre={pre}: a equal {torch.equal(a, ref_a)}, o equal "
              f"{torch.equal(o, ref_o)}, sync left {sync.tolist()}, "
              f"local slots {int((ids < E).sum())}")


def main():
    dev = torch.device("cuda")
    D = F = 2880
    E_LOC, E_ALL, TOPK = 16, 32, 4
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    torch.manual_seed(int(os.environ.get("SEED", 0)))
    w1, s1, b1 = weights(dev, E_LOC, 2 * F, D)
    w2, s2, b2 = weights(dev, E_LOC, D, F)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    kinds = os.environ.get("KINDS", "base,one16,one24,one32,pre16,pre32,two32").split(",")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for T in [int(t) for t in os.environ.get("TOKENS", "1,2,4").split(",")]:
        ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).int()
        x = torch.randn(T, D, device=dev).to(torch.bfloat16)
        local = int(((ids >= 0) & (ids < E_LOC)).sum())
        graphs, outs = {}, {}
        for kind in kinds:
            a = torch.zeros(T, TOPK, F, device=dev, dtype=torch.bfloat16)
            o = torch.zeros(T, TOPK, D, device=dev, dtype=torch.bfloat16)
            sync = torch.zeros(2 * T * TOPK, device=dev, dtype=torch.int32)

            def run(kind=kind, a=a, o=o, sync=sync):
                if kind == "base":
                    sparse_gemv(x, ids, w1, s1, b1, a, expert_offset=0, glu="swiglu_oai")
                    sparse_gemv(a, ids, w2, s2, b2, o, expert_offset=0)
                    return
                per_sm = int(kind[3:])
                nprog = sms * per_sm
                if kind.startswith("two"):
                    for stage in (1, 2):
                        one_launch(x, ids, w1, s1, b1, a, w2, s2, b2, o, sync, nprog=nprog,
                                   stage=stage)
                else:
                    one_launch(x, ids, w1, s1, b1, a, w2, s2, b2, o, sync, nprog=nprog,
                               pre=kind.startswith("pre"))

            run()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run()
            graphs[kind] = g
            a.zero_()
            o.zero_()
            g.replay()
            torch.cuda.synchronize()
            outs[kind] = (a, o, sync)
        for kind in kinds:
            eq = all(torch.equal(p, q) for p, q in zip(outs[kind][:2], outs[kinds[0]][:2]))
            left = int(outs[kind][2].abs().sum())
            print(f"fp8 T={T} local_slots={local} {kind}: equal_to_first={eq} sync_left={left}",
                  flush=True)
        times = {k: [] for k in kinds}
        for g in graphs.values():
            for _ in range(3):
                g.replay()
        for rep in range(40):
            order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]
            for kind in order:
                flush.add_(1)
                start.record()
                graphs[kind].replay()
                end.record()
                end.synchronize()
                times[kind].append(start.elapsed_time(end) * 1e3)
        for kind in kinds:
            med = statistics.median(times[kind])
            print(f"fp8 T={T} {kind}: step median {med:.1f} us (min {min(times[kind]):.1f})",
                  flush=True)
        for kind in kinds:
            eq = all(torch.equal(p, q) for p, q in zip(outs[kind][:2], outs[kinds[0]][:2]))
            print(f"fp8 T={T} {kind}: after timing equal_to_first={eq} "
                  f"sync_left={int(outs[kind][2].abs().sum())}", flush=True)


if __name__ == "__main__":
    sys.exit(check() if sys.argv[1:] == ["check"] else main())
