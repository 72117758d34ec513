"""Scratch (issue 28, thirty-eighth session, built without device time left; not yet run): the
sparse decode step (fc1, fc2, combine; one CUDA graph, L2 flushed before each replay) against the
same step with the combine folded into fc2 (`sparse_gemv(combine=...)`, `moebench/kernels/
gemv_combine.py`: the last of a row block's local slots writes y; two launches instead of three),
each with the arm's launches otherwise (its weights, token load and dependent launch). The
thirty-eighth session measured one launch boundary at about 2 us of a 26-40 us one-token step on
an H100 (docs/PERF.md `step_floor_h100`). Each step is checked (reference gate, sentinels) and
compared bit for bit with the arm's before it is timed, then interleaved (moebench's clock), then
fc1 and fc2 alone (fc2 alone holds the combine in the folded kind).

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/fold_bench.py
[--tokens 1,2,4] [--seeds 0,1,2,3] [--rank 0,1] [--precision w8a16]. On the CPU (interpreter)
with a small decode scenario (`--scenario S.yaml`) it checks and compares the steps and times
nothing.
"""

from __future__ import annotations

import time

from sparse_ab import main, parser

from arms.decode import pipeline
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.core.vocabulary import DECODE_STAGES
from moebench.kernels.gemv_combine import combine_counters
from moebench.kernels.sparse_gemv import sparse_gemv


def folded(ws: Workspace) -> tuple[Stage, ...]:
    """The arm's stages with fc2's GEMV folding the combine in and the combine stage empty (so
    that the step and the checks see the three stages' names)."""
    p = ws.problem
    counters = combine_counters(p.topk_ids_TK.shape[0], ws.y_TD.shape[1], ws.y_TD.device)

    def gemv(x, ids, w, scale, bias, out, **kw):
        if out is ws.o:  # fc2
            kw["combine"] = (p.topk_weights_TK, ws.y_TD, counters)
        sparse_gemv(x, ids, w, scale, bias, out, **kw)

    fc1, fc2, _ = pipeline.build_stages(ws, gemv=gemv)
    return fc1, fc2, Stage(name=DECODE_STAGES[2], run=lambda: None)


if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("1,2,4", "0,1,2,3", "w8a16", "fold").parse_args()
    main(a, [("fold", folded)])
    print(f"total {time.monotonic() - t0:.0f} s")
