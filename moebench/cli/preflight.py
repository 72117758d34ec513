"""What ``run`` and ``validate`` check and say before any work.

``check_run`` refuses every bad option of ``moebench run`` (one line, exit 2, nothing written):
a run that times for minutes and only then finds that ``--baseline`` names no arm wastes the
minutes and leaves a folder behind. ``notes`` are the warnings a run or a validation prints up
front: a regime this device cannot record (``profile`` needs CUDA graphs), a limit this mode does
not enforce. ``case_costs`` is what ``validate`` prints per case: the samples it will record and,
on the CPU, an estimate of its time under the Triton interpreter, so that a shape that cannot
finish on the CPU is flagged before anyone waits for it. A whole-FFN arm's kernel-regime samples
are the sub-stages its ``prepare`` names, known only when it runs: they are not counted, and
``samples_cell``/``samples_note`` say so where the count is printed.
"""

from __future__ import annotations

import dataclasses
import os

from moebench.arm.base import Arm
from moebench.core.coverage import blocks_needed, cell_alpha
from moebench.core.errors import MoebenchError
from moebench.core.families import facts
from moebench.core.vocabulary import AA_SUFFIX, Regime
from moebench.plan.cases import PlannedCase, arm_names, run_arms
from moebench.results.files import check_room
from moebench.run.options import RunOptions, case_timeout
from moebench.spec.build import timed_samples
from moebench.spec.schema import MAX_TIMEOUT_S, Scenario, local_experts
from moebench.spec.sweep import expand

# --- the interpreter's cost --------------------------------------------------------------------
# Seconds of one whole-FFN run of one arm on one rank under TRITON_INTERPRET=1, fitted to the
# The interpreter's cost of one whole-FFN run is the family's (``core.families``).
# Whole-FFN runs of each arm on each rank besides the timed ones: the eager gate, the fresh-input
# gate and the cross-arm comparison (measured: 2 to 3 runs' worth).
GATE_RUNS = 3
# A case estimated longer than this (when it has no measure.case_timeout_s) gets a warning.
LONG_CASE_S = 1800.0


def check_run(
    s: Scenario, options: RunOptions, baseline: str | None, nproc: int | None = None
) -> None:
    """MoebenchError for the first option of ``moebench run`` that cannot work with ``s``,
    before any work: every check here is one the run would otherwise hit late or never."""
    names = arm_names(s, options.aa)
    if baseline is not None and baseline not in names:
        hint = ""
        if baseline.endswith(AA_SUFFIX) and not (options.aa or s.measure.aa):
            hint = " (an A/A copy is run only with --aa or measure.aa: true)"
        raise MoebenchError(
            f"--baseline: must be one of the run's arms ({', '.join(names)}); "
            f"got {baseline!r}{hint}"
        )
    case_timeout(s, options)  # the range of --case-timeout
    timeout = options.dist_timeout_s
    if not (isinstance(timeout, int | float) and 0 < timeout <= MAX_TIMEOUT_S):
        raise MoebenchError(
            f"--dist-timeout: must be > 0 and at most {MAX_TIMEOUT_S:g} seconds, got {timeout!r}"
        )
    distributed = s.topology.mode == "distributed"
    if nproc is not None:
        from moebench.comm import world

        if nproc < 1:
            raise MoebenchError(f"--nproc: must be at least 1, got {nproc}")
        world.check_world(s, nproc)
    if distributed and options.isolate:
        raise MoebenchError(
            "--isolate: runs the cases of a simulated run in child processes; "
            "topology.mode distributed already runs each rank in a process of its own"
        )
    if distributed and options.case_timeout_s is not None:
        raise MoebenchError(
            "--case-timeout: limits the cases of a simulated run; in topology.mode distributed "
            "--dist-timeout bounds how long a collective waits"
        )
    if options.resume is None:
        check_room(options.results_dir)


def device_of(s: Scenario) -> str:
    """The kind of device a run of ``s`` would use here (``cpu`` or ``cuda``), without checking
    that it can (``plan.cases.select_device`` does that)."""
    import torch

    if s.device != "auto":
        return s.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def verdict_cells(s: Scenario, aa: bool = False) -> int:
    """How many (case, regime, stage, arm) cells a comparison of this scenario decides: every
    arm but the baseline, and the A/A copy, in every timed cell of every case."""
    m = s.measure
    per_case = (Regime.FFN in m.regimes) + len(m.stages) * (
        (Regime.KERNEL in m.regimes) + (Regime.PROFILE in m.regimes)
    )
    arms = len(s.arms) - 1 + (1 if aa or m.aa else 0)
    return len(expand(s)) * per_case * max(arms, 0)


