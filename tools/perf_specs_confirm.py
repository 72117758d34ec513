"""docs/PERF.md's generated tables of the twentieth session (2026-12-05, issue 28), all on an
H100 80GB HBM3 (the device asked for an H200 and was lent H100s): the one-token FP8 sparse step as
dependent launches triggered once a slot is local, the FP8 one-pass tile on 64-value steps, the
placed layout's A/B again, where the combine's time goes, where the tile's warps wait, and the
gated scenario with the copy shares.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from statistics import mean

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_passes16 import _slowest
from perf_specs_placed import WORDS
from perf_specs_rotated import _cells

DAY = "2026-12-05-h200-confirm"
HIST = "[issue 28][h-i28y]"
H100 = "**H100 80GB HBM3** (asked for an H200; the device lent H100s), driver 580.159.04"
K128 = "dot m16 n64 k128 w4 s3 pdl tma r80 passes eb placed"
K64 = "dot m16 n64 k64 w4 s6 pdl tma r80 passes eb placed"


def _mean_slowest(r: Records, log: str, tokens: int, seeds, variant: str):
    per = [_slowest(r, log, "w8a16", tokens, s, variant) for s in seeds]
    return per, derive(lambda *v: sum(v) / len(v), "{:.1f}", *per)


def _faster(a: list, b: list):
    """The draws whose ``a`` is below ``b``."""
    n = len(a)
    return derive(lambda *v: sum(p < q for p, q in zip(v[:n], v[n:], strict=True)),
                  f"{{:.0f}} of {({2: 'two', 3: 'three'}[n])}", *a, *b)  # fmt: skip


def fp8_step64(r: Records) -> Table:
    t = Table(
        name="fp8_step64",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The grouped arm's FP8 one-pass tile (16-64 tokens)
stepping 128 values on 3 stages (the arm's launch before) against 64 values on 6 (now,
`grouped_launch.PASS_GRID_FP8_BLOCK_K`, `PASS_GRID_FP8_STAGES`): `PYTHONPATH=$PWD:$PWD/tools
python3 tools/bench_grouped_decode.py OUT --precision w8a16 --tokens 16,32,64 --seeds S --rank
0,1 --variants V --variant-tokens 16,32,64`, three calls of this session on two machines (calls
5 and 6 with 128 values the default and 64 a variant, `dot:-:-:64:-:6:-:1`; call 8, on 64 values'
tree, with 128 the variant, `dot:-:-:128:-:3:-:1`). Each step checked against the reference and
the sentinels first, then timed interleaved (one CUDA graph, L2 flushed). sm_90a (offline): 77
registers and no stack against 80 and 16 bytes spilled, 6 programs an SM either way, and at R =
2,880 no masked last step. Derived: a time = the mean over the draws of the slower rank's step,
us; "change" = 64 values / 128 values - 1; "faster in" = the draws whose 64-value step is below
the 128-value one's. Faster in every draw of all three calls: the arm takes it. The sums group
their products by 64 values: the last bits differ from the 128-value tile's.""",
        columns=["call", "tokens", "128 values, 3 stages", "64 values, 6 stages", "change",
                 "faster in"],
    )  # fmt: skip
    calls = (("fifth", "call5/stages.log", (0, 1), "default", K64),
             ("sixth", "call6/stages2.log", (0, 1, 2), "default", K64),
             ("eighth", "call8/ab_k64.log", (0, 1, 2), K128, "default"))  # fmt: skip
    for name, log, seeds, old, new in calls:
        for tokens in (16, 32, 64):
            a, mean_a = _mean_slowest(r, f"{DAY}/{log}", tokens, seeds, old)
            b, mean_b = _mean_slowest(r, f"{DAY}/{log}", tokens, seeds, new)
            t.row(name, WORDS[tokens], mean_a, mean_b, over(mean_b, mean_a), _faster(b, a),
                  history=HIST)  # fmt: skip
    return t


