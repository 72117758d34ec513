"""Scratch (sixth session): the sparse decode step at 1-4 tokens with fc2's weights of the routed
local experts prefetched into L2 while fc1 runs.

fc1 streams well below the copy rate at one token (its launch ramps up and drains on a few
experts' bytes), and fc2's weights never depend on fc1, so a kernel that only issues
`cp.async.bulk.prefetch.L2` for them, launched before fc1, lets the DRAM fetch fc2's bytes while
fc1 is still reading its own; fc2 then reads L2. At one token fc2's bytes (2-4 experts, 8.3 MB an
FP8 expert) fit in L2 beside fc1's stream. The prefetch kernel returns as soon as it has issued
its prefetches (they are fire-and-forget), so fc1 starts at once behind it.

Kinds: ``base`` (fc1, fc2: the arm's two GEMVs as shipped, programmatic dependent launch as the arm
sets it per format), ``pf`` (the prefetch kernel first), ``pfh`` (the same with an L2 evict-last
cache hint on the prefetched lines), ``pfa`` (``pf`` for fc1's weights as well: the whole step's
bytes asked for at once), ``pkg`` (a candidate package module, then `moebench/kernels/prefetch.py`,
now `prefetch_pkg.py` beside this file: the size in a register instead of an immediate, for fc2's
weights and, MXFP4, their scales), and (call 11) ``pfs``: ``pf`` on a side stream of the graph,
fc1 not waiting for it and fc2 waiting for both, ``pfws``: the same with the prefetch spread wide
(16 KiB a thread, one warp a program: 16 programs an FP8 expert instead of one). Outputs must equal ``base``'s bit for bit (a prefetch moves no data a
kernel reads by value). Same harness as mb.py: one CUDA graph a step, L2 flushed before each
replay, median of 40 interleaved replays."""
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

from moebench.kernels.sparse_gemv import sparse_gemv
from prefetch_pkg import _prefetch_routed_l2, prefetch_routed  # as run: moebench.kernels.prefetch

dev = torch.device("cuda")
D = F = 2880
E_LOC, E_ALL, TOPK = 16, 32, 4
PDL = {"fp8": False, "mxfp4": True}  # arms/decode/pipeline.py's PDL per precision
CHUNK = 64 * 1024

_PF = tl.constexpr("{ cp.async.bulk.prefetch.L2.global [$1], 65536; mov.u32 $0, 0; }")
_PF_HINT = tl.constexpr("{ .reg .b64 pol; createpolicy.fractional.L2::evict_last.b64 pol, 1.0; "
            "cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], 65536, pol; mov.u32 $0, 0; }")


