"""Sparse top-k GEMV launch variants at gpt-oss-20b decode shapes, one token, on the GPU.

Rank 0 of `scenarios/gpt-oss-20b-decode.yaml` (16 local experts, top-4): each variant's fc1
(gate_up with the GLU fused) and fc2 outputs are checked bitwise against the default launch before
they are timed (CUDA-graph replays, L2 flushed by a read before each). Bandwidth counts the bytes
of the distinct local experts the token hits (values, scales, biases), as the work model does.

Usage (GPU): PYTHONPATH=$PWD python3 tools/bench_decode.py OUT
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from arms import decode
from moebench.families import family_of
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.runner import plan
from moebench.scenario import load_scenario

COPY_TBS = 4.27
dev = torch.device("cuda")
flush = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)


def time_graph(fn, reps: int = 50) -> float:
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        flush.max()
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main(out_dir: str) -> None:
    s = load_scenario("scenarios/gpt-oss-20b-decode.yaml")
    rows = []
    for p in plan(s):
        cs = p.case.scenario
        if cs.shape.tokens_per_rank != 1:
            continue
        fam = family_of(cs)
        from moebench.inputs import make_tokens

        x = make_tokens(tokens=1, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
        prob = fam.problem(cs, p.routing, p.capacity_rows, x, 0, dev)
        ws = decode.Workspace(prob, layout="TKD")
        per = decode.expert_bytes(prob)
        bytes_hit = decode.weight_bytes(prob, layout="TKD")
        off = prob.expert_offset
        # Every output starts as the same NaN, so rows of non-local slots (never written) compare
        # equal too and only what the kernel wrote decides.
        ref_a = torch.full_like(ws.a, float("nan"))
        sparse_gemv(prob.x_TD, prob.topk_ids_TK, prob.w13, prob.w13_scale, prob.b13_E2F, ref_a,
                    expert_offset=off, glu=prob.activation)  # fmt: skip
        ref_o = torch.full_like(ws.o, float("nan"))
        sparse_gemv(ref_a, prob.topk_ids_TK, prob.w2, prob.w2_scale, prob.b2_ED, ref_o,
                    expert_offset=off)  # fmt: skip
        for bn in (None, 8, 32):
            for bk in (None, 512, 2048):
                for nw in (4, 8):
                    kw = dict(block_n=bn, block_k=bk, num_warps=nw)
                    a, o = ws.a, ws.o
                    a.fill_(float("nan"))
                    o.fill_(float("nan"))
                    try:
                        sparse_gemv(prob.x_TD, prob.topk_ids_TK, prob.w13, prob.w13_scale,
                                    prob.b13_E2F, a, expert_offset=off, glu=prob.activation,
                                    **kw)  # fmt: skip
                        sparse_gemv(a, prob.topk_ids_TK, prob.w2, prob.w2_scale, prob.b2_ED, o,
                                    expert_offset=off, **kw)  # fmt: skip
                    except Exception as exc:  # a variant the launcher refuses or cannot compile
                        rows.append(dict(precision=cs.precision, **kw, error=str(exc)[:80]))
                        continue
                    exact = bool(
                        torch.equal(a.view(torch.int16), ref_a.view(torch.int16))
                        and torch.equal(o.view(torch.int16), ref_o.view(torch.int16))
                    )
                    t1 = time_graph(
                        lambda kw=kw: sparse_gemv(
                            prob.x_TD,
                            prob.topk_ids_TK,
                            prob.w13,
                            prob.w13_scale,
                            prob.b13_E2F,
                            ws.a,
                            expert_offset=off,
                            glu=prob.activation,
                            **kw,
                        )
                    )
                    t2 = time_graph(
                        lambda kw=kw: sparse_gemv(
                            ws.a,
                            prob.topk_ids_TK,
                            prob.w2,
                            prob.w2_scale,
                            prob.b2_ED,
                            ws.o,
                            expert_offset=off,
                            **kw,
                        )
                    )
                    row = dict(
                        precision=cs.precision,
                        block_n=bn,
                        block_k=bk,
                        warps=nw,
                        exact=exact,
                        fc1_us=t1,
                        fc2_us=t2,
                        fc1_of_copy=bytes_hit["fc1"] / t1 / 1e6 / COPY_TBS,
                        fc2_of_copy=bytes_hit["fc2"] / t2 / 1e6 / COPY_TBS,
                    )
                    rows.append(row)
                    print(
                        " ".join(
                            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in row.items()
                        ),
                        flush=True,
                    )
        del per
    with open(f"{out_dir}/bench_decode.json", "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
