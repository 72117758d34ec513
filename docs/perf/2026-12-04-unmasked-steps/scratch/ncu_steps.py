"""Scratch (issue 28, 2026-12-04, fifteenth session): three launches of the sparse GEMV's fc1 (GLU)
and fc2 at one token of gpt-oss-20b-decode (rank 0), with the package's kernel (FP8 at 2 rows and
MXFP4: every step masked) or `unmasked_gemv.py`'s (f947aed: whole steps unmasked), for Nsight
Compute to compare their warp states. Usage (GPU, repository root):

    ncu --clock-control none --launch-skip 2 --launch-count 2 -k regex:_sparse_gemv_ \\
        --section SpeedOfLight --section WarpStateStats --section InstructionStats \\
        python3 DIR/ncu_steps.py w4a16|w8a16 masked|unmasked
"""

from __future__ import annotations

import sys

import torch
from unmasked_gemv import sparse_gemv as unmasked_gemv

from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario

dev = torch.device("cuda")


def main(precision: str, kind: str) -> None:
    gemv = sparse_gemv if kind == "masked" else unmasked_gemv
    s = load_scenario("scenarios/gpt-oss-20b-decode.yaml")
    p = next(q for q in plan(s) if q.case.scenario.shape.tokens_per_rank == 1
             and q.case.scenario.precision == precision)  # fmt: skip
    cs = p.case.scenario
    x = make_tokens(tokens=1, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
    prob = family_of(cs).problem(cs, p.routing, p.capacity_rows, x, 0, dev)
    ws = Workspace(prob, layout="TKD")
    for _ in range(2):
        gemv(prob.x_TD, prob.topk_ids_TK, prob.w13, prob.w13_scale, prob.b13_E2F, ws.a,
             expert_offset=prob.expert_offset, glu=prob.activation)  # fmt: skip
        gemv(ws.a, prob.topk_ids_TK, prob.w2, prob.w2_scale, prob.b2_ED, ws.o,
             expert_offset=prob.expert_offset)  # fmt: skip
    torch.cuda.synchronize()
    print(precision, kind, "slots on rank 0:", int(((prob.topk_ids_TK >= prob.expert_offset)
          & (prob.topk_ids_TK < prob.expert_offset + prob.local_experts)).sum()))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
