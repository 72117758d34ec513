"""Scratch (eighth session): the MXFP4 tile's scale loads, A/B on the H200.

The step as the arm runs it (fc1 with swiglu_oai, then fc2 reading fc1's output; the arm's
default launch at each token count, `grouped_gemv.default_launch`, programmatic dependent launch)
in one CUDA graph, L2 flushed before each replay, median of 40 interleaved replays, at gpt-oss-20b
EP2 shapes (16 local experts of 32, top-4, ids drawn per token over all 32). Kinds:

- ``old``: the committed kernel (`grouped_dot_old.py` beside this file, HEAD's copy): scales a
  step ahead in plain loads.
- ``pkg``: the working tree's kernel (moebench/kernels/grouped_dot.py): the scale rows here are
  4-byte aligned, so it loads a step's scales as words (`grouped_gemv.scale_words`).
- ``aN``: the probe kernel (`grouped_dot_probe.py`) with SCALES_AHEAD = N: 1 as committed; 4 each
  step's scale bytes of a row as one 32-bit word loaded in the step (the pipeline copies them
  asynchronously); -1 no scale load in the loop (WRONG values: what the loads cost at most).
  The scale rows are padded to 96 bytes for every kind (the words need 4-byte aligned rows).
- a suffix ``:sS`` / ``:rR`` / ``:p0`` ``:p1``: stages, register cap, pass grid other than the
  default's; ``:u`` the scales unpadded (90 bytes a row, as the problem holds them: the committed
  arm's input; the working tree's kernel then takes its byte loads). Without it the scale rows
  are padded to 96 bytes (third call: every kind so; a stride divisible by 16 changed the byte
  loads' code, so that call's ``old`` is not the committed arm).

Each kind's outputs are compared bit for bit with the first kind's."""
import dataclasses
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import grouped_dot_old  # noqa: E402
import grouped_dot_probe  # noqa: E402

import moebench.kernels.grouped_gemv as G  # noqa: E402

PKG = G._grouped_dot_mxfp4
from moebench.kernels.grouped_gemv import default_launch, grouped_gemv  # noqa: E402

dev = torch.device("cuda")
D = F = 2880
E_LOC, E_ALL, TOPK = 16, 32, 4


class Probe:
    def __init__(self, fn, ahead=None):
        self.fn, self.ahead, self.compiled = fn, ahead, []

    def __getitem__(self, grid):
        def launch(*a, **k):
            if self.fn is not PKG:  # the committed and the probe kernel take no SCALE_WORDS
                k.pop("SCALE_WORDS")
            if self.ahead is not None:
                k["SCALES_AHEAD"] = self.ahead
            self.compiled.append(self.fn[grid](*a, **k))
        return launch


def parse(kind, base):
    name, *opts = kind.split(":")
    L = base
    for o in opts:
        if o[0] == "s":
            L = dataclasses.replace(L, num_stages=int(o[1:]))
        elif o[0] == "r":
            L = dataclasses.replace(L, max_registers=int(o[1:]))
        elif o == "u":
            pass
        elif o[0] == "p":
            L = dataclasses.replace(L, pass_grid=o[1:] == "1")
    if name == "old":
        return Probe(grouped_dot_old._grouped_dot_mxfp4), L
    if name == "pkg":
        return Probe(PKG), L
    return Probe(grouped_dot_probe._grouped_dot_mxfp4, int(name[1:])), L


def main():
    torch.manual_seed(int(os.environ.get("SEED", 0)))
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    W = []
    for N, R in ((2 * F, D), (D, F)):
        w = torch.randint(0, 256, (E_LOC, N, R // 2), device=dev, dtype=torch.uint8)
        s_pad = torch.zeros(E_LOC, N, 96, device=dev, dtype=torch.uint8)
        s_pad[:, :, : R // 32] = torch.randint(118, 124, (E_LOC, N, R // 32), device=dev,
                                               dtype=torch.uint8)
        W.append((w, s_pad[:, :, : R // 32], (torch.randn(E_LOC, N, device=dev) * 0.1).bfloat16()))
    (w1, s1p, b1), (w2, s2p, b2) = W
    s1u, s2u = s1p.contiguous(), s2p.contiguous()  # the problem's own layout: 90 bytes a row
    kinds = os.environ.get("KINDS", "old,a1,a4,a-1").split(",")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for T in [int(t) for t in os.environ.get("TOKENS", "64,32,16,8,4").split(",")]:
        ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).int()
        x = torch.randn(T, D, device=dev).to(torch.bfloat16)
        base = default_launch("mxfp4", tokens=T, top_k=TOPK, experts=E_LOC, columns=2 * F,
                              pdl=True)
        local = int((ids < E_LOC).sum())
        touched = len(set(ids[ids < E_LOC].tolist()))
        print(f"T={T}: {local} local slots on {touched} experts; default {base}", flush=True)
        graphs, outs = {}, {}
        for kind in kinds:
            probe, launch = parse(kind, base)
            if launch.path != "dot":
                print(f"T={T} {kind}: the default is the GEMV, skipped")
                continue
            o1 = torch.zeros(T, TOPK, F, device=dev, dtype=torch.bfloat16)
            o2 = torch.zeros(T, TOPK, D, device=dev, dtype=torch.bfloat16)

            s1, s2 = (s1u, s2u) if kind.endswith(":u") else (s1p, s2p)

            def run(launch=launch, o1=o1, o2=o2, probe=probe, s1=s1, s2=s2):
                G._grouped_dot_mxfp4 = probe
                grouped_gemv(x, ids, w1, s1, b1, o1, expert_offset=0, launch=launch,
                             glu="swiglu_oai")
                grouped_gemv(o1, ids, w2, s2, b2, o2, expert_offset=0, launch=launch)

            run()
            torch.cuda.synchronize()
            k1, k2 = probe.compiled[:2]
            print(f"T={T} {kind}: fc1 {k1.n_regs} registers {k1.n_spills} spills "
                  f"{k1.metadata.shared} B shared; fc2 {k2.n_regs} / {k2.n_spills} / "
                  f"{k2.metadata.shared}", flush=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run()
            graphs[kind] = g
            outs[kind] = (o1, o2)
        kinds_t = list(graphs)
        for kind in kinds_t:
            for o in outs[kind]:
                o.zero_()
            graphs[kind].replay()
        torch.cuda.synchronize()
        for kind in kinds_t:
            eq = all(torch.equal(p, q) for p, q in zip(outs[kind], outs[kinds_t[0]]))
            print(f"T={T} {kind}: equal_to_first={eq}", flush=True)
        times = {k: [] for k in kinds_t}
        for g in graphs.values():
            for _ in range(3):
                g.replay()
        for rep in range(40):
            for kind in kinds_t[rep % len(kinds_t):] + kinds_t[:rep % len(kinds_t)]:
                flush.add_(1)
                start.record()
                graphs[kind].replay()
                end.record()
                end.synchronize()
                times[kind].append(start.elapsed_time(end) * 1e3)
        for kind in kinds_t:
            t = times[kind]
            print(f"T={T} {kind}: step median {statistics.median(t):.1f} us "
                  f"(min {min(t):.1f})", flush=True)


if __name__ == "__main__":
    main()
