"""docs/PERF.md's generated tables of the fourteenth H200 session (2026-12-04, issue 28): the
sparse FP8 GEMV with one program a (row block, token) serving every slot of the token, and two
launches of the grouped tile (fc1 on 128-row blocks; one pass on 64-value steps, 8 programs an
SM), all measured slower than the arm's; the arms' decode kernels of today under Nsight Compute.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re
from functools import partial

from perf_cells import Table, fill
from perf_records import Derived, Figure, Records, derive, over, ratio
from perf_specs_earlyloads import RUN_FOUR, _early_step, _mean_slowest, _run_pair, step_rows
from perf_specs_fused import ncu_metric
from perf_specs_grouped import FORMATS, TOKENS

DAY = "2026-12-04-token-programs"
HIST = "[issue 28][h-i28o]"
SEEDS = range(6)
mean = lambda *v: sum(v) / len(v)  # noqa: E731

TOKEN = f"{DAY}/call1/token_call1.log"
TOKEN_KINDS = (
    ("arm", "the arm's: a program a slot, two rows"),
    ("tok2k1024g1r0", "a program a token, two rows, one slot a pass"),
    ("tok2k1024g1r64", "the same capped at sixty-four registers"),
    ("tok2k1024g2r0", "two slots a pass"),
    ("tok2k512g2r64", "two slots a pass, half-kilobyte steps, capped"),
    ("tok2k512g4r0", "every slot in one pass, half-kilobyte steps"),
    ("tok4k512g1r64", "four rows, one slot a pass, capped"),
    ("f1-tok2k1024g1r64", "fc1 only a program a token (capped), fc2 the arm's"),
)


def token_programs(r: Records) -> Table:
    t = Table(
        name="token_programs",
        caption="""\
FP8's sparse GEMV with one program a (row block, token), every local slot of the token served by
the same one-warp program (`scratch/token_gemv.py`: the local slots compacted, GROUP of them a
pass in one K loop, non-local slots never loaded), against the arm's program a (row block, slot,
token): `PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/token_bench.py --tokens 1,2,4 --seeds
0,1,2,3,4,5 --rank 0,1 --variants
2:1024:1,2:1024:1:64,2:512:2:64,2:1024:2,2:512:4,4:512:1:64,f1-2:1024:1:64` (first call; DIR
the records' scratch/), the step (fc1, fc2, combine; one CUDA graph, L2 flushed before each
replay), each checked against the reference and the sentinels first. "empty step": draw B's rank
0, which holds no slot at one token. Derived: a step cell = the mean over the six draws of the
slower rank's step, us. A quarter of the programs halves the empty step (17.1 to 8.9 us) but
makes every step with work slower, by 7-86%: the one-token step's fixed part (`one_token_slots`) is
not the empty programs' dispatch, and two slots' work in one warp costs more than two warps.
Not shipped.""",
        columns=["launch", "empty step", "1 token", "2 tokens", "4 tokens"],
    )  # fmt: skip
    for kind, label in TOKEN_KINDS:
        empty = _early_step(r, TOKEN, "w8a16", 1, 1, 0, kind)
        t.row(
            label,
            empty,
            *(_mean_slowest(r, TOKEN, "w8a16", n, kind) for n in (1, 2, 4)),
            history=HIST,
        )
    return t


def _bench_mean(r: Records, log: str, prec: str, tokens: int, variant: str,
                arm: str = "grouped_decode", seeds=(0, 1)) -> Derived:  # fmt: skip
    """The mean over the draws of the slower rank's step of a bench_grouped_decode.py log."""
    v = re.escape(variant)
    worst = []
    for s in seeds:
        steps = [r.text(log, rf"^precision={prec} tokens={tokens} seed={s} rank={k} .* "
                             rf"arm={arm} variant={v} weight_bytes=.* step_us=(\S+)")
                 for k in (0, 1)]  # fmt: skip
        worst.append(derive(max, "{:.1f}", *steps))
    return derive(mean, "{:.1f}", *worst)


