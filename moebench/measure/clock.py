"""The one timer: device events on the GPU, a synchronised host clock on the CPU (docs/DESIGN.md 6).

Each sample times one call of an argument-free function. On the GPU the ``ffn`` regime replays a
CUDA graph captured once per arm, and the ``kernel`` regime replays one graph per stage and flushes
L2 before each sample so that a stage does not read what the previous sample left in cache.

Host launch latency is kept out of the figures: before the start event the GPU is given work of
its own (the L2 flush, or a short spin) so that, by the time it records the start, the timed launch
is already queued behind it. Without that, event-to-event time of a small stage includes the
10-20 us the host needs to launch a Triton kernel from Python.

The SMs' clock falls within milliseconds of idling: a host that spends a few milliseconds between
samples (loading the next input set, checking the last output, fingerprinting inputs) hands the
timed call a device at a low clock, and the 50 us spin does not bring it back (measured on the
H200 with tools/bench_integrity.py: 5 ms of host idle made prefix_sum_masked at v4-flash-ep8
335.5 -> 364.6 us and sparse_decode at one token 33.0 -> 54.2 us; a spin of about 1 ms first
gave 335.5 and 33.1 again; memory traffic instead of the spin did not, 38.3). So a sample that
follows more than ``IDLE_GAP_S`` of host time since the device last finished is preceded by the
longer ``WAKE_CYCLES`` spin: back-to-back samples pay nothing.

Before every sample the device's persisting L2 lines are reset to normal ones
(``cudaCtxResetPersistingL2Cache``): an arm may set an access-policy window that pins its
weights in L2, which no flush by reading a buffer evicts, and the next sample would read them
from cache. ``host_us`` times a call with a synchronised host clock beside the events: work an
eager arm launches on a stream of its own escapes the events but not the host clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from moebench.measure.graphs import capture_replay

_CUDART: object = False  # the CUDA runtime library (ctypes), None where it cannot be found

L2_FLUSH_BYTES = 256 << 20  # several times the H200's 60 MB L2
# The flush reads its buffer: writing it (zero_) would leave L2 full of dirty lines whose write-back
# the timed kernel then pays (measured on the H200: +2.6 us on a 12.6 us activation, +6 us on a
# 72 us one).
SPIN_CYCLES = 100_000  # ~50 us at 2 GHz: longer than the host needs to queue a graph replay
WAKE_CYCLES = 2_000_000  # ~1 ms at 2 GHz (longer at an idle clock): the SM clock back up
IDLE_GAP_S = 200e-6  # host time since the device last finished after which a sample wakes it

# The samples columns of ``Clock.telemetry``.
TELEMETRY = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")
THROTTLE_FRACTION = 0.9  # an SM clock below this share of the max NVML reports looks throttled
# NVML clock event (throttle) reasons; idle (0x1) and the application clock setting (0x2) do not
# count as throttling, and neither does the display clock setting (0x100).
BENIGN_REASONS = 0x1 | 0x2 | 0x100
THROTTLE_REASONS = {
    0x4: "software power cap", 0x8: "hardware slowdown", 0x10: "sync boost",
    0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}  # fmt: skip


class Clock:
    """Samples of argument-free calls on ``device``. ``dirty_flush``: flush L2 by writing its
    buffer instead of reading it (a diagnostic of tools/bench_kernels.py: it leaves dirty lines
    whose write-back the timed call pays; runs always read)."""

    def __init__(self, device: torch.device, *, dirty_flush: bool = False):
        self.device = device
        self.cuda = device.type == "cuda"
        self.dirty_flush = dirty_flush
        self._flush = (
            torch.zeros(L2_FLUSH_BYTES, dtype=torch.uint8, device=device) if self.cuda else None
        )
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
        self._nvml = _nvml_handle() if self.cuda else None
        self._max_sm: float | None = None
        self.throttled: dict[str, int] = {}  # reason -> blocks that showed it
        self.blocks = 0
        self._reset_l2 = _persisting_l2_reset() if self.cuda else None
        self._finished = -math.inf  # host time (perf_counter) the device last finished a sample
        self.wakes = 0  # samples preceded by the long spin (WAKE_CYCLES)

    def spin_cycles(self, now: float) -> int:
        """The spin before a sample at host time ``now``: the long one after a host gap."""
        if now - self._finished > IDLE_GAP_S:
            self.wakes += 1
            return WAKE_CYCLES
        return SPIN_CYCLES

    def sample_us(self, fn: Callable[[], None], *, flush_l2: bool = False) -> float:
        """Microseconds of one call of ``fn``."""
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e6
        if self._reset_l2 is not None:
            self._reset_l2()
        cycles = self.spin_cycles(time.perf_counter())
        if flush_l2:
            if cycles != SPIN_CYCLES:  # the clock up first; the flush then runs right before
                torch.cuda._sleep(cycles)
            self._flush.zero_() if self.dirty_flush else self._flush.max()
        else:
            torch.cuda._sleep(cycles)
        self._start.record()
        fn()
        self._end.record()
        self._end.synchronize()
        self._finished = time.perf_counter()
        return self._start.elapsed_time(self._end) * 1e3

    @property
    def resets_persisting_l2(self) -> bool:
        return self._reset_l2 is not None

    def host_us(self, fn: Callable[[], None]) -> float:
        """Microseconds of one call of ``fn`` by the host clock, the device synchronised before
        and after (every stream: what a call leaves running on another stream is counted)."""
        self.synchronize()
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        return (time.perf_counter() - t0) * 1e6

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """A CUDA graph of ``fn`` (already warmed up) and its replay; ``fn`` itself on the CPU."""
        return capture_replay(fn) if self.cuda else fn

    def clocks(self) -> tuple[float, float]:
        """(SM MHz, memory MHz) now, NaN where NVML is not available."""
        t = self.telemetry()
        return t["sm_clock_mhz"], t["mem_clock_mhz"]

    def telemetry(self) -> dict[str, float]:
        """The samples columns a block records: SM and memory clocks (MHz), temperature (C) and
        power (W) now, each NaN where NVML cannot say. Also notes, for ``warnings``, whether the
        clocks look throttled."""
        out = dict.fromkeys(TELEMETRY, math.nan)
        if self._nvml is None:
            return out
        import pynvml

        h = self._nvml
        reads = {
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(
                h, pynvml.NVML_TEMPERATURE_GPU
            ),
            "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        }
        for key, read in reads.items():
            try:
                out[key] = float(read())
            except Exception:  # NVMLError, or a call this driver lacks: unknown, NaN
                pass
        self._note_throttle(out["sm_clock_mhz"])
        return out

    def _note_throttle(self, sm: float) -> None:
        import pynvml

        self.blocks += 1
        reasons = []
        if self._max_sm is None:
            try:
                self._max_sm = float(
                    pynvml.nvmlDeviceGetMaxClockInfo(self._nvml, pynvml.NVML_CLOCK_SM)
                )
            except Exception:
                self._max_sm = math.nan
        if sm < THROTTLE_FRACTION * self._max_sm:  # False when either is NaN
            reasons.append(f"SM clock below {THROTTLE_FRACTION:.0%} of max {self._max_sm:.0f} MHz")
        get = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        try:
            mask = int(get(self._nvml)) & ~BENIGN_REASONS if get else 0
        except Exception:
            mask = 0
        reasons += [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
        for r in reasons:
            self.throttled[r] = self.throttled.get(r, 0) + 1

    def warnings(self) -> list[str]:
        """What ``telemetry`` saw since the last call, one line (or none), then forgets it."""
        if not self.throttled:
            return []
        seen = ", ".join(f"{r} ({n} of {self.blocks} blocks)" for r, n in self.throttled.items())
        self.throttled, self.blocks = {}, 0
        return [f"clocks looked throttled: {seen}"]

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def _persisting_l2_reset() -> Callable[[], None] | None:
    """A call of ``cudaCtxResetPersistingL2Cache`` (the CUDA runtime torch loaded), or None."""
    global _CUDART
    if _CUDART is False:
        import ctypes
        import glob
        import os

        _CUDART = None
        here = os.path.dirname(torch.__file__)
        names = [
            "libcudart.so",
            *glob.glob(os.path.join(here, "lib", "libcudart*.so*")),
            *glob.glob(os.path.join(here, "..", "nvidia", "*", "lib", "libcudart.so*")),
        ]
        for name in names:
            try:
                _CUDART = ctypes.CDLL(name)
                _CUDART.cudaCtxResetPersistingL2Cache  # noqa: B018 (present in this runtime)
                break
            except (OSError, AttributeError):
                _CUDART = None
    if _CUDART is None:
        return None
    return _CUDART.cudaCtxResetPersistingL2Cache


def _nvml_handle():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception:  # NVML missing or not permitted: clocks are recorded as NaN
        return None