def notes(s: Scenario, device: str, aa: bool = False) -> list[str]:
    """Warnings that belong before the run starts: what this run will not record or enforce,
    and, on a GPU, blocks too few for a verdict at the corrected level."""
    out = []
    m = s.measure
    cells = verdict_cells(s, aa)
    need = blocks_needed(cell_alpha(0.05, cells))
    if device == "cuda" and cells and m.blocks < need:
        out.append(
            f"measure.blocks: {m.blocks} blocks cannot support a verdict for the {cells} cells "
            f"of this scenario at 95% corrected (each exact interval needs >= {need} paired "
            "blocks): compare will say TOO FEW BLOCKS"
        )
    if Regime.PROFILE in m.regimes:
        others = [r for r in m.regimes if r != Regime.PROFILE]
        records = " and ".join(others) + " only" if others else "no timed samples (gates only)"
        if device != "cuda":
            out.append(
                "measure.regimes: profile needs a GPU with CUDA graphs; "
                f"this CPU run records {records}"
            )
        elif s.topology.mode == "distributed":
            out.append(
                "measure.regimes: profile is not recorded in topology.mode distributed; "
                f"this run records {records}"
            )
        elif not m.graph:
            out.append(
                "measure.regimes: profile reads the ffn CUDA graph replays, and measure.graph "
                f"is false; this run records {records}"
            )
    if s.topology.mode == "distributed" and m.case_timeout_s is not None:
        out.append(
            "measure.case_timeout_s: not enforced in topology.mode distributed "
            "(--dist-timeout bounds how long a collective waits)"
        )
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaseCost:
    case_id: str
    samples: int  # ranks x blocks x iterations x each arm's timed stages (spec.build.timed_samples)
    seconds: float | None  # estimated wall time under the interpreter; None on a GPU
    limit_s: float | None  # measure.case_timeout_s of the case
    # whole-FFN arms whose kernel-regime samples (the sub-stages they name) are not in `samples`
    open_arms: tuple[str, ...] = ()


def samples_cell(cost: CaseCost) -> str:
    """The samples of a case as ``validate`` prints them: ``84``, or ``84+`` when a whole-FFN arm
    may add the sub-stages it names (``samples_note``)."""
    return f"{cost.samples:,}" + ("+" if cost.open_arms else "")


def samples_note(costs: list[CaseCost]) -> str:
    """What the count covers, for ``validate``'s caption."""
    text = "samples: ranks x blocks x iterations x each arm's timed stages"
    arms = sorted({a for c in costs for a in c.open_arms})
    if arms:
        text += (f" (+: {', '.join(arms)}, whole-FFN, counted with ffn samples only, plus any "
                 "sub-stages it names: its prepare says which when it runs)")  # fmt: skip
    return text


def ffn_seconds(s: Scenario, arm: Arm, capacity_rows: int, live_rows: int) -> float:
    """Estimated seconds of one whole-FFN run of ``arm`` on one rank under the interpreter
    (``FamilyFacts.cpu_seconds``; an arm from outside is costed as the built-in arms of its
    family)."""
    return facts(s.family).cpu_seconds(s.model.hidden, s.model.intermediate, local_experts(s),
                                       capacity_rows, live_rows, arm.layout)  # fmt: skip


def case_costs(planned: list[PlannedCase], device: str, aa: bool = False) -> list[CaseCost]:
    """Per case: the samples it records and, on the CPU, its estimated time (every arm on every
    rank: the gate runs, the warm-up and the timed runs; a kernel-regime sample counts as its
    stage's share of a whole FFN). A whole-FFN arm is counted without kernel-regime samples,
    in both (its sub-stages are known only when it runs: ``open_arms``)."""
    out = []
    for p in planned:
        s = p.case.scenario
        m = s.measure
        arms = run_arms(s, aa)
        kernel = Regime.KERNEL in m.regimes and bool(m.stages)
        whole = [name for name, arm in arms.items() if not arm.staged]
        seconds = None
        if device == "cpu":
            share = len(m.stages) / len(facts(s.family).stages) if kernel else 0
            live = p.counts_RE.sum(dim=1).tolist()
            seconds = 0.0
            for arm in arms.values():
                timed = (Regime.FFN in m.regimes) + (share if arm.staged else 0)
                runs = GATE_RUNS + m.warmup + m.blocks * m.iterations * timed
                seconds += sum(
                    runs * ffn_seconds(s, arm, p.capacity_rows, int(live[rank])) for rank in p.ranks
                )
            if s.topology.mode == "distributed":  # one process a rank, sharing the cores
                seconds /= max(1, min(len(p.ranks), os.cpu_count() or 1))
        out.append(
            CaseCost(
                case_id=p.case.case_id,
                samples=timed_samples(m, len(p.ranks), len(arms), whole_ffn=len(whole)),
                seconds=seconds,
                limit_s=m.case_timeout_s,
                open_arms=tuple(whole) if kernel else (),
            )
        )
    return out


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.4 h``, ``590 days``: an estimate needs no more digits."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def slow_cases(costs: list[CaseCost]) -> str | None:
    """One warning line for the cases the CPU cannot finish in time, or None."""
    slow = [
        c
        for c in costs
        if c.seconds is not None
        and c.seconds > (c.limit_s if c.limit_s is not None else LONG_CASE_S)
    ]
    if not slow:
        return None
    limits = {c.limit_s for c in slow}
    if limits == {None}:
        past = f"longer than {duration(LONG_CASE_S)}"
    elif len(limits) == 1:
        past = f"longer than measure.case_timeout_s ({duration(limits.pop())})"
    else:
        past = "longer than their measure.case_timeout_s"
    listed = ", ".join(f"{c.case_id} ~{duration(c.seconds)}" for c in slow[:3])
    more = f" and {len(slow) - 3} more" if len(slow) > 3 else ""
    return (
        f"{len(slow)} of {len(costs)} case(s) would take {past} on this CPU under the Triton "
        f"interpreter (estimate: {listed}{more}); run them on a GPU or shrink the shapes"
    )