def _tile_table(r: Records, name: str, caption: str, log: str, kinds) -> Table:
    """A row a (format, token count): the arm's launch, each variant's step, the best's change."""
    t = Table(name=name, caption=caption,
              columns=["precision", "tokens", "the arm's launch", *(label for _, _, label in kinds),
                       "best change"])  # fmt: skip
    for prec, pname in FORMATS:
        for tokens in (16, 32, 64):
            base = _bench_mean(r, log, prec, tokens, "default")
            cells = [_bench_mean(r, log, prec, tokens, fp8 if prec == "w8a16" else mx)
                     for fp8, mx, _ in kinds]  # fmt: skip
            count = r.text(log, rf"^precision={prec} tokens=({tokens}) seed=0 rank=0 .* "
                                r"arm=grouped_decode variant=default ")  # fmt: skip
            best = derive(min, "{:.1f}", *cells)
            t.row(pname, count, base, *cells, over(best, base), history=HIST)
    return t


WIDE = f"{DAY}/call2/rows128.log"
WIDE_KINDS = (
    (
        "dot m16 n128 k128 w4 s3 pdl tma r128 passes eb fc1",
        "dot m16 n128 k128 w4 s3 pdl r128 passes eb fc1",
        "fc1 wide, three stages",
    ),
    (
        "dot m16 n128 k128 w4 s2 pdl tma r128 passes eb fc1",
        "dot m16 n128 k128 w4 s2 pdl r128 passes eb fc1",
        "fc1 wide, two stages",
    ),
    (
        "dot m16 n128 k64 w4 s4 pdl tma r96 passes eb fc1",
        "dot m16 n128 k64 w4 s4 pdl r96 passes eb fc1",
        "fc1 wide, half steps, four stages",
    ),
)


def wide_fc1(r: Records) -> Table:
    return _tile_table(
        r,
        "wide_fc1",
        """\
The grouped tile's fc1 on 128-row blocks (one warpgroup, two 64-row MMAs a step; fc2's 2,880
rows keep 64): `PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py OUT --tokens 16,32,64
--seeds 0,1 --rank 0,1
--variants=dot:-:128:-:-:-:-:1:128:-:-:1,dot:-:128:64:-:4:-:1:96:-:-:1,dot:-:128:-:-:2:-:1:128:-:-:1
--variant-tokens 16,32,64` (second call; the twelfth field, new, gives the variant to fc1 only),
one pass a program, each step checked against the reference and the sentinels first. Offline
sm_90a (`offline/sass_tiles.log`): the wide tile's weight loop takes 3.6 instructions a byte
(FP8) and 6.7 (MXFP4) against 4.4 and 8.6, on 128 registers, 4 programs an SM against 6.
Derived: a cell = the mean over the two draws of the slower rank's step, us; "best change" = the
fastest variant / the arm's - 1. Fewer instructions a byte on fewer programs are not faster: the
one mean below the arm's (FP8 at 16 tokens, 64-value steps) is slower in one of its two draws
(126.9 against 125.4 us). Not shipped.""",
        WIDE,
        WIDE_KINDS,
    )


HALF = f"{DAY}/call3/k64.log"
HALF_KINDS = tuple(
    (f"dot m16 n64 k64 w4 s{s} pdl tma r{g} passes eb",
     f"dot m16 n64 k64 w4 s{s} pdl r{g} passes eb", label)
    for s, g, label in ((4, 64, "four stages, capped low"), (5, 64, "five stages, capped low"),
                        (6, 64, "six stages, capped low"), (4, 72, "four stages, capped higher"))
)  # fmt: skip


def half_steps(r: Records) -> Table:
    return _tile_table(
        r,
        "half_steps",
        """\
The grouped tile's one pass a program on 64-value steps, capped at 64 or 72 registers: sm_90a
(`offline/sass_tiles.log`) FP8 64 registers and no spills, 8 programs an SM on 4 or 5 stages (6
on 6), against the arm's 6 on 128-value steps; MXFP4 spills a little at 64. `PYTHONPATH=$PWD
python3 tools/bench_grouped_decode.py OUT --tokens 16,32,64 --seeds 0,1 --rank 0,1
--variants=dot:-:-:64:-:4:-:1:64,dot:-:-:64:-:5:-:1:64,dot:-:-:64:-:6:-:1:64,dot:-:-:64:-:4:-:1:72
--variant-tokens 16,32,64` (third call), both stages, each step checked first. Derived as
`wide_fc1`. A third more warps an SM do not make up for 64-byte rows a step: FP8 4-11% slower
(fc2 alone 52-66 against 48 us at 64 tokens), MXFP4 39-60%. Not shipped.""",
        HALF,
        HALF_KINDS,
    )


