"""The case loop: plan every case, build inputs, run the gates, time the arms, write a part.

Order of work per case and rank: inputs -> reference -> each arm once on poisoned buffers (gates)
-> cross-arm gates -> warm-up -> blocks of samples with the arms in rotating order -> a last check
that timing replays produced the gated output -> one Parquet part per table for the case.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from arms import ARMS
from arms.pipeline import Workspace, run_all
from moebench import checks as gates
from moebench import provenance, routing
from moebench.errors import MoebenchError, ScenarioError
from moebench.inputs import build_problem, make_tokens, make_weights, reference_output
from moebench.layout import align_up, capacity_rows
from moebench.results import AA_SUFFIX, RunWriter, aa_twin, new_run_id
from moebench.scenario import Case, Scenario, expand, global_tokens, local_experts, to_dict
from moebench.timing import Clock


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    results_dir: Path = Path("results")
    resume: Path | None = None
    allow_mismatch: bool = False
    allow_source_drift: bool = False
    command: str = ""
    aa: bool = False  # A/A control, as measure.aa
    # topology.mode distributed (moebench.dist_runner): collective timeout, seconds.
    dist_timeout_s: float = 300.0


@dataclass(frozen=True, kw_only=True)
class PlannedCase:
    case: Case
    routing: routing.Routing
    capacity_rows: int
    ranks: tuple[int, ...]


@dataclass(kw_only=True)
class RunSummary:
    run_dir: Path
    run_id: str
    cases_run: int = 0
    cases_skipped: int = 0
    mismatches: list[str] = field(default_factory=list)
    status: str = "complete"


class Progress:
    """What the runner tells its caller; the CLI renders it with rich. Silent by default."""

    def start(self, total: int) -> None: ...

    def step(self, label: str) -> None: ...


# --------------------------------------------------------------------------- planning


def arm_provenance(names: tuple[str, ...]) -> dict[str, dict]:
    out = {}
    for name in names:
        arm = ARMS[name]
        files = provenance.source_hashes(arm.SOURCES)
        out[name] = {
            "hash": provenance.combined_hash(files), "files": files, "kernels": list(arm.KERNELS)
        }
    return out


def arm_names(s: Scenario, options: RunOptions) -> tuple[str, ...]:
    """The arms a run gates and times: the scenario's, then for the A/A control a second copy of
    the baseline, ``<baseline>~aa`` (same code, its own workspace, same inputs)."""
    aa = options.aa or s.measure.aa
    return (*s.arms, s.measure.baseline + AA_SUFFIX) if aa else s.arms


def arm_module(name: str):
    return ARMS[aa_twin(name) or name]


def select_device(s: Scenario) -> torch.device:
    want = s.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda" and not torch.cuda.is_available():
        raise ScenarioError(f"{s.path or s.name}: device: cuda requested but no GPU is visible")
    if want == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise MoebenchError(
            "CPU runs need TRITON_INTERPRET=1 in the environment before start "
            "(the moebench command sets it when no GPU is visible)"
        )
    return torch.device(want)


def plan_case(case: Case) -> PlannedCase:
    """Build the case's routing and capacity on the host; any impossibility is a ScenarioError."""
    s = case.scenario
    where = f"{s.path or s.name}: case {case.case_id}"
    E_loc = local_experts(s)
    ep = s.topology.ep
    r = s.routing
    try:
        rt = routing.synthesize(
            family=r.family, tokens=global_tokens(s), experts=s.model.experts,
            top_k=s.model.top_k, ep=ep, seed=r.seed, alpha=r.alpha, hot_rank=r.hot_rank,
            hot_fraction=r.hot_fraction, empty_fraction=r.empty_fraction,
            alignment=s.shape.alignment, trace_path=r.path, trace_layer=r.layer,
        )
    except ValueError as exc:
        raise ScenarioError(f"{where}: routing.family: {exc}") from None
    A = s.shape.alignment
    needed = [
        routing.rows_needed(routing.local_counts(rt.topk_ids_TK, rank * E_loc, E_loc), A)
        for rank in range(ep)
    ]
    cap = s.shape.capacity
    if cap == "formula":
        rows = capacity_rows(s.shape.tokens_per_rank, ep, s.model.top_k, E_loc, A)
    elif cap == "tight":
        rows = max(align_up(max(needed), A), A)
    else:
        rows = int(cap)
    worst = max(range(ep), key=lambda k: needed[k])
    if needed[worst] > rows:
        raise ScenarioError(
            f"{where}: shape.capacity: rank {worst} needs {needed[worst]} rows, capacity is {rows}"
        )
    ranks = tuple(s.measure.ranks) if s.measure.ranks is not None else tuple(range(ep))
    return PlannedCase(case=case, routing=rt, capacity_rows=rows, ranks=ranks)


