"""What a run is asked to do (``RunOptions``), what it reports back (``RunSummary``, ``Progress``).

Shared by both case loops (simulated and distributed), the isolated child and the CLI.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from moebench.core.errors import MoebenchError
from moebench.spec.schema import MAX_TIMEOUT_S, Scenario


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    results_dir: Path = Path("results")
    resume: Path | None = None
    allow_mismatch: bool = False
    allow_source_drift: bool = False
    isolate: bool = False  # each case in a child process
    case_timeout_s: float | None = None  # overrides the scenario's measure.case_timeout_s
    aa: bool = False  # A/A control, as measure.aa
    # topology.mode distributed (moebench.run.distributed): collective timeout, seconds.
    dist_timeout_s: float = 300.0
    command: str = ""


@dataclass(kw_only=True)
class RunSummary:
    run_dir: Path
    run_id: str
    cases_run: int = 0
    cases_skipped: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # per case: clocks that looked throttled
    status: str = "complete"


class Progress:
    """What the runner tells its caller; the CLI renders it with rich. Silent by default."""

    def start(self, total: int) -> None: ...

    def step(self, label: str, advance: int = 1) -> None: ...


def case_timeout(s: Scenario, options: RunOptions) -> float | None:
    """The time limit of a case (its scenario's ``measure.case_timeout_s``, unless the command
    line gives one for every case)."""
    limit = options.case_timeout_s
    if limit is None:
        return s.measure.case_timeout_s
    if not (isinstance(limit, int | float) and 0 < limit <= MAX_TIMEOUT_S):
        raise MoebenchError(
            f"--case-timeout: must be > 0 and at most {MAX_TIMEOUT_S:g} seconds, got {limit!r}"
        )
    return float(limit)


def resume_command(s: Scenario, options: RunOptions, run_dir: Path, nproc: int | None) -> str:
    """The command that finishes this run (``nproc``: the world size of a distributed run)."""
    parts = ["moebench", "run", s.path or "SCENARIO"]
    if nproc is not None:
        parts += ["--nproc", str(nproc)]
    parts += ["--resume", str(run_dir)]
    if options.isolate:
        parts.append("--isolate")
    if options.case_timeout_s is not None:
        parts += ["--case-timeout", f"{options.case_timeout_s:g}"]
    if options.allow_mismatch:
        parts.append("--allow-mismatch")
    if options.allow_source_drift:
        parts.append("--allow-source-drift")
    if options.aa:
        parts.append("--aa")
    return shlex.join(parts)