NCU_NOW = {"fp8": f"{DAY}/call4/ncu_grouped.txt", "mxfp4": f"{DAY}/call4/ncu_grouped-mxfp4.txt",
           "gemv": f"{DAY}/call4/ncu_gemv.txt"}  # fmt: skip
STALLS_NOW = {"fp8": f"{DAY}/call4/stalls_grouped.txt",
              "mxfp4": f"{DAY}/call4/stalls_grouped-mxfp4.txt",
              "gemv": f"{DAY}/call4/stalls_gemv.txt"}  # fmt: skip
# (record key, kernel, its launch as ncu prints it, label): the tile's fc1 and fc2 at 64 tokens,
# the sparse FP8 GEMV's at one token.
NCU_KERNELS = (
    ("fp8", "_grouped_dot_fp8", r"\(90, 32, 1\)x\(128, 1, 1\)", "FP8 tile, fc1"),
    ("fp8", "_grouped_dot_fp8", r"\(45, 32, 1\)x\(128, 1, 1\)", "FP8 tile, fc2"),
    ("mxfp4", "_grouped_dot_mxfp4", r"\(90, 32, 1\)x\(128, 1, 1\)", "MXFP4 tile, fc1"),
    ("mxfp4", "_grouped_dot_mxfp4", r"\(45, 32, 1\)x\(128, 1, 1\)", "MXFP4 tile, fc2"),
    ("gemv", "_sparse_gemv_fp8", r"\(2880, 4, 1\)x\(32, 1, 1\)", "FP8 sparse GEMV, fc1"),
    ("gemv", "_sparse_gemv_fp8", r"\(1440, 4, 1\)x\(32, 1, 1\)", "FP8 sparse GEMV, fc2"),
)


def _ncu_now(r: Records, path: str, kernel: str, launch: str, metric: str) -> Figure:
    """A metric's value in the Nsight Compute text of one kernel, told apart by its launch."""
    return ncu_metric(r, path, rf"{kernel} {launch}", metric)


def ncu_now(r: Records) -> Table:
    t = Table(
        name="ncu_now",
        caption="""\
The grouped decode's tile at 64 tokens and the sparse FP8 GEMV at one token as the arms launch
them today, under Nsight Compute 2025.3.1 (fourth call: `ncu --clock-control none -k
regex:_grouped_dot --launch-skip 4 --launch-count 2 --section SpeedOfLight --section
MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats
--section SchedulerStats python3 tools/ncu_kernels.py grouped` (and `grouped-mxfp4`; `-k
regex:_sparse_gemv_fp8 ... gemv`), then the same launches with the stall metrics of `stalls_now`;
`tools/ncu_kernels.py` now hands the MXFP4 tile its scales as the arm does, rows on 16-byte
boundaries and their largest byte). The sixth session's `tile_ncu` took the tile of then (4
programs an SM): FP8 fc1 3.00 and fc2 2.46 TB/s, now 3.27 and 3.08 inside the kernels (77% and
72% of the 4.27 TB/s copy). "SM active": `sm__cycles_active.avg` over `gpc__cycles_elapsed.max`,
the share of the kernel's cycles an SM holds any warp (second launch, same kernel). Derived: that
ratio. fc2's SMs sit empty 13% (FP8 tile) and 24% (one-token GEMV) of their kernel's time: its
launch's ramp and tail, where fc1's are 5% and 15%.""",
        columns=["kernel", "duration us", "DRAM TB/s, of peak", "issued", "warps active, eligible",
                 "registers", "waves an SM", "SM active"],
    )  # fmt: skip
    for key, kernel, launch, label in NCU_KERNELS:
        m = partial(_ncu_now, r, NCU_NOW[key], kernel, launch)
        s = partial(_ncu_now, r, STALLS_NOW[key], kernel, launch)
        active = derive(lambda a, e: 100 * a / e, "{:.0f}%", s(r"sm__cycles_active\.avg"),
                        s(r"gpc__cycles_elapsed\.max"))  # fmt: skip
        t.row(label, m("Duration"),
              fill("{}, {}%", m(r"Memory Throughput\s+Tbyte/s"), m(r"DRAM Throughput")),
              m("Issued Warp Per Scheduler"),
              fill("{}, {}", m("Active Warps Per Scheduler"), m("Eligible Warps Per Scheduler")),
              m("Registers Per Thread"), m("Waves Per SM"), active, history=HIST)  # fmt: skip
    return t


