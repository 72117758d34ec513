"""The simulated case loop: every rank of every case on one device, one after another.

Order of work per case and rank: inputs -> reference -> each arm once on poisoned buffers (gates,
``gates.rank``) -> cross-arm gates -> warm-up -> blocks of samples with the arms in rotating order
(``measure.timed``) -> a last check that timing replays produced the gated output -> one Parquet
part per table for the case. The run's opening, resume checks and last word are
``run.lifecycle``'s, shared with the distributed loop.

Failures (see ``core.faults``): an arm that runs out of memory, fails to compile or raises becomes
an ``error`` row and the other arms go on; inputs that cannot be built make every arm of that rank
an ``error`` row; a case past its time limit gets a ``timeout`` row per arm and keeps what it
measured. Every case gets its three parts whatever happened to it. A device fault that loses the
CUDA context stops the run after writing the faulting case's rows; ``--isolate``
(``run.isolate``) runs each case in a child process so that such a fault costs only that case.
"""

from __future__ import annotations

import signal

import torch

from moebench.core import faults
from moebench.core.errors import DeviceFault
from moebench.gates.families import family_of, ledger_rows
from moebench.gates.fresh import fresh_input_gate
from moebench.gates.rank import gate_rank, post_timing
from moebench.measure.clock import Clock
from moebench.measure.timed import time_rank
from moebench.plan.cases import (
    PlannedCase,
    arm_names,
    case_columns,
    plan,
    routing_rows,
    run_arms,
    select_device,
)
from moebench.plan.inputs import make_tokens
from moebench.plan.steps import check_memory, plan_step_case, step_manifest
from moebench.results.rows import CaseRows, Check, DeviceLost, record_failure
from moebench.run import isolate, lifecycle
from moebench.run.options import Progress, RunOptions, RunSummary, case_timeout, resume_command
from moebench.run.step import run_step_case
from moebench.spec.schema import Scenario, global_tokens
from moebench.spec.sweep import expand


