"""Scratch (seventh session): which part of the shipped FP8 tile costs what, from the fast probe up.

`ws_probe.py` found the probe tile (weights AND the slots' rows through TMA descriptors, the
rows pre-gathered 16 a touched expert into one [E * 16, R] buffer, the step past R inside the
pipelined loop by the copy engine's zero fill, no routing scan, a plain fp32 store) 12% faster
than the shipped launch on fc1 and 27% on fc2 at 64 tokens, timed alone. Here the probe takes the
shipped tile's parts back one at a time, each a flag of the kind ``p<stages><flags>``:

- ``x``: the slots' rows through pointer loads (the shipped tile's gathered rows), not TMA;
- ``t``: the loop stops at the last whole step and the step past R runs after it, unpipelined;
- ``e``: the shipped epilogue's work: bias, the GLU (fc1), bf16 rounding, a masked store;
- ``s``: the routing scan at the start (`grouped_slots.touched_expert`, `expert_slots`, real
  64-token routing: count < 16, masked rows);
- ``c``: registers capped at 128 (the shipped cap);
- ``b`` (second call): the bias row loaded before the K loop instead of in the epilogue.

``arm`` is the shipped `grouped_gemv` launch. Each stage alone, one graph, L2 flushed, median of
40 interleaved replays; every probe kind's output checked against a torch reference (relative
max error) before timing."""
import os
import statistics

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import dot_order, dot_order_rows
from moebench.kernels.grouped_gemv import default_launch, grouped_gemv
from moebench.kernels.grouped_slots import expert_slots, scan_width, touched_expert
from moebench.kernels.jit import e4m3_to_bf16, fp32_to_bf16, gated_activation


@triton.jit
def _step(acc, w_desc, w_row, x_desc, x_at, x_row, k0, R, m_ok, XPTR: tl.constexpr,
          MASKED: tl.constexpr):
    w = w_desc.load([w_row, k0])
    if XPTR:
        ok = m_ok[None, :]
        if MASKED:
            ok = ok & (k0 + tl.arange(0, 128) < R)[:, None]
        xv = tl.load(x_at + k0, mask=ok, other=0.0)  # [128, 16]
    else:
        xv = tl.trans(x_desc.load([x_row, k0]))
    return tl.dot(dot_order(e4m3_to_bf16(w, False)), dot_order_rows(xv), acc)


