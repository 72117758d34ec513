"""The one timer: device events on the GPU, a synchronised host clock on the CPU.

Each sample times one call of an argument-free function. On the GPU the ``ffn`` regime replays a
CUDA graph captured once per arm, and the ``kernel`` regime replays one graph per stage and flushes
L2 before each sample so that a stage does not read what the previous sample left in cache.

Host launch latency is kept out of the figures: before the start event the GPU is given work of
its own (the L2 flush, or a short spin) so that, by the time it records the start, the timed launch
is already queued behind it. Without that, event-to-event time of a small stage includes the
10-20 us the host needs to launch a Triton kernel from Python.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

L2_FLUSH_BYTES = 256 << 20  # several times the H200's 60 MB L2
# The flush reads its buffer: writing it (zero_) would leave L2 full of dirty lines whose write-back
# the timed kernel then pays (measured on the H200: +2.6 us on a 12.6 us activation, +6 us on a
# 72 us one).
SPIN_CYCLES = 100_000  # ~50 us at 2 GHz: longer than the host needs to queue a graph replay


class Clock:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self._flush = (
            torch.zeros(L2_FLUSH_BYTES, dtype=torch.uint8, device=device) if self.cuda else None
        )
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
        self._nvml = _nvml_handle() if self.cuda else None

    def sample_us(self, fn: Callable[[], None], *, flush_l2: bool = False) -> float:
        """Microseconds of one call of ``fn``."""
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e6
        if flush_l2:
            self._flush.max()
        else:
            torch.cuda._sleep(SPIN_CYCLES)
        self._start.record()
        fn()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) * 1e3

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """A CUDA graph of ``fn`` (already warmed up) and its replay; ``fn`` itself on the CPU."""
        if not self.cuda:
            return fn
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # one more warm call on the capture stream, as PyTorch recommends
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
        return graph.replay

    def clocks(self) -> tuple[float, float]:
        """(SM MHz, memory MHz) now, NaN where NVML is not available."""
        if self._nvml is None:
            return math.nan, math.nan
        import pynvml

        try:
            return (
                float(pynvml.nvmlDeviceGetClockInfo(self._nvml, pynvml.NVML_CLOCK_SM)),
                float(pynvml.nvmlDeviceGetClockInfo(self._nvml, pynvml.NVML_CLOCK_MEM)),
            )
        except pynvml.NVMLError:
            return math.nan, math.nan

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def _nvml_handle():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception:  # NVML missing or not permitted: clocks are recorded as NaN
        return None
