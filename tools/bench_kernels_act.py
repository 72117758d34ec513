"""`tools/bench_kernels.py`'s parts ``act``, ``act_full`` and ``act_floor``: the activation and
quantization kernels (`moebench.kernels.act_quant`) at the issue-3 shapes, their masked launches'
schedules and the floors beside them. GPU only."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from act_probe import _act_grid_probe  # tools/ is sys.path[0] when run as a script
from bench_kernels_common import (
    COPY_TBS,
    A,
    E,
    F,
    M,
    balanced_ends,
    dev,
    flush,
    one_expert_ends,
    record,
    time_graph,
    time_interleaved,
)

from moebench.core import reference
from moebench.core.layout import expert_ends, live_row_mask
from moebench.kernels.act_quant import act_quant_dense, act_quant_masked

# (schedule, rows a tile, column groups a tile, programs per SM, warps) of the masked launches;
# the first is the arms' launch. Programs per SM apply to the persistent and stream schedules.
ACT_MASKED_CONFIGS = (
    ("grid", 16, 2, 0, 4),
    ("persistent", 16, 1, 16, 4),
    ("persistent", 16, 2, 16, 4),
    ("persistent", 16, 2, 8, 4),
    ("persistent", 32, 1, 8, 4),
    ("persistent", 32, 1, 8, 8),
    ("persistent", 16, 1, 32, 2),
    ("persistent", 8, 2, 16, 2),
    ("stream", 16, 1, 16, 4),
    ("stream", 16, 2, 8, 4),
    ("grid", 32, 1, 0, 4),
    ("grid", 16, 1, 0, 4),
    ("persistent", 16, 4, 8, 4),
    ("persistent", 16, 4, 8, 8),
    ("persistent", 32, 2, 8, 8),
    ("persistent", 16, 1, 12, 4),
    ("persistent", 8, 4, 16, 4),
)
# Live rows of the crossover sweep between the schedules (balanced over the 32 experts).
ACT_CROSSOVER = (3072, 6144, 7168, 12288, 24576, 27648)


def masked_opts(schedule: str, rows: int, groups: int, per_sm: int, warps: int) -> dict:
    """`act_quant_masked` keyword arguments of one ACT_MASKED_CONFIGS entry."""
    return dict(
        alignment=A,
        block_rows=rows,
        groups=groups,
        programs_per_sm=max(per_sm, 1),
        num_warps=warps,
        schedule=schedule,
    )


def bench_act() -> None:
    print("== act_quant (M 28672, 2F 4096 bf16 -> F 2048 fp8 + packed UE8M0)", flush=True)
    h = (torch.randn(M, 2 * F, device=dev) * 2).to(torch.bfloat16)

    def bufs():
        return (
            torch.empty(M, F, dtype=torch.float8_e4m3fn, device=dev),
            reference.empty_packed_scales(M, F // 128, dev),
        )

    ref_q, ref_sf = bufs()
    act_quant_dense(h, ref_q, ref_sf)
    want_q, want_sf = reference.act_quant(h, "silu", "fp8")
    mism = (ref_q.view(torch.uint8) != want_q.view(torch.uint8)).float().mean().item()
    record(
        kernel="act_dense_vs_torch",
        byte_mismatch_fraction=mism,
        scales_equal=bool(torch.equal(ref_sf, want_sf)),
    )
    full_bytes = M * 2 * F * 2 + M * F + M * 4 * 4
    for br, gr, nw in ((16, 1, 4), (32, 1, 4), (16, 2, 4), (32, 2, 4), (16, 4, 4), (32, 4, 8)):
        q, sf = bufs()
        act_quant_dense(h, q, sf, block_rows=br, groups=gr, num_warps=nw)
        ok = torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8)) and torch.equal(sf, ref_sf)
        us = time_graph(
            lambda q=q, sf=sf, br=br, gr=gr, nw=nw: act_quant_dense(
                h, q, sf, block_rows=br, groups=gr, num_warps=nw
            )
        )
        record(
            kernel="act_dense",
            block_rows=br,
            groups=gr,
            warps=nw,
            exact=ok,
            us=us,
            floor_us=full_bytes / COPY_TBS / 1e6,
            tbs=full_bytes / us / 1e6,
        )
    routings = [("balanced3072", balanced_ends(3072)), ("one_expert3072", one_expert_ends(3072))]
    routings += [(f"balanced{n}", balanced_ends(n)) for n in ACT_CROSSOVER[1:]]
    for label, ends in (*routings, ("full", None)):
        if ends is None:  # every row live: 32 experts of 896 rows, no padding
            ends = expert_ends(torch.full((E,), M // E, dtype=torch.int32), A).to(dev)
        live = live_row_mask(ends, A, M)
        n = int(live.sum())
        # The dense launch of the arms beside the masked ones, all timed together.
        dq, dsf = bufs()
        timed = [
            (
                dict(kernel="act_dense_same_call", routing=label, live=M, block_rows=16, groups=2),
                lambda dq=dq, dsf=dsf: act_quant_dense(h, dq, dsf, block_rows=16, groups=2),
            )
        ]
        for sched, br, gr, pps, nw in ACT_MASKED_CONFIGS:
            q, sf = bufs()
            opts = masked_opts(sched, br, gr, pps, nw)
            act_quant_masked(h, q, sf, ends, **opts)
            ok = torch.equal(
                q.view(torch.uint8)[live], ref_q.view(torch.uint8)[live]
            ) and torch.equal(sf[live], ref_sf[live])
            row = dict(kernel="act_masked", routing=label, live=n, schedule=sched, block_rows=br,
                       groups=gr, per_sm=pps, warps=nw, exact=ok)  # fmt: skip
            timed.append(
                (row, lambda q=q, sf=sf, ends=ends, o=opts: act_quant_masked(h, q, sf, ends, **o))
            )
        if label.startswith("balanced") and label != "balanced3072":
            # the crossover sweep: the dense launch, the arms' two schedules and the best others
            timed = timed[:3]
        if label == "balanced3072":
            # what masking is held to: the dense kernel over a buffer of only the live rows
            hl, ql = h[:n], torch.empty(n, F, dtype=torch.float8_e4m3fn, device=dev)
            sfl = reference.empty_packed_scales(n, F // 128, dev)
            for br, gr in ((16, 1), (16, 2), (32, 1)):
                timed.append((
                    dict(kernel="act_dense_live_rows_only", routing=label, live=n,
                         block_rows=br, groups=gr),
                    lambda hl=hl, ql=ql, sfl=sfl, br=br, gr=gr: act_quant_dense(
                        hl, ql, sfl, block_rows=br, groups=gr),
                ))  # fmt: skip
            # The masked schedules on that same buffer, every row live (24 experts of 128 rows,
            # no padding): what the endpoint lookup alone costs over the dense pass.
            ends_live = expert_ends(torch.full((24,), n // 24, dtype=torch.int32), A).to(dev)
            for config in (ACT_MASKED_CONFIGS[0], ACT_MASKED_CONFIGS[1]):
                o = masked_opts(*config)
                timed.append((
                    dict(kernel="act_masked_live_rows_only", routing=label, live=n,
                         schedule=config[0], block_rows=config[1], groups=config[2]),
                    lambda hl=hl, ql=ql, sfl=sfl, o=o: act_quant_masked(hl, ql, sfl, ends_live,
                                                                        **o),
                ))  # fmt: skip
        times = time_interleaved([fn for _, fn in timed], rounds=10)
        device = device_times([fn for _, fn in timed]) if label in ("balanced3072", "full") else {}
        for i, ((row, _), us) in enumerate(zip(timed, times, strict=True)):
            nbytes = row["live"] * (2 * F * 2 + F + 16)
            extra = {"device_us": device[i]} if i in device else {}
            record(**row, us=us, **extra, floor_us=nbytes / COPY_TBS / 1e6, tbs=nbytes / us / 1e6)


def device_times(fns, reps: int = 20) -> dict[int, float]:
    """{index: median device time in us} of each function's kernels, from CUPTI (torch.profiler),
    L2 flushed by a read before each call: the `profile` regime's measure, no launch in it."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for i, fn in enumerate(fns):
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                flush.max()
                fn()
            torch.cuda.synchronize()
        evs = [e for e in prof.events() if getattr(e, "device_type", None)
               == torch.autograd.DeviceType.CUDA and e.name.startswith("_act")]  # fmt: skip
        if evs:
            times = sorted(e.device_time_total for e in evs)
            out[i] = times[len(times) // 2]
    return out


@triton.jit
def _touch(ptr):
    # One program, one 4-byte store: what the timer measures for a launch that does no work.
    tl.store(ptr, 1)


def compiled_meta(fn) -> list[dict]:
    """Registers, spills, shared memory and warps of every compiled specialisation of ``fn``."""
    out = []
    for dev_cache in getattr(fn, "device_caches", {}).values():
        for k in dev_cache[0].values():
            try:
                k._init_handles()
                out.append(dict(n_regs=k.n_regs, n_spills=k.n_spills,
                                shared=k.metadata.shared, warps=k.metadata.num_warps))  # fmt: skip
            except Exception as exc:  # metadata names differ across versions
                out.append(dict(error=str(exc)[:80]))
    return out


def bench_act_full() -> None:
    """The masked activation on buffers with every row live (the full-buffer case), where it
    should cost what the dense one does: dense, the arms' grid and persistent launches and the
    grid probes, interleaved, with device time and the compiled kernels' registers."""
    from moebench.kernels import act_quant as aq

    print("== act_quant on fully live buffers", flush=True)
    h = (torch.randn(M, 2 * F, device=dev) * 2).to(torch.bfloat16)
    for rows in (12_288, 28_672):
        hs = h[:rows]
        q = torch.empty(rows, F, dtype=torch.float8_e4m3fn, device=dev)
        sf = reference.empty_packed_scales(rows, F // 128, dev)
        ends = expert_ends(torch.full((E,), rows // E, dtype=torch.int32), A).to(dev)
        want_q, want_sf = torch.empty_like(q), torch.empty_like(sf)
        act_quant_dense(hs, want_q, want_sf, block_rows=16, groups=2)

        def probe(eager, lookup, q=q, sf=sf, hs=hs, ends=ends, rows=rows):
            grid = (rows // 16, F // 128 // 2)
            _act_grid_probe[grid](hs, q.view(torch.uint8), sf, ends, rows, F, E, hs.stride(0),
                                  q.stride(0), sf.stride(0), sf.stride(1), ALIGNMENT=A,
                                  BLOCK_ROWS=16, BLOCK_E=32, GROUPS=2, EAGER=eager,
                                  LOOKUP=lookup, num_warps=4)  # fmt: skip

        fns = [
            (dict(variant="dense_16x2"), lambda: act_quant_dense(hs, q, sf, block_rows=16,
                                                                 groups=2)),
            (dict(variant="masked_grid_16x2"), lambda: act_quant_masked(
                hs, q, sf, ends, **masked_opts("grid", 16, 2, 0, 4))),
            (dict(variant="masked_persistent_16x1"), lambda: act_quant_masked(
                hs, q, sf, ends, **masked_opts("persistent", 16, 1, 16, 4))),
            (dict(variant="probe_lookup"), lambda: probe(False, True)),
            (dict(variant="probe_eager_lookup"), lambda: probe(True, True)),
            (dict(variant="probe_no_lookup"), lambda: probe(False, False)),
            (dict(variant="probe_eager_no_lookup"), lambda: probe(True, False)),
        ]  # fmt: skip
        rows_out, ok_fns = [], []
        for row, fn in fns:
            q.view(torch.uint8).fill_(0x7F)
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # a probe that does not compile is a row, not the end
                record(kernel="act_full", rows=rows, **row, error=str(exc)[:160])
                continue
            ok_fns.append((row, fn))
            exact = torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)) and torch.equal(
                sf, want_sf
            )
            rows_out.append(dict(kernel="act_full", rows=rows, **row, exact=exact))
        times = time_interleaved([fn for _, fn in ok_fns], rounds=10)
        device = device_times([fn for _, fn in ok_fns])
        for i, (row, us) in enumerate(zip(rows_out, times, strict=True)):
            record(**row, us=us, device_us=device.get(i, float("nan")))
    for fn in (aq._act_quant_dense_kernel, aq._act_quant_masked_grid_kernel,
               aq._act_quant_masked_kernel, _act_grid_probe):  # fmt: skip
        for meta in compiled_meta(fn):
            record(kernel=f"compiled:{fn.__name__}", **meta)


def bench_act_floor() -> None:
    """Where the masked activation's time goes at small live counts: the timer's own floor (an
    empty graph, and a one-store kernel), the masked schedules at growing live rows (the slope is
    bandwidth, the intercept the fixed latency of a launch that must read the endpoints before it
    knows where to read), and the dense kernel over a buffer holding exactly the live rows (what
    masking could reach at best: no endpoint lookup, no empty programs)."""
    print("== act_quant: fixed cost and slope at small live counts", flush=True)
    scratch = torch.zeros(1, dtype=torch.int32, device=dev)
    try:
        record(kernel="timer_empty_graph", us=time_graph(lambda: None))
    except Exception as exc:  # some builds refuse to replay an empty graph
        record(kernel="timer_empty_graph", error=str(exc)[:120])
    record(kernel="timer_one_store_kernel", us=time_graph(lambda: _touch[(1,)](scratch)))
    h = (torch.randn(M, 2 * F, device=dev) * 2).to(torch.bfloat16)
    q = torch.empty(M, F, dtype=torch.float8_e4m3fn, device=dev)
    sf = reference.empty_packed_scales(M, F // 128, dev)
    for live in (0, 384, 1536, 3072, 6144, 12288):
        ends = balanced_ends(live)
        row_bytes = 2 * F * 2 + F + 16
        for config in ACT_MASKED_CONFIGS[:2]:
            opts = masked_opts(*config)
            us = time_graph(lambda e=ends, o=opts: act_quant_masked(h, q, sf, e, **o))
            record(kernel="act_masked", schedule=config[0], live=live, us=us,
                   floor_us=live * row_bytes / COPY_TBS / 1e6)  # fmt: skip
        if live:
            hl, ql = h[:live], q[:live]
            sfl = reference.empty_packed_scales(live, F // 128, dev)
            for br, gr in ((32, 1), (16, 2)):
                us = time_graph(
                    lambda hl=hl, ql=ql, sfl=sfl, br=br, gr=gr: act_quant_dense(
                        hl, ql, sfl, block_rows=br, groups=gr
                    )
                )
                record(kernel="act_dense_live_rows_only", live=live, block_rows=br, groups=gr,
                       us=us, floor_us=live * row_bytes / COPY_TBS / 1e6)  # fmt: skip
