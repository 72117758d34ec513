"""Scratch A/B (issue 28): the decode step's fc1 -> fc2 chain split over side streams.

A step launches fc1, then fc2 (which needs fc1's output), then the combine, each kernel paying
its ramp and drain in series. fc2 of a group of experts (or slots) needs only that group's fc1,
so the step can run G chains fc1(g) -> fc2(g) on G streams of one CUDA graph and join them before
the combine: one chain's drain and the next kernel's ramp can then overlap another chain's
streaming. The kernels and their launches are the arms' own; only the grid is split (experts
[a, b) through the launchers' expert range, or slots [k0, k1) through a view of the routing).
Outputs are compared bitwise with the arm's own step, and with the reference.

Usage (GPU): PYTHONPATH=$PWD python3 docs/perf/2026-12-03-streams/scratch/streams_ab.py OUT
[--tokens 1,2,4,8,16,32,64] [--scenario S] [--seed N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import torch

from arms.decode import grouped_decode
from arms.decode import pipeline as sparse_pipeline
from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.core.ceilings import H200
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.grouped_gemv import grouped_gemv
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.routing.synthetic import local_counts
from moebench.spec.load import load_scenario

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CLOCK = Clock(dev)
SCENARIO = "scenarios/gpt-oss-20b-decode-grouped.yaml"


def forked(chains, streams, tail):
    """A step running chain i on streams[i] (all forked from, and joined back to, the current
    stream), then ``tail`` on the current stream."""

    def step():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for chain, s in zip(chains, streams):
            with torch.cuda.stream(s):
                chain()
        for s in streams:
            main.wait_stream(s)
        tail()

    return step


def grouped_chains(ws, parts, by):
    """fc1 -> fc2 of the grouped arm for each part: experts [a, b) (``by == "experts"``) or slots
    [a, b) of the routing (``by == "slots"``)."""
    p = ws.problem
    l1, l2 = grouped_decode.launches(p)
    s13 = grouped_decode.tiles_scales(p.w13, p.w13_scale, l1)
    s2 = grouped_decode.tiles_scales(p.w2, p.w2_scale, l2)
    off = p.expert_offset
    chains = []
    for a, b in parts:
        if by == "experts":
            def chain(a=a, b=b):
                grouped_gemv(p.x_TD, p.topk_ids_TK, p.w13[a:b], s13[a:b], p.b13_E2F[a:b], ws.a,
                             expert_offset=off + a, launch=l1, glu=p.activation)
                grouped_gemv(ws.a, p.topk_ids_TK, p.w2[a:b], s2[a:b], p.b2_ED[a:b], ws.o,
                             expert_offset=off + a, launch=l2)
        else:
            def chain(a=a, b=b):
                ids = p.topk_ids_TK[:, a:b]
                grouped_gemv(p.x_TD, ids, p.w13, s13, p.b13_E2F, ws.a[:, a:b],
                             expert_offset=off, launch=l1, glu=p.activation)
                grouped_gemv(ws.a[:, a:b], ids, p.w2, s2, p.b2_ED, ws.o[:, a:b],
                             expert_offset=off, launch=l2)
        chains.append(chain)
    return chains, l2.pdl


def sparse_chains(ws, parts):
    p = ws.problem
    pdl = sparse_pipeline.PDL.get(p.precision, False)
    off = p.expert_offset
    chains = []
    for a, b in parts:
        def chain(a=a, b=b):
            ids = p.topk_ids_TK[:, a:b]
            sparse_gemv(p.x_TD, ids, p.w13, p.w13_scale, p.b13_E2F, ws.a[:, a:b],
                        expert_offset=off, glu=p.activation, pdl=pdl)
            sparse_gemv(ws.a[:, a:b], ids, p.w2, p.w2_scale, p.b2_ED, ws.o[:, a:b],
                        expert_offset=off, pdl=pdl)
        chains.append(chain)
    return chains, pdl


def combine(ws, pdl):
    p = ws.problem
    return lambda: combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD,
                                expert_offset=p.expert_offset, local_experts=p.local_experts,
                                layout=ws.layout, pdl=pdl)


def split(n, g):
    edges = [round(i * n / g) for i in range(g + 1)]
    return [(edges[i], edges[i + 1]) for i in range(g)]


def main(out_dir, tokens, scenario):
    os.makedirs(out_dir, exist_ok=True)
    s = load_scenario(scenario)
    arms = {n: registry.resolve(n) for n in ("sparse_decode", "grouped_decode")}
    rows = []
    streams = [torch.cuda.Stream() for _ in range(4)]
    # The first chain on a high-priority stream: its fc2 takes the SMs' free places before the
    # second chain's pending fc1 programs (if the graph keeps the priorities).
    prio = [torch.cuda.Stream(priority=-1), torch.cuda.Stream(priority=0)]
    for pc in sorted(plan(s), key=lambda q: -q.case.scenario.shape.tokens_per_rank):
        cs = pc.case.scenario
        T = cs.shape.tokens_per_rank
        if T not in tokens:
            continue
        x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
        prob = family_of(cs).problem(cs, pc.routing, pc.capacity_rows, x, 0, dev)
        ref = decode_reference_output(prob)
        counts = local_counts(prob.topk_ids_TK.cpu(), prob.expert_offset, prob.local_experts)
        K, E = prob.topk_ids_TK.shape[1], prob.local_experts
        print(f"\n{cs.precision} {T} tokens: {int(counts.sum())} local slots on "
              f"{int((counts > 0).sum())} experts, counts {counts.tolist()}", flush=True)
        steps = {}
        for name in (["sparse_decode"] if T <= 8 else []) + ["grouped_decode"]:
            ws = Workspace(prob, layout="TKD")
            st = arms[name].build(ws)
            steps[name] = (ws, lambda st=st: [x.run() for x in st], name)
        if T <= 8:
            for g in (2, 4):
                ws = Workspace(prob, layout="TKD")
                chains, pdl = sparse_chains(ws, split(K, g))
                steps[f"sparse slots/{g}"] = (ws, forked(chains, streams[:g], combine(ws, pdl)),
                                              "sparse_decode")
            ws = Workspace(prob, layout="TKD")
            chains, pdl = sparse_chains(ws, split(K, 2))
            steps["sparse slots/2 prio"] = (ws, forked(chains, prio, combine(ws, pdl)),
                                            "sparse_decode")
        for g in (2, 4):
            ws = Workspace(prob, layout="TKD")
            chains, pdl = grouped_chains(ws, split(E, g), "experts")
            steps[f"grouped experts/{g}"] = (ws, forked(chains, streams[:g], combine(ws, pdl)),
                                             "grouped_decode")
        ws = Workspace(prob, layout="TKD")
        chains, pdl = grouped_chains(ws, split(E, 2), "experts")
        steps["grouped experts/2 prio"] = (ws, forked(chains, prio, combine(ws, pdl)),
                                           "grouped_decode")
        # Two chains of experts interleaved (0, 2, 4, ... and 1, 3, 5, ...) cannot be an expert
        # range; four chains on two streams, two after each other on a stream:
        ws = Workspace(prob, layout="TKD")
        chains, pdl = grouped_chains(ws, split(E, 4), "experts")
        pairs = [lambda c=chains: (c[0](), c[2]()), lambda c=chains: (c[1](), c[3]())]
        steps["grouped experts/4 on 2"] = (ws, forked(pairs, streams[:2], combine(ws, pdl)),
                                           "grouped_decode")
        if T == 1:
            for g in (2, 4):
                ws = Workspace(prob, layout="TKD")
                chains, pdl = grouped_chains(ws, split(K, g), "slots")
                steps[f"grouped slots/{g}"] = (ws, forked(chains, streams[:g], combine(ws, pdl)),
                                               "grouped_decode")
        outs = {}
        timed = {}
        for name, (ws, fn, base) in steps.items():
            row = dict(precision=cs.precision, tokens=T, step=name)
            try:
                ws.poison()
                fn()
                torch.cuda.synchronize()
                outs[name] = ws.y_TD.clone()
                row["diff"] = calc_diff(ws.y_TD.float(), ref)
                row["ok"] = row["diff"] <= TOLERANCE[cs.precision]
                if name != base:
                    row["bitwise_as_arm"] = bool(torch.equal(outs[name].view(torch.int16),
                                                             outs[base].view(torch.int16)))
            except Exception as exc:
                row.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:300]}")
            rows.append(row)
            if row["ok"] and row.get("bitwise_as_arm", True):
                timed[name] = (row, fn)
            else:
                print(row, flush=True)
        names = list(timed)
        us = bench.time_interleaved(CLOCK, [timed[n][1] for n in names], rounds=8, reps=4)
        for n, u in zip(names, us):
            row = timed[n][0]
            base = steps[n][2]
            row["step_us"] = u
            print(f"  {n:28s} {u:8.2f} us" + (f"  ({u / us[names.index(base)] - 1:+.1%} vs {base})"
                                               if n != base and base in names else ""), flush=True)
        with open(f"{out_dir}/streams_ab.json", "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tokens", default="1,2,4,8,16,32,64")
    ap.add_argument("--scenario", default=SCENARIO)
    a = ap.parse_args()
    t0 = time.monotonic()
    main(a.out, [int(v) for v in a.tokens.split(",")], a.scenario)
    print(f"total {time.monotonic() - t0:.0f} s")
