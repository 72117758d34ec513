"""Scratch A/B (issue 28): the MXFP4 tile's decode with the scales folded (one multiply a pair of
values, `grouped_dot` FOLD_SCALES) against the two-multiply decode, the step of fc1, fc2 and the
combine as one graph, at the arm's own launches and padded scales. Outputs compared bitwise.

Usage (GPU): PYTHONPATH=$PWD python3 docs/perf/2026-12-03-mx-fold/scratch/fold_ab.py
[--tokens 4,8,16,32,64] [--scenario S]
"""

from __future__ import annotations

import argparse

import torch

from arms.decode import grouped_decode
from moebench.arm.decode import Workspace
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.grouped_gemv import grouped_gemv
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.spec.load import load_scenario

dev = torch.device("cuda")
CLOCK = Clock(dev)


def step(ws, fold: bool):
    p = ws.problem
    l1, l2 = grouped_decode.launches(p)
    (s13, m13), (s2, m2) = (grouped_decode.tiles_scales(p.w13, p.w13_scale, l1),
                            grouped_decode.tiles_scales(p.w2, p.w2_scale, l2))
    m13, m2 = (m13, m2) if fold else (None, None)
    off = p.expert_offset

    def run():
        grouped_gemv(p.x_TD, p.topk_ids_TK, p.w13, s13, p.b13_E2F, ws.a, expert_offset=off,
                     launch=l1, glu=p.activation, max_scale_byte=m13)
        grouped_gemv(ws.a, p.topk_ids_TK, p.w2, s2, p.b2_ED, ws.o, expert_offset=off, launch=l2,
                     max_scale_byte=m2)
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=l2.pdl)

    return run, (l1, l2), (m13, m2)


def main(tokens, scenario):
    s = load_scenario(scenario)
    for pc in sorted(plan(s), key=lambda q: -q.case.scenario.shape.tokens_per_rank):
        cs = pc.case.scenario
        T = cs.shape.tokens_per_rank
        if T not in tokens or cs.precision != "w4a16":
            continue
        x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
        prob = family_of(cs).problem(cs, pc.routing, pc.capacity_rows, x, 0, dev)
        ref = decode_reference_output(prob)
        runs, outs = [], []
        for fold in (False, True):
            ws = Workspace(prob, layout="TKD")
            run, launches, largest = step(ws, fold)
            ws.poison()
            run()
            torch.cuda.synchronize()
            outs.append(ws.y_TD.clone())
            runs.append(run)
            print(f"{cs.precision} T={T} fold={fold} largest_scale_byte={largest} "
                  f"path={launches[0].path} passes={launches[0].pass_grid} "
                  f"diff={calc_diff(ws.y_TD.float(), ref):.3e} "
                  f"ok={calc_diff(ws.y_TD.float(), ref) <= TOLERANCE[cs.precision]}", flush=True)
        same = torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
        us = bench.time_interleaved(CLOCK, runs, rounds=8, reps=4) if same else [float("nan")] * 2
        print(f"  T={T}: two multiplies {us[0]:.2f} us, folded {us[1]:.2f} us, "
              f"{us[1] / us[0] - 1:+.1%}, bitwise equal: {same}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="4,8,16,32,64")
    ap.add_argument("--scenario", default="scenarios/gpt-oss-20b-decode-grouped.yaml")
    a = ap.parse_args()
    main([int(v) for v in a.tokens.split(",")], a.scenario)
