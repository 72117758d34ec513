"""Kernel variants at the issue-3 shapes on the GPU, in one call: correctness first, then time.

DeepSeek-V4-Flash per-rank shapes (32 local experts, D 4096, F 2048, capacity 28,672 rows).
Every variant is checked bitwise against the default launcher before it is timed; times are
medians of CUDA-graph replays with L2 flushed before each (the moebench kernel regime). The
variants of one case (activation: one routing; GEMM: one FC and live-row count, with torch's
grouped GEMM) are timed interleaved, in rotating rounds after a warm-up, so that a drift of the
clock falls on all of them alike. Writes a JSON of every figure to OUT/bench_kernels.json and
prints a line a figure.

Usage (GPU): PYTHONPATH=$PWD python3 tools/bench_kernels.py OUT [PART ...]
PART: act, act_floor, act_full, gemm, scatter, combine (default act gemm); "zero" or "read"
before a part picks how the L2 is flushed (default read).
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl
from act_probe import _act_grid_probe  # tools/ is sys.path[0] when run as a script

from moebench.core import reference
from moebench.core.ceilings import H200
from moebench.core.layout import expert_ends, live_row_mask
from moebench.kernels.act_quant import act_quant_dense, act_quant_masked
from moebench.kernels.grouped_gemm import grouped_gemm
from moebench.kernels.grouped_gemm_tiles import _step_scales
from moebench.measure import bench
from moebench.measure.clock import Clock

COPY_TBS = H200.copy_tbs
FP8_TFLOPS = H200.tflops["fp8"]
E, D, F, M, A = 32, 4096, 2048, 28_672, 128
dev = torch.device("cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
results: list[dict] = []
LIVES = (3072, 6144, 12288, 24576)


FLUSH = "read"  # "zero" writes the flush buffer (dirty L2 lines), "read" reads it (clean lines)
# The project's clock (moebench/measure): the same samples as a run's kernel regime.
CLOCKS = {"read": Clock(dev), "zero": Clock(dev, dirty_flush=True)}


def time_graph(fn, reps: int = 30) -> float:
    """Median us of ``reps`` replays of a graph of ``fn``, L2 flushed before each."""
    return bench.time_graph(CLOCKS[FLUSH], fn, reps=reps)


def time_interleaved(fns, rounds: int = 8, reps: int = 4) -> list[float]:
    """Median us of each of ``fns``, sampled in rounds that visit every function in turn (the
    order rotating each round), so a drift of the clock during the call falls on all alike."""
    return bench.time_interleaved(CLOCKS[FLUSH], fns, rounds=rounds, reps=reps)


def sm_clock_mhz() -> float:
    """The SM clock now (NVML), NaN where it cannot be read."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:
        return float("nan")


def record(**row) -> None:
    results.append(row)
    print(
        "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
        flush=True,
    )