def step64_others(r: Records) -> Table:
    t = Table(
        name="step64_others",
        caption=f"""\
{H100}. The other depths tried beside `fp8_step64` (same bench and calls; the sixth call's
variants `dot:-:-:64:-:5:-:1`, `dot:-:-:64:-:7:-:1`, `dot:-:-:32:-:10:-:1`, `dot:-:-:32:-:12:-:1`;
the fifth's `dot:-:-:-:-:4:-:1`, 128 values on 4 stages; the looping tile at 4 and 8 tokens on
64 values, `dot:-:-:64:-:6` and `dot:-:-:64:-:8`; the ninth call's one pass a program at 4 and 8
tokens, `dot:-:-:-:-:-:-:1`, on 64 values' tree; the tenth call's one pass capped at 64 registers
on 5 or 4 stages, 8 programs an SM, or at 72 on 5, 7 programs, no spill in either (sm_90a,
offline), `bash docs/perf/2026-12-05-h200-confirm/scratch/call10.sh`). More programs an SM on
fewer registers are slower. Derived as there: a time = the mean over the
draws of the slower rank's step, us; "change" = the variant / the default in that call - 1.
None is taken.""",
        columns=["variant", "tokens", "the arm's launch then", "the variant", "change"],
    )  # fmt: skip
    w = {32: "thirty-two", 64: "sixty-four", 128: "a hundred and twenty-eight", 4: "four",
         5: "five", 6: "six", 7: "seven", 8: "eight", 10: "ten", 12: "twelve",
         72: "seventy-two"}  # fmt: skip
    rows = [(f"{w[k]} values, {w[s]} stages, one pass", "call6/stages2.log", (0, 1, 2), n,
             f"dot m16 n64 k{k} w4 s{s} pdl tma r80 passes eb placed")
            for k, s in ((64, 5), (64, 7), (32, 10), (32, 12)) for n in (32, 64)]  # fmt: skip
    rows += [(f"{w[128]} values, four stages, one pass", "call5/stages.log", (0, 1), n,
              "dot m16 n64 k128 w4 s4 pdl tma r80 passes eb placed") for n in (32, 64)]  # fmt: skip
    rows += [(f"sixty-four values, {w[s]} stages, the loop", "call6/stages_loop.log", (0, 1, 2),
              n,
              f"dot m16 n64 k64 w4 s{s} pdl tma r128 eb placed")
             for s in (6, 8) for n in (4, 8)]  # fmt: skip
    rows += [("one pass (sixty-four values, six stages)", "call9/ab_pass8.log", (0, 1, 2), n, K64)
             for n in (4, 8)]  # fmt: skip
    rows += [(f"sixty-four values, {w[s]} stages, {w[g]} registers, one pass", "call10/regs.log",
              (0, 1, 2), n, f"dot m16 n64 k64 w4 s{s} pdl tma r{g} passes eb placed")
             for s, g in ((5, 64), (4, 64), (5, 72)) for n in (16, 32, 64)]  # fmt: skip
    for variant, log, seeds, tokens, name in rows:
        _, base = _mean_slowest(r, f"{DAY}/{log}", tokens, seeds, "default")
        _, mine = _mean_slowest(r, f"{DAY}/{log}", tokens, seeds, name)
        t.row(variant, WORDS[tokens], base, mine, over(mine, base), history=HIST)
    return t


COPY = f"{DAY}/call7/copy_share_{{}}.log"


