"""Faults and interruptions: what went wrong in a case, whether the run can go on, when to stop.

A failure inside a case is classified (``classify``):

- ``oom``: ``torch.OutOfMemoryError`` (or "out of memory" from a Triton launch). The arm, or the
  rank's inputs, become an ``error`` row; memory is released and the run goes on.
- ``compile``: a Triton compile or resource error (too much shared memory, ptxas). A row.
- ``fatal``: an error after which the CUDA context is unusable (an illegal memory access, a
  device-side assert, a launch failure). Every later CUDA call would fail too, so the case is
  recorded with what it has and the run stops cleanly; with ``--isolate`` only the child process
  that hit it dies and the run goes on.
- ``error``: anything else an arm raised. A row.

A case that runs past its time limit raises ``CaseTimeout`` at the next check point; SIGINT and
SIGTERM set a flag that ``Stopper.check`` turns into ``Interrupted`` at the next check point
(after the current sample), so a run never stops half-way through writing. A second signal
interrupts at once.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time

import torch

from moebench.core.errors import typed_line

# Messages of CUDA errors that leave the context unusable ("sticky" errors).
FATAL_PATTERNS = (
    "illegal memory access",
    "cudaerrorillegaladdress",
    "cuda_error_illegal_address",
    "device-side assert",
    "devicesideassert",
    "unspecified launch failure",
    "cudaerrorlaunchfailure",
    "cuda_error_launch_failed",
    "illegal instruction",
    "misaligned address",
    "uncorrectable ecc",
    "hardware stack error",
)
KINDS = ("oom", "compile", "fatal", "error")


class CaseTimeout(BaseException):
    """The case ran past its time limit. A BaseException so that an arm's ``except Exception``
    cannot swallow it."""

    def __init__(self, limit_s: float, elapsed_s: float, where: str):
        super().__init__(
            f"case time limit of {limit_s:g} s reached after {elapsed_s:.1f} s ({where})"
        )
        self.limit_s = limit_s
        self.elapsed_s = elapsed_s
        self.where = where


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (SIGINT or SIGTERM) at a check point."""

    def __init__(self, signum: int = signal.SIGINT, message: str = ""):
        super().__init__(message or signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def signame(self) -> str:
        return signal.Signals(self.signum).name


def classify(exc: BaseException) -> str:
    """One of ``KINDS`` for an exception raised while running a case."""
    text = str(exc).lower()
    if any(p in text for p in FATAL_PATTERNS):
        return "fatal"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text:
        return "oom"
    if isinstance(exc, MemoryError):
        return "oom"
    module = type(exc).__module__ or ""
    if module.startswith("triton") and type(exc).__name__ != "InterpreterError":
        return "compile"
    return "error"


def describe(exc: BaseException, kind: str | None = None) -> str:
    """``kind: Type: first line of the message``, at most 300 characters."""
    kind = kind or classify(exc)
    return f"{kind}: {typed_line(exc, 298 - len(kind))}"


def device_healthy(device: torch.device) -> bool:
    """False when the CUDA context no longer runs work (after a sticky error)."""
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize(device)
        probe = torch.ones(1, device=device)
        probe.add_(1)
        torch.cuda.synchronize(device)
        return True
    except Exception:
        return False


def release(device: torch.device) -> None:
    """Give memory back after a failure (the exception's frames are gone by now)."""
    gc.collect()
    if device.type == "cuda":
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()


class Stopper:
    """Check points for the case loop: interruptions, the case time limit, a vanished parent.

    ``check(where)`` raises ``Interrupted`` once a signal arrived (or the parent process that
    started this one is gone) and ``CaseTimeout`` once the current case passed its deadline.

    A check point comes after every sample, but one sample can run for minutes (a large shape
    under the Triton interpreter), so within ``signals()`` an alarm backs the check points up:
    ``GRACE_S`` after the first SIGINT or SIGTERM, or after the case's deadline, the exception is
    raised wherever the case is (inside a sample too). Only while a case runs: what comes between
    cases (writing its parts, the manifest) is never cut short. The case in progress is then
    not finished, as after any interrupt, and a timeout keeps what the case measured.
    """

    GRACE_S = 2.0

    def __init__(self, *, parent_pid: int | None = None):
        self.signal: int | None = None
        self._parent_pid = parent_pid
        self._limit_s: float | None = None
        self._started = 0.0
        self._in_case = False
        self._alarms = False  # signals() installed the SIGALRM handler
        self._interrupt_at: float | None = None  # monotonic time of the interrupt's alarm

    def start_case(self, limit_s: float | None) -> None:
        self._limit_s = limit_s
        self._started = time.monotonic()
        self._in_case = True
        self._rearm()

    def end_case(self) -> None:
        self._limit_s = None
        self._in_case = False
        self._rearm()

    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def interrupted(self) -> bool:
        orphaned = self._parent_pid is not None and os.getppid() != self._parent_pid
        if self.signal is None and orphaned:
            self.signal = signal.SIGTERM  # the parent was killed: stop as if sent SIGTERM
        return self.signal is not None

    def check(self, where: str = "") -> None:
        if self.interrupted():
            raise Interrupted(self.signal)
        if self._limit_s is not None and self.elapsed_s() > self._limit_s:
            raise CaseTimeout(self._limit_s, self.elapsed_s(), where or "between steps")

    def _deadlines(self) -> list[float]:
        out = []
        if self._in_case and self._limit_s is not None:
            out.append(self._started + self._limit_s + self.GRACE_S)
        if self._in_case and self._interrupt_at is not None:
            out.append(self._interrupt_at)
        return out

    def _rearm(self) -> None:
        """Set the one alarm to the nearest deadline (or clear it)."""
        if not self._alarms:
            return
        due = self._deadlines()
        delay = max(min(due) - time.monotonic(), 0.01) if due else 0.0
        signal.setitimer(signal.ITIMER_REAL, delay)

    def _alarm(self, signum, frame) -> None:
        if not self._in_case:
            return  # between cases the check points do it
        now = time.monotonic()
        if self._interrupt_at is not None and now >= self._interrupt_at and self.signal:
            raise Interrupted(self.signal)
        if self._limit_s is not None and self.elapsed_s() > self._limit_s:
            where = f"inside a step, {self.GRACE_S:g} s past the deadline"
            raise CaseTimeout(self._limit_s, self.elapsed_s(), where)
        self._rearm()

    @contextlib.contextmanager
    def signals(self):
        """Within the block, SIGINT and SIGTERM set the flag and arm the alarm (module docstring);
        a second one interrupts at once. Outside the main thread (no signal handlers possible)
        nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return

        def handler(signum, frame):
            if self.signal is not None:
                raise Interrupted(signum)
            self.signal = signum
            self._interrupt_at = time.monotonic() + self.GRACE_S
            self._rearm()

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._alarm)
        self._alarms = True
        self._rearm()
        try:
            yield self
        finally:
            self._alarms = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            for s, h in previous.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)