@triton.jit
def _prefetch_l2(ids_ptr, w_ptr, sink_ptr, stride_it, stride_ik, stride_we, expert_bytes, K, E,
                 expert_offset, PER_PROGRAM: tl.constexpr, HINT: tl.constexpr):
    """Program (c, s): slot s's expert, if local, chunks c * PER_PROGRAM ... of its weight bytes
    (``w_ptr`` as bytes), 64 KiB a chunk, one a thread; the last chunks clamped inside the
    expert."""
    s = tl.program_id(1)
    e = tl.load(ids_ptr + (s // K) * stride_it + (s % K) * stride_ik) - expert_offset
    if (e >= 0) & (e < E):
        c = tl.program_id(0) * PER_PROGRAM + tl.arange(0, PER_PROGRAM)
        offset = tl.minimum(c.to(tl.int64) * 65536, expert_bytes - 65536)
        at = w_ptr + e.to(tl.int64) * stride_we + offset
        if HINT:
            done = tl.inline_asm_elementwise(_PF_HINT, "=r,l", [at], dtype=tl.int32,
                                             is_pure=False, pack=1)
        else:
            done = tl.inline_asm_elementwise(_PF, "=r,l", [at], dtype=tl.int32, is_pure=False,
                                             pack=1)
        tl.store(sink_ptr + tl.arange(0, PER_PROGRAM), done)


def prefetch_l2(ids, w, sink, expert_offset, hint):
    E = w.shape[0]
    wb = w.view(torch.uint8)
    per = wb[0].numel()
    chunks = triton.cdiv(per, CHUNK)
    per_program = 128
    grid = (triton.cdiv(chunks, per_program), ids.numel())
    _prefetch_l2[grid](ids, wb, sink, ids.stride(0), ids.stride(1), wb.stride(0), per,
                       ids.shape[1], E, expert_offset, PER_PROGRAM=per_program, HINT=hint,
                       num_warps=4)


def prefetch_wide(ids, w, sink):
    """prefetch_pkg's kernel with 16 KiB a thread and 32 threads (one warp) a program."""
    wb = w.view(torch.uint8)
    per, chunk, per_program = wb[0].numel(), 16 * 1024, 32
    grid = (triton.cdiv(triton.cdiv(per, chunk), per_program), ids.numel())
    _prefetch_routed_l2[grid](ids, wb, sink, ids.stride(0), ids.stride(1), wb.stride(0), per,
                              chunk, ids.shape[1], w.shape[0], 0, CHUNKS=per_program,
                              num_warps=1)


def weights(fmt, N, R):
    if fmt == "fp8":
        w = (torch.randn(E_LOC, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
        s = torch.rand(E_LOC, device=dev) * 0.01 + 0.001
    else:
        w = torch.randint(0, 256, (E_LOC, N, R // 2), device=dev, dtype=torch.uint8)
        s = torch.randint(118, 124, (E_LOC, N, R // 32), device=dev, dtype=torch.uint8)
    return w, s, (torch.randn(E_LOC, N, device=dev) * 0.1).to(torch.bfloat16)


def main():
    torch.manual_seed(int(os.environ.get("SEED", 0)))
    W = {fmt: (weights(fmt, 2 * F, D), weights(fmt, D, F)) for fmt in ("fp8", "mxfp4")}
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    sink = torch.empty(1024, dtype=torch.int32, device=dev)
    kinds = os.environ.get("KINDS", "base,pf,pfh,pfa,pkg").split(",")
    side = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for fmt in os.environ.get("FMTS", "fp8,mxfp4").split(","):
        (w1, s1, b1), (w2, s2, b2) = W[fmt]
        pdl = PDL[fmt]
        for T in [int(t) for t in os.environ.get("TOKENS", "1,2,4").split(",")]:
            ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).int()
            x = torch.randn(T, D, device=dev).to(torch.bfloat16)
            local = int(((ids >= 0) & (ids < E_LOC)).sum())
            touched = int(torch.unique(ids[(ids >= 0) & (ids < E_LOC)]).numel())
            graphs, outs = {}, {}
            for kind in kinds:
                a = torch.zeros(T, TOPK, F, device=dev, dtype=torch.bfloat16)
                o = torch.zeros(T, TOPK, D, device=dev, dtype=torch.bfloat16)

                def run(kind=kind, a=a, o=o):
                    if kind in ("pfs", "pfws"):
                        main = torch.cuda.current_stream()
                        side.wait_stream(main)
                        with torch.cuda.stream(side):
                            if kind == "pfs":
                                prefetch_l2(ids, w2, sink, 0, False)
                            else:
                                prefetch_wide(ids, w2, sink)
                        sparse_gemv(x, ids, w1, s1, b1, a, expert_offset=0, glu="swiglu_oai",
                                    pdl=pdl)
                        main.wait_stream(side)
                        sparse_gemv(a, ids, w2, s2, b2, o, expert_offset=0, pdl=pdl)
                        return
                    if kind in ("pfa",):
                        prefetch_l2(ids, w1, sink, 0, False)
                    if kind in ("pf", "pfa"):
                        prefetch_l2(ids, w2, sink, 0, False)
                    elif kind == "pfh":
                        prefetch_l2(ids, w2, sink, 0, True)
                    elif kind == "pkg":
                        prefetch_routed(ids, w2, sink, expert_offset=0)
                        if fmt == "mxfp4":
                            prefetch_routed(ids, s2, sink, expert_offset=0)
                    sparse_gemv(x, ids, w1, s1, b1, a, expert_offset=0, glu="swiglu_oai", pdl=pdl)
                    sparse_gemv(a, ids, w2, s2, b2, o, expert_offset=0, pdl=pdl)

                run()
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    run()
                graphs[kind] = g
                g.replay()
                torch.cuda.synchronize()
                outs[kind] = (a, o)
            for kind in kinds:
                eq = all(torch.equal(p, q) for p, q in zip(outs[kind], outs[kinds[0]]))
                print(f"{fmt} T={T} local_slots={local} touched={touched} {kind}: "
                      f"equal_to_first={eq}", flush=True)
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
                print(f"{fmt} T={T} {kind}: step median {med:.1f} us "
                      f"(min {min(times[kind]):.1f})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