def copy_share_h100(r: Records) -> Table:
    t = Table(
        name="copy_share_h100",
        caption=f"""\
{H100}. Issue 28's copy-rate targets on the H100, against its own copy ceiling (the bench measures
it at its start where moebench has no figure: a torch copy of 2 x 1 GiB, 2.99 TB/s in these logs)
on the tree with this session's two changes (seventh call: `tools/bench_grouped_decode.py OUT
--precision P --tokens 1,32,64 --seeds 0,1,2 --rank 0,1`). "of copy" is the bench's: the step's
weight bytes (the touched experts once) over its time, over the copy ceiling, rank 0 of the
scenario's routing (draw 0, as `copy_share` below), then the mean over the three draws of the
slower rank's step. The targets: at one token the best arm (FP8: sparse) at 75% or more; at 32 and
64 tokens the grouped step at 85% or more. Missed on the H100 too, nearer: FP8 sparse 70% at one
token, FP8 grouped 81-84% at 32-64.""",
        columns=["precision", "tokens", "arm", "step us, draw 0 rank 0", "of copy",
                 "the slower rank, mean of three draws"],
    )  # fmt: skip
    copy_share_rows(t, r, COPY, (0, 1, 2), HIST)
    return t


def copy_share_rows(t: Table, r: Records, copy: str, seeds: tuple[int, ...], hist: str) -> None:
    """A copy-share table's rows from the bench logs ``copy`` (``{}`` the precision): each
    format's best arm at one token and the grouped arm at 32 and 64, rank 0 of draw 0, then the
    mean over ``seeds`` of the slower rank's step."""
    for prec in ("w8a16", "w4a16"):
        for tokens, arm in ((1, "sparse_decode"), (32, "grouped_decode"), (64, "grouped_decode")):
            log = copy.format(prec)

            def row(seed: int, rank: int, what: str, tokens=tokens, arm=arm, log=log):
                head = rf"^precision={prec} tokens={tokens} seed={seed} rank={rank} .* "
                return r.text(log, head + rf"arm={arm} variant=default .* {what}=(\S+)")

            slowest = [derive(max, "{:.1f}", row(s, 0, "step_us"), row(s, 1, "step_us"))
                       for s in seeds]  # fmt: skip
            t.row("FP8" if prec == "w8a16" else "MXFP4", WORDS[tokens], arm,
                  row(0, 0, "step_us"),
                  derive(lambda v: 100 * v, "{:.0f}%", row(0, 0, "of_copy")),
                  derive(lambda *v: mean(v), "{:.1f}", *slowest), history=hist)  # fmt: skip


PDL = f"{DAY}/call1/pdl_fp8.log"


