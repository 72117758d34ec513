"""Scratch (issue 28, the one-token step): what bounds sparse_decode's fc2 at 1-2 tokens. Each
stage alone from a graph, L2 flushed before each sample (cold, as the step is timed) and not
(hot: the stage's weights left in L2 by the replay before, 24.9 MB for FP8 fc2 at one token), and
fc2's launch varied (rows a program, warps, values a step, split-K). Outputs: the launches that
keep the sums' order must equal the arm's bit for bit; split-K is held to the tolerance.

Usage (GPU): PYTHONPATH=$PWD python3 docs/perf/2026-12-03-prefetch/scratch/fc2_hot.py
[--tokens 1,2] [--scenario S]
"""

from __future__ import annotations

import argparse

import torch

from arms.decode import pipeline
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario

dev = torch.device("cuda")
CLOCK = Clock(dev)
FC2 = {  # name: sparse_gemv keywords for fc2 (FP8; MXFP4 takes those that fit its format)
    "arm": {},
    "n4w1": {"block_n": 4, "num_warps": 1},
    "n4w2": {"block_n": 4, "num_warps": 2},
    "n2k512": {"block_k": 512},
    "n2k2048": {"block_k": 2048},
    "n8w4": {"block_n": 8, "num_warps": 4},
    "split2": {"split_k": 2},
}


def main(tokens, scenario, rounds):
    s = load_scenario(scenario)
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    for pc in sorted(plan(s), key=lambda q: (q.case.scenario.precision,
                                             q.case.scenario.shape.tokens_per_rank)):
        cs = pc.case.scenario
        T = cs.shape.tokens_per_rank
        if T not in tokens:
            continue
        x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
        p = family_of(cs).problem(cs, pc.routing, pc.capacity_rows, x, 0, dev)
        off, pdl = p.expert_offset, pipeline.PDL.get(p.precision, False)
        ws = Workspace(p, layout="TKD")

        def fc1():
            sparse_gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a,
                        expert_offset=off, glu=p.activation, pdl=pdl)

        fc1()
        names, runs, outs = [], [], []
        for name, kw in FC2.items():
            if p.precision == "w4a16" and name != "arm" and "split_k" not in kw:
                kw = {**kw, "block_n": 16 * kw.get("block_n", 2) // 2,
                      "num_warps": 4 * kw.get("num_warps", 1)}
            o = torch.full_like(ws.o, float("nan"))
            extra = {} if kw.get("split_k") else {"pdl": pdl}

            def fc2(o=o, kw=kw, extra=extra):
                sparse_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, o, expert_offset=off,
                            **kw, **extra)

            fc2()
            torch.cuda.synchronize()
            names.append(name)
            runs.append(fc2)
            outs.append(o)
        local = ~torch.isnan(outs[0].float())
        for name, o in zip(names, outs):
            same = torch.equal(o[local].view(torch.int16), outs[0][local].view(torch.int16))
            close = torch.allclose(o[local].float(), outs[0][local].float(), rtol=2**-7,
                                   atol=2**-7)
            print(f"{p.precision} T={T} fc2 {name}: bitwise {same}, within tolerance {close}",
                  flush=True)
        cold = bench.time_interleaved(CLOCK, [fc1, *runs], rounds=rounds, reps=4)
        hot = bench.time_interleaved(CLOCK, [fc1, *runs], rounds=rounds, reps=4, flush_l2=False)
        for name, c, h in zip(["fc1", *names], cold, hot):
            print(f"  {p.precision} T={T} {name:8s} cold {c:7.2f} us  hot {h:7.2f} us", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,2")
    ap.add_argument("--scenario", default="scenarios/gpt-oss-20b-decode-grouped.yaml")
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    main([int(v) for v in a.tokens.split(",")], a.scenario, a.rounds)
