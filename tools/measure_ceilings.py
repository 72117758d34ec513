"""Measure, on the GPU this runs on, the ceilings moebench draws floors against
(`moebench.core.ceilings`), the way the H200's were measured: the device copy of large tensors
(bytes read plus written over the time), and the dense rate of 8192-cube products in bf16
(`torch.mm`) and fp8 (`torch._scaled_mm`, e4m3 operands, bf16 out) on random normal data; and the
L2 the driver reports.

Writes a JSON record (OUT) with every repeat's figure, the versions and the GPU's name, and prints
the same figures and a `Ceilings` literal to paste into moebench/core/ceilings.py once the record
is stored under docs/perf/. A GPU's figures are its own: a figure measured on one card never
stands for another model (an H100 PCIe or NVL is not an H100 SXM).

Usage: python3 tools/measure_ceilings.py OUT.json [--repeats N]
Needs a CUDA GPU (exit 2 without one, nothing written).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys

import torch
from copy_ceiling import measure_copy_tbs

CUBE = 8192
WARMUP, TIMED = 5, 20


def product_tflops(device: torch.device, precision: str) -> float:
    """TFLOP/s of one CUBE-cube product in ``precision`` ("bf16" or "fp8"), median of TIMED
    products after WARMUP, each timed with CUDA events."""
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(CUBE, CUBE, device=device, generator=g)
    b = torch.randn(CUBE, CUBE, device=device, generator=g)
    if precision == "bf16":
        a, b = a.bfloat16(), b.bfloat16()
        product = lambda: torch.mm(a, b)  # noqa: E731
    else:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm takes it
        one = torch.ones((), device=device)
        product = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,  # noqa: E731
                                           out_dtype=torch.bfloat16)  # fmt: skip
    for _ in range(WARMUP):
        product()
    times = []
    for _ in range(TIMED):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        product()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return 2 * CUBE**3 / statistics.median(times) / 1e12


def driver_version() -> str:
    """The driver nvidia-smi reports, "" where it cannot be asked."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.strip().splitlines()[0] if out.strip() else ""


def ceilings_literal(record: dict) -> str:
    """The `moebench.core.ceilings.Ceilings` of ``record`` (this tool's JSON) as Python source:
    the median copy, the median products, the L2, and when and how."""
    t = record["tflops"]
    return (
        f'Ceilings(\n    name="{record["gpu_name"].removeprefix("NVIDIA ")}",\n'
        f"    copy_tbs={record['copy_tbs_median']:.2f},\n"
        f'    tflops={{"fp8": {t["fp8"]:.0f}.0, "bf16": {t["bf16"]:.0f}.0}},\n'
        f"    l2_bytes={record['l2_bytes']},\n"
        f'    measured="{record["date"]}, torch {record["torch"]}: tools/measure_ceilings.py",\n)'
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the JSON record to write")
    p.add_argument("--repeats", type=int, default=5, help="copy measurements (each a median)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        print("measure_ceilings: --repeats must be at least 1", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("measure_ceilings: needs a CUDA GPU (none here); nothing written", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    copies = [measure_copy_tbs(device) for _ in range(args.repeats)]
    record = dict(
        gpu_name=torch.cuda.get_device_name(device),
        date=datetime.date.today().isoformat(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        driver=driver_version(),
        copy_tbs=copies,
        copy_tbs_median=statistics.median(copies),
        tflops={"bf16": product_tflops(device, "bf16"), "fp8": product_tflops(device, "fp8")},
        l2_bytes=torch.cuda.get_device_properties(device).L2_cache_size,
    )
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"{record['gpu_name']}, driver {record['driver']}, torch {record['torch']}")
    print(
        "device copy (TB/s, read + written, each the median of 20 copies of 1 GiB): "
        + ", ".join(f"{c:.3f}" for c in copies)
        + f"; median {record['copy_tbs_median']:.3f}"
    )
    for prec, v in record["tflops"].items():
        print(f"{CUBE}-cube {prec} product: {v:.1f} TFLOP/s (median of {TIMED})")
    print(f"L2: {record['l2_bytes']} bytes")
    print(ceilings_literal(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
