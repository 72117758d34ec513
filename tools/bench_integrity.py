"""What each integrity defence does to a timed figure: one arm's ffn graph on rank 0 of a
scenario, timed with the run's ``Clock`` and each defence of docs/DESIGN.md section 15 switched on
alone, then all together, so that a shift in a scenario's figures can be put on its cause.

Variants (interleaved in rotating rounds, as tools/bench_kernels.py times its variants):
  plain        the graph replayed, the clock's spin before each sample, no reset, nothing between
  flush        L2 flushed (a buffer written) before each sample, as the kernel regime does: what
               a cold L2 costs, beside which the others can be read
  reset_l2     cudaCtxResetPersistingL2Cache before each sample (what ``Clock.sample_us`` does)
  load         an input set loaded before each sample: another set's tokens, rows permuted
  check        each sample's output held to its reference after it, the verdicts read after the
               round's samples (what the run does after an arm's turn)
  fingerprint  every input fingerprinted after each sample (a turn of one sample)
  all          load, reset_l2, check and fingerprint together (the run's ffn samples)
  idle         the host idle for IDLE_S before each sample, the device with nothing to do (what
               a slow host between samples does to the clocks)
  idle_spin    idle, then a spin of SPIN_LONG cycles queued before the sample's own spin
  idle_busy    idle, then BUSY passes of memory traffic (the L2 flush buffer written) first

The variants timed are all of them, or those named (comma-separated) after ARM.

Each variant's output is checked against the reference of the inputs it ran on before any time
counts. Usage (GPU): PYTHONPATH=$PWD python3 tools/bench_integrity.py OUT [SCENARIO] [ARM]
(default scenarios/v4-flash-ep8.yaml and prefix_sum_masked; writes OUT/bench_integrity.json).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

from moebench.arm import assemble, registry
from moebench.arm.base import run_all
from moebench.gates.checks import check_reference, reference_pending
from moebench.gates.families import family_of
from moebench.gates.fresh import fresh_inputs
from moebench.gates.integrity import InputGuard, fingerprint
from moebench.measure.bench import warm
from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order
from moebench.plan.cases import plan
from moebench.run.simulated_ranks import SimulatedRanks
from moebench.spec.load import load_scenario

VARIANTS = (
    "plain",
    "flush",
    "reset_l2",
    "load",
    "check",
    "fingerprint",
    "all",
    "idle",
    "idle_spin",
    "idle_busy",
)
IDLE_S, SPIN_LONG, BUSY = 0.005, 2_000_000, 16  # 5 ms; about 1 ms at 2 GHz; about 1 ms of writes
ROUNDS, REPS, SETS = 10, 8, 4


def main(out: str, scenario: str, arm_name: str, variants: tuple[str, ...] = VARIANTS) -> None:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    s = load_scenario(scenario)
    (p, *_) = plan(s)
    clock = Clock(dev)
    problem, _ = SimulatedRanks(dev, clock).layer_inputs(p, p.ranks[0])
    family = family_of(s)
    arm = registry.resolve(arm_name, Path(scenario).parent)
    ws = family.workspace(arm, problem)
    stages = assemble.build(arm, ws)
    ws.poison()
    run_all(stages)
    guard = InputGuard(problem)
    for i in range(1, SETS):
        values, _ = fresh_inputs(problem, experts=s.model.experts, seed=s.routing.seed + 100 + i,
                                 keep_counts=True)  # fmt: skip
        guard.add_set(values)
    refs = []
    for i in range(SETS):
        guard.load(i)
        refs.append(family.reference(problem))
    guard.load(0)
    graph = clock.capture(lambda: run_all(stages))
    if dev.type == "cuda":
        warm([graph])
    reset = clock._reset_l2
    T = problem.topk_ids_TK.shape[0]
    order = torch.Generator().manual_seed(7)
    counter = [0]

    def before(v: str):
        if v.startswith("idle"):
            time.sleep(IDLE_S)
            if v == "idle_spin":
                torch.cuda._sleep(SPIN_LONG)
            elif v == "idle_busy":
                for _ in range(BUSY):
                    clock._flush.zero_()
        if v in ("load", "all"):
            k = counter[0] = counter[0] + 1
            rows = torch.randperm(T, generator=order)
            guard.load(k % SETS, rows)
            return k % SETS, rows
        return 0, None

    verdicts: list = []  # the run's checks: queued after each sample, read after the turn

    def after(v: str, loaded) -> None:
        if v in ("check", "all"):
            i, rows = loaded
            ref = refs[i] if rows is None else refs[i][rows.to(refs[i].device)]
            verdicts.append(reference_pending(ws.y_TD, ref, problem.precision))
        if v in ("fingerprint", "all"):
            for t in guard.tensors.values():
                fingerprint(t)

    times: dict[str, list[float]] = {v: [] for v in variants}
    wall: dict[str, float] = dict.fromkeys(variants, 0.0)  # host seconds a variant's samples took
    for v in variants:  # correctness first: each variant's output against its inputs' reference
        loaded = before(v)
        graph()
        clock.synchronize()
        i, rows = loaded
        ref = refs[i] if rows is None else refs[i][rows.to(refs[i].device)]
        c = check_reference(ws.y_TD, ref, problem.precision)
        if c.status != "pass":
            raise SystemExit(f"{v}: output wrong before timing: {c.detail}")
        guard.load(0)
    for r in range(ROUNDS):
        for v in block_order(list(variants), r):
            t0 = time.perf_counter()
            for _ in range(REPS):
                loaded = before(v)
                clock._reset_l2 = reset if v in ("reset_l2", "all") else None
                times[v].append(clock.sample_us(graph, flush_l2=v == "flush"))
                after(v, loaded)
            for verdict in verdicts:
                c = verdict()
                if c.status != "pass":
                    raise SystemExit(f"{v}: a timed output is wrong: {c.detail}")
            verdicts.clear()
            wall[v] += time.perf_counter() - t0
            guard.load(0)
    clock._reset_l2 = reset
    result = {v: statistics.median(t) for v, t in times.items()}
    for v in variants:
        per = wall[v] / len(times[v]) * 1e6
        print(
            f"{v:12s} median {result[v]:9.2f} us  (+{result[v] - result[variants[0]]:.2f})  "
            f"host {per:9.1f} us a sample"
        )
    print(f"persisting-L2 reset available: {reset is not None}")
    Path(out).mkdir(parents=True, exist_ok=True)
    doc = {"scenario": scenario, "arm": arm_name, "rank": p.ranks[0], "rounds": ROUNDS,
           "reps": REPS, "sets": SETS, "median_us": result, "samples_us": times,
           "host_us_per_sample": {v: wall[v] / len(times[v]) * 1e6 for v in variants},
           "reset_available": reset is not None}  # fmt: skip
    (Path(out) / "bench_integrity.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1] if len(args) > 1 else "scenarios/v4-flash-ep8.yaml",
         args[2] if len(args) > 2 else "prefix_sum_masked",
         tuple(args[3].split(",")) if len(args) > 3 else VARIANTS)  # fmt: skip
