"""`tools/bench_kernels.py`'s parts ``scatter`` and ``combine``: the prefill arms' scatter and
combine at DeepSeek-V4-Flash rank 0 of EP8 (512 tokens a rank), their launch variants and the
byte floors beside them. GPU only."""

from __future__ import annotations

import torch
from bench_kernels_common import (
    COPY_TBS,
    A,
    D,
    F,
    M,
    dev,
    flush,
    record,
    time_graph,
    time_interleaved,
)

from moebench.core import reference


def scatter_floor_bytes(plan: dict, T: int, K: int) -> tuple[int, int, int]:
    """(live rows, tokens read, the scatter's fewest bytes): each routed token read once and each
    live row written once (FP8 row plus 16 bytes of scale words), the ids read and the slot map
    written, and the two row maps written over the whole buffer."""
    live = int((plan["row_src_M"] >= 0).sum())
    tokens_read = int((plan["slot_row_TK"] >= 0).any(dim=1).sum())
    return live, tokens_read, (tokens_read + live) * (D + 16) + T * K * 4 * 2 + M * 8


def against_floor(nbytes: int, us: float) -> dict:
    """The byte floor at the copy ceiling, the issue's target (2 x floor + 5 us) and TB/s."""
    floor = nbytes / COPY_TBS / 1e6
    return dict(floor_us=floor, target_us=2 * floor + 5, tbs=nbytes / us / 1e6)


def rank0_pipeline():
    """(problem, workspace, {stage: run}) of V4-Flash rank 0 of EP8 at 512 tokens per rank, the
    masked arm's stages, every stage run once."""
    from arms.prefill.pipeline import build_stages
    from moebench.arm.prefill import Workspace
    from moebench.plan.inputs import build_problem, make_tokens, make_weights
    from moebench.routing.synthetic import synthesize

    experts = 256  # V4-Flash's, eight ranks of E
    r = synthesize(family="uniform", tokens=4096, experts=experts, top_k=6, ep=8)
    w13, w2 = make_weights(experts=range(32), hidden=D, intermediate=F, seed=0, device=dev)
    p = build_problem(
        x_TD=make_tokens(tokens=4096, hidden=D, seed=0, device=dev),
        topk_ids_TK=r.topk_ids_TK.to(dev),
        topk_weights_TK=r.topk_weights_TK.to(dev),
        w13_EFD=w13,
        w2_EDF=w2,
        expert_offset=0,
        experts=experts,
        alignment=A,
        capacity_rows=M,
        precision="fp8",
        activation="silu",
    )
    ws = Workspace(p)
    stages = {st.name: st.run for st in build_stages(ws, gemm_mode="psum", masked_act=True)}
    for st in stages.values():
        st()
    return p, ws, stages


# (tokens a program, columns a program, warps) of the combine; the first is the arms' launch.
COMBINE_VARIANTS = (
    (1, 1024, 4),
    (1, 2048, 4),
    (1, 4096, 8),
    (1, 1024, 2),
    (1, 512, 2),
    (2, 1024, 4),
    (2, 2048, 8),
    (4, 1024, 8),
    (4, 512, 4),
    (8, 512, 8),
)


