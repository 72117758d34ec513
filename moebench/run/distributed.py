"""A distributed run (``topology.mode: distributed``): this process is one rank of the world
torchrun started (``comm.world``); rank 0 writes.

The run opens, resumes and ends through ``run.lifecycle``, as a simulated run does. Each case
runs the case sequence (``run.case``) with the regime it asks for (one layer, ``run.layer``; a
model step, ``run.step``) on the distributed topology (``run.distributed_rank``): every phase
ends with the ranks agreeing, so an error on one rank stops all of them at the same point and
rank 0 records it in the manifest; rank 0 gathers every rank's rows and writes the case.
"""

from __future__ import annotations

import signal

from moebench.comm import world as distributed
from moebench.comm.world import RankFailure, World, phase
from moebench.core import faults
from moebench.core.errors import ScenarioError
from moebench.measure.clock import Clock
from moebench.plan.cases import arm_names, plan, run_arms, select_device
from moebench.plan.steps import check_memory, plan_step_case, step_manifest
from moebench.results.rows import CaseRows
from moebench.run import lifecycle
from moebench.run.case import CaseContext, run_case
from moebench.run.distributed_rank import DistributedRank
from moebench.run.layer import OneLayer
from moebench.run.options import Progress, RunOptions, RunSummary, resume_command
from moebench.run.step import Step
from moebench.spec.schema import Scenario
from moebench.spec.sweep import expand


def run(s: Scenario, options: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Run every case of the scenario as one rank of the world torchrun started."""
    progress = progress or Progress()
    device_type = select_device(s).type
    world = distributed.init_world(s, device_type, options.dist_timeout_s)
    previous = signal.signal(signal.SIGTERM, _interrupted)  # torchrun stops workers with SIGTERM
    try:
        summary = _run(world, s, options, progress)
    finally:
        signal.signal(signal.SIGTERM, previous)
    # Only after success: a failed rank may leave collectives its peers never matched, and
    # tearing those down can block; the CLI ends such a process at once.
    distributed.shutdown()
    return summary


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def _run(world: World, s: Scenario, options: RunOptions, progress: Progress) -> RunSummary:
    def prepare():
        ranks = s.measure.ranks
        if ranks is not None and sorted(ranks) != list(range(s.topology.ep)):
            raise ScenarioError(f"{s.path or s.name}: measure.ranks: distributed mode runs every "
                                f"rank; leave it out (got {list(ranks)})")  # fmt: skip
        sources, drift = lifecycle.sources_and_pins(s, options)
        if s.step is not None:  # the model step: every case every MoE layer (run.step)
            planned = [plan_step_case(c) for c in expand(s)]
            # This rank's share (its experts of every layer and the exchange) must fit its device.
            check_memory(planned, list(run_arms(s, options.aa).values()), world.device)
            return sources, drift, planned
        return sources, drift, plan(s)

    names = arm_names(s, options.aa)
    sources, drift, planned = phase(world, "while planning the run", prepare)
    extra = {"distributed": {"world_size": world.size, "backend": world.backend,
                             "timeout_s": world.timeout_s, "dp": s.topology.dp,
                             "tp": s.topology.tp, "ep": s.topology.ep}}  # fmt: skip
    if s.step is not None:
        extra["step"] = {**step_manifest(s, planned),
                         "weights": "one set per layer and rank: each rank holds its own experts "
                                    "of every layer"}  # fmt: skip
    writer = phase(world, "opening the results folder", lambda: (
        lifecycle.open_run(s, options, planned, sources, drift, world.device.type, extra)
        if world.leader else None
    ))  # fmt: skip
    summary, done = distributed.broadcast(world, (
        (lifecycle.new_summary(writer, planned), sorted(writer.finished_cases))
        if world.leader else None
    ))  # fmt: skip
    todo = [p for p in planned if p.case.case_id not in done]
    progress.start(len(todo) * (s.step.steps if s.step is not None else len(names)))
    clock = Clock(world.device)
    resume = resume_command(s, options, summary.run_dir, world.size)
    try:
        for p in todo:
            rows = case_rows(world, p, clock, summary.run_id, options, progress)
            phase(world, f"writing case {p.case.case_id}",
                  lambda p=p, rows=rows: writer.write_case(
                      p.case.case_id, rows.samples, rows.checks, rows.routing, rows.ledger)
                  if world.leader else None)  # fmt: skip
            if world.leader:
                lifecycle.tally(summary, p.case.case_id, rows)
            else:
                summary.cases_run += 1
    except KeyboardInterrupt:
        lifecycle.finish_stopped(writer, summary, "interrupted", resume=resume)
        raise
    except RankFailure as exc:
        lifecycle.finish_stopped(writer, summary, "failed", error=exc.message, resume=resume,
                                 failed_ranks=[{"rank": r, "kind": k, "error": m}
                                               for r, k, m in exc.failures])  # fmt: skip
        raise
    except BaseException as exc:
        lifecycle.finish_stopped(writer, summary, "failed",
                                 error=f"rank 0: {distributed.describe(exc)}",
                                 resume=resume)  # fmt: skip
        raise
    lifecycle.finish(writer, summary)
    # Every rank exits with the run's code: rank 0's verdict goes to all of them.
    verdict = distributed.broadcast(world, (summary.status, summary.mismatches, summary.errors))
    summary.status, summary.mismatches, summary.errors = verdict
    return summary


def case_rows(world: World, p, clock: Clock, run_id: str, options: RunOptions,
              progress: Progress) -> CaseRows | None:  # fmt: skip
    """One planned case on this rank (module docstring): the case's rows on rank 0, None
    elsewhere."""
    topology = DistributedRank(world, clock, run_id, allow_mismatch=options.allow_mismatch)
    ctx = CaseContext(run_id=run_id, options=options, clock=clock, stop=faults.Stopper(),
                      progress=progress)  # fmt: skip
    regime = Step if p.case.scenario.step is not None else OneLayer
    return run_case(regime(p, topology, ctx), topology, ctx)