STALL_REASONS = (("long scoreboard", "long_scoreboard"), ("wait", "wait"),
                 ("math pipe throttle", "math_pipe_throttle"), ("barrier", "barrier"),
                 ("short scoreboard", "short_scoreboard"), ("dispatch", "dispatch_stall"),
                 ("not selected", "not_selected"))  # fmt: skip


def stalls_now(r: Records) -> Table:
    t = Table(
        name="stalls_now",
        caption="""\
Where the warps of `ncu_now`'s kernels wait: each reason's average warps stalled per issued
instruction (`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`; "selected" is 1
by definition; mio throttle, not listed, is 0.10 for FP8's fc2 and 0.54-0.55 for MXFP4's, the
others below 0.2 where they appear). The one-token GEMV waits on its loads (long scoreboard 4.5
and 5.3); the FP8 tile on its loads first (2.3-2.4, against 1.05-1.31 in the sixth session's
tile), then a busy pipe and fixed latencies; MXFP4's warps stand ready but not picked (not
selected 1.75-1.89) and at the step's barrier (1.26-1.28): its schedulers, not its bytes, set its
pace.""",
        columns=["kernel", *(name for name, _ in STALL_REASONS), "instructions, of them wgmma"],
    )  # fmt: skip
    for key, kernel, launch, label in NCU_KERNELS:
        s = partial(_ncu_now, r, STALLS_NOW[key], kernel, launch)
        reasons = [s(rf"smsp__average_warps_issue_stalled_{k}_per_issue_active\.ratio")
                   for _, k in STALL_REASONS]  # fmt: skip
        t.row(label, *reasons,
              fill("{}, {}", s(r"smsp__inst_executed\.sum"),
                   s(r"sm__inst_executed_pipe_tensor_op_gmma\.sum")), history=HIST)  # fmt: skip
    return t


XONCE = f"{DAY}/call5/xonce.log"
AB = f"{DAY}/call6/ab.log"


def token_once(r: Records) -> Table:
    t = Table(
        name="token_once",
        caption="""\
FP8's sparse GEMV with the token's values loaded once a step and broadcast over a program's rows
in registers, against the row-broadcast pointer tile that triton 3.6 loads and widens once a row
(sm_90a, 4 rows at 512 bytes: 313 instructions a step against 344; 2 rows at 1,024: 365 against
344, the values moved by warp shuffles). Fifth call: `scratch/token_bench.py --tokens 1,2,4,8,16
--seeds 0,1,2,3,4,5 --rank 0,1 --variants x-2:1024,x-4:512` (the arm's kernel then, against
`scratch/xonce_gemv.py`). Sixth call, on a508e4c's kernel (`sparse_gemv(token_once=None)`: once
from 4 rows; 4 rows from 2 tokens): the same with `--variants r-2:1024,r-4:512` (the package's
GEMV with `token_once=False`, the kernel before). Each step checked against the reference and
the sentinels first; the same blocks give the same bits either way. Derived: a cell = the mean
over the six draws of the slower rank's step, us; "change" = the arm's now / the arm's before
(2 rows at 1,024 to 2 tokens, 4 rows at 512 from 4, the row tile) - 1.""",
        columns=["tokens", "fifth call: the arm then", "token once, 2 rows", "token once, 4 rows",
                 "sixth call: the arm now", "row tile, 2 rows", "row tile, 4 rows", "change"],
    )  # fmt: skip
    for tokens in (1, 2, 4, 8, 16):
        then = _mean_slowest(r, XONCE, "w8a16", tokens, "arm")
        now = _mean_slowest(r, AB, "w8a16", tokens, "arm")
        rows2 = _mean_slowest(r, AB, "w8a16", tokens, "rowtile2k1024")
        rows4 = _mean_slowest(r, AB, "w8a16", tokens, "rowtile4k512")
        before = rows2 if tokens < 4 else rows4
        count = r.text(AB, rf"^w8a16 T=({tokens}) seed=0 rank=0 .* arm: ")
        t.row(count, then, _mean_slowest(r, XONCE, "w8a16", tokens, "xonce2k1024"),
              _mean_slowest(r, XONCE, "w8a16", tokens, "xonce4k512"), now, rows2, rows4,
              over(now, before), history=HIST)  # fmt: skip
    return t


