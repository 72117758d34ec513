"""What the combine costs inside the sparse decode step (issue 28's one-token target): the arm's
step (fc1, fc2, combine; one CUDA graph, L2 flushed) against its first two stages alone and its
first alone, interleaved, over routing draws and both ranks; the combine alone beside them. The
arm's step is checked against the reference first. Prints a line a (count, draw, rank) and each
form's slowest rank per draw with their mean: "step - fc1+fc2" is what a combine folded into
fc2's epilogue could save at most.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools python3 DIR/combine_cost.py [--tokens 1,2,4]
[--seeds 0,1,2,3,4,5] [--precision w8a16] [--arm sparse_decode]
"""

from __future__ import annotations

import torch
from bench_grouped_decode import SCENARIO, checked
from sparse_ab import parser

from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.routing.synthetic import local_counts
from moebench.spec.load import load_scenario, scenario_with

FORMS = ("step", "fc1+fc2", "fc1", "combine")


def main() -> None:
    ap = parser("1,2,4", "0,1,2,3,4,5", "w8a16", "")
    ap.add_argument("--arm", default="sparse_decode")
    a = ap.parse_args()
    dev = torch.device("cuda")
    clock = Clock(dev)
    arm = registry.resolve(a.arm)
    print(torch.__version__, torch.cuda.get_device_name(0), a.arm, a.precision)
    worst: dict = {}
    toks = {int(v) for v in a.tokens.split(",")}
    for seed in [int(v) for v in a.seeds.split(",")]:
        s = scenario_with(load_scenario(a.scenario or SCENARIO), **{"routing.seed": seed})
        for rank in [int(v) for v in a.rank.split(",")]:
            for pl in plan(s):
                cs = pl.case.scenario
                T = cs.shape.tokens_per_rank
                if T not in toks or cs.precision != a.precision:
                    continue
                x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
                prob = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, x, rank, dev)
                counts = local_counts(prob.topk_ids_TK.cpu(), prob.expert_offset,
                                      prob.local_experts)  # fmt: skip
                ws = Workspace(prob, layout=arm.layout)
                st = arm.build(ws)
                row = checked(ws, st, decode_reference_output(prob), cs.precision)
                if not row["ok"]:
                    print(f"T={T} seed={seed} rank={rank}: FAILED its check {row}", flush=True)
                    continue
                fns = [lambda st=st: [f.run() for f in st], lambda st=st: [f.run() for f in st[:2]],
                       st[0].run, st[2].run]  # fmt: skip
                us = bench.time_interleaved(clock, fns, rounds=8, reps=4)
                print(f"T={T} seed={seed} rank={rank} slots={int(counts.sum())} "
                      + " ".join(f"{n}={u:.2f}" for n, u in zip(FORMS, us, strict=True))
                      + f" step-(fc1+fc2)={us[0] - us[1]:.2f}", flush=True)  # fmt: skip
                for n, u in zip(FORMS, us, strict=True):
                    cell = worst.setdefault((T, n), {}).setdefault(seed, {})
                    cell[rank] = u
    print("\nthe slower rank's step per draw (each form at that rank), mean:")
    for T in sorted(toks):
        for n in FORMS:
            per = worst.get((T, n), {})
            step = worst.get((T, "step"), {})
            vals = [per[d][max(step[d], key=step[d].get)] for d in per if len(step.get(d, {})) > 1]
            if vals:
                print(f"  T={T:2d} {n:8s}: " + " ".join(f"{v:.2f}" for v in vals)
                      + f"  mean {sum(vals) / len(vals):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
