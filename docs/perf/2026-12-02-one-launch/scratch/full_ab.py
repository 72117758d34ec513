"""Scratch (seventh session): the FP8 tile with the step past R inside the pipelined loop
(TMA path; moebench/kernels/grouped_dot.py as changed, ``new``) against the committed kernel
(``old``: `grouped_dot_old.py` beside this file, HEAD's copy), at stage counts and register caps.

Kinds ``old:S:R`` / ``new:S:R[:p]``: S pipeline stages, at most R registers a thread (0: no cap),
``p`` one pass a program (`Launch.pass_grid`, the second call). The
step as the arm runs it from 8 tokens: fc1 (swiglu_oai) then fc2 reading fc1's output, both
`grouped_gemv`'s tile through TMA with programmatic dependent launch, one CUDA graph, L2 flushed
before each replay, median of 40 interleaved replays; each kind's outputs compared bit for bit
with the first kind's, and the compiled registers and shared memory printed."""
import os
import statistics
import sys
from dataclasses import replace

import torch

sys.path.insert(0, os.path.dirname(__file__))
import grouped_dot_old  # noqa: E402

import moebench.kernels.grouped_gemv as G  # noqa: E402
from moebench.kernels.grouped_gemv import Launch, grouped_gemv  # noqa: E402

NEW = {"fp8": G._grouped_dot_fp8, "mxfp4": G._grouped_dot_mxfp4}
OLD = {"fp8": grouped_dot_old._grouped_dot_fp8, "mxfp4": grouped_dot_old._grouped_dot_mxfp4}
FMT = os.environ.get("FMT", "fp8")  # mxfp4 (third call): its tile, pointer loads, no TMA
dev = torch.device("cuda")
D = F = 2880
E_LOC, E_ALL, TOPK = 16, 32, 4


class Probe:
    """Launches ``fn`` and keeps the compiled kernel (registers, shared memory); the committed
    kernel (``old``) has no PASS_GRID (its launches never ask for one pass a program)."""

    def __init__(self, fn, old=False):
        self.fn, self.compiled, self.old = fn, [], old

    def __getitem__(self, grid):
        def launch(*a, **k):
            if self.old:
                assert not k.pop("PASS_GRID")
            self.compiled.append(self.fn[grid](*a, **k))
        return launch


def main():
    torch.manual_seed(int(os.environ.get("SEED", 0)))
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    W = []
    for N, R in ((2 * F, D), (D, F)):
        if FMT == "fp8":
            w = (torch.randn(E_LOC, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
            s = torch.rand(E_LOC, device=dev) * 0.01 + 0.001
        else:
            w = torch.randint(0, 256, (E_LOC, N, R // 2), device=dev, dtype=torch.uint8)
            s = torch.randint(118, 124, (E_LOC, N, R // 32), device=dev, dtype=torch.uint8)
        W.append((w, s, (torch.randn(E_LOC, N, device=dev) * 0.1).to(torch.bfloat16)))
    (w1, s1, b1), (w2, s2, b2) = W
    kinds = os.environ.get("KINDS", "old:4:128,new:4:128,new:3:80,new:3:88,new:4:80").split(",")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for T in [int(t) for t in os.environ.get("TOKENS", "64,32,16,8").split(",")]:
        ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).int()
        x = torch.randn(T, D, device=dev).to(torch.bfloat16)
        graphs, outs = {}, {}
        for kind in kinds:
            which, stages, regs, *passes = kind.split(":")
            probe = Probe(OLD[FMT], old=True) if which == "old" else Probe(NEW[FMT])
            launch = Launch(path="dot", block_m=16, block_n=64, block_k=128, num_warps=4,
                            num_stages=int(stages), pdl=True, tma=FMT == "fp8",
                            max_registers=int(regs),
                            pass_grid=passes == ["p"])
            o1 = torch.zeros(T, TOPK, F, device=dev, dtype=torch.bfloat16)
            o2 = torch.zeros(T, TOPK, D, device=dev, dtype=torch.bfloat16)

            def run(launch=launch, o1=o1, o2=o2, probe=probe):
                setattr(G, f"_grouped_dot_{FMT}", probe)
                grouped_gemv(x, ids, w1, s1, b1, o1, expert_offset=0, launch=launch,
                             glu="swiglu_oai")
                grouped_gemv(o1, ids, w2, s2, b2, o2, expert_offset=0, launch=launch)

            run()
            torch.cuda.synchronize()
            k1, k2 = probe.compiled[:2]
            print(f"{FMT} T={T} {kind}: fc1 {k1.n_regs} registers {k1.n_spills} spills "
                  f"{k1.metadata.shared} B shared; fc2 {k2.n_regs} / {k2.n_spills} / "
                  f"{k2.metadata.shared}", flush=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run()
            graphs[kind] = g
            outs[kind] = (o1, o2)
        for kind in kinds:
            o1, o2 = outs[kind]
            o1.zero_()
            o2.zero_()
            graphs[kind].replay()
        torch.cuda.synchronize()
        for kind in kinds:
            eq = all(torch.equal(p, q) for p, q in zip(outs[kind], outs[kinds[0]]))
            print(f"{FMT} T={T} {kind}: equal_to_first={eq}", flush=True)
        times = {k: [] for k in kinds}
        for g in graphs.values():
            for _ in range(3):
                g.replay()
        for rep in range(40):
            for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
                flush.add_(1)
                start.record()
                graphs[kind].replay()
                end.record()
                end.synchronize()
                times[kind].append(start.elapsed_time(end) * 1e3)
        for kind in kinds:
            t = times[kind]
            print(f"{FMT} T={T} {kind}: step median {statistics.median(t):.1f} us "
                  f"(min {min(t):.1f})", flush=True)


if __name__ == "__main__":
    main()
