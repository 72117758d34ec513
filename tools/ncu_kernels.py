"""A few launches of the kernels that miss their targets, for Nsight Compute to look inside.

- ``gemv``: the sparse decode GEMV (fc1 with the GLU, then fc2) at gpt-oss-20b rank-0 shapes, one
  token, FP8 weights (issue 5: ~46% of copy bandwidth against a 75% target);
- ``act``: the masked activation + FP8 quant at the seed microbenchmark shape (28,672 capacity
  rows, 3,072 live over 32 experts; issue 3: 15 us against 10);
- ``grouped`` / ``grouped-mxfp4``: the grouped decode's fc1 (with the GLU) and fc2 at gpt-oss-20b
  EP2 shapes (16 local experts of 32, top-4, D = F = 2,880), 64 tokens of random routing, random
  FP8 (or MXFP4) weights, each stage with the arm's default launch (issue 28: 66% of copy over
  the touched experts' bytes against an 85% target); ``grouped-placed`` the FP8 tile reading its
  weights in `fp8_placed`'s layout (`Launch.fp8_placed`), beside ``grouped``'s natural layout.

Each kernel runs three times (the first compiles); profile the later ones, e.g.

    ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:_sparse_gemv_fp8 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        python3 tools/ncu_kernels.py gemv

Usage (GPU): PYTHONPATH=$PWD python3 tools/ncu_kernels.py KERNELS
(KERNELS: gemv, act, grouped, grouped-mxfp4 or grouped-placed)
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


def grouped(fmt: str = "fp8", tokens: int = 64, placed: bool = False) -> None:
    from dataclasses import replace

    from moebench.kernels.fp8_placed import place_e4m3
    from moebench.kernels.grouped_gemv import grouped_gemv, max_scale_byte, word_aligned_scales
    from moebench.kernels.grouped_launch import default_launch

    torch.manual_seed(0)
    E, E_ALL, K, D, F = 16, 32, 4, 2880, 2880

    def weights(N, R):
        if fmt == "fp8":
            w = (torch.randn(E, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
            s = torch.rand(E, device=dev) * 0.01 + 0.001
        else:
            w = torch.randint(0, 256, (E, N, R // 2), device=dev, dtype=torch.uint8)
            s = torch.randint(118, 124, (E, N, R // 32), device=dev, dtype=torch.uint8)
        return w, s, (torch.randn(E, N, device=dev) * 0.1).to(torch.bfloat16)

    (w1, s1, b1), (w2, s2, b2) = weights(2 * F, D), weights(D, F)
    ids = torch.stack([torch.randperm(E_ALL, device=dev)[:K] for _ in range(tokens)]).int()
    x = torch.randn(tokens, D, device=dev).to(torch.bfloat16)
    a = torch.empty(tokens, K, F, device=dev, dtype=torch.bfloat16)
    o = torch.empty(tokens, K, D, device=dev, dtype=torch.bfloat16)
    shape = dict(tokens=tokens, top_k=K, experts=E, pdl=True)
    l1, l2 = default_launch(fmt, columns=2 * F, **shape), default_launch(fmt, columns=D, **shape)
    # The scales as the arm hands them to the MXFP4 tile (arms/decode/grouped_decode.py,
    # tiles_scales): rows on 16-byte boundaries, and their largest byte for the folded decode.
    if fmt == "mxfp4":
        s1, s2 = word_aligned_scales(s1), word_aligned_scales(s2)
    m1, m2 = max_scale_byte(s1), max_scale_byte(s2)
    if placed:  # the FP8 tile's placed layout, as the arm would hand it (tiles_weights)
        w1, w2 = place_e4m3(w1), place_e4m3(w2)
        l1, l2 = replace(l1, fp8_placed=True), replace(l2, fp8_placed=True)
    for _ in range(3):
        grouped_gemv(x, ids, w1, s1, b1, a, expert_offset=0, launch=l1, glu="swiglu_oai",
                     max_scale_byte=m1)  # fmt: skip
        grouped_gemv(a, ids, w2, s2, b2, o, expert_offset=0, launch=l2, max_scale_byte=m2)
    torch.cuda.synchronize()


if __name__ == "__main__":
    {"gemv": gemv, "act": act, "grouped": grouped,
     "grouped-mxfp4": lambda: grouped("mxfp4"),
     "grouped-placed": lambda: grouped("fp8", placed=True)}[sys.argv[1]]()  # fmt: skip
