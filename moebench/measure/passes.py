"""Timing a distributed pass: every step of one pass of the layer on this rank, in blocks.

A pass is a sequence of named steps (``dispatch``, ``ffn``, ``sync_wait``, ``combine_a2a``); each
is timed by device events on the GPU (a host clock on the CPU) and ``layer`` is the whole pass.
The ranks meet (untimed, ``align``) before every pass, so iteration i of every rank is the same
pass; before the start event the GPU spins while the host queues the whole pass, so that no
launch latency is in the figures (as ``Clock.sample_us`` does for one call). ``wait`` waits for
the pass's last event with a deadline, so that a peer that never comes is an error, not a hang.
Blocks rotate the arms (``rotation.block_order``); the kernel regime times the local stages with
the project's ``Clock``, as in simulated mode.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order

Step = tuple[str, Callable[[], None]]


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


def sample_passes(
    timed: list[str],
    passes: dict[str, Sequence[Step]],
    kernel: dict[str, list[Step]],
    *,
    blocks: int,
    iterations: int,
    warmup: int,
    flush_l2: bool,
    graph: bool,
    clock: Clock,
    rank_cols: dict,
    weight_bytes: dict[str, dict[str, int]],
    align: Callable[[], None],
    wait: Callable[[torch.cuda.Event], None] | None,
    spin_cycles: int,
    settle: Callable[[], None],
) -> list[dict]:
    """Samples rows of the ``timed`` arms: ``warmup`` untimed passes each, then ``blocks`` blocks
    in rotating arm order, ``iterations`` passes (regime ``ffn``) and ``iterations`` samples of
    each local stage (regime ``kernel``) per arm and block."""
    samples: list[dict] = []
    if not timed:
        return samples
    pass_of = lambda arm: timed_pass(passes[arm], align=align, wait=wait,
                                     spin_cycles=spin_cycles)  # fmt: skip
    for _ in range(warmup):
        for arm in passes:
            pass_of(arm)
    settle()
    device = "cuda" if clock.cuda else "cpu"
    for block in range(blocks):
        telemetry = clock.telemetry()  # clocks, temperature, power: once a block
        for position, arm in enumerate(block_order(timed, block)):
            base = {**rank_cols, "arm": arm, "block": block, "position": position,
                    "device": device, "mode": "graph" if graph else "eager",
                    "weights": "warm", "weight_copies": 1, **telemetry}  # fmt: skip
            for it in range(iterations if arm in passes else 0):
                for stage, t in pass_of(arm).items():
                    samples.append({**base, "stage": stage, "regime": "ffn", "iteration": it,
                                    "time_us": t,
                                    "weight_bytes": weight_bytes[arm].get(stage, 0)})  # fmt: skip
            for name, call in kernel.get(arm, ()):
                for it in range(iterations):
                    t = clock.sample_us(call, flush_l2=flush_l2)
                    samples.append({**base, "stage": name, "regime": "kernel", "iteration": it,
                                    "time_us": t,
                                    "weight_bytes": weight_bytes[arm].get(name, 0)})  # fmt: skip
    return samples
