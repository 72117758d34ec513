"""A few launches of the kernels that miss their targets, for Nsight Compute to look inside.

- ``gemv``: the sparse decode GEMV (fc1 with the GLU, then fc2) at gpt-oss-20b rank-0 shapes, one
  token, FP8 weights (issue 5: ~46% of copy bandwidth against a 75% target);
- ``act``: the masked activation + FP8 quant at the seed microbenchmark shape (28,672 capacity
  rows, 3,072 live over 32 experts; issue 3: 15 us against 10).

Each kernel runs three times (the first compiles); profile the later ones, e.g.

    ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:_sparse_gemv_fp8 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        python3 tools/ncu_kernels.py gemv

Usage (GPU): PYTHONPATH=$PWD python3 tools/ncu_kernels.py gemv|act
"""

from __future__ import annotations

import sys

import torch

dev = torch.device("cuda")


def gemv() -> None:
    from moebench.arm.decode import Workspace as DecodeWorkspace
    from moebench.gates.families import family_of
    from moebench.kernels.sparse_gemv import sparse_gemv
    from moebench.plan.cases import plan
    from moebench.plan.inputs import make_tokens
    from moebench.spec.load import load_scenario

    s = load_scenario("scenarios/gpt-oss-20b-decode.yaml")
    p = next(
        q
        for q in plan(s)
        if q.case.scenario.shape.tokens_per_rank == 1 and q.case.scenario.precision == "w8a16"
    )
    cs = p.case.scenario
    x = make_tokens(tokens=1, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
    prob = family_of(cs).problem(cs, p.routing, p.capacity_rows, x, 0, dev)
    ws = DecodeWorkspace(prob, layout="TKD")
    for _ in range(3):
        sparse_gemv(prob.x_TD, prob.topk_ids_TK, prob.w13, prob.w13_scale, prob.b13_E2F, ws.a,
                    expert_offset=prob.expert_offset, glu=prob.activation)  # fmt: skip
        sparse_gemv(ws.a, prob.topk_ids_TK, prob.w2, prob.w2_scale, prob.b2_ED, ws.o,
                    expert_offset=prob.expert_offset)  # fmt: skip
    torch.cuda.synchronize()


def act() -> None:
    from moebench.kernels.act_quant import act_quant_masked

    E, M, F, A, live = 32, 28_672, 2048, 128, 3072
    counts = torch.full((E,), live // E, dtype=torch.int64)
    spans = (counts + A - 1) // A * A
    ends = (torch.cumsum(spans, 0) - spans + counts).to(torch.int32).to(dev)
    h = torch.randn(M, 2 * F, device=dev).to(torch.bfloat16)
    out = torch.empty(M, F, dtype=torch.float8_e4m3fn, device=dev)
    sf = torch.empty(F // 128 // 4, M, dtype=torch.int32, device=dev).t()  # M-major packed words
    for _ in range(3):
        act_quant_masked(h, out, sf, ends, alignment=A, block_rows=16, groups=2, schedule="grid")
    torch.cuda.synchronize()


if __name__ == "__main__":
    {"gemv": gemv, "act": act}[sys.argv[1]]()
