"""Scratch (issue 28, 2026-12-06, twenty-fourth session): the one-token sparse FP8 step with fc2
loading its first two K steps' weights before its dependent-launch wait (``pdl_peel=2``) instead
of one, fc1 unchanged. Why: the second call's timeline (gemv_timeline.py) showed fc2's programs
resident from 17 us but waiting until 22 us (fc1's end + 1.3), with one step of their three
loaded, while fc1's last 10% of programs leave the memory system part idle; after the wait the
resident programs load two more steps (about 6 us), and the programs that did not fit start only
then. sm_90a offline: 80 registers with two steps held (25 programs an SM), 64 with a cap (32 an
SM, 16 bytes of stack). Checked and compared bit for bit with the arm's step first, then timed
(`sparse_ab.main`).

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/fc2_peel_bench.py
[--tokens 1] [--seeds 0,1,2,3] [--rank 0,1]
"""

from __future__ import annotations

import functools
import time

from fc2_rows_bench import steps_fc2
from sparse_ab import main, parser

if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("1", "0,1,2,3", "w8a16", "").parse_args()
    kinds = [("fc2_peel2_r64", dict(pdl_peel=2, max_registers=64)),
             ("fc2_peel2", dict(pdl_peel=2))]  # fmt: skip
    main(a, [(n, functools.partial(steps_fc2, fc2_opts=o)) for n, o in kinds])
    print(f"total {time.monotonic() - t0:.0f} s")
