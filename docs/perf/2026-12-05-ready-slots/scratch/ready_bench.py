"""Scratch A/B (issue 28, 2026-12-05, eighteenth session): the one-token sparse FP8 step with fc2
waiting per slot on fc1 (`ready_gemv.py`) against the `sparse_decode` arm's step, over
`tools/sparse_ab.py`'s draws and ranks (each step checked, compared bit for bit with the arm's,
then timed interleaved).

Kinds:
- ``ready``: fc1 counts each slot's programs; fc2, launched to start as fc1's programs leave,
  loads its weight rows, then waits for its slot, then reads the activation.
- ``late``: the same hand-over, fc2 loading its weights after the wait (what the early start
  alone gives).
- ``ready_local``, ``ready_none``: ``ready`` with fc1's programs letting fc2 launch only where
  they have work (after the routing load; a program that leaves counts as having let it), or
  never (fc2 then launches as fc1 ends; the dependent launch without its early start).
- ``count``: fc1 counts its programs as in ``ready`` (a fence and an atomic at each program's
  end), fc2 and the combine the arm's: what the counting costs fc1 (nothing resets the cells,
  which are left out of the final check).
- ``pdl``: the arm's step with its GEMVs and combine as programmatic dependent launches
  (`pipeline.build_stages(pdl=True)`: FP8's fc2 starts early, loads its first step's weights,
  then waits for the whole of fc1), the form issue 19 measured slower for FP8 (MXFP4's arm has
  it); ``pdl_local`` the same with each GEMV program letting the next kernel launch only once
  its slot is known local (``pdl_trigger="local"``). These two run at any count and precision
  (``--kinds pdl,pdl_local --tokens 1,2,4``); the hand-over kinds at one FP8 token only.

fc2 cannot run without the fc1 before it (it would wait for a count that never comes), so these
kinds' first stage is fc1 and fc2 together and their second the combine: their "fc1_us" is
fc1 + fc2 and their "fc2_us" the combine alone.

With ``--grouped``: the `grouped_decode` arm's step against kind ``ready``, its tile (one pass a
program; FP8, or MXFP4 with ``--precision w4a16``) with fc2 waiting per pass on fc1
(`ready_tile.py`), at 16-64 tokens. Added in the nineteenth session, before any of this ran on a
GPU: kinds ``placed`` (the arm's step with the FP8 tile's weights in `fp8_placed`'s layout) and
``ready_placed`` (both), e.g. ``--grouped --kinds ready,placed,ready_placed``.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/ready_bench.py [--grouped] [--tokens 1]
[--seeds 0,1,2,3,4,5] [--rank 0,1] [--kinds ready,late]   (DIR this folder; on the CPU with a tiny
decode scenario it checks and compares the steps and times nothing)
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time

import torch
from ready_gemv import ReadySlots, ready_gemv
from ready_tile import ReadyPasses, groups_for, ready_tile
from sparse_ab import dev, main, parser

from arms.decode import grouped_decode, pipeline
from moebench.arm import registry
from moebench.arm.base import Stage
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario

MADE: list[ReadySlots] = []  # every step's counters, checked back at zero at the end


def ready_steps(ws, preload: bool, count_only: bool = False, trigger: str = "start"):
    p = ws.problem
    off = p.expert_offset
    slots = ReadySlots(*p.topk_ids_TK.shape, p.x_TD.device)
    if not count_only:
        MADE.append(slots)

    def fc1_fc2():
        ready_gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a, slots,
                   role="signal", expert_offset=off, glu=p.activation, trigger=trigger)  # fmt: skip
        if count_only:
            sparse_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, expert_offset=off)
        else:
            ready_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, slots, role="await",
                       expert_offset=off, preload=preload)  # fmt: skip

    def comb():
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=False)  # fmt: skip

    return (Stage(name="fc1", run=fc1_fc2), Stage(name="fc2", run=comb),
            Stage(name="combine", run=lambda: None))  # fmt: skip


def placed(launch):
    """FP8 ``launch`` reading its weights in `fp8_placed`'s layout where it is the tile."""
    return dataclasses.replace(launch, fp8_placed=True) if launch.path == "dot" else launch


def ready_tile_steps(ws, placed_weights: bool = False):
    """The grouped arm's step with fc2 waiting per pass (`ready_tile.py`) where the arm takes the
    tile one pass a program for both stages (weights and scales as the arm gives them); the
    arm's own step elsewhere. ``placed_weights``: the FP8 tile's weights in `fp8_placed`'s
    layout (the nineteenth session's), in both the hand-over and the fallback."""
    p = ws.problem
    one, two = grouped_decode.launches(p)
    if placed_weights and p.precision == "w8a16":
        one, two = placed(one), placed(two)
    tile = lambda L: L.path == "dot" and L.pass_grid  # noqa: E731
    if not (tile(one) and tile(two) and one.block_m == two.block_m):
        return grouped_decode.build_stages(ws, fc1=one, fc2=two)
    T, K = p.topk_ids_TK.shape
    passes = min(p.local_experts, T * K) + T * K // one.block_m
    g = groups_for(p.w13.shape[1] // one.block_n, p.w2.shape[1] // two.block_n)
    cells = ReadyPasses(passes, g, p.x_TD.device)
    MADE.append(cells)
    off = p.expert_offset
    s13, max13 = grouped_decode.tiles_scales(p.w13, p.w13_scale, one)
    s2, max2 = grouped_decode.tiles_scales(p.w2, p.w2_scale, two)
    w13, w2 = grouped_decode.tiles_weights(p.w13, one), grouped_decode.tiles_weights(p.w2, two)

    def fc1_fc2():
        ready_tile(p.x_TD, p.topk_ids_TK, w13, s13, p.b13_E2F, ws.a, cells, role="signal",
                   expert_offset=off, launch=one, glu=p.activation,
                   max_scale_byte=max13)  # fmt: skip
        ready_tile(ws.a, p.topk_ids_TK, w2, s2, p.b2_ED, ws.o, cells, role="await",
                   expert_offset=off, launch=two, max_scale_byte=max2)  # fmt: skip

    def comb():
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=p.local_experts, layout=ws.layout, pdl=two.pdl)  # fmt: skip

    return (Stage(name="fc1", run=fc1_fc2), Stage(name="fc2", run=comb),
            Stage(name="combine", run=lambda: None))  # fmt: skip


