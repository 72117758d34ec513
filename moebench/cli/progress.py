"""How ``moebench run`` shows its progress on stderr.

On a terminal, rich's live bar. Anywhere else (a log file, CI, ``nohup``, a pipe) rich's bar
prints nothing until it ends, so a nine-minute run would be silent: there the run prints plain
lines instead, one per finished step (a rank x arm of a case) but at most one every few seconds,
each with N/total, the time elapsed and a rough time left. The warnings that belong before the
run (``preflight.notes``) are printed when the run starts, after every check that could refuse it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichBar

from moebench.run.options import Progress

EVERY_S = 5.0  # the most often a plain progress line is printed


def clock_text(seconds: float) -> str:
    """``0:01:23``: elapsed and remaining times of a progress line."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class LineProgress(Progress):
    """Plain progress lines through ``write`` (module docstring)."""

    def __init__(
        self,
        write: Callable[[str], None],
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.write, self.every_s, self.clock = write, every_s, clock
        self.total = self.done = 0
        self.t0 = self.last = 0.0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        self.t0 = self.clock()
        self.last = -float("inf")
        if total:
            self.write(f"moebench: {total} step(s) to run (rank x arm of each case)")

    def step(self, label: str, advance: int = 1) -> None:
        self.done += advance
        now = self.clock()
        if self.done < self.total and now - self.last < self.every_s:
            return
        self.last = now
        elapsed = now - self.t0
        left = ""
        if 0 < self.done < self.total:
            left = f", about {clock_text(elapsed / self.done * (self.total - self.done))} left"
        self.write(
            f"moebench: {self.done}/{self.total} {label} ({clock_text(elapsed)} elapsed{left})"
        )


class CliProgress(Progress):
    """The run's progress on ``console``: a live bar on a terminal, plain lines elsewhere, and
    the run's up-front warnings (``notes``) when it starts. A context manager (the bar's)."""

    def __init__(self, console: Console, notes: Iterable[str] = (), every_s: float = EVERY_S):
        self.console = console
        self.notes = list(notes)
        write = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
        self.write = write
        self.bar = None
        self.lines = None
        if console.is_terminal:
            self.bar = RichBar(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
        else:
            self.lines = LineProgress(write, every_s)
        self.task = None

    def __enter__(self) -> CliProgress:
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def start(self, total: int) -> None:
        for note in self.notes:
            self.write(f"moebench: warning: {note}")
        if self.bar is not None:
            self.task = self.bar.add_task("cases x ranks x arms", total=total)
        else:
            self.lines.start(total)

    def step(self, label: str, advance: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=advance, description=label)
        else:
            self.lines.step(label, advance)
