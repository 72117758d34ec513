"""Timing a distributed pass: every step of one pass of the layer on this rank, in blocks.

A pass is a sequence of named steps (``dispatch``, ``ffn``, ``sync_wait``, ``combine_a2a``); each
is timed by device events on the GPU (a host clock on the CPU) and ``layer`` is the whole pass.
The ranks meet (untimed, ``align``) before every pass, so iteration i of every rank is the same
pass; before the start event the GPU spins while the host queues the whole pass, so that no
launch latency is in the figures (as ``Clock.sample_us`` does for one call). ``wait`` waits for
the pass's last event with a deadline, so that a peer that never comes is an error, not a hang.
A pass is a ``Probe`` of the one timing loop (``measure.sampling``), which rotates the arms in
blocks as for every other regime.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from moebench.measure.sampling import Probe

Step = tuple[Any, Callable[[], None]]  # (a stage name or a model layer id, the call)


def timed_pass(
    steps: Sequence[Step],
    *,
    align: Callable[[], None],
    wait: Callable[[torch.cuda.Event], None] | None,
    spin_cycles: int,
) -> dict[str, float]:
    """One pass, every step timed on this rank (us), plus ``layer``, the whole. ``wait`` None:
    a CPU rank (host clock)."""
    if wait is not None:
        torch.cuda._sleep(spin_cycles)  # the host queues the pass meanwhile
        align()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(steps) + 1)]
        events[0].record()
        for (_, fn), ev in zip(steps, events[1:], strict=True):
            fn()
            ev.record()
        wait(events[-1])
        out = {name: events[i].elapsed_time(events[i + 1]) * 1e3
               for i, (name, _) in enumerate(steps)}  # fmt: skip
        out["layer"] = events[0].elapsed_time(events[-1]) * 1e3
        return out
    align()
    stamps = [time.perf_counter()]
    for _, fn in steps:
        fn()
        stamps.append(time.perf_counter())
    out = {name: (stamps[i + 1] - stamps[i]) * 1e6 for i, (name, _) in enumerate(steps)}
    out["layer"] = (stamps[-1] - stamps[0]) * 1e6
    return out


def pass_probe(
    steps: Sequence[Step],
    rows: Mapping[Any, Mapping[str, Any]],
    *,
    align: Callable[[], None],
    wait: Callable[[torch.cuda.Event], None] | None,
    spin_cycles: int,
) -> Probe:
    """One pass as a probe of the timing loop (``measure.sampling``): every step's figure and the
    whole pass's (``layer``) become the rows ``rows[step name]``."""
    return Probe(
        measure=lambda: timed_pass(steps, align=align, wait=wait, spin_cycles=spin_cycles),
        rows=rows,
    )