def placed_steps(ws):
    """The grouped arm's step with the FP8 tile's weights in `fp8_placed`'s layout (the
    nineteenth session's `Launch.fp8_placed`), the arm's launches otherwise."""
    one, two = grouped_decode.launches(ws.problem)
    if ws.problem.precision == "w8a16":
        one, two = placed(one), placed(two)
    return grouped_decode.build_stages(ws, fc1=one, fc2=two)


def pdl_steps(ws, trigger: str = "start"):
    """The arm's step (its launches for the precision and count) as dependent launches, each
    GEMV program asking for the next kernel's launch at its start or once local."""
    return pipeline.build_stages(ws, pdl=True, pdl_trigger=trigger)


def at_zero() -> bool:
    """Every step's counters and flags back at zero (reset by each step's last fc2 program)."""
    return all(int(s.cells.abs().sum()) == 0 for s in MADE)


def handover_check(scenario: str, rounds: int = 40, tokens: int = 1, arm: str = "sparse_decode",
                   build=None, precision: str = "w8a16") -> None:  # fmt: skip
    """fc2 must read this step's activation, never the step before's: the tokens alternate
    between two draws from one step to the next (eager launches, no graph), and every output
    must equal ``arm``'s for the same tokens, the counters at zero after each step (``precision``
    at ``tokens`` tokens; ``build`` the hand-over's step, None: `ready_steps` with the weights
    loaded before the wait)."""
    build = build or functools.partial(ready_steps, preload=True)
    s = load_scenario(scenario)
    for pl in plan(s):
        cs = pl.case.scenario
        if cs.shape.tokens_per_rank != tokens or cs.precision != precision:
            continue
        xs = [make_tokens(tokens=tokens, hidden=cs.model.hidden, seed=v, device=dev)
              for v in (0, 1)]  # fmt: skip
        for rank in (0, 1):
            prob = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, xs[0].clone(), rank,
                                         dev)  # fmt: skip
            want = []
            for x in xs:
                prob.x_TD.copy_(x)
                ws0 = Workspace(prob, layout="TKD")
                for st in registry.resolve(arm).build(ws0):
                    st.run()
                want.append(ws0.y_TD.clone())
            ws = Workspace(prob, layout="TKD")
            stages = build(ws)
            bad = 0
            for i in range(rounds):
                prob.x_TD.copy_(xs[i % 2])
                ws.y_TD.zero_()
                for st in stages:
                    st.run()
                bad += not torch.equal(ws.y_TD, want[i % 2])
            if dev.type == "cuda":
                torch.cuda.synchronize()
            print(f"hand-over check ({arm}, {tokens} tokens) rank {rank}: {rounds - bad} of "
                  f"{rounds} steps equal the arm's for their own tokens; counters at zero: "
                  f"{at_zero()}", flush=True)  # fmt: skip
        return


if __name__ == "__main__":
    t0 = time.monotonic()
    grouped = "--grouped" in sys.argv
    if grouped:
        sys.argv.remove("--grouped")
        a = parser("16,32,64", "0,1,2,3", "w8a16", "ready").parse_args()
        if dev.type == "cuda":
            print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
            handover_check(a.scenario, tokens=max(int(v) for v in a.tokens.split(",")),
                           arm="grouped_decode", build=ready_tile_steps,
                           precision=a.precision)  # fmt: skip
        builds = {
            "ready": ready_tile_steps,
            "placed": placed_steps,
            "ready_placed": functools.partial(ready_tile_steps, placed_weights=True),
        }
        main(a, [(k, builds[k]) for k in a.kinds.split(",")], arm_name="grouped_decode",
             loose=True)  # fmt: skip
    else:
        a = parser(
            "1", "0,1,2,3,4,5", "w8a16", "ready,ready_local,ready_none,count,pdl,pdl_local"
        ).parse_args()
        if dev.type == "cuda":
            # the records' header line first (torch, GPU), as tools/perf_records reads it
            print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
            handover_check(a.scenario)
        builds = {"ready": functools.partial(ready_steps, preload=True),
                  "late": functools.partial(ready_steps, preload=False),
                  "ready_local": functools.partial(ready_steps, preload=True, trigger="local"),
                  "ready_none": functools.partial(ready_steps, preload=True, trigger="none"),
                  "count": functools.partial(ready_steps, preload=False, count_only=True),
                  "pdl": pdl_steps,
                  "pdl_local": functools.partial(pdl_steps, trigger="local")}  # fmt: skip
        main(a, [(k, builds[k]) for k in a.kinds.split(",")], loose=True)
    print(f"counters at zero after every step: {at_zero()}")
    print(f"total {time.monotonic() - t0:.0f} s")