RUN_ONCE = f"{DAY}/call6/gpt-oss-20b-decode-grouped.md"


def token_once_run(r: Records) -> Table:
    t = Table(
        name="token_once_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (sixth call, 201 s) on
a508e4c's tree (the sparse FP8 GEMV's token loaded once from 4 rows, 4 rows from 2 tokens; the
manifest names 6066bc8, dirty: the device's copy of git's HEAD lags) against the thirteenth
session's last run (`four_rows_run`, bbf7325): every correctness gate and integrity check passed
(952 pass, 112 skip, none failed). The `ffn` regime, median us of the slowest rank as `moebench
compare` printed them. Derived: "change" = now / before - 1. FP8's sparse step is 3.9% lower at
2 tokens and 4.7% at 4, where it is the policy's arm (15.5% below grouped at 4); one token, whose
launch did not change, within 0.4%; at 8 tokens and up grouped stays the faster.""",
        columns=["tokens", "FP8 dense before", "now", "change", "FP8 sparse before", "now",
                 "change", "FP8 grouped before", "now", "change"],
    )  # fmt: skip
    for i, tokens in enumerate(TOKENS):
        count, cells = _run_pair(r, RUN_FOUR, RUN_ONCE, i, "w8a16", tokens)
        t.row(count, *cells, history=HIST)
    return t


STEP_NOW = f"{DAY}/call7/step2.md"
STEP_BEFORE = "2026-12-04-early-loads/call12/step4.md"


def token_once_step(r: Records) -> Table:
    t = Table(
        name="token_once_step",
        caption="""\
The step regime with FP8 at 2 and 4 tokens: `docs/perf/2026-12-04-token-programs/scratch/step2.yaml`
(`scenarios/gpt-oss-20b-decode-step-grouped.yaml` at 2 and 4 tokens, FP8 only) through `moebench
run` (seventh call, 85 s, ce06c3e's tree: the sparse FP8 GEMV's token once from 4 rows, 4 rows
from 2 tokens) against the thirteenth session's run at 4 and 8 tokens (`four_rows_step`, which
has no 2-token case): gpt-oss-20b's 24 MoE layers, each with its own weights and a seeded uniform
routing per step and layer, EP2 simulated, one step = the sum over layers of each layer's slowest
rank; 40 steps a case; every gate of the new run passed (82 pass, 10 skip). P50 and P90 of the
step with their exact 95% order-statistic intervals, us. Derived: "change" = now / before - 1.
At 4 tokens sparse_decode, the policy's FP8 arm there, is 4.7% lower at the median, but
dense_decode, whose code did not change, is 5.0% lower too: a drift between the two runs of the
same size, so this table does not separate the change (the interleaved `token_once` does).
Within the run sparse_decode is 9.0% below grouped_decode at 4 tokens and 25.1% at 2.""",
        columns=["case, arm", "P50 before", "P50 now", "change", "P90 before", "P90 now",
                 "change"],
    )  # fmt: skip
    plan = (("two", 2, None, "c000"), ("four", 4, "c000", "c001"))
    return step_rows(r, t, STEP_BEFORE, STEP_NOW, plan, HIST)


MXROW = f"{DAY}/call8/mxrow.log"
MX_KINDS = (
    ("arm", "the arm's: sixteen rows, the token's words through shared memory"),
    ("rowtile16k1024", "sixteen rows, the token's words through the row tile"),
    ("xonce8k1024", "eight rows, through shared memory"),
    ("rowtile8k1024", "eight rows, through the row tile"),
)


def mx_row_tile(r: Records) -> Table:
    t = Table(
        name="mx_row_tile",
        caption="""\
