"""Scratch (issue 28, prepared 2026-12-04 in a session without a device; not yet run): the sparse
decode step (fc1, fc2, combine; one CUDA graph, L2 flushed before each replay) with the arm's GEMV
against other launches of the package's GEMV, in either format. MXFP4: the arm's plain K loop loads
the token's words with ``tl.load`` and triton moves them to every warp through shared memory (16
barriers a step in sm_90a SASS); the kinds load them as inline PTX in the layout of their use
(``token_load`` ``words`` or ``quads``: no barrier) or software-pipeline the loop (``num_stages``:
the scale bytes a step ahead, 2 barriers a step). FP8: the arm loads the token's values through a
row-broadcast tile at one token and once a step through shared memory from 2 tokens; ``quads``
loads them once a step as 16-byte quads of inline PTX (344 -> 308 and 290 -> 253 instructions a
step). Each with PDL as the arm has it. gpt-oss-20b-decode-grouped's shapes, several routing draws,
both ranks. Each step is checked (reference gate, sentinels) and compared bit for bit with the
arm's before it is timed; then the steps are interleaved (moebench's clock), and fc1 and fc2 alone.

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/loads_bench.py
[--tokens 1,2,4,8] [--seeds 0,1,2,3] [--rank 0,1] [--precision w4a16]
[--kinds STAGES[:REG[:TOKEN]],...] (each a step with the package's GEMV: STAGES ``num_stages``, 0
the plain loop; REG ``max_registers``, 0 none, - or left out the launcher's choice for the token
count (MXFP4 80 from 4 tokens); TOKEN ``token_load``, broadcast when left out; named sSTAGES,
rREG and the token load's first letter)
"""

from __future__ import annotations

import argparse
import functools
import time

import torch
from bench_grouped_decode import COPY_TBS, SCENARIO, checked

from arms.decode import pipeline
from moebench.arm import registry
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.routing.synthetic import local_counts
from moebench.spec.load import load_scenario, scenario_with

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def stages_with(ws: Workspace, gemv) -> tuple[Stage, ...]:
    """The arm's step (arms/decode/pipeline.py) with ``gemv`` for the package's GEMV."""
    p = ws.problem
    off, pdl = p.expert_offset, pipeline.PDL.get(p.precision, False)

    def fc1():
        gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a, expert_offset=off,
             glu=p.activation, pdl=pdl)  # fmt: skip

    def fc2():
        gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, expert_offset=off, pdl=pdl)

    def comb():
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=pdl)  # fmt: skip

    return tuple(Stage(name=n, run=f) for n, f in (("fc1", fc1), ("fc2", fc2), ("combine", comb)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,2,4,8")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--rank", default="0,1")
    ap.add_argument("--scenario", default=SCENARIO)
    ap.add_argument("--precision", default="w4a16")
    ap.add_argument("--kinds", default="0:0:quads,0:-:words,3:0,2:80,3:0:quads")
    a = ap.parse_args()
    toks = {int(v) for v in a.tokens.split(",")}
    clock = Clock(dev)
    arm = registry.resolve("sparse_decode")
    print(torch.__version__, torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu")
    results: dict = {}
    for seed in [int(v) for v in a.seeds.split(",")]:
        s = scenario_with(load_scenario(a.scenario), **{"routing.seed": seed})
        for rank in [int(v) for v in a.rank.split(",")]:
            for pl in sorted(plan(s), key=lambda p: -p.case.scenario.shape.tokens_per_rank):
                cs = pl.case.scenario
                T = cs.shape.tokens_per_rank
                if T not in toks or cs.precision != a.precision:
                    continue
                x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
                prob = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, x, rank, dev)
                ref = decode_reference_output(prob)
                counts = local_counts(prob.topk_ids_TK.cpu(), prob.expert_offset,
                                      prob.local_experts)  # fmt: skip
                wbytes = pipeline.weight_bytes(prob, layout="TKD")["ffn"]
                builds = [("arm", arm.build)]
                for item in filter(None, a.kinds.split(",")):
                    parts = item.split(":")
                    st, reg, token = parts + ["-", "broadcast"][len(parts) - 1 :]
                    opts = {"num_stages": int(st) or None, "token_load": token}
                    if reg != "-":
                        opts["max_registers"] = int(reg)
                    name = f"s{st}r{reg}{token[0]}"
                    gemv = functools.partial(sparse_gemv, **opts)
                    builds.append((name, functools.partial(stages_with, gemv=gemv)))
                steps = {}
                for name, build in builds:
                    ws = Workspace(prob, layout="TKD")
                    steps[name] = (ws, build(ws))
                rows = {n: checked(ws, st, ref, cs.precision) for n, (ws, st) in steps.items()}
                base = steps["arm"][0].y_TD
                for n, (ws, _) in steps.items():
                    rows[n]["bitwise"] = bool(torch.equal(ws.y_TD, base))
                head = (f"{cs.precision} T={T} seed={seed} rank={rank} "
                        f"slots={int(counts.sum())} touched={int((counts > 0).sum())}")  # fmt: skip
                if dev.type != "cuda":
                    print(head, rows, flush=True)
                    continue
                # Every kind keeps the products and their order: only bitwise steps are timed.
                good = [n for n in steps if rows[n]["ok"] and rows[n]["bitwise"]]
                us = bench.time_interleaved(
                    clock, [lambda st=steps[n][1]: [x_.run() for x_ in st] for n in good],
                    rounds=8, reps=4)  # fmt: skip
                alone = bench.time_interleaved(
                    clock, [f for n in good for f in (steps[n][1][0].run, steps[n][1][1].run)],
                    rounds=4)  # fmt: skip
                for i, (n, u) in enumerate(zip(good, us, strict=True)):
                    rows[n].update(step_us=u, fc1_us=alone[2 * i], fc2_us=alone[2 * i + 1])
                    results.setdefault((cs.precision, T, n), {}).setdefault(seed, {})[rank] = u
                for n, r in rows.items():
                    extra = ""
                    if "step_us" in r and "step_us" in rows["arm"]:
                        u = r["step_us"]
                        of_copy = wbytes / u / 1e6 / COPY_TBS
                        vs_arm = 100 * (u / rows["arm"]["step_us"] - 1)
                        extra = (f" step_us={u:.2f} fc1_us={r['fc1_us']:.2f} "
                                 f"fc2_us={r['fc2_us']:.2f} of_copy={of_copy:.3f}"
                                 f" vs_arm={vs_arm:+.1f}%")  # fmt: skip
                    print(f"{head} {n}: ok={r['ok']} bitwise={r['bitwise']} diff={r['diff']:.3g}"
                          f"{extra}", flush=True)  # fmt: skip
    print("\nslowest rank per draw (us), mean:")
    for key in sorted(results):
        worst = [max(v.values()) for v in results[key].values() if len(v) > 1]
        if worst:
            print(f"  {key[0]} {key[1]:2d} {key[2]}: " + " ".join(f"{w:.2f}" for w in worst)
                  + f"  mean {sum(worst) / len(worst):.2f}")  # fmt: skip


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"total {time.monotonic() - t0:.0f} s")
