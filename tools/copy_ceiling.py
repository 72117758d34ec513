"""The device-copy ceiling the benchmarks in tools/ divide by, for the GPU they run on.

moebench's measured figure where it has one for that GPU (`moebench.core.ceilings.for_gpu`: the
H200's 4.27 TB/s, the H100 SXM's 2.97); on a GPU it has none for (an H100 PCIe, say), one measured
here the way those were, a torch copy of large tensors, bytes read plus written over the time.
Either way a bench's "of copy" is a fraction of the copy rate of the GPU it ran on, never another
GPU's, and its header says where the figure came from. No GPU: NaN (CPU benches time nothing).
"""

from __future__ import annotations

import math

import torch

from moebench.core.ceilings import for_gpu

COPY_BYTES = 1 << 30  # each of the two buffers: far past any L2
COPIES = 20


def measure_copy_tbs(device: torch.device) -> float:
    """TB/s of a device-to-device copy of COPY_BYTES (read + written), median of COPIES copies
    after a warm-up, timed with CUDA events."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(COPIES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    times.sort()
    return 2 * COPY_BYTES / times[len(times) // 2] / 1e12


def copy_tbs(device: torch.device) -> tuple[float, str]:
    """(TB/s, where it comes from) of ``device``'s copy ceiling; (NaN, "no GPU") on a CPU."""
    if device.type != "cuda":
        return math.nan, "no GPU"
    name = torch.cuda.get_device_name(device)
    known = for_gpu(name)
    if known is not None:
        return known.copy_tbs, f"{known.name}'s {known.copy_tbs} TB/s (moebench.core.ceilings)"
    tbs = measure_copy_tbs(device)
    return tbs, (f"{tbs:.2f} TB/s measured now on {name} (a torch copy of 2 x 1 GiB; "
                 f"moebench.core.ceilings has no figure for it)")  # fmt: skip
