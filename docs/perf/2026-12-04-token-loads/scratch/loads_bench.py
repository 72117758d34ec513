"""Scratch (issue 28, prepared 2026-12-04 in a session without a device; not yet run): the sparse
decode step (fc1, fc2, combine; one CUDA graph, L2 flushed before each replay) with the arm's GEMV
against other launches of the package's GEMV, in either format. MXFP4: the arm's plain K loop loads
the token's words with ``tl.load`` and triton moves them to every warp through shared memory (16
barriers a step in sm_90a SASS); the kinds load them as inline PTX in the layout of their use
(``token_load`` ``words`` or ``quads``: no barrier) or software-pipeline the loop (``num_stages``:
the scale bytes a step ahead, 2 barriers a step). FP8: the arm loads the token's values through a
row-broadcast tile at one token and once a step through shared memory from 2 tokens; ``quads``
loads them once a step as 16-byte quads of inline PTX (344 -> 308 and 290 -> 253 instructions a
step). Each with PDL as the arm has it. gpt-oss-20b-decode-grouped's shapes, several routing draws,
both ranks. Each step is checked (reference gate, sentinels) and compared bit for bit with the
arm's before it is timed; then the steps are interleaved (moebench's clock), and fc1 and fc2 alone.

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/loads_bench.py
[--tokens 1,2,4,8] [--seeds 0,1,2,3] [--rank 0,1] [--precision w4a16]
[--kinds STAGES[:REG[:TOKEN]],...] (each a step with the package's GEMV: STAGES ``num_stages``, 0
the plain loop; REG ``max_registers``, 0 none, - or left out the launcher's choice for the token
count (MXFP4 80 from 4 tokens); TOKEN ``token_load``, broadcast when left out; named sSTAGES,
rREG and the token load's first letter)
"""

from __future__ import annotations

import functools
import time

from sparse_ab import main, parser, steps_with

from moebench.kernels.sparse_gemv import sparse_gemv


def kinds(spec: str) -> list:
    """(name, build) for each kind of ``spec`` (the module docstring's STAGES[:REG[:TOKEN]])."""
    builds = []
    for item in filter(None, spec.split(",")):
        parts = item.split(":")
        st, reg, token = parts + ["-", "broadcast"][len(parts) - 1 :]
        opts = {"num_stages": int(st) or None, "token_load": token}
        if reg != "-":
            opts["max_registers"] = int(reg)
        gemv = functools.partial(sparse_gemv, **opts)
        builds.append((f"s{st}r{reg}{token[0]}", functools.partial(steps_with, gemv=gemv)))
    return builds


if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("1,2,4,8", "0,1,2,3", "w4a16", "0:0:quads,0:-:words,3:0,2:80,3:0:quads").parse_args()
    main(a, kinds(a.kinds))
    print(f"total {time.monotonic() - t0:.0f} s")
