"""`tools/bench_kernels.py`'s part ``gemm``: the prefill arms' grouped FP8 GEMMs
(`moebench.kernels.grouped_gemm`) at the issue-3 shapes, their launch variants against torch's
grouped GEMM, and the probes of one tile. GPU only."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bench_kernels_common import (
    COPY_TBS,
    FP8_TFLOPS,
    A,
    D,
    E,
    F,
    M,
    balanced_ends,
    dev,
    record,
    sm_clock_mhz,
    time_interleaved,
)

from moebench.core import reference
from moebench.core.layout import live_row_mask
from moebench.kernels.grouped_gemm import grouped_gemm
from moebench.kernels.grouped_gemm_tiles import _step_scales

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
