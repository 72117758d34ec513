"""The warp-specialised probe (mx_ws.py) beside the arm's MXFP4 tile and the twenty-seventh
session's best Gluon probe (tiled, 3 stages), on the scenario's own weights and routing
(gpt-oss-20b, 16 local experts a rank, w4a16), as `../../2026-12-06-packed-mx/scratch/
probe_bench.py` does (whose helpers it imports).

For each (tokens, seed, rank): the arm's grouped step runs once (its fc1 fills the activation
that fc2 reads); x is gathered by expert for each stage (the probe's TMA reads it); the probe's
fc1 and fc2 run on the same weights re-laid by `mx_ws.pack`, each launch checked against the
dequantised fp32 reference (max error over max magnitude) and every variant bitwise against the
first; then, timed interleaved with L2 flushed before each replay: the arm's fc1 and fc2, the
earlier probe's, each variant's, and the two gathers on their own. Bytes: the touched experts'
e2m1 values and e8m0 scales; "of copy" over the copy ceiling measured at the start.

Usage: PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/ws_bench.py [--tokens 32,64] [--seeds 0,1]
[--rank 0] [--variants 4:80,3:80] (stages:maxnreg[:producer_regs[:rows[:read_only[:pairs]]]]:
rows a program's tile, 64 a consumer warpgroup, fc1's only where fc2's N is not a multiple: fc2
then 64; read_only 1: the producer's stream alone, timed, never checked (zeros out); pairs 1: two
K steps a stage, `mx_ws_pairs_kernel`, stages then counting pairs) [--ncu]
(each launch once after the checks, nothing timed: for Nsight Compute), DIR this folder.
"""

from __future__ import annotations

import argparse

import mx_ws as ws
import probe_bench as pb  # the earlier bench: helpers, the clock, the copy ceiling
import torch

from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.measure import bench
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario, scenario_with

g = ws.g
dev = pb.dev


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="32,64")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--rank", default="0")
    ap.add_argument("--variants", default="4:80,3:80")
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    defaults = (4, 80, 24, 64, 0, 0)  # stages, maxnreg, producer registers, rows, read-only, pairs
    variants = []
    for spec in a.variants.split(","):
        given = [int(v) for v in spec.split(":")]
        variants.append(tuple(given + list(defaults[len(given) :])))
    print(f"{torch.__version__} {torch.cuda.get_device_name(0)}")
    print(f"copy ceiling: {pb.COPY_FROM}", flush=True)
    arm = registry.resolve("grouped_decode")
    for seed in [int(s) for s in a.seeds.split(",")]:
        s = scenario_with(load_scenario(pb.SCENARIO), **{"routing.seed": seed})
        for p in plan(s):
            cs = p.case.scenario
            T = cs.shape.tokens_per_rank
            if cs.precision != "w4a16" or T not in [int(t) for t in a.tokens.split(",")]:
                continue
            for rank in [int(r) for r in a.rank.split(",")]:
                run_case(arm, cs, p, T, seed, rank, variants, a.ncu)


