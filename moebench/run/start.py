"""The entry of a run: the scenario's topology picks the case loop.

``simulated`` (the default) runs every rank on one device in this process; ``distributed`` runs
this process as one rank of the world torchrun started. Both open, resume and finish the run
through ``run.lifecycle``.
"""

from __future__ import annotations

from moebench.run import distributed, simulated
from moebench.run.options import Progress, RunOptions, RunSummary
from moebench.spec.schema import Scenario


def run(s: Scenario, options: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Run every case of ``s``; raises MoebenchError before any work for bad input (see the
    loops for interrupts and device faults)."""
    if s.topology.mode == "distributed":
        return distributed.run(s, options, progress)
    return simulated.run(s, options, progress)
