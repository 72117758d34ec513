"""The ``profile`` regime: per-stage device time inside whole-FFN graph replays (docs/DESIGN.md 6).

The ``ffn`` regime times a replay from end to end; the ``kernel`` regime times each stage alone.
This one runs the same replays as ``ffn`` under ``torch.profiler`` and attributes every kernel to
its stage, so the stage times add up to what the FFN really spends inside one graph (launch gaps
excluded); compare's reconciliation sets their sum beside the ``ffn`` median.

Attribution is by order, not by name (the same GEMM kernel serves fc1 and fc2): each stage is
profiled once alone to count the kernels it launches, and a replay's kernels, in start order, are
cut into consecutive runs of those counts. GPU only (the interpreter launches no device kernels).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def _kernels(prof) -> list:
    """CUDA kernel events of a profile, in start order."""
    events = [
        e for e in prof.events()
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
    ]  # fmt: skip
    return sorted(events, key=lambda e: e.time_range.start)


def stage_kernel_counts(stages: Sequence) -> dict[str, int]:
    """Kernels each stage launches, from one eager run of each under the profiler."""
    from torch.profiler import ProfilerActivity, profile

    counts = {}
    for st in stages:
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            st.run()
            torch.cuda.synchronize()
        counts[st.name] = len(_kernels(prof))
    return counts


def profile_replays(
    plan: Sequence[tuple[str, Callable[[], None], dict[str, int]]],
) -> list[tuple[str, dict[str, float]]]:
    """Run ``plan`` — (arm, graph replay, kernels per stage) in order — under one profiler session
    and return, per replay, (arm, {stage: device microseconds}). Raises when the kernels seen do
    not divide into the expected runs (a replay launched something unexpected)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _, replay, _ in plan:
            replay()
        torch.cuda.synchronize()
    durations = [e.time_range.elapsed_us() for e in _kernels(prof)]
    return split(durations, [(arm, counts) for arm, _, counts in plan])


def split(
    durations: Sequence[float], runs: Sequence[tuple[str, dict[str, int]]]
) -> list[tuple[str, dict[str, float]]]:
    """Cut kernel durations (start order) into the replays of ``runs`` — (arm, kernels per stage)
    — and sum each stage's run. Raises when the counts do not match the kernels seen."""
    expected = sum(sum(c.values()) for _, c in runs)
    if len(durations) != expected:
        raise RuntimeError(
            f"profile: {len(durations)} kernels in the replays, {expected} expected from the stages"
        )
    out, i = [], 0
    for arm, counts in runs:
        times = {}
        for stage, n in counts.items():
            times[stage] = float(sum(durations[i : i + n]))
            i += n
        out.append((arm, times))
    return out
