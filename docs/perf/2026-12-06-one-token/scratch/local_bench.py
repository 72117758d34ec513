"""Scratch (issue 28, 2026-12-06, twenty-fourth session): the sparse decode step (fc1, fc2,
combine; one CUDA graph, L2 flushed before each replay) with the arm's GEMV against the same GEMV
with ``local_first=True`` (`gemv_parts.program_expert`: the local (token, slot) pairs served by
the first programs in launch order, the programs past their count leaving last), each with the
dependent launch as the arm has it for the count. gpt-oss-20b-decode-grouped's shapes, several
routing draws, both ranks. Each step is checked (reference gate, sentinels) and compared bit for
bit with the arm's before it is timed (`sparse_ab.main`).

Why: at one token the FP8 GEMV launches 2,880 one-warp programs a slot for fc1 and 1,440 for fc2,
grid (row blocks, slot, token), so a slot routed to another rank puts its programs, which only
read the routing and leave, between the local slots' in launch order; the GPU starts programs at a
finite rate (about 1.2 ns each on the H200, docs/perf/HISTORY.md 2026-12-01), so the next local
slot's programs wait behind them while the resident ones drain.

Usage (GPU, repository root): PYTHONPATH=$PWD:$PWD/tools python3 DIR/local_bench.py
[--tokens 1,2,4] [--seeds 0,1,2,3] [--rank 0,1] [--precision w8a16]
"""

from __future__ import annotations

import functools
import time

import torch
from sparse_ab import dev, main, parser, steps_with

from moebench.gates.families import family_of
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario, scenario_with


def local_positions(a) -> None:
    """Print, for each draw, rank and count up to 4 tokens, which (token, slot) pairs are local
    (1) and remote (0) in launch order: where the remote slots' programs sit."""
    toks = {int(v) for v in a.tokens.split(",")}
    for seed in [int(v) for v in a.seeds.split(",")]:
        s = scenario_with(load_scenario(a.scenario), **{"routing.seed": seed})
        for rank in [int(v) for v in a.rank.split(",")]:
            for pl in plan(s):
                cs = pl.case.scenario
                T = cs.shape.tokens_per_rank
                if T not in toks or T > 4 or cs.precision != a.precision:
                    continue
                x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
                p = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, x, rank, dev)
                e = p.topk_ids_TK.cpu() - p.expert_offset
                loc = ((e >= 0) & (e < p.local_experts)).to(torch.int32).tolist()
                print(f"positions T={T} seed={seed} rank={rank}: "
                      + " ".join("".join(map(str, r)) for r in loc), flush=True)  # fmt: skip


if __name__ == "__main__":
    t0 = time.monotonic()
    a = parser("1,2,4", "0,1,2,3", "w8a16", "local_first").parse_args()
    local_positions(a)
    gemv = functools.partial(sparse_gemv, local_first=True)
    main(a, [("local_first", functools.partial(steps_with, gemv=gemv))])
    print(f"total {time.monotonic() - t0:.0f} s")