@triton.jit
def _tile_probe(w_desc, x_desc, xs_ptr, ids_ptr, s_ptr, b_ptr, c_ptr, out_ptr, N, R, TK, K, E,
                STAGES: tl.constexpr, XPTR: tl.constexpr, TAIL: tl.constexpr, EPI: tl.constexpr,
                SCAN: tl.constexpr, GLU: tl.constexpr, BLOCK_E: tl.constexpr,
                SCAN_W: tl.constexpr, BPRE: tl.constexpr):
    n_block = tl.program_id(0)
    if SCAN:
        e, count = touched_expert(ids_ptr, 4, 1, TK, K, 0, E, tl.program_id(1), BLOCK_E, SCAN_W)
        if count == 0:
            return
        t64, k64 = expert_slots(ids_ptr, 4, 1, TK, K, 0, e, count, 0, 16, SCAN_W)
        m_ok = tl.arange(0, 16) < count
        m_ok = m_ok & (t64 >= 0) & (k64 >= 0)  # keep the scan's results live
    else:
        e = tl.program_id(1)
        m_ok = tl.arange(0, 16) < 16
    w_row = e * N + n_block * 64
    x_row = e * 16
    x_at = xs_ptr + (x_row + tl.arange(0, 16)).to(tl.int64)[None, :] * R + tl.arange(0, 128)[:, None]
    cols = n_block * 64 + tl.arange(0, 64)
    if BPRE:
        bias = tl.load(b_ptr + e * N + cols).to(tl.float32)
    acc = tl.zeros([64, 16], dtype=tl.float32)
    r_loop = R // 128 * 128 if TAIL else R
    for k0 in tl.range(0, r_loop, 128, num_stages=STAGES):
        acc = _step(acc, w_desc, w_row, x_desc, x_at, x_row, k0, R, m_ok, XPTR, not TAIL)
    if TAIL:
        if r_loop < R:
            acc = _step(acc, w_desc, w_row, x_desc, x_at, x_row, r_loop, R, m_ok, XPTR, True)
    h = tl.trans(acc) * tl.load(s_ptr + e)  # [16, 64]
    rows = (x_row + tl.arange(0, 16)).to(tl.int64)
    if EPI:
        if not BPRE:
            bias = tl.load(b_ptr + e * N + cols).to(tl.float32)
        h = h + bias[None, :]
        if GLU:
            gate, up = tl.split(tl.reshape(h, [16, 32, 2]))
            a = fp32_to_bf16(gated_activation(gate, up, "swiglu_oai"), False)
            half = n_block * 32 + tl.arange(0, 32)
            tl.store(out_ptr + rows[:, None] * (N // 2) + half[None, :], a, mask=m_ok[:, None])
        else:
            tl.store(out_ptr + rows[:, None] * N + cols[None, :], fp32_to_bf16(h, False),
                     mask=m_ok[:, None])
    else:
        flat = (e * N + cols).to(tl.int64)
        tl.store(c_ptr + flat[None, :] * 16 + tl.arange(0, 16)[:, None], h)


def main():
    dev = torch.device("cuda")
    torch.manual_seed(int(os.environ.get("SEED", 0)))
    D = F = 2880
    E, E_ALL, TOPK, T = 16, 32, 4, int(os.environ.get("T", 64))
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    kinds = os.environ.get("KINDS", "arm,p3,p4,p5,p3x,p3t,p3e,p3s,p4xtesc").split(",")
    graphs = {}
    ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).int()
    for stage, N, R in (("fc1", 2 * F, D), ("fc2", D, F)):
        w = (torch.randn(E, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
        s = torch.rand(E, device=dev) * 0.01 + 0.001
        b = (torch.randn(E, N, device=dev) * 0.1).to(torch.bfloat16)
        xs = torch.randn(E * 16, R, device=dev).to(torch.bfloat16)
        ref = torch.einsum("enr,emr->enm", w.float(), xs.view(E, 16, R).float()) * s[:, None, None]
        w_desc = TensorDescriptor.from_tensor(w.view(E * N, R), [64, 128])
        x_desc = TensorDescriptor.from_tensor(xs, [16, 128])
        x_arm = torch.randn(T, R, device=dev).to(torch.bfloat16)
        o_arm = torch.zeros(T, TOPK, N // (2 if stage == "fc1" else 1), device=dev,
                            dtype=torch.bfloat16)
        launch = default_launch("fp8", tokens=T, top_k=TOPK, experts=E, columns=N)
        block_e = triton.next_power_of_2(E)
        for kind in kinds:
            c = torch.zeros(E * N, 16, device=dev)
            out = torch.zeros(E * 16, N, device=dev, dtype=torch.bfloat16)
            if kind != "arm":
                st, flags = int(kind[1]), kind[2:]
                opts = dict(num_warps=4)
                if "c" in flags:
                    opts["maxnreg"] = 128

            def run(kind=kind, c=c, out=out):
                if kind == "arm":
                    grouped_gemv(x_arm, ids, w, s, b, o_arm, expert_offset=0, launch=launch,
                                 glu="swiglu_oai" if stage == "fc1" else "none")
                    return
                return _tile_probe[(N // 64, E)](
                    w_desc, x_desc, xs, ids, s, b, c, out, N, R, T * TOPK, TOPK, E,
                    STAGES=st, XPTR="x" in flags, TAIL="t" in flags, EPI="e" in flags,
                    SCAN="s" in flags, GLU=stage == "fc1", BLOCK_E=block_e,
                    SCAN_W=scan_width(T * TOPK, block_e, 16), BPRE="b" in flags, **opts)

            try:
                k = run()
                torch.cuda.synchronize()
                if k is not None:
                    print(f"T={T} {stage} {kind}: {k.n_regs} registers, {k.n_spills} spills, "
                          f"{k.metadata.shared} B shared", flush=True)
            except Exception as ex:
                print(f"{stage} {kind}: ERROR {str(ex).splitlines()[0][:300]}", flush=True)
                continue
            if kind != "arm" and "e" not in flags and "s" not in flags:
                err = ((c.view(E, N, 16) - ref).abs().max() / ref.abs().max()).item()
                print(f"{stage} {kind}: rel err vs torch {err:.2e}", flush=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run()
            graphs[(stage, kind)] = g
    keys = list(graphs)
    times = {k: [] for k in keys}
    for g in graphs.values():
        for _ in range(3):
            g.replay()
    for rep in range(40):
        for key in keys[rep % len(keys):] + keys[:rep % len(keys)]:
            flush.add_(1)
            start.record()
            graphs[key].replay()
            end.record()
            end.synchronize()
            times[key].append(start.elapsed_time(end) * 1e3)
    for stage, kind in keys:
        t = times[(stage, kind)]
        print(f"T={T} {stage} {kind}: median {statistics.median(t):.1f} us (min {min(t):.1f})",
              flush=True)


if __name__ == "__main__":
    main()
