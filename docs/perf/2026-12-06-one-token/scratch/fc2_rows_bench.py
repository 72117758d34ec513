"""Scratch (issue 28, 2026-12-06, twenty-fourth session): the one-token sparse FP8 step with fc2
on 4 rows a program (512 bytes a row a step, the launch the GEMV takes from 2 tokens) instead of
2 rows at 1,024, fc1 unchanged; with the token's values through the row-broadcast tile or as
16-byte quads. Why: the second call's timeline (gemv_timeline.py) showed fc2's 4,320 local
one-warp programs at three local slots outnumber the 4,224 an H100 holds at once (32 an SM), so
the last ones start about 5 us after the wait and end the step 3 us after the median program's
loop; at 4 rows fc2 has 2,160 local programs, one wave. The fourteenth session measured fc2 on 4
rows slower on the H200 (32.09 against 31.36 us), before the dependent launch's local trigger.
Checked and compared bit for bit with the arm's step first, then timed (`sparse_ab.main`).

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/fc2_rows_bench.py
[--tokens 1] [--seeds 0,1,2,3] [--rank 0,1]
"""

from __future__ import annotations

import functools
import time

from sparse_ab import main, parser

from arms.decode import pipeline
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.sparse_gemv import sparse_gemv


def steps_fc2(ws: Workspace, fc2_opts: dict) -> tuple[Stage, ...]:
    """The arm's one-token step with ``fc2_opts`` for fc2's GEMV launch only."""
    p = ws.problem
    off = p.expert_offset
    pdl, trigger = pipeline.step_pdl(ws)

    def fc1():
        sparse_gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a, expert_offset=off,
                    glu=p.activation, pdl=pdl, pdl_trigger=trigger)  # fmt: skip

    def fc2():
        sparse_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, expert_offset=off,
                    pdl=pdl, pdl_trigger=trigger, **fc2_opts)  # fmt: skip

    def comb():
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=pdl)  # fmt: skip

    return tuple(Stage(name=n, run=f) for n, f in (("fc1", fc1), ("fc2", fc2), ("combine", comb)))


if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("1", "0,1,2,3", "w8a16", "").parse_args()
    four = dict(block_n=4, block_k=512)
    kinds = [("fc2_4rows", four), ("fc2_4rows_quads", dict(four, token_load="quads"))]
    # loose: 512 bytes a row a step sums a row's lanes in another order than 1,024 (last fp32 bits).
    main(a, [(n, functools.partial(steps_fc2, fc2_opts=o)) for n, o in kinds], loose=True)
    print(f"total {time.monotonic() - t0:.0f} s")
