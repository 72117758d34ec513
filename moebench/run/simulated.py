"""A simulated run: every case, every rank of it on one device in this process.

Each case runs the case sequence (``run.case``) with the regime it asks for (one layer,
``run.layer``; a model step, ``run.step``; a whole model, ``run.model``) on the simulated
topology (``run.simulated_ranks``), then its rows are written as one Parquet part per table.
The run's opening, resume checks and last word are ``run.lifecycle``'s, shared with the
distributed run.

Failures (see ``core.faults``): an arm that runs out of memory, fails to compile or raises becomes
an ``error`` row and the other arms go on; inputs that cannot be built make every arm of that rank
an ``error`` row, and so does the case's own work running out of memory (a ``case`` row); a case
past its time limit gets a ``timeout`` row per arm and keeps what it measured. Every case gets its
three parts whatever happened to it. A device fault that loses the CUDA context stops the run after
writing the faulting case's rows; ``--isolate`` (``run.isolate``) runs each case in a child process
so that such a fault costs only that case.
"""

from __future__ import annotations

import signal

import torch

from moebench.core import faults
from moebench.core.errors import DeviceFault
from moebench.measure.clock import Clock
from moebench.plan.cases import arm_names, plan, run_arms, select_device
from moebench.plan.steps import check_memory, plan_step_case, step_manifest
from moebench.results.rows import CaseRows
from moebench.run import isolate, lifecycle
from moebench.run.case import CaseContext, run_case
from moebench.run.layer import OneLayer
from moebench.run.model import ModelRun
from moebench.run.model_plan import check_model_memory, model_manifest, plan_model_case
from moebench.run.options import Progress, RunOptions, RunSummary, case_timeout, resume_command
from moebench.run.simulated_ranks import SimulatedRanks
from moebench.run.step import Step
from moebench.spec.schema import Scenario
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
        check_memory(planned, list(run_arms(s, options.aa).values()), device)  # before any work
        extra = {"step": step_manifest(s, planned)}
    elif s.model_run is not None:  # the model regime: every case a whole model (run.model)
        planned = [plan_model_case(c, options.aa) for c in expand(s)]
        check_model_memory(planned, device)  # before anything is allocated
        extra = {"model": model_manifest(s, planned)}
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
                else:
                    rows = case_rows(p, device, clock, writer.run_id, options, stop, limit,
                                     progress)  # fmt: skip
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
    """Progress units of a case: one per (rank, arm), per step of a step regime case, one for a
    model regime case."""
    s = p.case.scenario
    if s.model_run is not None:
        return 1
    return s.step.steps if s.step is not None else len(p.ranks) * len(names)


def case_rows(
    p,
    device: torch.device,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    stop: faults.Stopper,
    limit_s: float | None = None,
    progress: Progress | None = None,
) -> CaseRows:
    """One planned case (a ``PlannedCase``, or a ``PlannedStep`` of the step regime) in this
    process, every rank; failures become rows (``run.case``). Raises only ``faults.Interrupted``
    (the case is then not finished). The isolated child runs its case through here too."""
    topology = SimulatedRanks(device, clock)
    ctx = CaseContext(run_id=run_id, options=options, clock=clock, stop=stop,
                      progress=progress or Progress(), limit_s=limit_s)  # fmt: skip
    s = p.case.scenario
    regime = Step if s.step is not None else ModelRun if s.model_run is not None else OneLayer
    return run_case(regime(p, topology, ctx), topology, ctx)
