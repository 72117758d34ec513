"""A timing ablation (wrong outputs on purpose): the grouped FP8 step with fc2's tile skipping its
dependent-launch wait, so fc2's programs stream their weights as soon as they are resident during
fc1's second wave, reading whatever activations are there. What it saves against the arm's step is
the most any finer-grained wait (fc2 per expert as fc1's programs finish it) could save. The arm's
own step is checked against the reference first; the ablated one is not checked (it is wrong).

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools python3 DIR/nowait.py [--tokens 16,32,64] [--seeds 0,1]
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import torch
from bench_grouped_decode import SCENARIO, checked
from sparse_ab import parser

import moebench.kernels.grouped_dot as gd
import moebench.kernels.grouped_gemv as gg
from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.spec.load import load_scenario, scenario_with

FORMS = ("step", "fc2 no wait", "fc1+fc2", "fc1")
WAIT = (
    "    # Only the routing was read so far; x may be the previous kernel's output.\n"
    "    pdl_wait(GDC)\n"
)


def nowait_kernel():
    src = pathlib.Path(gd.__file__).read_text()
    assert src.count(WAIT) == 1
    path = pathlib.Path("/tmp/gd_nowait.py")
    path.write_text(src.replace(WAIT, ""))
    spec = importlib.util.spec_from_file_location("gd_nowait", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gd_nowait"] = mod
    spec.loader.exec_module(mod)
    return mod._grouped_dot_fp8


def main() -> None:
    a = parser("16,32,64", "0,1", "w8a16", "").parse_args()
    dev = torch.device("cuda")
    clock = Clock(dev)
    arm = registry.resolve("grouped_decode")
    fast = nowait_kernel()
    print(torch.__version__, torch.cuda.get_device_name(0), "grouped_decode", a.precision)
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
                ws = Workspace(prob, layout=arm.layout)
                st = arm.build(ws)
                row = checked(ws, st, decode_reference_output(prob), cs.precision)
                if not row["ok"]:
                    print(f"T={T} seed={seed} rank={rank}: FAILED its check {row}", flush=True)
                    continue

                def fc2_fast(st=st):
                    orig = gg._grouped_dot_fp8
                    gg._grouped_dot_fp8 = fast
                    try:
                        st[1].run()
                    finally:
                        gg._grouped_dot_fp8 = orig

                fns = [lambda st=st: [f.run() for f in st],
                       lambda st=st, f2=fc2_fast: (st[0].run(), f2(), st[2].run()),
                       lambda st=st: [f.run() for f in st[:2]], st[0].run]  # fmt: skip
                us = bench.time_interleaved(clock, fns, rounds=8, reps=4)
                print(f"T={T} seed={seed} rank={rank} "
                      + " ".join(f"{n}={u:.2f}" for n, u in zip(FORMS, us, strict=True))
                      + f" saved={us[0] - us[1]:.2f}", flush=True)  # fmt: skip
                for n, u in zip(FORMS, us, strict=True):
                    worst.setdefault((T, n), {}).setdefault(seed, {})[rank] = u
    print("\nthe slower rank's step per draw (each form at that rank), mean:")
    for T in sorted(toks):
        for n in FORMS:
            per, step = worst.get((T, n), {}), worst.get((T, "step"), {})
            vals = [per[d][max(step[d], key=step[d].get)] for d in per if len(step.get(d, {})) > 1]
            if vals:
                print(f"  T={T:2d} {n:12s}: " + " ".join(f"{v:.2f}" for v in vals)
                      + f"  mean {sum(vals) / len(vals):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