MXFP4's sparse GEMV (group-major, 16 rows on 4 warps) with the token's bf16-pair words read
through a pointer tile broadcast over the rows (`scratch/mx_rowtile_gemv.py`), against the arm's
broadcast in registers, which triton 3.6 compiles to 8 STSM, 8 LDSM and 16 barriers a step
(sm_90a; the row tile: none of them, 16 single-word loads, 80 registers against 95, 6 programs
an SM against 5): `scratch/token_bench.py --precision w4a16 --tokens 1,2,4 --seeds
0,1,2,3,4,5 --rank 0,1 --variants r-16:1024,r-8:1024,x-8:1024` (eighth call), each step checked
against the reference and the sentinels first, bitwise the arm's at the same blocks. Derived: a
cell = the mean over the six draws of the slower rank's step, us. The row tile is slower in
every form (16 rows: 12-15%): the words' shared-memory round trip costs less than their
repeated loads. Not shipped.""",
        columns=["launch", "1 token", "2 tokens", "4 tokens"],
    )  # fmt: skip
    for kind, label in MX_KINDS:
        cells = [_mean_slowest(r, MXROW, "w4a16", n, kind) for n in (1, 2, 4)]
        t.row(label, *cells, history=HIST)
    return t


MXWARP = f"{DAY}/call9/mxwarp.log"
MXWARP_KINDS = (
    ("early", "sixteen rows, four warps (the arm's)"),
    ("n8k1024w2", "eight rows, two warps"),
    ("n8k1024w1", "eight rows, one warp"),
    ("n8k512w1", "eight rows, one warp, half the step"),
    ("n4k1024w1", "four rows, one warp"),
    ("n2k1024w1", "two rows, one warp"),
)


def mx_warps(r: Records) -> Table:
    t = Table(
        name="mx_warps",
        caption="""\
