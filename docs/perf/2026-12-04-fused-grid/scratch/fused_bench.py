"""Scratch (issue 28, 2026-12-04): the grouped decode's step as the arm builds it (fc1, fc2,
combine: two tile launches) against fc1 and fc2 in one ticketed launch (`fused_tile.FusedStep`)
and the same combine, at the token counts where the arm runs the one-pass tile (16, 32, 64).
Each step is run once on a poisoned workspace and checked (the reference gate and the sentinels,
as tools/bench_grouped_decode.py) and the fused step's output compared bit for bit with the arm's;
then the steps are timed interleaved (moebench's clock: one CUDA graph a step, L2 flushed before
each replay), and the fused step replayed 200 more times and checked bitwise again (a missed wait
would show as a changed output).

Usage (GPU, from the repository root): PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/fused_bench.py
[--tokens 16,32,64] [--seeds 0,1] [--rank 0,1] [--precisions w8a16,w4a16]
"""

from __future__ import annotations

import argparse
import time

import torch

from arms.decode import grouped_decode
from bench_grouped_decode import SCENARIO, checked, COPY_TBS
from fused_tile import FusedStep, FusedStep1
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.routing.synthetic import local_counts
from moebench.spec.load import load_scenario, scenario_with

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def fused_stages(prob, ws, fc1, pdl, regs=None, one=False):
    s13, max13 = grouped_decode.tiles_scales(prob.w13, prob.w13_scale, fc1)
    s2, max2 = grouped_decode.tiles_scales(prob.w2, prob.w2_scale, fc1)
    cls = FusedStep1 if one else FusedStep
    step = cls(prob, ws, fc1, s13, max13, s2, max2, pdl=pdl, max_registers=regs)

    def run_combine():
        combine_topk(ws.o, prob.topk_ids_TK, prob.topk_weights_TK, ws.y_TD,
                     expert_offset=prob.expert_offset, local_experts=prob.local_experts,
                     layout=ws.layout, pdl=pdl)  # fmt: skip

    STEPS.append(step)
    return (Stage(name="fc1+fc2", run=step.run), Stage(name="combine", run=run_combine))


STEPS = []


def registers(step) -> str:
    k = getattr(step, "kernel", None)
    if k is None:
        return "-"
    return f"regs={getattr(k, 'n_regs', '?')} spills={getattr(k, 'n_spills', '?')}"



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="16,32,64")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--rank", default="0")
    ap.add_argument("--precisions", default="w8a16,w4a16")
    ap.add_argument("--scenario", default=SCENARIO)
    ap.add_argument("--kinds", default="one-pdl,pdl")
    a = ap.parse_args()
    toks = {int(v) for v in a.tokens.split(",")}
    precs = set(a.precisions.split(","))
    clock = Clock(dev)
    print(torch.__version__, torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu")
    results = {}
    for seed in [int(v) for v in a.seeds.split(",")]:
        s = scenario_with(load_scenario(a.scenario), **{"routing.seed": seed})
        for rank in [int(v) for v in a.rank.split(",")]:
            for pl in sorted(plan(s), key=lambda p: -p.case.scenario.shape.tokens_per_rank):
                cs = pl.case.scenario
                T = cs.shape.tokens_per_rank
                if T not in toks or cs.precision not in precs:
                    continue
                x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
                prob = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, x, rank, dev)
                ref = decode_reference_output(prob)
                counts = local_counts(prob.topk_ids_TK.cpu(), prob.expert_offset,
                                      prob.local_experts)  # fmt: skip
                fc1, _ = grouped_decode.launches(prob)
                if not fc1.pass_grid:
                    print(f"{cs.precision} {T}: the arm's launch is not the one-pass tile; skipped")
                    continue
                wbytes = grouped_decode.ARM.weight_bytes(prob)["ffn"]
                steps = {}
                ws0 = Workspace(prob, layout="TKD")
                steps["arm"] = (ws0, grouped_decode.build_stages(ws0))
                for kind in a.kinds.split(","):
                    ws = Workspace(prob, layout="TKD")
                    # kinds: [one-]pdl|nopdl[-rNN]: the second form (one body), PDL, a register cap
                    one = kind.startswith("one-")
                    base, _, regs = kind.removeprefix("one-").partition("-r")
                    st = fused_stages(prob, ws, fc1, base == "pdl", int(regs) if regs else None, one)
                    steps[f"fused {kind}"] = (ws, st)
                rows = {}
                for name, (ws, st) in steps.items():
                    rows[name] = checked(ws, st, ref, cs.precision)
                print(" ".join(registers(st) for st in STEPS), flush=True)
                del STEPS[:]
                base = steps["arm"][0].y_TD.clone()
                for name, (ws, st) in steps.items():
                    rows[name]["bitwise"] = bool(torch.equal(ws.y_TD, base))
                head = (f"{cs.precision} T={T} seed={seed} rank={rank} slots={int(counts.sum())} "
                        f"touched={int((counts > 0).sum())}")  # fmt: skip
                if dev.type != "cuda":
                    for name, r in rows.items():
                        print(head, name, r)
                    continue
                good = [n for n in steps if rows[n]["ok"] and rows[n]["bitwise"]]
                us = bench.time_interleaved(
                    clock, [lambda st=steps[n][1]: [x.run() for x in st] for n in good],
                    rounds=8, reps=4)  # fmt: skip
                for n, u in zip(good, us):
                    rows[n]["step_us"] = u
                # Many more replays of each fused step: still bitwise the arm's.
                for n in good:
                    if n == "arm":
                        continue
                    ws, st = steps[n]
                    for _ in range(200):
                        for x_ in st:
                            x_.run()
                    rows[n]["bitwise_after_200"] = bool(torch.equal(ws.y_TD, base))
                torch.cuda.synchronize()
                for n, r in rows.items():
                    u = r.get("step_us")
                    extra = ""
                    if u:
                        extra = (f" step_us={u:.2f} of_copy={wbytes / u / 1e6 / COPY_TBS:.3f}"
                                 f" vs_arm={100 * (u / rows['arm']['step_us'] - 1):+.1f}%")
                    print(f"{head} {n}: ok={r['ok']} bitwise={r['bitwise']} "
                          f"after200={r.get('bitwise_after_200', '-')} diff={r['diff']:.3g}{extra}",
                          flush=True)  # fmt: skip
                    if u:
                        results.setdefault((cs.precision, T, n), {}).setdefault(seed, {})[rank] = u
    print("\nslowest rank per draw, mean:")
    for key in sorted(results):
        by = results[key]
        worst = [max(v.values()) for v in by.values()]
        print(f"  {key[0]} {key[1]:2d} {key[2]}: " + " ".join(f"{w:.1f}" for w in worst)
              + f"  mean {sum(worst) / len(worst):.1f}")


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"total {time.monotonic() - t0:.0f} s")