def balanced_ends(live: int) -> torch.Tensor:
    counts = torch.full((E,), live // E, dtype=torch.int32)
    counts[: live % E] += 1
    return expert_ends(counts, A).to(dev)


def one_expert_ends(live: int) -> torch.Tensor:
    counts = torch.zeros(E, dtype=torch.int32)
    counts[5] = live
    return expert_ends(counts, A).to(dev)


# --------------------------------------------------------------------------- act + quant
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


# --------------------------------------------------------------------------- grouped GEMMs
GEMM_LIVES = (3072,)
# (k_loop, loads, BLOCK_M, BLOCK_N, warps, stages, programs per SM, group_m, flatten), persistent
# psum. The
# first is the arms' launch (arms/prefill/pipeline.py) and the bitwise reference of the rest. The
# k_loop variants (two K steps an iteration) were timed on 2026-11-30 and were all slower than
# "plain" (docs/perf/HISTORY.md) with pointer loads, which need 236-255 registers at 64x128;
# with TMA descriptor loads (no address tiles in registers) the plain loop needs 166 (ptxas
# 13.4, sm_90a, offline).
GEMM_CONFIGS = (
    ("plain", "tma", 64, 128, 4, 3, 3, 8, False),
    ("plain", "tma", 64, 128, 4, 3, 3, 8, True),
    ("plain", "tma", 64, 128, 4, 2, 4, 8, True),
    ("plain", "tma", 64, 128, 4, 3, 3, 4, True),
    ("plain", "pointer", 64, 128, 4, 4, 2, 8, False),
    ("plain", "pointer", 64, 128, 4, 4, 2, 8, True),
)


@triton.jit
def _gemm_probe(a_desc, w_desc, sf_ptr, ws_ptr, out_ptr, N, K, stride_sfm, stride_sfp, stride_se,
                stride_sn, stride_sk, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                A: tl.constexpr, PROMOTE: tl.constexpr):  # fmt: skip
    # Probe (not shipped): the psum tiles of a balanced routing (one grid program a tile, row
    # blocks [e * A, e * A + 2 * BLOCK_M)) with TMA loads. PROMOTE scales each K step's product by
    # its group scales into an fp32 sum, as the shipped tile does; without it the tensor cores
    # accumulate the raw products (a wrong result, the same bytes and MMA work): the pair shows what
    # the per-step promotion costs against what the loads and MMAs alone cost.
    n0 = tl.program_id(0) * BLOCK_N
    m0 = tl.program_id(2) * A + tl.program_id(1) * BLOCK_M
    e = tl.program_id(2)
    w_row = e * N + n0
    rows = (m0 + tl.arange(0, BLOCK_M)).to(tl.int64)
    row_ok = rows >= 0
    sf_ptrs = sf_ptr + rows * stride_sfm
    w_scales = ws_ptr + e.to(tl.int64) * stride_se + (n0 // 128) * stride_sn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, K // 128):
        a = a_desc.load([m0, kb * 128])
        w = w_desc.load([w_row, kb * 128])
        if PROMOTE:
            a_s, w_s = _step_scales(sf_ptrs, w_scales, kb, row_ok, stride_sfp, stride_sk)
            acc += tl.dot(a, tl.trans(w), out_dtype=tl.float32) * (a_s * w_s)[:, None]
        else:
            acc = tl.dot(a, tl.trans(w), acc, out_dtype=tl.float32)
    offs_n = n0 + tl.arange(0, BLOCK_N)
    tl.store(out_ptr + rows[:, None] * stride_om + offs_n[None, :], acc.to(tl.bfloat16))


def gemm_probes(aq, asf, wq, ws, out, live: int) -> list[tuple[dict, object]]:
    """(row, function) of the promotion probes at ``live`` balanced rows (two 64-row blocks an
    expert: what the shipped kernel visits at 96 rows an expert)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    if live != E * 96:
        return []
    En, N, K = wq.shape
    a_desc = TensorDescriptor.from_tensor(aq, [64, 128])
    w_desc = TensorDescriptor.from_tensor(wq.view(En * N, K), [128, 128])
    probes = []
    for promote in (True, False):

        def fn(promote=promote):
            _gemm_probe[(N // 128, 2, En)](
                a_desc, w_desc, asf, ws, out, N, K, *asf.stride(), *ws.stride(), out.stride(0),
                BLOCK_M=64, BLOCK_N=128, A=A, PROMOTE=promote, num_warps=4, num_stages=3,
            )  # fmt: skip

        probes.append((dict(kernel="gemm_probe", live=live, promote=promote), fn))
    return probes


def bench_gemm() -> None:
    print("== grouped GEMMs (fp8, 128x128 weight blocks) vs torch._scaled_grouped_mm", flush=True)
    for name, N, K in (("fc1", 2 * F, D), ("fc2", D, F)):
        w = torch.randn(E, N, K, device=dev) / K**0.5
        wq, ws = reference.quant_weight_fp8_block(w)
        del w
        a = torch.randn(M, K, device=dev)
        aq, aexp = reference.quant_fp8_ue8m0(a)
        asf = reference.pack_ue8m0(aexp)
        out = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
        # torch peer: rowwise scales (its fp8 grouped GEMM takes per-row/per-column scales).
        wt = wq.transpose(1, 2)  # [E, K, N] column-major view, as _scaled_grouped_mm wants
        sa = torch.ones(M, device=dev)
        sb = torch.ones(E, N, device=dev)
        w_bytes = E * N * K
        for live in GEMM_LIVES:
            ends = balanced_ends(live)
            live_mask = live_row_mask(ends, A, M)
            flops = 2 * live * N * K
            aligned_end = int(((ends.cpu().long() + A - 1) // A * A)[-1])
            # (row of the table, function): checked first, then all timed together.
            timed: list[tuple[dict, object]] = []
            ref_out = None
            for k_loop, loads, bm, bn, nw, ns, pps, gm, flat in GEMM_CONFIGS:
                out.fill_(float("nan"))
                kw = dict(
                    alignment=A,
                    mode="psum",
                    BLOCK_M=bm,
                    BLOCK_N=bn,
                    num_warps=nw,
                    num_stages=ns,
                    persistent=True,
                    programs_per_sm=pps,
                    k_loop=k_loop,
                    loads=loads,
                    group_m=gm,
                    flatten=flat,
                )
                tags = dict(
                    k_loop=k_loop,
                    loads=loads,
                    block_m=bm,
                    block_n=bn,
                    warps=nw,
                    stages=ns,
                    group_m=gm,
                    flatten=flat,
                )
                try:
                    grouped_gemm(aq, asf, wq, ws, ends, out, **kw)
                    torch.cuda.synchronize()
                except Exception as exc:  # a config that cannot compile or run is a row
                    record(kernel=f"{name}_psum", live=live, **tags, error=str(exc)[:120])
                    continue
                got = out[live_mask].clone()
                if ref_out is None:
                    ref_out = got
                differ = int((got.view(torch.int16) != ref_out.view(torch.int16)).sum())
                row = dict(kernel=f"{name}_psum", live=live, **tags, per_sm=pps,
                           exact=differ == 0, differ=differ)  # fmt: skip
                timed.append((row, lambda kw=kw: grouped_gemm(aq, asf, wq, ws, ends, out, **kw)))
            if live == GEMM_LIVES[0]:
                # The stock arm's mode computes every block of the buffer, whatever the routing.
                for loads, stages in (("pointer", 4), ("tma", 4), ("tma", 3)):
                    kw = dict(alignment=A, mode="all", BLOCK_M=64, loads=loads, num_stages=stages)
                    row = dict(kernel=f"{name}_all", rows=M, loads=loads, stages=stages,
                               flops=2 * M * N * K)  # fmt: skip
                    timed.append(
                        (row, lambda kw=kw: grouped_gemm(aq, asf, wq, ws, ends, out, **kw))
                    )
            for row, fn in gemm_probes(aq, asf, wq, ws, out, live):
                try:
                    fn()
                    torch.cuda.synchronize()
                    timed.append((dict(row, kernel=f"{name}_{row['kernel']}"), fn))
                except Exception as exc:  # a probe that does not compile is a row
                    record(**row, error=str(exc)[:160])
            offs = ((ends.long() + A - 1) // A * A).to(torch.int32)

            def peer(offs=offs, aligned_end=aligned_end):
                torch._scaled_grouped_mm(
                    aq[:aligned_end], wt, sa[:aligned_end], sb, offs=offs,
                    out_dtype=torch.bfloat16,
                )  # fmt: skip

            try:
                peer()
                torch.cuda.synchronize()
                row = dict(kernel=f"{name}_torch_scaled_grouped_mm", live=live,
                           rows_computed=aligned_end)  # fmt: skip
                timed.append((row, peer))
            except Exception as exc:
                record(kernel=f"{name}_torch_scaled_grouped_mm", live=live, error=str(exc)[:160])
            times = time_interleaved([fn for _, fn in timed])
            clock = sm_clock_mhz()
            for (row, _), us in zip(timed, times, strict=True):
                row_flops = row.pop("flops", flops)
                record(
                    **row,
                    us=us,
                    tflops=row_flops / us / 1e6,
                    weight_gbs=w_bytes / us / 1e3,
                    floor_us=max(w_bytes / COPY_TBS / 1e6, row_flops / FP8_TFLOPS / 1e6),
                    sm_mhz_after=clock,
                )


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


if __name__ == "__main__":
    out_dir = sys.argv[1]
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for part in sys.argv[2:] or ["act", "gemm"]:
        if part in ("zero", "read"):
            FLUSH = part
            print(f"== L2 flush by {part}", flush=True)
            continue
        {
            "act": bench_act,
            "act_floor": bench_act_floor,
            "act_full": bench_act_full,
            "gemm": bench_gemm,
            "scatter": bench_scatter_combine,
            "combine": bench_combine,
        }[part]()
    with open(f"{out_dir}/bench_kernels.json", "w") as fh:
        json.dump(results, fh, indent=1)
