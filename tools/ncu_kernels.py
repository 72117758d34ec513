"""A few launches of the kernels that miss their targets, for Nsight Compute to look inside.

- ``gemv``: the sparse decode GEMV (fc1 with the GLU, then fc2) at gpt-oss-20b rank-0 shapes, one
  token, FP8 weights (issue 5: ~46% of copy bandwidth against a 75% target);
- ``act``: the masked activation + FP8 quant at the seed microbenchmark shape (28,672 capacity
  rows, 3,072 live over 32 experts; issue 3: 15 us against 10);
- ``grouped`` / ``grouped-mxfp4``: the grouped decode's fc1 (with the GLU) and fc2 at gpt-oss-20b
  EP2 shapes (16 local experts of 32, top-4, D = F = 2,880), 64 tokens of random routing, random
  FP8 (or MXFP4) weights, each stage with the arm's launch and operands as the arm builds them
  (FP8: placed words packed box by box; MXFP4: rotated bytes packed box by box; fc2 waiting for
  fc1 expert by expert; issue 28's 85% of copy over the touched experts' bytes);
  ``grouped-natural`` the FP8 tile on the natural weights with none of those, ``grouped-placed``
  with placed words only (the form of the 2026-12-05 records), ``grouped-mxfp4-natural`` the
  MXFP4 tile on rotated bytes in their rows (not packed: the form before 2026-12-06's
  twenty-seventh session), ``grouped-mxfp4-padded`` the arm's MXFP4 launches with the scales in
  padded rows (not packed: the form before 2026-12-06's twenty-eighth session),
  ``grouped-mxfp4-dot`` the arm's MXFP4 launches with the values in the tile's K order
  (``Launch.mx_dot_order``), ``grouped-mxfp4-stream`` the arm's MXFP4 launches on the persistent,
  evenly split grid at 6 programs an SM (``Launch.stream_k``; fc2 then waits for the whole of fc1,
  the thirty-second session's variant).

Each kernel runs three times (the first compiles); profile the later ones, e.g.

    ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:_sparse_gemv_fp8 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        python3 tools/ncu_kernels.py gemv

Usage (GPU): PYTHONPATH=$PWD python3 tools/ncu_kernels.py KERNELS
(KERNELS: gemv, act, grouped, grouped-mxfp4, grouped-natural, grouped-placed,
grouped-mxfp4-natural, grouped-mxfp4-padded, grouped-mxfp4-dot or grouped-mxfp4-stream)
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


def grouped(fmt: str = "fp8", tokens: int = 64, form: str = "arm") -> None:
    """fc1 and fc2 of the grouped decode. ``form``: "arm", the launches and operands as the arm
    builds them (`grouped_decode.launches`' rules: placed and packed FP8 weights, MXFP4's rotated
    and packed weights and padded scales, fc2 waiting for fc1 expert by expert with its counters
    where the launches pair them); "natural", the tile on the natural weights with none of those
    (MXFP4: rotated, not packed); "placed", placed words only (the 2026-12-05 records' form);
    "padded", the arm's with MXFP4's scales in padded rows, not packed; "dot", the arm's with
    MXFP4's values in the tile's K order; "stream", the arm's on the persistent grid of 6
    programs an SM (not paired: fc2 waits for the whole of fc1)."""
    from dataclasses import replace

    from arms.decode.grouped_decode import tiles_scales, tiles_weights
    from moebench.kernels.expert_ready import ready_counters
    from moebench.kernels.grouped_gemv import grid_tiles, grouped_gemv
    from moebench.kernels.grouped_launch import default_launch, paired_launches
    from moebench.kernels.stream_k import stream_programs, stream_scratch

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
    l1 = default_launch(fmt, columns=2 * F, reduction=D, **shape)
    l2 = default_launch(fmt, columns=D, reduction=F, **shape)
    if form == "stream":
        l1, l2 = (replace(f, stream_k=6) for f in (l1, l2))
    if form in ("arm", "padded", "dot", "stream"):
        l1, l2 = paired_launches(l1, l2, fmt, slots_per_expert=tokens * K / E)
        if form == "padded":
            l1, l2 = (replace(f, mx_packed_scales=False) for f in (l1, l2))
        if form == "dot":
            l1, l2 = (replace(f, mx_dot_order=True) for f in (l1, l2))
    else:
        l1, l2 = (replace(f, fp8_placed=form == "placed", fp8_packed=False, mx_packed=False,
                          mx_packed_scales=False) for f in (l1, l2))  # fmt: skip
    # The operands each launch reads, as the arm hands them (arms/decode/grouped_decode.py).
    (s1, m1), (s2, m2) = tiles_scales(w1, s1, l1), tiles_scales(w2, s2, l2)
    w1, w2 = tiles_weights(w1, l1), tiles_weights(w2, l2)
    ready = ready_counters(E, dev) if l1.expert_ready else None
    st1, st2 = (stream_scratch(stream_programs(dev, f.stream_k), grid_tiles(tokens, K, E, n, f),
                               f.block_n, f.block_m, dev) if f.stream_k else None
                for f, n in ((l1, 2 * F), (l2, D)))  # fmt: skip
    for _ in range(3):
        grouped_gemv(x, ids, w1, s1, b1, a, expert_offset=0, launch=l1, glu="swiglu_oai",
                     max_scale_byte=m1, ready=ready, stream=st1)  # fmt: skip
        grouped_gemv(a, ids, w2, s2, b2, o, expert_offset=0, launch=l2, max_scale_byte=m2,
                     ready=ready, stream=st2)  # fmt: skip
    torch.cuda.synchronize()


if __name__ == "__main__":
    {"gemv": gemv, "act": act, "grouped": grouped,
     "grouped-mxfp4": lambda: grouped("mxfp4"),
     "grouped-natural": lambda: grouped("fp8", form="natural"),
     "grouped-placed": lambda: grouped("fp8", form="placed"),
     "grouped-mxfp4-natural": lambda: grouped("mxfp4", form="natural"),
     "grouped-mxfp4-padded": lambda: grouped("mxfp4", form="padded"),
     "grouped-mxfp4-dot": lambda: grouped("mxfp4", form="dot"),
     "grouped-mxfp4-stream": lambda: grouped("mxfp4", form="stream")}[sys.argv[1]]()  # fmt: skip
