"""One case, written once: inputs -> gates -> agreement -> end-to-end gates -> timing -> checks
after timing -> rows (docs/DESIGN.md sections 5, 6, 7 and 14).

Two things vary, and each is an object of its own:

- the **regime** (``CaseRegime``): what a case measures. ``run.layer.OneLayer`` is one MoE layer
  (the ``ffn``, ``kernel`` and ``profile`` regimes), ``run.step.Step`` a model step over every
  MoE layer. A regime cuts a case into units (a rank of a one-layer case, a token group of a
  step) and says, per unit, what its inputs, gates, timing and checks after timing are.
- the **topology** (``Topology``): where the ranks are. ``run.simulated_ranks.SimulatedRanks``
  holds every rank in this process, one after another; ``run.distributed_rank.DistributedRank``
  is one rank of a torchrun world, whose peers must reach every point together.

``run_case`` is the sequence, the only one: per unit each phase runs through
``Topology.phase`` (in a distributed run every rank agrees at its end, so a failure on one rank
stops all of them at the same point), the arms to time are those every rank may time
(``Topology.agree``), the topology's own whole-layer gate follows (the gathered end-to-end check
of a distributed layer), then timing (``measure.sampling``, the one timing loop) and the checks
after it. A case past its time limit gets a ``timeout`` row per arm and keeps what it measured;
a device fault that loses the CUDA context gets ``aborted`` rows for the arms it did not reach,
and ``CaseRows.fault`` tells the run to stop. The rows of every rank meet on the writing rank at
the end (``Topology.collect``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from moebench.core import faults
from moebench.measure.clock import Clock
from moebench.results.rows import CaseRows, Check, DeviceLost
from moebench.run.options import Progress, RunOptions

T = TypeVar("T")


@dataclass(kw_only=True)
class CaseContext:
    """What every case of a run shares: the run's id and options, the clock, the stopper."""

    run_id: str
    options: RunOptions
    clock: Clock
    stop: faults.Stopper
    progress: Progress
    limit_s: float | None = None


class Topology(Protocol):
    """Where the ranks of a case are (module docstring); the regimes' topology-dependent parts
    are methods of the implementations (``run.simulated_ranks``, ``run.distributed_rank``)."""

    leader: bool  # this process writes the run

    def phase(self, what: str, fn: Callable[[], T]) -> T: ...

    def agree(self, arms: list[str]) -> list[str]: ...

    def collect(self, out: CaseRows) -> CaseRows | None: ...

    def recover(self, out: CaseRows, cols: dict, arms, gate: str, exc: Exception) -> None: ...

    def release(self) -> None: ...


class CaseRegime(Protocol):
    """What a case measures (module docstring). ``held`` is the regime's own record of a unit."""

    names: tuple[str, ...]  # every arm of the case, the A/A copy included

    def rows(self) -> CaseRows: ...

    def units(self) -> Iterable[Any]: ...

    def label(self, unit: Any) -> str: ...

    def inputs(self, unit: Any, out: CaseRows) -> Any | None: ...

    def gates(self, held: Any, out: CaseRows) -> list[str]: ...

    def end_to_end(self, held: Any, timed: list[str], out: CaseRows) -> list[str]: ...

    def time(self, held: Any, timed: list[str], out: CaseRows) -> list[str]: ...

    def after_timing(self, held: Any, timed: list[str], out: CaseRows) -> None: ...

    def finish(self, held: Any, timed: list[str], out: CaseRows) -> None: ...

    def current_cols(self) -> dict: ...


def run_case(regime: CaseRegime, topology: Topology, ctx: CaseContext) -> CaseRows | None:
    """The case (module docstring): its rows on the writing rank, None elsewhere. Failures of an
    arm become rows, and so does an out-of-memory error of the case's own work (the harness's
    checks between the arms' calls: every arm without an error row gets a ``case`` row, the
    memory goes back and the run goes on); raises only ``faults.Interrupted`` (the case is then
    not finished), the bugs of the harness and, in a distributed run, the ``RankFailure`` of a
    phase."""
    out = regime.rows()
    ctx.stop.start_case(ctx.limit_s)
    try:
        for unit in regime.units():
            what = regime.label(unit)
            ctx.stop.check(f"{what}, inputs")
            held = topology.phase(f"building the inputs of {what}",
                                  lambda u=unit: regime.inputs(u, out))  # fmt: skip
            if held is None:  # the inputs could not be built: every arm has its error row
                continue
            timed = topology.phase(f"in the gates of {what}",
                                   lambda h=held: regime.gates(h, out))  # fmt: skip
            timed = topology.agree(timed)
            timed = regime.end_to_end(held, timed, out)
            timed = topology.phase(f"timing {what}",
                                   lambda h=held, t=timed: regime.time(h, t, out))  # fmt: skip
            topology.phase(f"in the checks after timing {what}",
                           lambda h=held, t=timed: regime.after_timing(h, t, out))  # fmt: skip
            regime.finish(held, timed, out)
            del held
    except faults.CaseTimeout as timeout:
        cols = regime.current_cols()
        for arm in regime.names:
            out.add(cols, arm, Check(name="timeout", status="error", detail=f"timeout: {timeout}"))
    except DeviceLost as lost:
        out.fault = str(lost)
        cols = regime.current_cols()
        for arm in _without_error(out, cols, regime.names):
            out.add(cols, arm, Check(name="aborted", status="error",
                                     detail=f"not finished: {lost}"))  # fmt: skip
    except Exception as exc:
        if faults.classify(exc) != "oom":
            raise
        cols = regime.current_cols()
        topology.recover(out, cols, _without_error(out, cols, regime.names), "case", exc)
        topology.release()
    finally:
        ctx.stop.end_case()
        out.warnings += ctx.clock.warnings()
    return topology.collect(out)


def _without_error(out: CaseRows, cols: dict, names) -> list[str]:
    """The arms of ``names`` with no error row yet at ``cols``'s rank."""
    hit = {c["arm"] for c in out.checks if c["rank"] == cols["rank"] and c["status"] == "error"}
    return [arm for arm in names if arm not in hit]
