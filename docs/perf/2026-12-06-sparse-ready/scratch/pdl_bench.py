"""Scratch (issue 28, 2026-12-06, twenty-fifth session): the sparse FP8 step as the arm builds it
against the same step with the one-token dependent launch (`pipeline.build_stages(pdl=True,
pdl_trigger="local")`: the GEMVs and the combine as programmatic dependent launches, each GEMV
program letting the next kernel launch once its slot is known local), at the counts where the arm
has plain launches, over eight routing draws, both ranks; each step checked and compared bit for
bit with the arm's first (`sparse_ab.main`).

Why: three H100 calls (the nineteenth session's, this session's first) had it faster on the mean
at 2 and 4 tokens (-0.6% / -1.2%, -2.1% / -1.4%), in some draws only; this asks with more draws.

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/pdl_bench.py
[--tokens 2,4] [--seeds 0,...,7] [--rank 0,1]
"""

from __future__ import annotations

import functools
import time

from sparse_ab import main, parser

from arms.decode import pipeline

if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("2,4", "0,1,2,3,4,5,6,7", "w8a16", "pdl_local").parse_args()
    build = functools.partial(pipeline.build_stages, pdl=True, pdl_trigger="local")
    main(a, [("pdl_local", build)])
    print(f"total {time.monotonic() - t0:.0f} s")