MXFP4's sparse GEMV on one or two warps a program, where the token's words need no shared-memory
round trip (sm_90a: no barrier in the loop on one warp; 4 rows on one warp 64 registers, 32
programs an SM), against the arm's 16 rows on 4 warps: `PYTHONPATH=$PWD:$PWD/tools:DIR python3
DIR/early_bench.py --tokens 1,2,4 --seeds 0,1,2,3,4,5 --rank 0,1 --precisions w4a16 --blocks
4:1024:1,8:1024:1,8:512:1,8:1024:2,2:1024:1 --blocks-precisions w4a16` (ninth call; DIR the
thirteenth session's scratch, docs/perf/2026-12-04-early-loads/scratch/), each step checked
against the reference and the sentinels first. Derived: a cell = the mean over the six draws of
the slower rank's step, us. Every other launch is slower at 1-4 tokens (at best 4.0% at one
token, 5.3% at 2, 4.9% at 4): not shipped. With FP8's sparse step faster since this session, MXFP4's
best arm at 4 tokens (sparse 70.16 us in `token_once_run`'s run, grouped 70.21) is above FP8's
(sparse 67.63).""",
        columns=["launch", "1 token", "2 tokens", "4 tokens"],
    )  # fmt: skip
    for kind, label in MXWARP_KINDS:
        cells = [_mean_slowest(r, MXWARP, "w4a16", n, kind) for n in (1, 2, 4)]
        t.row(label, *cells, history=HIST)
    return t


STEP_MX = f"{DAY}/call10/step2_mx.md"


def mx_step(r: Records) -> Table:
    t = Table(
        name="mx_step",
        caption="""\
MXFP4 against FP8 in the step regime at 2 and 4 tokens: `scratch/step2_mx.yaml` (`step2.yaml`
with MXFP4 weights) through `moebench run` (tenth call, 80 s, d6dcddf's tree; every gate passed,
82 pass, 10 skip) beside `token_once_step`'s FP8 run (seventh call, the same kernels). P50 of the
step with its exact 95% order-statistic interval, us. Derived: "MXFP4 / FP8" = the two P50s'
ratio. The best arms are the same within their intervals at both counts (at 4 tokens MXFP4's
grouped 1,709.8 against FP8's sparse 1,697.7, at 2 both sparse, 1,080.7 against 1,083.1): in the
step regime as in the ffn regime's gated run, MXFP4's best arm is no longer below FP8's at 4
tokens. Two runs of two device calls: the cross-run drift of `token_once_step` (5% on dense)
applies.""",
        columns=["case, arm", "MXFP4 P50", "FP8 P50", "MXFP4 / FP8"],
    )  # fmt: skip
    for words, tokens, mx_case, fp8_case in (
        ("two", 2, "c000", "c000"),
        ("four", 4, "c001", "c001"),
    ):
        for arm in ("sparse_decode", "grouped_decode", "dense_decode"):
            mx = r.cell(
                STEP_MX,
                "Model step",
                "P50 us",
                case=f"{mx_case}-precision=w4a16-tokens_per_rank={tokens}",
                arm=arm,
            )
            fp8 = r.cell(
                STEP_NOW,
                "Model step",
                "P50 us",
                case=f"{fp8_case}-precision=w8a16-tokens_per_rank={tokens}",
                arm=arm,
            )
            t.row(f"{words} tokens, {arm}", mx, fp8, ratio(mx, fp8), history=HIST)  # fmt: skip
    return t


LOW_PASS = f"{DAY}/call11/p4.log"


def low_count_pass(r: Records) -> Table:
    t = Table(
        name="low_count_pass",
        caption="""\
The grouped tile one pass a program (6 programs an SM at 80 registers, on 3 or 4 stages) at 4
and 8 tokens, where the arm's tile loops over its expert's passes (128 registers, 4 programs an
SM), asked because MXFP4's best arm at 4 tokens is now above FP8's (`token_once_run`):
`PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py OUT --tokens 4,8 --seeds 0,1,2,3 --rank
0,1 --variants=-:-:-:-:-:-:-:1,-:-:-:-:-:4:-:1 --variant-tokens 4,8` (eleventh call), each step
checked against the reference and the sentinels first. Derived: a cell = the mean over the four
draws of the slower rank's step, us; "best change" = the faster one-pass launch / the arm's
grouped launch - 1. MXFP4 at 4 tokens: slower on the mean (faster in two draws, slower in the
others); at 8 tokens 2% faster on the mean, 7% faster in two draws and 3-4% slower in two. FP8
slower at both counts, as the twelfth session measured. Not shipped; MXFP4's best arm at 4 tokens
stays above FP8's (sparse) in this bench too.""",
        columns=["precision", "tokens", "sparse_decode", "grouped (the arm's)",
                 "one pass, three stages", "one pass, four stages", "best change"],
    )  # fmt: skip
    for prec, pname in FORMATS:
        tma = " tma" if prec == "w8a16" else ""
        for tokens in (4, 8):
            seeds = range(4)
            sparse = _bench_mean(r, LOW_PASS, prec, tokens, "default", "sparse_decode", seeds)
            base = _bench_mean(r, LOW_PASS, prec, tokens, "default", seeds=seeds)
            cells = [_bench_mean(r, LOW_PASS, prec, tokens,
                                 f"dot m16 n64 k128 w4 s{st} pdl{tma} r80 passes eb", seeds=seeds)
                     for st in (3, 4)]  # fmt: skip
            count = r.text(LOW_PASS, rf"^precision={prec} tokens=({tokens}) seed=0 rank=0 .* "
                                     r"arm=grouped_decode variant=default ")  # fmt: skip
            t.row(pname, count, sparse, base, *cells, over(derive(min, "{:.1f}", *cells), base),
                  history=HIST)  # fmt: skip
    return t


TABLES = [
    token_once,
    token_once_run,
    token_once_step,
    mx_step,
    token_programs,
    mx_row_tile,
    mx_warps,
    low_count_pass,
    wide_fc1,
    half_steps,
    ncu_now,
    stalls_now,
]
