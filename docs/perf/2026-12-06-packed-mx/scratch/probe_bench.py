"""(Twenty-seventh session: the twenty-sixth session's bench, with the probe's ``tiled`` and
``ahead`` options as variant fields 6 and 7; a tiled variant reads weights packed for it.)

The Gluon probe (mx_gluon.py) beside the arm's MXFP4 tile on the GPU, on the scenario's own
weights and routing (tools/bench_grouped_decode.py's problem: gpt-oss-20b, 16 local experts a
rank, w4a16), at 32 and 64 tokens.

For each (tokens, seed, rank): the arm's grouped step runs once (its fc1 fills the activation
that fc2 reads); the probe's fc1 (x rows by token) and fc2 (the activation's rows by slot) run
on the same weights re-laid by `mx_gluon.pack_weights`, and are checked against a dequantised
fp32 reference (max error over max magnitude, per stage). Then, timed interleaved with L2
flushed before each replay (moebench.measure.bench, as the bench's kernel regime): the arm's fc1
and fc2 launches and the probe's, each variant given. Bytes: the touched experts' e2m1 values
and e8m0 scales (the arm also reads its biases: 0.1%), "of copy" over the copy ceiling measured
on this GPU (tools/copy_ceiling.py).

Usage: PYTHONPATH=$PWD:$PWD/tools:docs/perf/2026-12-06-packed-mx/scratch python3 THIS
[--tokens 32,64] [--seeds 0,1] [--rank 0] [--variants 4:1,3:1,4:0:1]
(stages:barrier[:ring[:place_only[:maxnreg[:tiled[:ahead]]]]]; place_only: timing only, wrong
values)
"""

from __future__ import annotations

import argparse

import mx_gluon as g
import torch
from copy_ceiling import copy_tbs

from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario, scenario_with

SCENARIO = "scenarios/gpt-oss-20b-decode-grouped.yaml"
dev = torch.device("cuda")
CLOCK = Clock(dev)
COPY_TBS, COPY_FROM = copy_tbs(dev)


def codes_of(w: torch.Tensor) -> torch.Tensor:
    """MXFP4 bytes [E, N, R/2] (value 2i in byte i's low nibble) -> codes [E, N, R]."""
    lo, hi = w & 0xF, w >> 4
    return torch.stack([lo, hi], -1).reshape(*w.shape[:-1], w.shape[-1] * 2)


def slot_lists(topk: torch.Tensor, offset: int, E: int, block_m: int):
    """Per local expert its slots' (token, slot) rows: idx_tok [E, block_m], idx_slot, counts."""
    T, K = topk.shape
    idx_tok = torch.zeros(E, block_m, dtype=torch.int32)
    idx_slot = torch.zeros(E, block_m, dtype=torch.int32)
    cnt = torch.zeros(E, dtype=torch.int32)
    for t in range(T):
        for k in range(K):
            e = int(topk[t, k]) - offset
            if 0 <= e < E:
                c = int(cnt[e])
                idx_tok[e, c], idx_slot[e, c] = t, t * K + k
                cnt[e] += 1
    return idx_tok.to(dev), idx_slot.to(dev), cnt.to(dev)


def rel_err(out: torch.Tensor, ref: torch.Tensor, cnt: torch.Tensor) -> float:
    worst = 0.0
    for e in range(cnt.shape[0]):
        c = int(cnt[e])
        if c:
            d = (out[e, :c] - ref[e, :c]).abs().max().item()
            worst = max(worst, d / max(ref[e, :c].abs().max().item(), 1e-30))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="32,64")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--rank", default="0")
    ap.add_argument("--variants", default="4:1,3:1,4:0")
    a = ap.parse_args()
    variants = [
        tuple(int(v) for v in (s + ":0:0:0:0:0").split(":")[:7]) for s in a.variants.split(",")
    ]
    print(f"{torch.__version__} {torch.cuda.get_device_name(0)}")
    print(f"copy ceiling: {COPY_FROM}", flush=True)
    arm = registry.resolve("grouped_decode")
    for seed in [int(s) for s in a.seeds.split(",")]:
        s = scenario_with(load_scenario(SCENARIO), **{"routing.seed": seed})
        for p in plan(s):
            cs = p.case.scenario
            T = cs.shape.tokens_per_rank
            if cs.precision != "w4a16" or T not in [int(t) for t in a.tokens.split(",")]:
                continue
            for rank in [int(r) for r in a.rank.split(",")]:
                run_case(arm, cs, p, T, seed, rank, variants)


