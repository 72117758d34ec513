"""The sparse decode step A/B on the GPU: the `sparse_decode` arm's step (fc1, fc2, combine; one
CUDA graph, L2 flushed before each replay) against the same step with other launches of the
package's GEMV (`steps_with`; or the `grouped_decode` arm's step against other launches of its
own, `main`'s ``arm_name``), at a scenario's shapes, over several routing draws and both ranks.
Each step is checked (reference gate, sentinels) and compared bit for bit with the arm's before it
is timed; only bitwise steps are timed (a kind that changes the fp32 summation order is compared
by `--loose` elsewhere), interleaved by moebench's clock, then fc1 and fc2 alone. Prints a line a
(draw, rank, count, kind) and, at the end, each kind's slowest rank per draw and their mean.

A session's scratch bench names its kinds and calls `main` (e.g.
docs/perf/2026-12-04-token-loads/scratch/loads_bench.py); on the CPU (interpreter) it checks and
compares the steps and times nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from bench_grouped_decode import COPY_TBS, SCENARIO, checked

from arms.decode import pipeline
from moebench.arm import registry
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.routing.synthetic import local_counts
from moebench.spec.load import load_scenario, scenario_with

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

Build = Callable[[Workspace], tuple[Stage, ...]]


def steps_with(ws: Workspace, gemv) -> tuple[Stage, ...]:
    """The arm's step (arms/decode/pipeline.py) with ``gemv`` for the package's GEMV, called with
    the arm's arguments: its weights (MXFP4's rotated copy with ``mx_rotated``), its token load
    and its dependent launch for the precision and count (`pipeline.build_stages`'s ``gemv``).
    Until 2026-12-06 this wrote its own calls, which had drifted from the arm's: natural MXFP4
    weights and the broadcast token load at every count, so a kind built on it was timed against
    other launches than the arm's wherever those defaults apply (MXFP4 at every count, FP8 from 2
    tokens; docs/perf/HISTORY.md, twenty-fifth session)."""
    return pipeline.build_stages(ws, gemv=gemv)


def parser(tokens: str, seeds: str, precision: str, kinds: str) -> argparse.ArgumentParser:
    """The options every A/B takes, with a bench's defaults."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default=tokens)
    ap.add_argument("--seeds", default=seeds)
    ap.add_argument("--rank", default="0,1")
    ap.add_argument("--scenario", default=SCENARIO)
    ap.add_argument("--precision", default=precision)
    ap.add_argument("--kinds", default=kinds)
    return ap


def main(
    a: argparse.Namespace,
    builds: list[tuple[str, Build]],
    arm_name: str = "sparse_decode",
    loose: bool = False,
) -> list[tuple[str, dict]]:
    """The A/B of arm ``arm_name``'s step (a decode arm on the sparse arm's one-row-a-slot
    workspace: `sparse_decode` or `grouped_decode`) against ``builds`` (name, stages of a
    workspace) over ``a``'s draws, ranks and token counts (`parser`); returns each cell's head
    line and its rows (per kind: the check, ``bitwise``, and on the GPU the times). ``loose``:
    a kind that passes the checks is timed even where it is not bitwise the arm's (its line says
    ``bitwise=False``)."""
    toks = {int(v) for v in a.tokens.split(",")}
    clock = Clock(dev)
    arm = registry.resolve(arm_name)
    print(torch.__version__, torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu")
    results: dict = {}
    cells: list[tuple[str, dict]] = []
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
                for name, build in [("arm", arm.build), *builds]:
                    ws = Workspace(prob, layout="TKD")
                    steps[name] = (ws, build(ws))
                rows = {n: checked(ws, st, ref, cs.precision) for n, (ws, st) in steps.items()}
                base = steps["arm"][0].y_TD
                for n, (ws, _) in steps.items():
                    rows[n]["bitwise"] = bool(torch.equal(ws.y_TD, base))
                head = (f"{cs.precision} T={T} seed={seed} rank={rank} "
                        f"slots={int(counts.sum())} touched={int((counts > 0).sum())}")  # fmt: skip
                cells.append((head, rows))
                if dev.type != "cuda":
                    print(head, rows, flush=True)
                    continue
                good = [n for n in steps if rows[n]["ok"] and (rows[n]["bitwise"] or loose)]
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
    return cells