def run_case(arm, cs, p, T, seed, rank, variants, ncu=False) -> None:
    x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
    prob = family_of(cs).problem(cs, p.routing, p.capacity_rows, x, rank, dev)
    wsp = Workspace(prob, layout=arm.layout)
    stages = arm.build(wsp)
    for st in stages:
        st.run()
    torch.cuda.synchronize()
    E, off = prob.local_experts, prob.expert_offset
    idx_tok, idx_slot, cnt = pb.slot_lists(prob.topk_ids_TK.cpu(), off, E, 64)
    block_m = 16 if int(cnt.max()) <= 16 else 32
    idx_tok, idx_slot = idx_tok[:, :block_m].contiguous(), idx_slot[:, :block_m].contiguous()
    touched = int((cnt > 0).sum())
    R = prob.x_TD.shape[1]
    F = prob.intermediate
    head = (f"T={T} seed={seed} rank={rank} slots={int(cnt.sum())} touched={touched} "
            f"block_m={block_m}")  # fmt: skip
    print(f"\n{head}", flush=True)
    a_rows = wsp.a.reshape(-1, F)
    work = {}
    for name, w, sc, xin, idx, N in (
        ("fc1", prob.w13, prob.w13_scale, prob.x_TD, idx_tok, 2 * F),
        ("fc2", prob.w2, prob.w2_scale, a_rows, idx_slot, R),
    ):
        codes = pb.codes_of(w)
        tiled = g.pack_weights(codes, sc, tiled=True)
        xg = torch.empty(E * block_m, xin.shape[1], dtype=torch.bfloat16, device=dev)
        ws.gather_x(xin, idx, cnt, xg)
        packed, desc = {}, {}
        for rows in sorted({v[3] if N % v[3] == 0 else 64 for v in variants}):
            packed[rows] = ws.pack(codes, sc, rows)
            for pairs in (0, 1):
                desc[rows, pairs] = ws.descriptors(packed[rows], xg, block_m, bool(pairs))
        ref = g.reference(w, sc, xin, idx, cnt, block_m)
        nbytes = touched * N * (codes.shape[-1] // 2 + codes.shape[-1] // 32)
        work[name] = dict(packed=packed, tiled=tiled, xin=xin, idx=idx, xg=xg, desc=desc, ref=ref,
                          N=N, R=codes.shape[-1], nbytes=nbytes)  # fmt: skip
    names, fns = ["arm fc1", "arm fc2"], [stages[0].run, stages[1].run]
    for name in ("fc1", "fc2"):
        wk = work[name]
        out = torch.zeros(E, block_m, wk["N"], dtype=torch.float32, device=dev)
        g.launch(wk["tiled"], wk["xin"], wk["idx"], cnt, out, wk["R"], stages=3, barrier=1,
                 tiled=1)  # fmt: skip
        torch.cuda.synchronize()
        print(f"probe s3 tiled {name}: max error / max |ref| = "
              f"{pb.rel_err(out, wk['ref'], cnt):.3g}", flush=True)  # fmt: skip
        names.append(f"probe s3 tiled {name}")
        fns.append(
            lambda wk=wk, out=out: g.launch(
                wk["tiled"], wk["xin"], wk["idx"], cnt, out, wk["R"], stages=3, barrier=1, tiled=1
            )
        )
    first = {}
    for stg, nreg, preg, rows, ro, pairs in variants:
        tag = f"ws s{stg} n{nreg} p{preg} r{rows}" + (" read-only" if ro else "")
        tag += " pairs" if pairs else ""
        opts = dict(stages=stg, maxnreg=nreg or None, producer_regs=preg, read_only=bool(ro),
                    pairs=bool(pairs))  # fmt: skip
        ok, pair = True, []
        for name in ("fc1", "fc2"):
            wk = work[name]
            out = torch.full((E, block_m, wk["N"]), float("nan"), device=dev)
            r = rows if wk["N"] % rows == 0 else 64
            try:
                ws.launch(wk["packed"][r], wk["desc"][r, pairs], cnt, out, **opts)
                torch.cuda.synchronize()
            except Exception as exc:  # a compile or launch failure of this variant
                print(f"{tag} {name}: failed: {exc!r}"[:600], flush=True)
                ok = False
                break
            err = pb.rel_err(out, wk["ref"], cnt)
            slot = torch.arange(block_m, device=dev)[None, :, None]
            valid = (slot < cnt[:, None, None]).expand_as(out)
            same = torch.equal(out[valid], first[name][valid]) if name in first else True
            if not ro:
                first.setdefault(name, out.clone())
            print(f"{tag} {name} ({r} rows): max error / max |ref| = {err:.3g}; bitwise equal to "
                  f"the first variant: {same}", flush=True)  # fmt: skip
            ok = ok and (bool(ro) or err < 1e-4)
            pair.append((name, wk, out, r, pairs))
        if not ok:
            print(f"{tag}: not timed (failed or wrong)", flush=True)
            continue
        for name, wk, out, r, pairs in pair:
            names.append(f"{tag} {name}")
            fns.append(lambda wk=wk, out=out, opts=opts, r=r, pairs=pairs: ws.launch(
                wk["packed"][r], wk["desc"][r, pairs], cnt, out, **opts))  # fmt: skip
    for name in ("fc1", "fc2"):
        wk = work[name]
        names.append(f"gather {name}")
        fns.append(lambda wk=wk: ws.gather_x(wk["xin"], wk["idx"], cnt, wk["xg"]))
    if ncu:  # each launch once more, in order, for the profiler; nothing timed
        for n, fn in zip(names, fns, strict=True):
            print(f"ncu launch: {n}", flush=True)
            fn()
        torch.cuda.synchronize()
        return
    us = bench.time_interleaved(pb.CLOCK, fns, rounds=8, reps=4)
    for n, t in zip(names, us, strict=True):
        if n.startswith("gather"):
            print(f"{head} {n}: {t:.2f} us", flush=True)
            continue
        nbytes = work[n.split()[-1]]["nbytes"]
        print(f"{head} {n}: {t:.2f} us, {nbytes / t / 1e3:.0f} GB/s, "
              f"{nbytes / t / 1e6 / pb.COPY_TBS:.1%} of copy", flush=True)  # fmt: skip
    b = work["fc1"]["nbytes"] + work["fc2"]["nbytes"]
    by = dict(zip(names, us, strict=True))
    tot_arm = by["arm fc1"] + by["arm fc2"]
    gathers = by["gather fc1"] + by["gather fc2"]
    for n in names:
        if n.endswith(" fc1") and not n.startswith(("arm", "gather")):
            t = by[n] + by[n[:-1] + "2"]
            print(f"{head} {n[:-4]} fc1+fc2 {t:.2f} us ({b / t / 1e6 / pb.COPY_TBS:.1%} of copy); "
                  f"with the gathers {t + gathers:.2f} us "
                  f"({b / (t + gathers) / 1e6 / pb.COPY_TBS:.1%}); the arm's {tot_arm:.2f} "
                  f"({b / tot_arm / 1e6 / pb.COPY_TBS:.1%})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