def pdl_one_token(r: Records) -> Table:
    t = Table(
        name="pdl_one_token",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The sparse arm's step against the same step with its
GEMVs and combine as programmatic dependent launches, each GEMV program triggering the next
kernel's launch at its start (`pdl`) or once its slot is known local (`pdl_local`,
`sparse_gemv(pdl_trigger="local")`): `bash docs/perf/2026-12-05-h200-confirm/scratch/next_call.sh`
(its `ready_bench.py --tokens 1,2,4 --seeds 0,1,2,3,4,5 --kinds pdl,pdl_local`, first call, on
a894cf6's tree: the arm without them at FP8), six routing draws, both ranks, each step checked
and bitwise the arm's first. Derived: a time = the mean over the draws of the slower rank's
step, us; "change" = kind / the arm - 1; "faster in" = the draws whose slower rank's step is
below the arm's. With the nineteenth session's call (`ready_h100`: 34.18 against 35.76 us, six
of six) `pdl_local` is faster in all twelve draws at one FP8 token: the arm takes it there
(`sparse_launch.default_pdl`); at 2 tokens mixed, at 4 eleven of twelve, not taken; MXFP4 keeps
its start trigger.""",
        columns=["case", "kind", "the arm", "the kind", "change", "faster in"],
    )  # fmt: skip
    for tokens in (1, 2, 4):
        for kind in ("pdl", "pdl_local"):
            t.row(f"FP8, {WORDS[tokens]} token{'s' * (tokens > 1)}", kind,
                  *_cells(r, PDL, "w8a16", tokens, 6, (kind,)), history=HIST)  # fmt: skip
    t.row("MXFP4, one token", "pdl_local",
          *_cells(r, f"{DAY}/call1/pdl_mxfp4.log", "w4a16", 1, 6, ("pdl_local",)),
          history=HIST)  # fmt: skip
    return t


def placed_again(r: Records) -> Table:
    t = Table(
        name="placed_again",
        caption=f"""\
{H100}. The nineteenth session's placed-layout A/B again, on another call (first call of this
session, a894cf6's tree, the placed layout the arm's default, the natural one the variant
`dot:-:-:-:-:-:-:-:-:-:-:-:-:0`, three draws, both ranks, each step checked first). Derived as
`placed_ab`: a time = the mean over the draws of the slower rank's step, us; "change" = placed /
natural - 1; "faster in" = the draws whose placed step is below the natural one's. Faster in
every draw at every count again.""",
        columns=["tokens", "natural", "placed (the arm)", "change", "faster in"],
    )  # fmt: skip
    log = f"{DAY}/call1/ab_placed.log"
    for tokens in (2, 4, 8, 16, 32, 64):
        natural = K128.replace(" placed", "") if tokens >= 16 else \
            "dot m16 n64 k128 w4 s4 pdl tma r128 eb"  # fmt: skip
        nat, mean_nat = _mean_slowest(r, log, tokens, (0, 1, 2), natural)
        pla, mean_pla = _mean_slowest(r, log, tokens, (0, 1, 2), "default")
        t.row(WORDS[tokens], mean_nat, mean_pla, over(mean_pla, mean_nat), _faster(pla, nat),
              history=HIST)  # fmt: skip
    return t


def combine_cost(r: Records) -> Table:
    t = Table(
        name="combine_cost",
        caption=f"""\
{H100}. What the combine costs inside the decode steps (third call,
`PYTHONPATH=$PWD:$PWD/tools python3 docs/perf/2026-12-05-h200-confirm/scratch/combine_cost.py
--tokens 1,2,4` and `--precision w4a16`, `--arm grouped_decode --tokens 8,32,64 --seeds 0,1,2`):
the arm's step (fc1, fc2, combine) against its first two stages and the combine alone, each one
CUDA graph, L2 flushed, interleaved, six draws (three for the grouped arm), both ranks, the arm's
step checked first. Derived: a time = the mean over the draws of the slower rank's figure, us;
"the combine in the step" = step - (fc1 + fc2); "share" = that / step. Alone the combine takes
about 5 us; inside the step, behind the dependent launch, 1.5-2.9: folding it into fc2's
epilogue could save at most that, so it was not built.""",
        columns=["arm", "precision", "tokens", "step", "fc1 + fc2", "the combine alone",
                 "the combine in the step", "share"],
    )  # fmt: skip
    cases = [("sparse_decode", "FP8", "call3/combine_fp8.log", n) for n in (1, 2, 4)]
    cases += [("sparse_decode", "MXFP4", "call3/combine_mxfp4.log", n) for n in (1, 2, 4)]
    cases += [("grouped_decode", "FP8", "call3/combine_grouped.log", n) for n in (8, 32, 64)]
    for arm, prec, log, tokens in cases:
        f = lambda form, log=log, tokens=tokens: r.text(  # noqa: E731
            f"{DAY}/{log}", rf"^  T=\s*{tokens} {form}\s*:.* mean (\S+)$"
        )
        step, two = f("step"), f(r"fc1\+fc2")
        inside = derive(lambda a, b: a - b, "{:.2f}", step, two)
        t.row(
            arm,
            prec,
            WORDS[tokens],
            step,
            two,
            f("combine"),
            inside,
            derive(lambda a, b: 100 * (a - b) / a, "{:.1f}%", step, two),
            history=HIST,
        )
    return t


def tma_wait(r: Records) -> Table:
    t = Table(
        name="tma_wait",
        caption=f"""\
{H100}. Where the FP8 tile's warps wait (before the 64-value steps: 128 values on 3 stages,
placed weights), the second method beside the event timer: Nsight Compute's warp-state sampling
by instruction (fourth call: `ncu --clock-control none -k regex:_grouped_dot --launch-skip 4|5
--launch-count 1 --section SourceCounters --section WarpStateStats -o REP python3
tools/ncu_kernels.py grouped-placed`, then `ncu -i REP --page source --print-source sass --csv`;
64 tokens of random routing, fc1 and fc2), summed by `scratch/stall_summary.py` into
`call4/stall_summary.txt`. Each reason's share of all samples, and the one instruction holding
most of them: the branch that retries `SYNCS.PHASECHK.TRANS64.TRYWAIT` on the weights' TMA
barrier. The warps wait on the weights' arrival, not on the decode: deeper pipelining of the
weights (`fp8_step64`) is what followed.""",
        columns=["launch", "samples", "long scoreboard", "wait", "selected", "short scoreboard",
                 "barrier", "at the TMA barrier's retry branch"],
    )  # fmt: skip
    path = f"{DAY}/call4/stall_summary.txt"
    for name in ("fc1", "fc2"):
        share = lambda reason, name=name: r.text(  # noqa: E731
            path, rf"^{name} reason={reason} share=(\S+)$"
        )
        t.row(name, r.text(path, rf"^{name} samples=(\d+) "),
              *(share(k) for k in ("long_sb", "wait", "selected", "short_sb", "barrier")),
              r.text(path, rf"^{name} top=1 share=(\S+) reason=long_sb instruction=@!P0_BRA"),
              history=HIST)  # fmt: skip
    return t


RUN = f"{DAY}/call7/gpt-oss-20b-decode-grouped.md"


def confirm_run(r: Records) -> Table:
    t = Table(
        name="confirm_run",
        caption=f"""\
{H100}. The gated scenario on the tree with both of this session's changes (seventh call:
`DEADLINE=... PER_RUN_TIMEOUT=330 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`, 128 s; every gate and integrity check passed, 952
pass and 112 skip in its checks): the step (`ffn`, one CUDA graph, the slowest rank's median over
13 blocks, us) of each arm. Derived: "grouped / dense" = the ratio; "MXFP4 best / FP8 best" = the
faster of the sparse and grouped steps of MXFP4 over FP8's. Grouped beats dense and MXFP4 beats
FP8 at every count.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, RUN, HIST)
    return t