def run_case(arm, cs, p, T, seed, rank, variants) -> None:
    x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
    prob = family_of(cs).problem(cs, p.routing, p.capacity_rows, x, rank, dev)
    ws = Workspace(prob, layout=arm.layout)
    stages = arm.build(ws)
    for st in stages:
        st.run()
    torch.cuda.synchronize()
    E, off = prob.local_experts, prob.expert_offset
    topk = prob.topk_ids_TK.cpu()
    idx_tok, idx_slot, cnt = slot_lists(topk, off, E, 64)
    block_m = 16 if int(cnt.max()) <= 16 else 32
    idx_tok, idx_slot = idx_tok[:, :block_m].contiguous(), idx_slot[:, :block_m].contiguous()
    touched = int((cnt > 0).sum())
    R = prob.x_TD.shape[1]
    F = prob.intermediate
    scales_ok = all(
        1 <= int(t.min()) and int(t.max()) <= 128 for t in (prob.w13_scale, prob.w2_scale)
    )
    head = (
        f"T={T} seed={seed} rank={rank} slots={int(cnt.sum())} touched={touched} block_m={block_m}"
    )
    print(f"\n{head} scales_in_1_128={scales_ok}", flush=True)
    a_rows = ws.a.reshape(-1, F)
    work = {}
    for name, w, sc, xin, idx, N in (
        ("fc1", prob.w13, prob.w13_scale, prob.x_TD, idx_tok, 2 * F),
        ("fc2", prob.w2, prob.w2_scale, a_rows, idx_slot, R),
    ):
        codes = codes_of(w)
        packed = {t: g.pack_weights(codes, sc, tiled=bool(t)) for t in (0, 1)}
        out = torch.zeros(E, block_m, N, dtype=torch.float32, device=dev)
        g.launch(packed[0], xin, idx, cnt, out, codes.shape[-1])
        ref = g.reference(w, sc, xin, idx, cnt, block_m)
        err = rel_err(out, ref, cnt)
        nbytes = touched * N * (codes.shape[-1] // 2 + codes.shape[-1] // 32)
        print(f"{name}: probe max error / max |ref| = {err:.3g}", flush=True)
        work[name] = (packed, xin, idx, out, codes.shape[-1], nbytes, err)
    names = ["arm fc1", "arm fc2"]
    fns = [stages[0].run, stages[1].run]
    for st, bar, ring, place, nreg, tiled, ahead in variants:
        tag = (
            f"s{st} b{bar} r{ring}"
            + (" place-only" if place else "")
            + (f" n{nreg}" if nreg else "")
            + (" tiled" if tiled else "")
            + (f" ahead{ahead}" if ahead else "")
        )
        opts = dict(stages=st, barrier=bar, ring=ring, place_only=place, maxnreg=nreg or None,
                    tiled=tiled, ahead=ahead)  # fmt: skip
        # Each variant checked on its own output before it is timed; one that fails to compile
        # or to match is reported and not timed. The place-only ablation computes wrong values
        # on purpose: timed, never checked.
        ok, pair = True, []
        for name in ("fc1", "fc2"):
            packs, xin, idx, out0, Rk, nbytes, err = work[name]
            packed = packs[tiled]
            out = torch.zeros_like(out0)
            try:
                g.launch(packed, xin, idx, cnt, out, Rk, **opts)
                torch.cuda.synchronize()
                same = torch.equal(out, out0)
            except Exception as exc:  # a compile or launch failure of this variant
                print(f"probe {tag} {name}: failed: {exc!r}"[:400], flush=True)
                ok = False
                break
            print(f"probe {tag} {name}: bitwise equal to s4 b1 natural's output: {same}",
                  flush=True)  # fmt: skip
            ok = ok and (bool(place) or (err < 1e-4 and same))
            pair.append((name, packed, xin, idx, out, Rk))
        if not ok:
            continue
        for name, packed, xin, idx, out, Rk in pair:
            names.append(f"probe {tag} {name}")
            fns.append(
                lambda packed=packed, xin=xin, idx=idx, out=out, Rk=Rk, opts=opts: g.launch(
                    packed, xin, idx, cnt, out, Rk, **opts
                )
            )
    us = bench.time_interleaved(CLOCK, fns, rounds=8, reps=4)
    for n, t in zip(names, us, strict=True):
        nbytes = work[n.split()[-1]][5]
        print(f"{head} {n}: {t:.2f} us, {nbytes / t / 1e3:.0f} GB/s, "
              f"{nbytes / t / 1e6 / COPY_TBS:.1%} of copy", flush=True)  # fmt: skip
    tot_arm = us[0] + us[1]
    for i in range(2, len(us), 2):
        b = work["fc1"][5] + work["fc2"][5]
        print(f"{head} {names[i][:-4]} fc1+fc2 {us[i] + us[i + 1]:.2f} us "
              f"({b / (us[i] + us[i + 1]) / 1e6 / COPY_TBS:.1%} of copy) against the arm's "
              f"{tot_arm:.2f} ({b / tot_arm / 1e6 / COPY_TBS:.1%})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
