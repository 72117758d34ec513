"""What `tools/bench_kernels.py`'s parts share: the issue-3 shapes (DeepSeek-V4-Flash per rank:
32 local experts, D 4096, F 2048, capacity 28,672 rows), the GPU's flush buffer and moebench's
clock, the timers, the rows every part records, and the routings' row ends. GPU only: importing it
allocates the flush buffer on the device."""

from __future__ import annotations

import torch

from moebench.core.ceilings import for_gpu
from moebench.core.layout import expert_ends
from moebench.measure import bench
from moebench.measure.clock import Clock

E, D, F, M, A = 32, 4096, 2048, 28_672, 128
dev = torch.device("cuda")
# The floors' ceilings: the GPU's own, measured (moebench.core.ceilings); on a GPU moebench has
# none for, NaN floors rather than another GPU's (its matrix rate is not measured here).
CEILINGS = for_gpu(torch.cuda.get_device_name(dev))
COPY_TBS = CEILINGS.copy_tbs if CEILINGS else float("nan")
FP8_TFLOPS = CEILINGS.tflops["fp8"] if CEILINGS else float("nan")
flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
results: list[dict] = []


FLUSH = "read"  # "zero" writes the flush buffer (dirty L2 lines), "read" reads it (clean lines)
# The project's clock (moebench/measure): the same samples as a run's kernel regime.
CLOCKS = {"read": Clock(dev), "zero": Clock(dev, dirty_flush=True)}


def time_graph(fn, reps: int = 30) -> float:
    """Median us of ``reps`` replays of a graph of ``fn``, L2 flushed before each."""
    return bench.time_graph(CLOCKS[FLUSH], fn, reps=reps)


def time_interleaved(fns, rounds: int = 8, reps: int = 4) -> list[float]:
    """Median us of each of ``fns``, sampled in rounds that visit every function in turn (the
    order rotating each round), so a drift of the clock during the call falls on all alike."""
    return bench.time_interleaved(CLOCKS[FLUSH], fns, rounds=rounds, reps=reps)


def sm_clock_mhz() -> float:
    """The SM clock now (NVML), NaN where it cannot be read."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:
        return float("nan")


def record(**row) -> None:
    results.append(row)
    print(
        "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
        flush=True,
    )


def balanced_ends(live: int) -> torch.Tensor:
    counts = torch.full((E,), live // E, dtype=torch.int32)
    counts[: live % E] += 1
    return expert_ends(counts, A).to(dev)


def one_expert_ends(live: int) -> torch.Tensor:
    counts = torch.zeros(E, dtype=torch.int32)
    counts[5] = live
    return expert_ends(counts, A).to(dev)


def set_flush(mode: str) -> None:
    """How the L2 is flushed before each replay from now on: "read" or "zero" (FLUSH)."""
    global FLUSH
    FLUSH = mode
