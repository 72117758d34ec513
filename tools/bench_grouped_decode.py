"""The three decode arms and the grouped GEMV's launches at gpt-oss-20b decode shapes, 1 to 64
tokens, on the GPU (issue 28).

Rank 0 (or ``--rank``) of `scenarios/gpt-oss-20b-decode-grouped.yaml` (16 local experts, top-4),
both weight formats, every token count of its sweep. For each (precision, tokens):

- every arm's step (fc1, fc2, combine) and each grouped variant's step is run once on a poisoned
  workspace and checked before it is timed: its output against the reference within the
  precision's tolerance (the reference gate), and its rows against the sentinels (every row it
  must write written; the sparse and grouped arms leave non-local slots' rows poisoned). A step
  that fails is reported and not timed.
- the steps that passed are timed together, interleaved in rotating order (moebench's clock and
  rotation, `moebench/measure/bench.py`): each a CUDA graph, L2 flushed by a read before every
  replay, as the `ffn` regime replays a step whose weights are not in L2.
- then fc1 and fc2 of each grouped launch alone (the kernel regime).

Bytes are each arm's own weight-byte model (`Arm.weight_bytes`: dense every local expert; sparse
and grouped the touched experts once), GB/s that over the time, and the share of the copy
ceiling of the GPU it runs on (tools/copy_ceiling.py: the H200's measured 4.27 TB/s, or on a GPU
moebench has no figure for, one measured at the start; the log's second line says which). With
`--floor` (token counts, e.g. 1,64) the tool also times the best read of the touched experts'
bytes there (tools/bench_decode.py's read kernels): in two launches (fc1's, then fc2's), what any
pair of kernels needs to read them; in one launch, what any step needs; and an empty launch, the
timer's floor (`read_floor_rows`).

Variants of the grouped launch (`moebench.kernels.grouped_launch.Launch`): by default the candidates
in VARIANTS, each at the token counts it is there to decide; with ``--variants``, one item each,
comma separated, at every count of ``--variant-tokens``:
path:block_m:block_n:block_k:warps[:stages[:pdl[:passes[:registers[:tma[:early[:stage[:rot
[:placed[:packed[:ragged[:prefetch[:ahead[:ready[:dot[:biased[:split[:stream[:gluon[:slots]]]]]]]]]]]]]]]]]]]]]
(one item, no spaces), "-" for the arm's default of a field, block_k in values (FP8 one a byte,
MXFP4 two), e.g. "dot:32:64:128:4:5,gemv:2:2:512:1"; passes 1 or 0: the tile's one pass a program
(`Launch.pass_grid`, `grouped_launch.one_pass_launch`) or its expert loop (4 stages, 128 registers),
other fields then from there; registers: the cap a thread (0: none); tma 1 or 0: the FP8 tile's
weights through a TMA descriptor or pointer loads (ignored for MXFP4); early 1 or 0: the epilogue's
bias loaded before the K loop or after it (`Launch.early_bias`); stage 1 or 2: the variant's launch
for fc1 only or fc2 only, the other stage the arm's (its name then ends in " fc1" or " fc2"); rot 1
or 0: the MXFP4 tile's weights in `mx_rotated`'s layout (`Launch.mx_rotated`; the arm makes the copy
when it builds the stages; ignored for FP8 and the GEMV); placed 1 or 0: the FP8 tile's weights in
`fp8_placed`'s layout (`Launch.fp8_placed`; likewise a copy; ignored for MXFP4 and the GEMV); packed
1 or 0: the tile's weights packed box by box (`tile_packed`; likewise a copy, for the launch's
blocks; ignored for the GEMV): FP8's through TMA (`Launch.fp8_packed`; needs R a multiple of
block_k), MXFP4's with a ragged last box (`Launch.mx_packed`), 2: MXFP4's scale bytes too
(`Launch.mx_packed_scales`; block_k a multiple of 128; FP8 takes 2 as 1); ragged 1 or 0: a block_n
that does not divide N (fc2's 2,880 at 128) kept, the FP8 TMA tile masking an expert's last row
block (`grouped_gemv`), or shrunk to one that divides N (the default; always for MXFP4, the GEMV and
the pointer loads); prefetch: that many of a packed FP8 program's first boxes asked of the L2 before
it waits for the previous kernel (`Launch.fp8_prefetch`; ignored unless packed); ahead: each K
step's L2 prefetch of the box that many steps on (`Launch.fp8_prefetch_ahead`; likewise); ready 1 or
0: fc2 waiting for fc1 expert by expert (`Launch.expert_ready`, fc1 "signal" and fc2 "wait", both
the tile; ignored otherwise) or for the whole of fc1; dot 1 or 0: the MXFP4 tile's values in its K
order (`Launch.mx_dot_order`; rotated launches only; a copy made when the stages are built; kept as
the arm's launch has it where a variant takes the path's defaults again); biased 1 or 0: the MXFP4
tile's scale bytes biased (`Launch.mx_biased_scales`; rotated launches only, dropped by the arm
where a scale byte is above 128); split: fc2's K steps over that many programs a row block
(`Launch.split_k`, `split_k`; MXFP4's one-pass tile only, the launcher refuses it elsewhere; fc1
never: its GLU; the name then ends in " fc2-split" and the count); stream: that many programs an SM
on the persistent grid that splits every tile's K steps evenly (`Launch.stream_k`, `stream_k`;
MXFP4's one-pass tile only, the launcher refuses it elsewhere; both stages unless stage says one;
fc2 then waits for the whole of fc1, ready dropped); gluon 1 or 0: the one-pass tile in Gluon or
not (`Launch.gluon`, `mx_gluon` and `fp8_gluon`: its own stages and register cap unless the variant
gives them; 0 where the arm's launch is Gluon: the Triton one-pass tile as the arm launches it where
a stage cannot run Gluon, `grouped_launch.triton_tile`, its stages, register cap and K order; the
Triton tile where the stage cannot run Gluon, the CPU included, and the name says which); slots 1
or 0: the one-slot GEMV's grid led by slots (`Launch.slot_grid`: program j serves slot j's expert
where j is its first slot; ignored off the one-slot GEMV) or by touched experts. A field
left to the default of another path takes that path's (`grouped_launch.path_launch`). The arm's own
launch always runs, as "default", and a variant equal to it is skipped. Cases run from the most
tokens down, so that a run cut short by its time budget (variants are not started past
TIME_BUDGET_S, 200 s or the environment's BENCH_TIME_BUDGET_S) loses the cheap cases' variants
first.

Targets printed at the end: grouped faster than dense at every count, MXFP4 faster than FP8 at every
count, and at 32 and 64 tokens >= 85% of the copy ceiling over the touched experts' bytes.

Several routing draws and ranks in one process (``--seeds 0,1,2 --rank 0,1``: the scenario's
``routing.seed`` replaced in its document, so every swept case takes it): each draw and rank in
OUT/seed{S}_rank{R}/ (OUT/rank{R}/ without --seeds), then each launch's step on the slowest rank of
each draw (an EP step waits for its slowest rank), their mean and the change against the arm's own
launch.

Usage (GPU): PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py OUT [--tokens 1,8,64]
[--variants SPEC] [--variant-tokens 1,8,32,64] [--floor 64] [--scenario S] [--rank 0[,1]]
[--seeds 0,1,...] [--precision w8a16|w4a16]
OUT is created if missing; the rows go to OUT/bench_grouped_decode.json as each case ends.
On a CPU (the interpreter, a tiny ``--scenario``) it runs the checks and times nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import torch
from copy_ceiling import copy_tbs

from arms.decode import grouped_decode
from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates.checks import check_decode_sentinels
from moebench.gates.families import family_of
from moebench.kernels.grouped_launch import (
    Launch,
    gluon_launch,
    one_pass_launch,
    paired_launches,
    path_launch,
    triton_tile,
)
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.routing.synthetic import local_counts
from moebench.spec.load import load_scenario, scenario_with

TARGET_OF_COPY = 0.85
SCENARIO = "scenarios/gpt-oss-20b-decode-grouped.yaml"
ARMS = ("dense_decode", "sparse_decode", "grouped_decode")
TIME_BUDGET_S = float(os.environ.get("BENCH_TIME_BUDGET_S", 200))
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CLOCK = Clock(dev)
# The copy ceiling of the GPU this runs on (tools/copy_ceiling.py): the target's fraction is of
# its own copy rate, never another GPU's.
COPY_TBS, COPY_FROM = copy_tbs(dev)

# Grouped launches beside the default, each with the token counts it is there to decide:
# (path, block_m, block_n, block_k in values, warps, stages, pdl, passes[, registers, tma, early,
# stage, rot, placed, packed, ragged, prefetch, ahead, ready]), None for the default's field.
# The defaults (grouped_launch.default_launch): the one-slot GEMV at 1 token (FP8) or 1-2 (MXFP4),
# the tile of 64 rows, 128 values a step, 4 stages and 16 slots a pass above, at most 128
# registers a thread, FP8's weights through TMA, one pass a program from 16 tokens
# (`one_pass_launch`: 80 registers; FP8 64 values a step on 6 stages, MXFP4 128 on 3).
VARIANTS: list[tuple[tuple[int, ...], tuple]] = [
    # Where the GEMV hands over to the tile: both paths at 1, 2 and 4 tokens (the one equal to the
    # default is skipped).
    ((1, 2, 4), ("dot", 16, 64, 128, 4, 4, None, None)),
    ((1, 2, 4), ("gemv", 1, None, None, None, None, None, None)),
    # Programmatic dependent launch flipped (on by default in both formats: the variant equal to
    # the default is skipped): the one-token GEMV (issue 28's 75% target) and the tile at 8 and 64
    # tokens.
    ((1, 8, 64), (None, None, None, None, None, None, True, None)),
    ((1, 8, 64), (None, None, None, None, None, None, False, None)),
    # The tile's one pass a program against its expert loop, on each side of where the default
    # changes (from 16 tokens).
    ((8, 16, 32, 64), (None, None, None, None, None, None, None, True)),
    ((8, 16, 32, 64), (None, None, None, None, None, None, None, False)),
    # The expert loop's depth: 128 values on 5 stages, 64 values on 6 (the MXFP4 default from 16
    # tokens before its row order; the FP8 default before the bit-placement conversion), at 8 to
    # 64 tokens (its 4 stages are the default to 16 tokens and the variant above from 32).
    ((8, 16, 32, 64), ("dot", None, None, 128, None, 5, None, False)),
    ((8, 16, 32, 64), ("dot", None, None, 64, None, 6, None, False)),
    # The FP8 tile's weights in `fp8_placed`'s layout or the natural one (`Launch.fp8_placed`; the
    # one equal to the default is skipped, and MXFP4 and the GEMV ignore the field), wherever the
    # FP8 tile runs.
    ((2, 4, 8, 16, 32, 64), (*[None] * 13, True)),
    ((2, 4, 8, 16, 32, 64), (*[None] * 13, False)),
]


def parse_variants(spec: str, tokens: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple]]:
    out = []
    for item in spec.split(","):
        f = item.split(":")
        f += ["-"] * (25 - len(f))
        path = None if f[0] in ("-", "") else f[0]
        nums = [None if v in ("-", "") else int(v) for v in f[1:6]]
        pdl, passes = (None if v in ("-", "") else bool(int(v)) for v in f[6:8])
        registers = None if f[8] in ("-", "") else int(f[8])
        tma = None if f[9] in ("-", "") else bool(int(f[9]))
        early = None if f[10] in ("-", "") else bool(int(f[10]))
        stage = None if f[11] in ("-", "") else int(f[11])
        rot = None if f[12] in ("-", "") else bool(int(f[12]))
        placed = None if f[13] in ("-", "") else bool(int(f[13]))
        packed = None if f[14] in ("-", "") else int(f[14])
        ragged = None if f[15] in ("-", "") else bool(int(f[15]))
        prefetch = None if f[16] in ("-", "") else int(f[16])
        ahead = None if f[17] in ("-", "") else int(f[17])
        ready = None if f[18] in ("-", "") else bool(int(f[18]))
        dot = None if f[19] in ("-", "") else bool(int(f[19]))
        biased = None if f[20] in ("-", "") else bool(int(f[20]))
        split = None if f[21] in ("-", "") else int(f[21])
        stream = None if f[22] in ("-", "") else int(f[22])
        gluon = None if f[23] in ("-", "") else bool(int(f[23]))
        slots = None if f[24] in ("-", "") else bool(int(f[24]))
        if packed not in (None, 0, 1, 2):
            raise ValueError(f"variant {item!r}: packed must be 0, 1 or 2, got {packed}")
        if stage not in (None, 1, 2):
            raise ValueError(f"variant {item!r}: stage must be 1 (fc1) or 2 (fc2), got {stage}")
        out.append((tokens, (path, *nums, pdl, passes, registers, tma, early, stage, rot, placed,
                             packed, ragged, prefetch, ahead, ready, dot, biased,
                             split, stream, gluon, slots)))  # fmt: skip
    return out


def variant_launch(base: Launch, v: tuple, fmt: str, columns: int, reduction: int = 0) -> Launch:
    """The launch of variant ``v`` for a stage of ``columns`` output columns and ``reduction``
    values a row (R; 0: not said), fields from
    ``base`` where ``v`` says None; on a change of path, from that path's defaults; on a change
    of the FP8 tile's passes, from the tile's defaults with that choice."""
    path, bm, bn, bk, nw, stages, pdl, passes, *extra = v
    fields15 = (*extra, *[None] * 17)[:17]
    registers, tma, early, _stage, rot, placed, packed, ragged, prefetch, ahead, _ready, dot = (
        fields15[:12]
    )
    biased, split, stream, gluon, slots = fields15[12:17]
    # The arm's K order where its launch takes it (default_launch, from R), kept when the path's
    # or the passes' defaults are taken again below (path_launch does not know R).
    ordered = base.mx_dot_order
    if path is not None and (path != base.path or (bm is not None and path == "gemv")):
        # That path's own blocks (a GEMV's step follows its slots a pass).
        base = path_launch(path, fmt, columns=columns, block_m=bm, pdl=base.pdl)
    if passes is not None and passes != base.pass_grid:
        if base.path != "dot":
            return base  # the same launch: skipped as equal to the default or another variant
        base = path_launch("dot", fmt, columns=columns, block_m=base.block_m, pdl=base.pdl)
        if passes:
            base = one_pass_launch(base, fmt)
    if gluon is not None and base.path == "dot" and base.pass_grid and gluon != base.gluon:
        # The Gluon tile's own stages and register cap, unless the variant says others; off, the
        # Triton one-pass tile as the arm would launch it (its stages, cap and K order).
        if gluon:
            base = gluon_launch(base, fmt)
        else:
            base = triton_tile(base, reduction, fmt)
            ordered = base.mx_dot_order
    fields = dataclasses.asdict(base)
    chosen = (("block_m", bm), ("block_n", bn), ("block_k", bk), ("num_warps", nw),
              ("num_stages", stages), ("pdl", pdl), ("max_registers", registers))  # fmt: skip
    for key, val in chosen:
        if val is not None:
            fields[key] = val
    if tma is not None and fmt == "fp8" and fields["path"] == "dot":
        fields["tma"] = tma
    if early is not None:
        fields["early_bias"] = early
    if rot is not None and fmt == "mxfp4" and fields["path"] == "dot":
        fields["mx_rotated"] = rot
    if placed is not None and fmt == "fp8" and fields["path"] == "dot":
        fields["fp8_placed"] = placed
    if packed is not None and fields["path"] == "dot":
        fields["fp8_packed" if fmt == "fp8" else "mx_packed"] = bool(packed)
        if fmt == "mxfp4":
            fields["mx_packed_scales"] = packed == 2
    if fmt == "mxfp4" and fields["path"] == "dot":
        fields["mx_dot_order"] = ordered if dot is None else dot
        if biased is not None:
            fields["mx_biased_scales"] = biased
    # Both layouts are of rotated bytes.
    fields["mx_dot_order"] = fields["mx_dot_order"] and fields["mx_rotated"]
    fields["mx_biased_scales"] = fields["mx_biased_scales"] and fields["mx_rotated"]
    if split is not None and fmt == "mxfp4" and fields["path"] == "dot":
        fields["split_k"] = split  # the launcher refuses it off the one-pass tile
    if stream is not None and fmt == "mxfp4" and fields["path"] == "dot":
        fields["stream_k"] = stream  # likewise
    if prefetch is not None and fields["fp8_packed"]:
        fields["fp8_prefetch"] = prefetch
    if ahead is not None and fields["fp8_packed"]:
        fields["fp8_prefetch_ahead"] = ahead
    if slots is not None:
        fields["slot_grid"] = slots
    # The slot grid is the one-slot GEMV's (a variant that leaves it drops it).
    fields["slot_grid"] = (
        fields["slot_grid"] and fields["path"] == "gemv" and fields["block_m"] == 1
    )
    keep = ragged and fmt == "fp8" and fields["path"] == "dot" and fields["tma"]
    if not keep:
        fields["block_n"] = min(fields["block_n"], columns & -columns)
    return Launch(**fields)


def expert_ready_pair(
    l1: Launch, l2: Launch, ready: bool | None, fmt: str, slots_per_expert: float
) -> tuple[Launch, Launch]:
    """fc1's and fc2's launches with fc2 waiting for fc1 expert by expert (``ready`` True: fc1
    "signal", fc2 "wait", where both are the tile; `expert_ready`), for the whole
    of fc1 (False), or as the arm pairs them (None: `grouped_launch.paired_launches`, so that a
    variant that leaves the one-pass tile drops the roles its base had)."""
    l1, l2 = (dataclasses.replace(f, expert_ready="") for f in (l1, l2))
    if ready is None:
        return paired_launches(l1, l2, fmt, slots_per_expert)
    if not ready or {l1.path, l2.path} != {"dot"}:
        return l1, l2
    return (dataclasses.replace(l1, expert_ready="signal"),
            dataclasses.replace(l2, expert_ready="wait"))  # fmt: skip


def describe(launch: Launch) -> str:
    L = launch
    stages = f" s{L.num_stages}" if L.path == "dot" else ""
    return (f"{L.path} m{L.block_m} n{L.block_n} k{L.block_k} w{L.num_warps}{stages}"
            + (" pdl" if L.pdl else "") + (" tma" if L.tma else "")
            + (f" r{L.max_registers}" if L.max_registers else "")
            + (" passes" if L.pass_grid else "") + (" eb" if L.early_bias else "")
            + (" rot" if L.mx_rotated else "") + (" placed" if L.fp8_placed else "")
            + (" packed" if L.fp8_packed or L.mx_packed else "")
            + (" scales-packed" if L.mx_packed_scales else "")
            + (" dot-order" if L.mx_dot_order else "")
            + (" biased" if L.mx_biased_scales else "")
            + (f" split{L.split_k}" if L.split_k > 1 else "")
            + (f" stream{L.stream_k}" if L.stream_k else "")
            + (" gluon" if L.gluon else "") + (" slots" if L.slot_grid else "")
            + (f" pf{L.fp8_prefetch}" if L.fp8_prefetch else "")
            + (f" ahead{L.fp8_prefetch_ahead}" if L.fp8_prefetch_ahead else "")
            + (f" ready-{L.expert_ready}" if L.expert_ready else ""))  # fmt: skip


def checked(ws: Workspace, stages, ref: torch.Tensor, precision: str) -> dict:
    """Run the step once on a poisoned workspace; the reference and sentinel checks."""
    ws.poison()
    for st in stages:
        st.run()
    diff = calc_diff(ws.y_TD.float(), ref)
    sentinels = check_decode_sentinels(ws)
    ok = diff <= TOLERANCE[precision] and all(c.status in ("pass", "skip") for c in sentinels)
    bad = [c.detail for c in sentinels if c.status == "fail"]
    return dict(diff=diff, ok=ok, sentinels="; ".join(bad) or "pass")


def main(out_dir: str, tokens: list[int], variants: list[tuple[tuple[int, ...], tuple]],
         floor_tokens: set[int], scenario: str = SCENARIO, rank: int = 0,
         seed: int | None = None, precisions: set[str] | None = None) -> list[dict]:  # fmt: skip
    """One rank of one routing draw (``seed``: the scenario's ``routing.seed`` replaced); its rows,
    also written to OUT/bench_grouped_decode.json. ``precisions``: only these precisions' cases
    (None: every one of the sweep)."""
    t_start = time.monotonic()
    os.makedirs(out_dir, exist_ok=True)
    s = load_scenario(scenario)
    if seed is not None:  # in the document, so that every swept case takes it
        s = scenario_with(s, **{"routing.seed": seed})
    # The first line as the records' reader takes it ("torch GPU"), then what was measured: the
    # logs of several ranks and routing draws are told apart by these, not by their file names.
    device = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    print(f"{torch.__version__} {device}")
    print(f"copy ceiling: {COPY_FROM}")
    print(f"scenario {scenario} (routing.seed {s.routing.seed}), rank {rank}", flush=True)
    arms = {name: registry.resolve(name) for name in ARMS}
    rows: list[dict] = []

    def save() -> None:
        with open(f"{out_dir}/bench_grouped_decode.json", "w") as fh:
            json.dump(rows, fh, indent=1)

    def show(row: dict) -> None:
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in row.items()), flush=True)  # fmt: skip

    cases = sorted(plan(s), key=lambda p: -p.case.scenario.shape.tokens_per_rank)
    for p in cases:
        cs = p.case.scenario
        T = cs.shape.tokens_per_rank
        if T not in tokens or (precisions and cs.precision not in precisions):
            continue
        x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
        prob = family_of(cs).problem(cs, p.routing, p.capacity_rows, x, rank, dev)
        ref = decode_reference_output(prob)
        fmt = "fp8" if cs.precision == "w8a16" else "mxfp4"
        counts = local_counts(prob.topk_ids_TK.cpu(), prob.expert_offset, prob.local_experts)
        case = dict(precision=cs.precision, tokens=T, seed=cs.routing.seed, rank=rank,
                    local_slots=int(counts.sum()),
                    touched=int((counts > 0).sum()), max_slots=int(counts.max()))  # fmt: skip
        print(
            f"\n{cs.precision} {T} tokens: {case['local_slots']} local slots on "
            f"{case['touched']} of {prob.local_experts} experts (at most {case['max_slots']})"
        )
        steps: dict[str, tuple] = {}  # name -> (stages, weight bytes, launches)
        for name, arm in arms.items():
            ws = Workspace(prob, layout=arm.layout)
            steps[name] = (ws, arm.build(ws), arm.weight_bytes(prob)["ffn"], None)
        base1, base2 = grouped_decode.launches(prob)
        over_budget = time.monotonic() - t_start > TIME_BUDGET_S
        if not over_budget:
            for v_tokens, v in variants:
                if T not in v_tokens:
                    continue
                only = v[11] if len(v) > 11 else None
                values = 2 if fmt == "mxfp4" else 1  # R in values: MXFP4 holds two a byte
                r1, r2 = prob.w13.shape[2] * values, prob.w2.shape[2] * values
                l1 = variant_launch(base1, v, fmt, prob.w13.shape[1], r1) if only != 2 else base1
                l1 = dataclasses.replace(l1, split_k=1)  # split_k is fc2's (fc1 has the GLU)
                l2 = variant_launch(base2, v, fmt, prob.w2.shape[1], r2) if only != 1 else base2
                ready = v[18] if len(v) > 18 else None
                if l1.stream_k or l2.stream_k:
                    ready = False  # the persistent grid takes no expert_ready (`stream_k`)
                per_expert = T * prob.topk_ids_TK.shape[1] / prob.local_experts
                l1, l2 = expert_ready_pair(l1, l2, ready, fmt, per_expert)
                # As the arm will run them (the scale bias dropped where a byte is above 128), so
                # that the name says what is timed.
                l1, l2 = (grouped_decode.scales_launch(f, grouped_decode.tiles_scales(w, s, f)[1])
                          for f, w, s in ((l1, prob.w13, prob.w13_scale),
                                          (l2, prob.w2, prob.w2_scale)))  # fmt: skip
                # The Gluon tile where the stage can run it, the Triton tile otherwise (the CPU).
                l1 = grouped_decode.gluon_or_triton(l1, prob.w13, prob.w13_scale, prob.x_TD)
                l2 = grouped_decode.gluon_or_triton(l2, prob.w2, prob.w2_scale, prob.x_TD)
                name = f"grouped {describe(l1 if only != 2 else l2)}"
                name += f" fc{only}" if only else ""
                if only != 2 and l2.split_k > 1:  # the name is fc1's launch: fc2's split too
                    name += f" fc2-split{l2.split_k}"
                if (l1, l2) == (base1, base2) or name in steps:
                    # Said, so that a variant spelled wrong does not pass unnoticed.
                    same = "the arm's launch" if (l1, l2) == (base1, base2) else "another variant"
                    print(f"variant {describe(l1)} / {describe(l2)} at {T} tokens: {same}, not "
                          "timed again")  # fmt: skip
                    continue
                ws = Workspace(prob, layout="TKD")
                stages = grouped_decode.build_stages(ws, fc1=l1, fc2=l2)
                steps[name] = (
                    ws,
                    stages,
                    steps["grouped_decode"][2],
                    (l1, l2),
                )
        steps["grouped_decode"] = (*steps["grouped_decode"][:3], (base1, base2))
        timed = {}
        for name, (ws, stages, wbytes, launch) in steps.items():
            arm, _, variant = name.partition(" ")
            row = dict(case, arm="grouped_decode" if variant else arm,
                       variant=variant or "default", weight_bytes=wbytes)  # fmt: skip
            if launch is not None:
                row["fc1_launch"], row["fc2_launch"] = describe(launch[0]), describe(launch[1])
            try:
                row.update(checked(ws, stages, ref, cs.precision))
            except Exception as exc:  # a launch the launcher refuses or cannot compile
                row.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:200]}")
            rows.append(row)
            if row["ok"]:
                timed[name] = (row, stages)
            if not row["ok"] or dev.type != "cuda":
                show(row)
        if dev.type != "cuda":  # the interpreter: the checks above only, no timing
            continue
        names = list(timed)
        step_us = bench.time_interleaved(
            CLOCK, [lambda st=timed[n][1]: [x.run() for x in st] for n in names], rounds=8, reps=4
        )  # fmt: skip
        for n, us in zip(names, step_us, strict=True):
            row, stages = timed[n]
            row.update(step_us=us, gbs=row["weight_bytes"] / us / 1e3)
            row["of_copy"] = row["gbs"] / 1e3 / COPY_TBS
            if row["arm"] == "grouped_decode":
                # fc1 and fc2 alone (the kernel regime), L2 flushed before each.
                fcs = [stages[0].run, stages[1].run]
                row["fc1_us"], row["fc2_us"] = bench.time_interleaved(CLOCK, fcs, rounds=4)
            show(row)
        if T in floor_tokens and dev.type == "cuda":
            for row in read_floor_rows(prob, case):
                rows.append(row)
                show(row)
        save()
    save()
    summary(rows)
    print(f"total {time.monotonic() - t_start:.0f} s")
    return rows


def read_floor_rows(prob, case: dict) -> list[dict]:
    """What any step needs to read the touched experts' fc1 and fc2 weight values under this
    timer (tools/bench_decode.py's read kernels, the best of their launch sizes), timed together
    interleaved: read in two launches (fc1's values, then fc2's: the floor of today's steps, whose
    GEMVs are two kernels), in one launch (the floor of a step that is a single kernel), and an
    empty launch (the timer's floor for a graph of one kernel)."""
    sys.path.insert(0, "tools")
    from bench_decode import empty_launch, read_both, read_floor

    off, E = prob.expert_offset, prob.local_experts
    hit = sorted(
        {int(e) - off for e in prob.topk_ids_TK.flatten().tolist() if 0 <= int(e) - off < E}
    )
    _, read1 = read_floor(prob.w13, hit)
    _, read2 = read_floor(prob.w2, hit)
    _, read12, _ = read_both(prob.w13, prob.w2, hit)
    runs = {"best read of the touched values": lambda: (read1(), read2()),
            "one launch reading the touched values": read12,
            "an empty launch": empty_launch(prob.w13.device)}  # fmt: skip
    times = bench.time_interleaved(CLOCK, list(runs.values()), rounds=4)
    values = len(hit) * (prob.w13[0].numel() * prob.w13.element_size()
                         + prob.w2[0].numel() * prob.w2.element_size())  # fmt: skip
    rows = []
    for variant, us in zip(runs, times, strict=True):
        read = 0 if variant == "an empty launch" else values
        rows.append(dict(case, arm="read_floor", variant=variant, step_us=us, weight_bytes=read,
                         of_copy=read / us / 1e6 / COPY_TBS))  # fmt: skip
    return rows


def summary(rows: list[dict]) -> None:
    """Per precision and token count: each arm's default step, the best grouped launch, and the
    targets."""
    timed = [r for r in rows if r.get("step_us")]
    print(
        f"\n{'prec':6} {'T':>3} {'slots':>5} {'hit':>3} {'dense us':>9} {'sparse us':>9} "
        f"{'grouped us':>10} {'%copy':>6} {'best grouped':>12} {'%copy':>6}  best launch"
    )
    best_by = {}
    for prec in sorted({r["precision"] for r in timed}):
        for T in sorted({r["tokens"] for r in timed if r["precision"] == prec}):
            here = [r for r in timed if r["precision"] == prec and r["tokens"] == T]
            arm = {r["arm"]: r for r in here if r["variant"] == "default"}
            grouped = [r for r in here if r["arm"] == "grouped_decode"]
            if not grouped or "grouped_decode" not in arm:
                continue
            best = min(grouped, key=lambda r: r["step_us"])
            best_by[(prec, T)] = (arm, best)
            cell = lambda name: f"{arm[name]['step_us']:9.1f}" if name in arm else f"{'-':>9}"
            g = arm["grouped_decode"]
            print(f"{prec:6} {T:3d} {g['local_slots']:5d} {g['touched']:3d} {cell('dense_decode')} "
                  f"{cell('sparse_decode')} {g['step_us']:10.1f} {100 * g['of_copy']:5.0f}% "
                  f"{best['step_us']:12.1f} {100 * best['of_copy']:5.0f}%  {best['variant']} "
                  f"{best.get('fc1_launch', '')} / {best.get('fc2_launch', '')}")  # fmt: skip
    print("\ntargets (the arm's default launch; the best launch in brackets):")
    for (prec, T), (arm, best) in sorted(best_by.items()):
        g = arm["grouped_decode"]
        if "dense_decode" in arm:
            ok = g["step_us"] < arm["dense_decode"]["step_us"]
            print(f"  {prec} {T:2d} tokens: grouped {g['step_us']:.1f} vs dense "
                  f"{arm['dense_decode']['step_us']:.1f} us: {'met' if ok else 'MISSED'} "
                  f"[{best['step_us']:.1f}]")  # fmt: skip
        if T in (32, 64):
            ok = g["of_copy"] >= TARGET_OF_COPY
            print(f"  {prec} {T:2d} tokens: grouped at {100 * g['of_copy']:.0f}% of copy over the "
                  f"touched bytes (target {100 * TARGET_OF_COPY:.0f}%): {'met' if ok else 'MISSED'}"
                  f" [{100 * best['of_copy']:.0f}%]")  # fmt: skip
    for T in sorted({T for _, T in best_by}):
        if ("w8a16", T) in best_by and ("w4a16", T) in best_by:
            fp8 = best_by[("w8a16", T)][0]["grouped_decode"]["step_us"]
            mx = best_by[("w4a16", T)][0]["grouped_decode"]["step_us"]
            print(f"  {T:2d} tokens: grouped MXFP4 {mx:.1f} vs FP8 {fp8:.1f} us: "
                  f"{'met' if mx < fp8 else 'MISSED'}")  # fmt: skip


def draws_summary(rows: list[dict]) -> None:
    """Over several routing draws and ranks: each launch's step on the slowest rank of each draw
    (an EP step waits for its slowest rank), their mean, and the change against the arm's own
    launch. Draws missing a rank are left out."""
    timed = [r for r in rows if r.get("step_us")]
    ranks = sorted({r["rank"] for r in timed})
    print(f"\nslowest of ranks {ranks} per draw (us), mean, change against the default:")
    groups: dict[tuple, dict[int, dict[int, float]]] = {}
    for r in timed:
        key = (r["precision"], r["tokens"], r["arm"], r["variant"])
        groups.setdefault(key, {}).setdefault(r["seed"], {})[r["rank"]] = r["step_us"]
    # The slowest rank of each draw that has every rank, per launch.
    slowest = {
        key: {d: max(v.values()) for d, v in by_draw.items() if sorted(v) == ranks}
        for key, by_draw in groups.items()
    }
    mean = {key: sum(v.values()) / len(v) for key, v in slowest.items() if v}
    for key in sorted(mean, key=lambda k: (k[0], k[1], k[2] != "grouped_decode", k[2], k[3])):
        base = (*key[:2], "grouped_decode", "default")
        change = ""
        if key[2] == "grouped_decode" and key != base and base in mean:
            if slowest[base].keys() == slowest[key].keys():
                change = f"  {100 * (mean[key] / mean[base] - 1):+.1f}%"
        draws = " ".join(f"{d}:{us:.1f}" for d, us in sorted(slowest[key].items()))
        print(f"  {key[0]} {key[1]:2d} {key[2]} {key[3]}: {draws}  mean {mean[key]:.1f}{change}")


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokens", default="1,2,4,8,16,32,64")
    ap.add_argument("--variants", default="")
    ap.add_argument("--variant-tokens", default="1,2,4,8,16,32,64", help="for --variants")
    ap.add_argument("--floor", default="")
    ap.add_argument("--scenario", default=SCENARIO, help="a decode scenario with its shapes")
    ap.add_argument("--rank", default="0", help="the simulated ranks it runs, e.g. 0,1")
    ap.add_argument("--seeds", default="", help="routing draws (routing.seed), e.g. 0,1,2")
    ap.add_argument("--precision", default="", help="only these precisions, e.g. w8a16")
    a = ap.parse_args()
    precisions = {p for p in a.precision.split(",") if p} or None
    for p in precisions or ():
        if p not in ("w8a16", "w4a16"):
            ap.error(f"--precision: {p!r} is neither decode precision (w8a16, w4a16)")
    variants = parse_variants(a.variants, tuple(ints(a.variant_tokens))) if a.variants else VARIANTS
    ranks, seeds = ints(a.rank), ints(a.seeds) or [None]
    if len(ranks) * len(seeds) == 1:
        main(
            a.out,
            ints(a.tokens),
            variants,
            set(ints(a.floor)),
            a.scenario,
            ranks[0],
            seeds[0],
            precisions,
        )
    else:
        # One process for every draw and rank (the kernels compile once), a folder each.
        rows = [row for seed in seeds for rank in ranks
                for row in main(f"{a.out}/{'' if seed is None else f'seed{seed}_'}rank{rank}",
                                ints(a.tokens), variants, set(ints(a.floor)), a.scenario, rank,
                                seed, precisions)]  # fmt: skip
        draws_summary(rows)
