"""The measuring helpers of the benchmarks in tools/: the project's clock and block rotation.

The tools time kernel variants outside scenarios; they use the same ``Clock`` (device events,
L2 flushed by a read before each sample, the GPU given work of its own so that no launch latency
is in the figure) and the same rotation of the order (``rotation.block_order``) as a run, so a
tool's figure and a run's kernel-regime figure are the same measurement. Each call is replayed
from a CUDA graph, warmed for ``WARM_MS`` first: after a compile the GPU has idled and its clock
is down (seen 2026-12-01: whichever variant came first after a compile ran 5% slow).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import torch

from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order

WARM_MS = 50.0


def warm(calls: Sequence[Callable[[], None]], ms: float = WARM_MS) -> None:
    """Run ``calls`` in turn for at least ``ms`` milliseconds of device time."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    while True:
        for call in calls:
            call()
        end.record()
        end.synchronize()
        if start.elapsed_time(end) >= ms:
            return


def time_interleaved(
    clock: Clock,
    fns: Sequence[Callable[[], None]],
    *,
    rounds: int = 8,
    reps: int = 4,
    flush_l2: bool = True,
) -> list[float]:
    """Median us of each of ``fns`` (each replayed from a graph), sampled in ``rounds`` rounds that
    visit every function in turn, the order rotating each round as a run's blocks do, so that a
    drift of the clock during the call falls on all alike."""
    calls = [clock.capture(fn) for fn in fns]
    warm(calls)
    samples: list[list[float]] = [[] for _ in calls]
    for r in range(rounds):
        for i in block_order(range(len(calls)), r):
            samples[i] += [clock.sample_us(calls[i], flush_l2=flush_l2) for _ in range(reps)]
    return [statistics.median(x) for x in samples]


def time_graph(
    clock: Clock, fn: Callable[[], None], reps: int = 30, flush_l2: bool = True
) -> float:
    """Median us of ``reps`` graph replays of ``fn``, L2 flushed before each (the kernel regime)."""
    return time_interleaved(clock, [fn], rounds=1, reps=reps, flush_l2=flush_l2)[0]