def bench_combine() -> None:
    """The combine at the V4-Flash EP8 rank shape (4,096 tokens, 3,072 live rows): tile variants,
    bitwise against the arms' launch, timed interleaved, with CUPTI device time beside."""
    print("== combine tiles, V4-Flash rank 0 of EP8, 512 tokens per rank", flush=True)
    from torch.profiler import ProfilerActivity, profile

    from moebench.kernels.combine import combine

    p, ws, _ = rank0_pipeline()
    T = p.topk_ids_TK.shape[0]
    live = int((ws.slot_row_TK >= 0).sum())
    nbytes = live * D * 2 + T * D * 2 + T * 6 * 8
    want = torch.empty_like(ws.y_TD)
    combine(ws.o_MD, ws.slot_row_TK, p.topk_weights_TK, want)
    timed = []
    for bt, bd, nw in COMBINE_VARIANTS:
        y = torch.full_like(ws.y_TD, float("nan"))
        kw = dict(block_t=bt, block_d=bd, num_warps=nw)
        combine(ws.o_MD, ws.slot_row_TK, p.topk_weights_TK, y, **kw)
        exact = torch.equal(y.view(torch.int16), want.view(torch.int16))
        timed.append((dict(kernel="combine", block_t=bt, block_d=bd, warps=nw, exact=exact),
                      lambda y=y, kw=kw: combine(ws.o_MD, ws.slot_row_TK, p.topk_weights_TK, y,
                                                 **kw)))  # fmt: skip
    # What these bytes cost torch: the live rows gathered (read + written) and y zeroed (written).
    rows = ws.slot_row_TK[ws.slot_row_TK >= 0].long()
    gathered = torch.empty(rows.numel(), D, dtype=ws.o_MD.dtype, device=dev)
    y0 = torch.empty_like(ws.y_TD)
    timed.append((dict(kernel="torch_index_select_live_rows", bytes=2 * rows.numel() * D * 2),
                  lambda: torch.index_select(ws.o_MD, 0, rows, out=gathered)))  # fmt: skip
    timed.append((dict(kernel="torch_zero_y", bytes=y0.numel() * 2), lambda: y0.zero_()))
    times = time_interleaved([fn for _, fn in timed], rounds=10)
    for (row, fn), us in zip(timed, times, strict=True):
        if "bytes" in row:
            record(**row, us=us, tbs=row["bytes"] / us / 1e6)
            continue
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                flush.max()
                fn()
            torch.cuda.synchronize()
        dev_us = sorted(e.device_time_total for e in prof.events()
                        if e.name.startswith("_combine"))  # fmt: skip
        record(**row, us=us, device_us=dev_us[len(dev_us) // 2] if dev_us else float("nan"),
               **against_floor(nbytes, us))  # fmt: skip


def bench_scatter_combine() -> None:
    print("== scatter and combine, V4-Flash rank 0 of EP8, 512 tokens per rank", flush=True)
    p, ws, stages = rank0_pipeline()
    plan = reference.scatter_plan(p.topk_ids_TK, 0, 32, A, M)
    exact = all(
        torch.equal(getattr(ws, k), plan[k])
        for k in ("ends_E", "row_expert_M", "row_src_M", "slot_row_TK")
    )
    live, _, scatter_bytes = scatter_floor_bytes(plan, *p.topk_ids_TK.shape)
    combine_bytes = live * D * 2 + 4096 * D * 2 + 4096 * 6 * 8
    for name, nbytes in (("scatter", scatter_bytes), ("combine", combine_bytes)):
        us = time_graph(stages[name], reps=50)
        record(kernel=name, exact=exact, us=us, **against_floor(nbytes, us))
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            flush.zero_()
            stages["scatter"]()
        torch.cuda.synchronize()
    for ev in prof.key_averages():
        if ev.key.startswith("_scatter"):
            record(kernel=f"profile:{ev.key}", us=ev.device_time_total / ev.count)
    bench_scatter_variants(p)


# Launch plans of the scatter (moebench/kernels/scatter.py `scatter` keywords), each checked
# bitwise against the original four-launch plan ("none") on whole buffers, then timed.
SCATTER_VARIANTS = [
    dict(fusion="none"),  # the four launches measured at 19.8 us
    dict(fusion="maps"),  # the default: maps folded into assign, same copy
    *(
        dict(fusion="maps", copy_block_t=bt, copy_block_d=bd, copy_warps=nw)
        for bt, bd, nw in ((8, 1024, 4), (2, 4096, 4), (4, 4096, 8), (8, 4096, 8), (16, 4096, 16))
    ),
    dict(fusion="maps", chunk=1024),
    dict(fusion="maps", chunk=512),
    *(
        dict(fusion="maps_copy", chunk=ch, copy_block_t=br, copy_block_d=bd, copy_warps=nw)
        for ch, br, bd, nw in (
            (None, 4, 4096, 4),
            (None, 8, 4096, 8),
            (None, 2, 4096, 4),
            (1024, 4, 4096, 4),
            (512, 4, 4096, 4),
            (512, 2, 4096, 4),
        )
    ),
]


def bench_scatter_variants(p) -> None:
    from torch.profiler import ProfilerActivity, profile

    from moebench.kernels.scatter import scatter, scatter_scratch

    T, K = p.topk_ids_TK.shape
    # "hot": every token's first slot goes to local expert 5, the others to other ranks: one
    # expert holds all 4,096 live rows (the worst case for the copy folded into assign).
    hot = torch.stack([torch.randperm(224, generator=torch.Generator().manual_seed(t))[: K - 1]
                       for t in range(T)]) + 32  # fmt: skip
    hot = torch.cat([torch.full((T, 1), 5), hot], dim=1).to(torch.int32).to(dev)
    scratch = scatter_scratch(T, K, 32, dev, chunk=512)
    for routing, ids in (("uniform", p.topk_ids_TK), ("hot_expert", hot)):
        plan = reference.scatter_plan(ids, 0, 32, A, M)
        live, tokens_read, nbytes = scatter_floor_bytes(plan, T, K)
        print(f"-- scatter variants, {routing}: {live} live rows, {tokens_read} tokens", flush=True)

        def fresh():
            return dict(
                xs_MD=torch.full((M, D), 0x7F, dtype=torch.uint8, device=dev).view(
                    torch.float8_e4m3fn
                ),
                xs_sf_MG4=reference.empty_packed_scales(M, D // reference.GROUP, dev).fill_(
                    0x7F7F7F7F
                ),
                counts_E=torch.full((32,), -7, dtype=torch.int32, device=dev),
                ends_E=torch.full((32,), -7, dtype=torch.int32, device=dev),
                row_expert_M=torch.full((M,), -7, dtype=torch.int32, device=dev),
                row_src_M=torch.full((M,), -7, dtype=torch.int32, device=dev),
                slot_row_TK=torch.full((T, K), -7, dtype=torch.int32, device=dev),
            )

        def run(bufs, v):
            scatter(p.x_TD, p.x_sf_TG4, ids, expert_offset=0, alignment=A, scratch_EC=scratch,
                    **bufs, **v)  # fmt: skip

        want = None
        for v in SCATTER_VARIANTS:
            label = ",".join(f"{k}={x}" for k, x in v.items())
            bufs = fresh()
            try:
                run(bufs, v)
                torch.cuda.synchronize()
            except Exception as exc:  # a variant that cannot compile or launch is a row
                record(
                    kernel="scatter_variant", routing=routing, variant=label, error=str(exc)[:160]
                )
                continue
            got = {k: t.view(torch.uint8) if t.dtype.itemsize == 1 else t for k, t in bufs.items()}
            if want is None:  # the reference plan: index maps, then the copied rows and scales
                want = got
                src = plan["row_src_M"]
                tok = src[src >= 0].long() // K
                ok = all(torch.equal(got[k], plan[k]) for k in plan)
                ok &= torch.equal(got["xs_MD"][src >= 0], p.x_TD.view(torch.uint8)[tok])
                ok &= torch.equal(got["xs_sf_MG4"][src >= 0], p.x_sf_TG4[tok])
                ok &= bool((got["xs_MD"][src < 0] == 0x7F).all())
            else:
                ok = all(torch.equal(got[k], want[k]) for k in want)
            us = time_graph(lambda bufs=bufs, v=v: run(bufs, v), reps=50)
            record(
                kernel="scatter_variant",
                routing=routing,
                variant=label,
                exact=ok,
                us=us,
                **against_floor(nbytes, us),
            )
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    flush.max()
                    run(bufs, v)
                torch.cuda.synchronize()
            record(
                kernel="scatter_variant_launches",
                routing=routing,
                variant=label,
                **{
                    ev.key: ev.device_time_total / ev.count
                    for ev in prof.key_averages()
                    if ev.key.startswith("_scatter")
                },
            )