# The columns of a gated run's rows (`run_rows`).
RUN_COLUMNS = ["tokens", "FP8 sparse", "FP8 grouped", "FP8 dense", "grouped / dense",
               "MXFP4 sparse", "MXFP4 grouped", "MXFP4 best / FP8 best"]  # fmt: skip


def run_rows(t: Table, r: Records, run: str, hist: str) -> None:
    """A gated run's rows (`confirm_run`'s columns) from its report ``run``: each arm's step at
    each token count, grouped over dense, MXFP4's best over FP8's."""
    for i, tokens in enumerate((1, 2, 4, 8, 16, 32, 64)):

        def cell(prec: str, case: int, arm: str, tokens=tokens):
            return r.result(
                run, "ffn", arm, f"c{case:03d}-precision={prec}-tokens_per_rank={tokens}"
            )

        f8 = {a: cell("w8a16", i, a) for a in ("grouped_decode", "dense_decode", "sparse_decode")}
        f4 = {a: cell("w4a16", i + 7, a) for a in ("grouped_decode", "sparse_decode")}
        best = derive(lambda a, b, c, d: min(a, b) / min(c, d), "{:.2f}",
                      f4["grouped_decode"], f4["sparse_decode"], f8["grouped_decode"],
                      f8["sparse_decode"])  # fmt: skip
        t.row(WORDS[tokens], f8["sparse_decode"], f8["grouped_decode"], f8["dense_decode"],
              derive(lambda a, b: a / b, "{:.2f}", f8["grouped_decode"], f8["dense_decode"]),
              f4["sparse_decode"], f4["grouped_decode"], best, history=hist)  # fmt: skip


TABLES = (fp8_step64, step64_others, copy_share_h100, pdl_one_token, placed_again, combine_cost,
          tma_wait, confirm_run)  # fmt: skip
