"""Scratch (seventh session): does triton 3.6's Hopper warp specialization speed the FP8 tile?

The fifth session found `tl.range(..., warp_specialize=True)` failing on the grouped tile's loop
(its slots' rows are gathered through pointers). Compiled offline this session, the same loop
with BOTH operands read through TMA descriptors (the slots' rows pre-gathered, 16 a touched
expert, into one [E * 16, R] buffer) does specialize at 4 warps (12 warps in all: load
partitions beside the 4 computing warps, `setmaxnreg`). This probe times that loop, with and
without the specialization, at gpt-oss-20b's fc1 and fc2 shapes at 64 tokens (all 16 local
experts touched, 16 slots each: one pass), against the shipped tile's launch on a routing of
about the same size. Speed only: the probe's output is the fp32 tile (no bias, GLU or bf16),
checked equal between its two builds and against a torch reference of the same products.

Kinds: ``arm`` (the shipped `grouped_gemv` launch, 64 tokens uniform routing), ``tdN`` (the probe,
N stages, no specialization), ``wsN`` (the probe, N stages, specialized). Each stage (fc1, fc2)
timed alone, as one graph, L2 flushed before each replay, median of 40 interleaved replays."""
import os
import statistics

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import dot_order, dot_order_rows
from moebench.kernels.grouped_gemv import default_launch, grouped_gemv
from moebench.kernels.jit import e4m3_to_bf16


@triton.jit
def _tile_td(w_desc, x_desc, s_ptr, c_ptr, N, R, STAGES: tl.constexpr, WS: tl.constexpr):
    n_block = tl.program_id(0)
    e = tl.program_id(1)
    acc = tl.zeros([64, 16], dtype=tl.float32)
    for k0 in tl.range(0, R, 128, num_stages=STAGES, warp_specialize=WS):
        w = w_desc.load([e * N + n_block * 64, k0])
        xv = x_desc.load([e * 16, k0])
        acc = tl.dot(dot_order(e4m3_to_bf16(w, False)), dot_order_rows(tl.trans(xv)), acc)
    acc = acc * tl.load(s_ptr + e)
    rows = (e * N + n_block * 64 + tl.arange(0, 64)).to(tl.int64)
    tl.store(c_ptr + rows[:, None] * 16 + tl.arange(0, 16)[None, :], acc)


def main():
    dev = torch.device("cuda")
    torch.manual_seed(int(os.environ.get("SEED", 0)))
    D = F = 2880
    E, E_ALL, TOPK, T = 16, 32, 4, 64
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    kinds = os.environ.get("KINDS", "arm,td3,td4,ws2,ws3,ws4").split(",")
    times, graphs = {}, {}
    for stage, N, R in (("fc1", 2 * F, D), ("fc2", D, F)):
        w = (torch.randn(E, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
        s = torch.rand(E, device=dev) * 0.01 + 0.001
        b = torch.zeros(E, N, device=dev, dtype=torch.bfloat16)
        xs = torch.randn(E * 16, R, device=dev).to(torch.bfloat16)
        ref = torch.einsum("enr,emr->enm", w.float(), xs.view(E, 16, R).float()) * s[:, None, None]
        w_desc = TensorDescriptor.from_tensor(w.view(E * N, R), [64, 128])
        x_desc = TensorDescriptor.from_tensor(xs, [16, 128])
        ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).int()
        x_arm = torch.randn(T, R, device=dev).to(torch.bfloat16)
        o_arm = torch.zeros(T, TOPK, N, device=dev, dtype=torch.bfloat16)
        launch = default_launch("fp8", tokens=T, top_k=TOPK, experts=E, columns=N)
        outs = {}
        for kind in kinds:
            c = torch.zeros(E * N, 16, device=dev)

            def run(kind=kind, c=c):
                if kind == "arm":
                    grouped_gemv(x_arm, ids, w, s, b, o_arm, expert_offset=0, launch=launch)
                else:
                    _tile_td[(N // 64, E)](w_desc, x_desc, s, c, N, R, STAGES=int(kind[2:]),
                                           WS=kind.startswith("ws"), num_warps=4)

            try:
                run()
                torch.cuda.synchronize()
            except Exception as ex:  # a build that does not compile is a finding, not a stop
                print(f"{stage} {kind}: ERROR {str(ex).splitlines()[0][:300]}", flush=True)
                continue
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run()
            graphs[(stage, kind)] = g
            outs[kind] = c
            if kind != "arm":
                err = ((c.view(E, N, 16) - ref).abs().max() / ref.abs().max()).item()
                print(f"{stage} {kind}: rel err vs torch {err:.2e}", flush=True)
        probe = [k for k in outs if k != "arm"]
        for k in probe[1:]:
            print(f"{stage} {k}: equal to {probe[0]}: {torch.equal(outs[k], outs[probe[0]])}")
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
        print(f"{stage} {kind}: median {statistics.median(t):.1f} us (min {min(t):.1f})",
              flush=True)


if __name__ == "__main__":
    main()
