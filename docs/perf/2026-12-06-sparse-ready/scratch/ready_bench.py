"""Scratch (issue 28, 2026-12-06, twenty-fifth session): the sparse decode step (fc1, fc2,
combine; one CUDA graph, L2 flushed before each replay) as the arm builds it against the same step
with fc2 waiting for fc1 expert by expert (`sparse_gemv(expert_ready=...)`, the counters of
`moebench.kernels.expert_ready`, made once a build), each step checked (reference gate, sentinels)
and compared bit for bit with the arm's before it is timed (`sparse_ab.main`).

Why: the one-token timeline (docs/perf/2026-12-06-one-token/call2) has fc2's programs resident
from 17.06 us but waiting for the whole of fc1 until 22.18, though fc1 serves its slots in launch
order and the first slots' experts are done well before its last program ends.

Kinds (FP8; the arm's blocks, token load and early loads):
- ``ready``: the arm's dependent launch for the count (one token: trigger once local), fc1
  signalling and fc2 waiting expert by expert. At 2 tokens and up the arm has plain launches,
  where the wait would never wait: this kind then takes the one-token dependent launch.
- ``ready_peel2``: ``ready`` with fc1 loading its first two steps' weights before it counts
  itself started (the atomic's round trip behind the loads).
- ``pdl_local`` (2 tokens and up only): the one-token dependent launch without the counters, to
  tell the launch's share from the wait's.

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/ready_bench.py
[--tokens 1,2,4] [--seeds 0,1,2,3] [--rank 0,1]
"""

from __future__ import annotations

import functools
import time

from sparse_ab import main, parser

from arms.decode import pipeline
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.expert_ready import ready_counters
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.kernels.sparse_launch import default_token_load, token_quads_fit


def steps(ws: Workspace, *, ready: bool, peel1: int = 1, one_token_pdl: bool = False):
    """The arm's FP8 sparse step (arms/decode/pipeline.py), fc2 waiting expert by expert with
    ``ready``; ``peel1`` fc1's steps before its wait; ``one_token_pdl`` the one-token dependent
    launch (trigger once local) at any count."""
    p = ws.problem
    off, T = p.expert_offset, p.topk_ids_TK.shape[0]
    pdl, trigger = (True, "local") if one_token_pdl else pipeline.step_pdl(ws)
    load = default_token_load("fp8", T)
    load1 = {"token_load": load} if token_quads_fit(p.x_TD, ws.a) else {}
    counters = ready_counters(p.local_experts, p.x_TD.device) if ready else None
    roles = ("signal", "wait") if ready else ("", "")
    common = dict(expert_offset=off, pdl=pdl, pdl_trigger=trigger, ready=counters, **load1)

    def fc1():
        sparse_gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a,
                    glu=p.activation, expert_ready=roles[0], pdl_peel=peel1, **common)  # fmt: skip

    def fc2():
        sparse_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, expert_ready=roles[1],
                    **common)  # fmt: skip

    def comb():
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=pdl)  # fmt: skip

    return tuple(Stage(name=n, run=f) for n, f in (("fc1", fc1), ("fc2", fc2), ("combine", comb)))


if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("1,2,4", "0,1,2,3", "w8a16", "ready").parse_args()
    builds = [
        ("ready", functools.partial(steps, ready=True, one_token_pdl=True)),
        ("ready_peel2", functools.partial(steps, ready=True, peel1=2, one_token_pdl=True)),
    ]
    if a.tokens != "1":
        builds.append(("pdl_local", functools.partial(steps, ready=False, one_token_pdl=True)))
    main(a, builds)
    print(f"total {time.monotonic() - t0:.0f} s")