def plan(s: Scenario) -> list[PlannedCase]:
    unknown = [a for a in s.arms if a not in ARMS]
    if unknown:
        raise ScenarioError(f"{s.path or s.name}: arms: unknown arm {unknown[0]!r}; "
                            f"known: {', '.join(ARMS)}")
    return [plan_case(c) for c in expand(s)]


# --------------------------------------------------------------------------- running


def run(s: Scenario, options: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Run every case of the scenario; raises MoebenchError before any work for bad input."""
    progress = progress or Progress()
    if s.topology.mode == "distributed":  # real ranks: their own loop (moebench/dist_runner.py)
        from moebench import dist_runner

        return dist_runner.run(s, options, progress)
    sources = arm_provenance(s.arms)
    drift = provenance.check_pins(
        s.sources, {a: v["hash"] for a, v in sources.items()},
        allow_drift=options.allow_source_drift,
    )
    planned = plan(s)
    device = select_device(s)
    names = arm_names(s, options)
    aa_arm = names[-1] if len(names) > len(s.arms) else None
    now = dt.datetime.now(dt.UTC)
    if options.resume is not None:
        writer = RunWriter.resume(options.resume)
        if writer.manifest.get("scenario", {}).get("sha256") != s.sha256:
            raise MoebenchError(
                f"{options.resume}: --resume needs the same scenario (sha256 differs)"
            )
        if writer.manifest.get("aa") != aa_arm:
            raise MoebenchError(
                f"{options.resume}: --resume needs the same A/A setting as the run "
                f"(it was started {'with' if writer.manifest.get('aa') else 'without'} --aa)"
            )
    else:
        run_id = new_run_id(s.name, now)
        writer = RunWriter.create(options.results_dir, run_id, {
            "run_id": run_id,
            "scenario": {"name": s.name, "path": s.path, "sha256": s.sha256, "text": s.text,
                         "normalised": to_dict(s)},
            "sources": sources,
            "source_drift": drift,
            "environment": provenance.environment(),
            "command": options.command,
            "started": now.isoformat(),
            "device": device.type,
            "cases": [p.case.case_id for p in planned],
            "aa": aa_arm,
        })
    summary = RunSummary(run_dir=writer.run_dir, run_id=writer.manifest["run_id"])
    done = writer.finished_cases
    todo = [p for p in planned if p.case.case_id not in done]
    summary.cases_skipped = len(planned) - len(todo)
    progress.start(sum(len(p.ranks) * len(names) for p in todo))
    clock = Clock(device)
    try:
        for p in todo:
            samples, check_rows, routing_rows = run_case(
                p, device, clock, writer.manifest["run_id"], options, summary, progress
            )
            writer.write_case(p.case.case_id, samples, check_rows, routing_rows)
            summary.cases_run += 1
    except KeyboardInterrupt:
        summary.status = "interrupted"
        writer.finish("interrupted", resume=f"moebench run {s.path or ''} --resume {writer.run_dir}")
        raise
    except BaseException as exc:
        summary.status = "failed"
        writer.finish("failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                      if str(exc) else type(exc).__name__,
                      resume=f"moebench run {s.path or ''} --resume {writer.run_dir}")
        raise
    summary.status = "mismatch" if summary.mismatches else "complete"
    writer.finish(summary.status, mismatches=summary.mismatches)
    return summary


def _case_columns(p: PlannedCase, run_id: str) -> dict:
    s = p.case.scenario
    return {
        "run_id": run_id, "case_id": p.case.case_id,
        "tokens_per_rank": s.shape.tokens_per_rank, "capacity_rows": p.capacity_rows,
        "local_experts": local_experts(s), "hidden": s.model.hidden,
        "intermediate": s.model.intermediate, "top_k": s.model.top_k,
        "precision": s.precision, "activation": s.activation, "routing": p.routing.label,
        "gemm": "triton", "params": json.dumps(dict(p.case.params), sort_keys=True, default=str),
    }


def run_case(
    p: PlannedCase, device: torch.device, clock: Clock, run_id: str, options: RunOptions,
    summary: RunSummary, progress: Progress,
) -> tuple[list[dict], list[dict], list[dict]]:
    s = p.case.scenario
    E_loc = local_experts(s)
    cols = _case_columns(p, run_id)
    samples: list[dict] = []
    check_rows: list[dict] = []
    routing_rows: list[dict] = []
    x = make_tokens(tokens=global_tokens(s), hidden=s.model.hidden, seed=s.routing.seed,
                    device=device)
    for rank in p.ranks:
        stats = routing.rank_statistics(
            p.routing.topk_ids_TK, rank=rank, ep=s.topology.ep, local_experts=E_loc,
            capacity_rows=p.capacity_rows,
        )
        routing_rows.append({
            "run_id": run_id, "case_id": p.case.case_id, "routing": p.routing.label,
            "tokens_per_rank": s.shape.tokens_per_rank, "trace_sha256": p.routing.trace_sha256,
            **stats,
        })
        w13, w2 = make_weights(
            experts=range(rank * E_loc, (rank + 1) * E_loc), hidden=s.model.hidden,
            intermediate=s.model.intermediate, seed=s.routing.seed, device=device,
        )
        problem = build_problem(
            x_TD=x, topk_ids_TK=p.routing.topk_ids_TK.to(device),
            topk_weights_TK=p.routing.topk_weights_TK.to(device), w13_EFD=w13, w2_EDF=w2,
            expert_offset=rank * E_loc, alignment=s.shape.alignment,
            capacity_rows=p.capacity_rows, precision=s.precision, activation=s.activation,
        )
        del w13, w2
        rank_cols = {**cols, "rank": rank, "live_rows": stats["live_rows"]}
        arm_checks, timed, stage_sets, captures = gate_rank(problem, s, options)
        for arm, rows in arm_checks.items():
            for c in rows:
                check_rows.append({**_check_cols(rank_cols), "arm": arm, "check": c.name,
                                   "status": c.status, "error": c.error, "detail": c.detail})
            if any(c.failed for c in rows):
                summary.mismatches.append(f"{p.case.case_id}/rank{rank}/{arm}")
        samples += time_rank(timed, stage_sets, s, clock, rank_cols, progress)
        for arm in timed:
            ws = stage_sets[arm][0]
            same = gates.bitwise_compare(ws.y_TD, captures[arm].y_TD)
            check_rows.append({**_check_cols(rank_cols), "arm": arm, "check": "post_timing",
                               "status": "pass" if same.equal else "fail", "error": math.nan,
                               "detail": f"output after timing vs gated run: {same.describe()}"})
            if not same.equal:
                summary.mismatches.append(f"{p.case.case_id}/rank{rank}/{arm}/post_timing")
        for arm in arm_names(s, options):
            if arm not in timed:
                progress.step(f"{p.case.case_id} rank {rank} {arm} (not timed: mismatch)")
        del stage_sets, captures, problem
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return samples, check_rows, routing_rows


def _check_cols(rank_cols: dict) -> dict:
    return {k: rank_cols[k] for k in ("run_id", "case_id", "rank")}


def gate_rank(problem, s: Scenario, options: RunOptions):
    """Gates 1-4 for every arm on this rank. Returns checks, the arms to time and their stages."""
    ref = reference_output(problem)
    arm_checks: dict[str, list[gates.Check]] = {}
    stage_sets = {}
    captures = {}
    names = arm_names(s, options)
    for name in names:
        arm = arm_module(name)
        ws = Workspace(problem)
        stages = arm.build(ws)
        ws.poison()
        try:
            run_all(stages)
            if problem.x_TD.is_cuda:
                torch.cuda.synchronize()
        except Exception as exc:  # a kernel that cannot run this case: a row, not a crash
            arm_checks[name] = [gates.Check(name="run", status="error",
                                            detail=f"{type(exc).__name__}: {str(exc)[:300]}")]
            continue
        cap = gates.capture(ws)
        captures[name] = cap
        stage_sets[name] = (ws, stages)
        arm_checks[name] = [
            gates.check_reference(ws.y_TD, ref, problem.precision),
            gates.check_nan_poison(ws.y_TD),
            *gates.check_sentinels(ws, cap, masked_act=arm.MASKED_ACT),
        ]
    if captures:
        base = next(iter(captures))
        for name, rows in gates.check_cross_arm(base, captures).items():
            arm_checks[name] += rows
    timed = [
        n for n in names if n in stage_sets
        and (options.allow_mismatch or not any(c.failed for c in arm_checks[n]))
    ]
    return arm_checks, timed, stage_sets, captures


def time_rank(timed, stage_sets, s: Scenario, clock: Clock, rank_cols: dict, progress: Progress):
    m = s.measure
    samples: list[dict] = []
    if not timed:
        return samples
    use_graph = m.graph and clock.cuda
    for _ in range(m.warmup):
        for arm in timed:
            run_all(stage_sets[arm][1])
    clock.synchronize()
    ffn: dict[str, Callable[[], None]] = {}
    kernel: dict[str, list[tuple[str, Callable[[], None]]]] = {}
    for arm in timed:
        stages = stage_sets[arm][1]
        if "ffn" in m.regimes:
            call = lambda st=stages: run_all(st)
            ffn[arm] = clock.capture(call) if use_graph else call
        if "kernel" in m.regimes:
            # One graph per stage: a stage of several launches is timed on the device, not at the
            # speed the host issues them.
            kernel[arm] = [
                (st.name, clock.capture(st.run) if use_graph else st.run)
                for st in stages if st.name in m.stages
            ]
    device = "cuda" if clock.cuda else "cpu"
    for block in range(m.blocks):
        k = block % len(timed)
        order = timed[k:] + timed[:k]  # ABC, BCA, CAB, ...
        sm, mem = clock.clocks()
        for position, arm in enumerate(order):
            base = {**rank_cols, "arm": arm, "block": block, "position": position,
                    "device": device, "sm_clock_mhz": sm, "mem_clock_mhz": mem}
            if "ffn" in m.regimes:
                for it in range(m.iterations):
                    t = clock.sample_us(ffn[arm])
                    samples.append({**base, "stage": "ffn", "regime": "ffn", "iteration": it,
                                    "time_us": t})
            if "kernel" in m.regimes:
                for name, call in kernel[arm]:
                    for it in range(m.iterations):
                        t = clock.sample_us(call, flush_l2=True)
                        samples.append({**base, "stage": name, "regime": "kernel",
                                        "iteration": it, "time_us": t})
    for arm in timed:
        progress.step(f"{rank_cols['case_id']} rank {rank_cols['rank']} {arm}")
    return samples
