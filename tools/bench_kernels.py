"""Kernel variants at the issue-3 shapes on the GPU, in one call: correctness first, then time.

DeepSeek-V4-Flash per-rank shapes (32 local experts, D 4096, F 2048, capacity 28,672 rows).
Every variant is checked bitwise against the default launcher before it is timed; times are
medians of CUDA-graph replays with L2 flushed before each (the moebench kernel regime). The
variants of one case (activation: one routing; GEMM: one FC and live-row count, with torch's
grouped GEMM) are timed interleaved, in rotating rounds after a warm-up, so that a drift of the
clock falls on all of them alike. Writes a JSON of every figure to OUT/bench_kernels.json and
prints a line a figure.

Usage (GPU): PYTHONPATH=$PWD python3 tools/bench_kernels.py OUT [PART ...]
PART: act, act_floor, act_full, gemm, scatter, combine (default act gemm); "zero" or "read"
before a part picks how the L2 is flushed (default read).

The parts live beside this file: `bench_kernels_act.py` (act, act_floor, act_full),
`bench_kernels_gemm.py` (gemm), `bench_kernels_scatter.py` (scatter, combine), and what they
share (shapes, flush buffer, timers, rows) in `bench_kernels_common.py`.
"""

from __future__ import annotations

import json
import sys

import bench_kernels_common as common  # tools/ is sys.path[0] when run as a script
import torch
from bench_kernels_act import bench_act, bench_act_floor, bench_act_full
from bench_kernels_gemm import bench_gemm
from bench_kernels_scatter import bench_combine, bench_scatter_combine

PARTS = {
    "act": bench_act,
    "act_floor": bench_act_floor,
    "act_full": bench_act_full,
    "gemm": bench_gemm,
    "scatter": bench_scatter_combine,
    "combine": bench_combine,
}

if __name__ == "__main__":
    out_dir = sys.argv[1]
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for part in sys.argv[2:] or ["act", "gemm"]:
        if part in ("zero", "read"):
            common.set_flush(part)
            print(f"== L2 flush by {part}", flush=True)
            continue
        PARTS[part]()
    with open(f"{out_dir}/bench_kernels.json", "w") as fh:
        json.dump(common.results, fh, indent=1)
