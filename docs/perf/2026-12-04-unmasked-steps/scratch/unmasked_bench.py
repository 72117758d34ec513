"""Scratch (issue 28, 2026-12-04, fifteenth session): the sparse decode step (fc1, fc2, combine;
one CUDA graph, L2 flushed before each replay) with the arm's GEMV, whose whole K steps are
unmasked and whose step past R is masked after them, against `masked_gemv.py` (the same GEMV as of
79c9d34, every step masked), at the arm's blocks and launch options, gpt-oss-20b-decode-grouped's
shapes, several routing draws and both ranks. Each step checked (reference gate, sentinels) and
compared bit for bit with the arm's before it is timed; then the two steps interleaved (moebench's
clock), and fc1 and fc2 alone.

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/unmasked_bench.py
[--tokens 1,2,4,8,16] [--seeds 0,1,2,3,4,5] [--rank 0,1] [--precision w8a16]
[--kinds BN:BK[:W[:REG[:EARLY]]],...] (more steps: the package's GEMV at those blocks, named
nBNkBKwW or, with REG, nBNkBKwWrREGeEARLY; W 0 or 1 the FP8 ``whole_steps``, - or left out: the
launcher's choice; REG ``max_registers``, 0 none; EARLY ``early_loads``, 1 unless told)
[--loose] (time the kinds whose output is within the reference tolerance but not bitwise the
arm's)
"""

from __future__ import annotations

import argparse
import functools
import time

import torch
from bench_grouped_decode import COPY_TBS, SCENARIO, checked
from masked_gemv import sparse_gemv as masked_gemv

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


def masked_stages(ws: Workspace, gemv=masked_gemv) -> tuple[Stage, ...]:
    """The arm's step (arms/decode/pipeline.py) with ``gemv`` (`masked_gemv.py`'s GEMV)."""
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
    ap.add_argument("--tokens", default="1,2,4,8,16")
    ap.add_argument("--seeds", default="0,1,2,3,4,5")
    ap.add_argument("--rank", default="0,1")
    ap.add_argument("--scenario", default=SCENARIO)
    ap.add_argument("--precision", default="w8a16")
    ap.add_argument("--kinds", default="")
    ap.add_argument("--loose", action="store_true")
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
                steps = {}
                builds = [("arm", arm.build), ("masked", masked_stages)]
                for item in filter(None, a.kinds.split(",")):
                    bn, bk, *more = item.split(":")
                    wh, reg, early = (more + ["-", "0", "1"][len(more) :])[:3]
                    gemv = functools.partial(
                        sparse_gemv, block_n=int(bn), block_k=int(bk),
                        whole_steps=None if wh == "-" else bool(int(wh)),
                        max_registers=int(reg), early_loads=bool(int(early)))  # fmt: skip
                    name = f"n{bn}k{bk}w{wh}" + (f"r{reg}e{early}" if more[1:] else "")
                    builds.append((name, functools.partial(masked_stages, gemv=gemv)))
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
                # The arm and the masked GEMV must agree bit for bit; other blocks sum a row's
                # lanes in another order, so with --loose they are timed within the tolerance.
                good = [n for n in steps if rows[n]["ok"] and (rows[n]["bitwise"] or a.loose)]
                us = bench.time_interleaved(
                    clock, [lambda st=steps[n][1]: [x_.run() for x_ in st] for n in good],
                    rounds=8, reps=4)  # fmt: skip
                alone = bench.time_interleaved(
                    clock, [f for n in good for f in (steps[n][1][0].run, steps[n][1][1].run)],
                    rounds=4)  # fmt: skip
                for i, (n, u) in enumerate(zip(good, us, strict=True)):
                    r = rows[n]
                    r.update(step_us=u, fc1_us=alone[2 * i], fc2_us=alone[2 * i + 1])
                    results.setdefault((cs.precision, T, n), {}).setdefault(seed, {})[rank] = u
                for n, r in rows.items():
                    extra = ""
                    if "step_us" in r:
                        u = r["step_us"]
                        extra = (
                            f" step_us={u:.2f} fc1_us={r['fc1_us']:.2f} "
                            f"fc2_us={r['fc2_us']:.2f} of_copy={wbytes / u / 1e6 / COPY_TBS:.3f}"
                            f" vs_masked={100 * (u / rows['masked']['step_us'] - 1):+.1f}%"
                            if "step_us" in rows["masked"]
                            else ""
                        )
                    print(f"{head} {n}: ok={r['ok']} bitwise={r['bitwise']} diff={r['diff']:.3g}"
                          f"{extra}", flush=True)  # fmt: skip
    print("\nslowest rank per draw (us), mean:")
    for key in sorted(results):
        worst = [max(v.values()) for v in results[key].values() if len(v) > 1]
        if worst:
            print(
                f"  {key[0]} {key[1]:2d} {key[2]}: "
                + " ".join(f"{w:.2f}" for w in worst)
                + f"  mean {sum(worst) / len(worst):.2f}"
            )


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"total {time.monotonic() - t0:.0f} s")