def run(s: Scenario, options: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Run every case of the scenario; raises MoebenchError before any work for bad input.

    Raises ``faults.Interrupted`` (a KeyboardInterrupt) after SIGINT/SIGTERM, once the manifest
    says ``interrupted``, and ``DeviceFault`` once a lost CUDA context stopped the run."""
    progress = progress or Progress()
    case_timeout(s, options)  # a bad --case-timeout is a user error before any work
    sources, drift = lifecycle.sources_and_pins(s, options)
    device = select_device(s)
    names = arm_names(s, options.aa)
    extra = None
    if s.step is not None:  # the step regime: every case a model step (moebench.run.step)
        planned = [plan_step_case(c) for c in expand(s)]
        check_memory(planned, len(names), device)  # before anything is allocated
        extra = {"step": step_manifest(s, planned)}
    else:
        planned = plan(s)
    clock = None if options.isolate else Clock(device)
    stop = faults.Stopper()
    fault = None
    # The handlers go in before the results folder is opened: a SIGTERM from here on leaves a
    # manifest that says "interrupted", never one left "running".
    with stop.signals():
        writer = lifecycle.open_run(s, options, planned, sources, drift, device.type, extra)
        summary = lifecycle.new_summary(writer, planned)
        resume = resume_command(s, options, writer.run_dir, None)
        todo = [p for p in planned if p.case.case_id not in writer.finished_cases]
        progress.start(sum(_units(p, names) for p in todo))
        try:
            for p in todo:
                stop.check("between cases")
                limit = case_timeout(p.case.scenario, options)
                if options.isolate:
                    rows = isolate.run_case_in_child(p, writer, options, stop, limit)
                    progress.step(f"{p.case.case_id} (isolated)", _units(p, names))
                elif s.step is not None:
                    rows = run_step_case(p, device, clock, writer.run_id, options, stop, limit,
                                         progress)  # fmt: skip
                else:
                    rows = run_case(p, device, clock, writer.run_id, options, stop, limit, progress)
                writer.write_case(p.case.case_id, rows.samples, rows.checks, rows.routing,
                                  rows.ledger)  # fmt: skip
                lifecycle.tally(summary, p.case.case_id, rows)
                if rows.fault:
                    fault = (p.case.case_id, rows.fault)
                    break
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", None) or stop.signal or signal.SIGINT
            stopped = faults.Interrupted(signum)
            lifecycle.finish_stopped(
                writer, summary, "interrupted", interrupted_by=stopped.signame, resume=resume
            )
            raise faults.Interrupted(
                signum,
                f"interrupted by {stopped.signame}: {len(writer.finished_cases)} "
                f"finished case(s) kept in {writer.run_dir}; resume with: {resume}",
            ) from None
        except BaseException as exc:
            lifecycle.finish_stopped(
                writer, summary, "failed", error=faults.describe(exc), resume=resume
            )
            raise
    if fault is not None:
        case_id, text = fault
        lifecycle.finish_stopped(
            writer, summary, "failed", error=text, fault_case=case_id, resume=resume,
            hint="resume runs the remaining cases in a fresh process; --isolate runs "
            "each case in its own process so that a device fault costs only that case",
        )  # fmt: skip
        raise DeviceFault(
            f"device fault in case {case_id} ({text}); the CUDA context is lost, so the run "
            f"stopped with {len(writer.finished_cases)} finished case(s) kept, this one's rows "
            f"included. Resume with: {resume}"
            + ("" if options.isolate else " (add --isolate so that a fault costs only its case)")
        )
    lifecycle.finish(writer, summary)
    return summary


def _units(p, names) -> int:
    """Progress units of a case: one per (rank, arm), or per step of a step regime case."""
    s = p.case.scenario
    return s.step.steps if s.step is not None else len(p.ranks) * len(names)


def _rank_inputs(p: PlannedCase, x_TD: torch.Tensor, rank: int, device: torch.device):
    """One rank's Problem (built by the arms' family) and its float32 reference output."""
    family = family_of(p.case.scenario)
    problem = family.problem(p.case.scenario, p.routing, p.capacity_rows, x_TD, rank, device)
    return problem, family.reference(problem)


def run_case(
    p: PlannedCase,
    device: torch.device,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    stop: faults.Stopper,
    limit_s: float | None = None,
    progress: Progress | None = None,
) -> CaseRows:
    """One case, every rank and arm; failures become rows (module docstring). Raises only
    ``faults.Interrupted`` (the case is then not finished)."""
    progress = progress or Progress()
    s = p.case.scenario
    family = family_of(s)
    arms = run_arms(s, options.aa)
    names = tuple(arms)
    out = CaseRows(routing=routing_rows(p, run_id))
    live = {r["rank"]: r["live_rows"] for r in out.routing}
    cols = case_columns(p, run_id)
    rank_cols = {**cols, "rank": p.ranks[0], "live_rows": live[p.ranks[0]]}
    x = None
    blocks = None  # the first rank's block count, which every later rank of the case runs
    stop.start_case(limit_s)
    try:
        for rank in p.ranks:
            rank_cols = {**cols, "rank": rank, "live_rows": live[rank]}
            stop.check(f"rank {rank}, inputs")
            try:
                if x is None:
                    x = make_tokens(
                        tokens=global_tokens(s),
                        hidden=s.model.hidden,
                        seed=s.routing.seed,
                        device=device,
                    )
                problem, ref = _rank_inputs(p, x, rank, device)
            except Exception as exc:  # out of memory while building inputs: every arm's row
                record_failure(out, rank_cols, names, "inputs", exc, device)
                problem = ref = None
            if problem is None:
                faults.release(device)
                progress.step(f"{p.case.case_id} rank {rank} (inputs failed)", len(names))
                continue
            for name, arm in arms.items():  # the work ledger: from the routing, on the host
                out.ledger += ledger_rows(arm, name, problem, rank_cols)
            stage_sets, captures, timed = gate_rank(
                problem, ref, arms, allow_mismatch=options.allow_mismatch, device=device,
                stop=stop, out=out, rank_cols=rank_cols, family=family,
            )  # fmt: skip
            weight_bytes = {a: family.weight_bytes(arms[a], problem) for a in timed}
            done, ran = time_rank(
                timed, stage_sets, s, clock, rank_cols, stop, device, out, weight_bytes,
                family.weight_fields, arms, blocks,
            )  # fmt: skip
            if blocks is None and ran:
                blocks = ran
            for arm in done:
                try:
                    check = post_timing(stage_sets[arm][0].y_TD, captures[arm].y_TD)
                except Exception as exc:
                    record_failure(out, rank_cols, [arm], "post_timing", exc, device)
                    continue
                out.add(rank_cols, arm, check)
            try:  # the same prepared arms on new inputs: a cached output cannot pass
                fresh = fresh_input_gate(
                    problem,
                    done,
                    stage_sets,
                    family.reference,
                    experts=s.model.experts,
                    seed=s.routing.seed + 1,
                )
            except Exception as exc:
                record_failure(out, rank_cols, done, "fresh_input", exc, device)
                fresh = {}
            for arm, check in fresh.items():
                out.add(rank_cols, arm, check)
            for arm in names:
                note = "" if arm in done else " (not timed)"
                progress.step(f"{p.case.case_id} rank {rank} {arm}{note}")
            del stage_sets, captures, problem, ref
            faults.release(device)
    except faults.CaseTimeout as timeout:
        for arm in names:
            out.add(rank_cols, arm, Check(name="timeout", status="error",
                                          detail=f"timeout: {timeout}"))  # fmt: skip
    except DeviceLost as lost:
        out.fault = str(lost)
        hit = {
            c["arm"]
            for c in out.checks
            if c["rank"] == rank_cols["rank"] and c["status"] == "error"
        }
        for arm in names:
            if arm not in hit:
                out.add(rank_cols, arm, Check(name="aborted", status="error",
                                              detail=f"not finished: {lost}"))  # fmt: skip
    finally:
        stop.end_case()
        out.warnings += clock.warnings() if clock is not None else []
    return out
