"""Scratch A/B (issue 28, the one-token step): sparse_decode's fc1 asking L2 for fc2's weights as
it goes (each program its share of its slot's expert's fc2 bytes, `sparse_gemv(prefetch=...)`),
so that fc2's bytes stream in with fc1's and fc2 reads them from L2. Variants of the arm's step
(fc1, fc2, combine as one graph, L2 flushed before each sample): ``base`` (the arm), ``ef`` (fc1's
own loads evict-first, no prefetch), ``pf`` (prefetch, no hint), ``pfl`` (prefetch evict-last,
fc1's loads evict-first), ``pfl_ef2`` (pfl, fc2's loads evict-first too). Also fc1 alone, to
see what the prefetch costs it. Outputs compared bitwise with ``base``.

Needs `sparse_gemv`'s prefetch and evict-first keywords, which were measured and not kept: `git
apply docs/perf/2026-12-03-prefetch/scratch/prefetch.patch` on 6df6224 (the tree this ran on).

Usage (GPU): PYTHONPATH=$PWD python3 docs/perf/2026-12-03-prefetch/scratch/pf_ab.py
[--tokens 1,2,4,8] [--scenario S]
"""

from __future__ import annotations

import argparse

import torch

from arms.decode import pipeline
from moebench.arm.decode import Workspace
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.spec.load import load_scenario

dev = torch.device("cuda")
CLOCK = Clock(dev)
VARIANTS = {  # name: (prefetch, prefetch_last, fc1 evict_first, fc2 evict_first)
    "base": (False, False, False, False),
    "ef": (False, False, True, False),
    "pf": (True, False, False, False),
    "pfl": (True, True, True, False),
    "pfl_ef2": (True, True, True, True),
}


def stages(ws, variant):
    p = ws.problem
    off, pdl = p.expert_offset, pipeline.PDL.get(p.precision, False)
    pf, last, ef1, ef2 = VARIANTS[variant]

    def fc1():
        sparse_gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a, expert_offset=off,
                    glu=p.activation, pdl=pdl, prefetch=p.w2 if pf else None, prefetch_last=last,
                    evict_first=ef1)

    def rest():
        sparse_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, expert_offset=off,
                    pdl=pdl, evict_first=ef2)
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=pdl)

    def step():
        fc1()
        rest()

    return step, fc1


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
        prob = family_of(cs).problem(cs, pc.routing, pc.capacity_rows, x, 0, dev)
        ref = decode_reference_output(prob)
        steps, fc1s, outs = [], [], []
        for v in VARIANTS:
            ws = Workspace(prob, layout="TKD")
            step, fc1 = stages(ws, v)
            ws.poison()
            step()
            torch.cuda.synchronize()
            outs.append(ws.y_TD.clone())
            steps.append(step)
            fc1s.append(fc1)
            d = calc_diff(ws.y_TD.float(), ref)
            print(f"{cs.precision} T={T} {v}: diff={d:.3e} ok={d <= TOLERANCE[cs.precision]}",
                  flush=True)
        same = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs)
        if not same:
            print(f"  T={T}: outputs differ from base; not timed", flush=True)
            continue
        us = bench.time_interleaved(CLOCK, steps + fc1s, rounds=rounds, reps=4)
        n = len(VARIANTS)
        for i, v in enumerate(VARIANTS):
            print(f"  {cs.precision} T={T} {v:8s} step {us[i]:7.2f} us ({us[i] / us[0] - 1:+.1%})"
                  f"  fc1 alone {us[n + i]:7.2f} us  rest {us[i] - us[n + i]:6.2f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,2,4,8")
    ap.add_argument("--scenario", default="scenarios/gpt-oss-20b-decode-grouped.yaml")
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    main([int(v) for v in a.tokens.split(",")], a.scenario, a.rounds)
