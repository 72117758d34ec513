"""docs/PERF.md's generated tables of the thirty-fourth session (2026-12-07, issue 28), on an H100
80GB HBM3 (the device lent an H100): the MXFP4 tile with its warps specialised, as a Gluon probe
(`docs/perf/2026-12-07-ws-gluon/scratch/mx_ws.py`): a TMA producer warp, decoding and
multiplying consumer warpgroups; timed beside the arm's kernels and the earlier tiled Gluon probe,
and read under Nsight Compute.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table
from perf_records import Records, derive
from perf_specs_h100 import STALL
from perf_specs_placed import WORDS

DAY = "2026-12-07-ws-gluon"
HIST = "[issue 28][h-i28ws]"
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
BENCH = f"{DAY}/call3/ws_bench.log"
NCU = f"{DAY}/call3/ncu_ws.txt"
HEAD = r"^T={} seed={} rank={} \S+ \S+ block_m=16 "
CASES = [(t, s, k) for s in (0, 1) for t in (32, 64) for k in (0, 1)]
DRAW = {0: "zero", 1: "one"}
VARIANTS = (
    ("probe s3 tiled", "the tiled Gluon probe (three stages, four programs an SM)"),
    ("ws s4 n80 p24 r64", "warp-specialised, a warpgroup a tile, four stages (three an SM)"),
    ("ws s4 n80 p24 r128", "warp-specialised, two warpgroups a tile in fc1 (two an SM)"),
    ("ws s8 n80 p24 r128", "the same on eight stages"),
    ("ws s4 n96 p24 r64", "warp-specialised, a warpgroup a tile, at two programs an SM"),
)


def ws_probe(r: Records) -> Table:
    t = Table(
        name="ws_gluon_probe",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The MXFP4 tile's weight loop with its warps
specialised (`docs/perf/{DAY}/scratch/mx_ws.py`: one producer warp streaming each step's weight
box, scale words and x halves by TMA into a ring of stages; one or two consumer warpgroups
decoding and multiplying; no bias, no GLU, fp32 out) beside the twenty-seventh session's tiled
Gluon probe and the arm's fc1 and fc2, on the scenario's weights and activations, gpt-oss-20b EP2,
32 and 64 tokens, draws zero and one (routing.seed 0 and 1), both ranks (`python3
docs/perf/{DAY}/scratch/ws_bench.py --tokens 32,64 --seeds 0,1 --rank 0,1 --variants
4:80,4:80:24:128,8:80:24:128,4:96`, third call). Every launch checked first against the
dequantised fp32 reference (max error over max magnitude at most 1.53e-06) and bitwise against
the first variant; then all timed interleaved, each a CUDA graph, L2 flushed. Cells: fc1+fc2
(us) as the log prints it (the 128-row variants' fc2 is the 64-row kernel: 2,880 rows are not a
multiple of 128). Derived: "best of copy" = the touched experts' bytes over the fastest
warp-specialised fc1+fc2, over the copy ceiling measured at the start (2.98 TB/s), read as the
log's own share times the arm's time over that time. Warp specialisation takes the loop from
203-212 instructions a step to 160, and its fastest launch is 1-4% faster than the tiled probe:
76-80% of copy against the tiled probe's 76-79% and the arm's 67-70%. At 96 registers (two
programs an SM) it falls to 66-70%.""",
        columns=["tokens", "draw", "rank", "the arm", "tiled probe", "warp-spec.",
                 "two warpgroups", "eight stages", "two an SM", "best of copy"],
    )  # fmt: skip
    for tokens, seed, rank in CASES:
        head = HEAD.format(tokens, seed, rank)
        total = lambda tag, head=head: r.text(  # noqa: E731
            BENCH, head + rf"{re.escape(tag)} fc1\+fc2 (\S+) us"
        )
        arm = r.text(BENCH, head + r"probe s3 tiled fc1\+fc2 .* the arm's (\S+) ")
        cells = [total(tag) for tag, _ in VARIANTS]
        arm_share = r.text(BENCH, head + r"probe s3 tiled fc1\+fc2 .* the arm's \S+ \((\S+)%\)")
        best = derive(lambda a, s, *ws: s * a / min(ws) / 100, "{:.1%}", arm, arm_share,
                      *cells[1:4])  # fmt: skip
        t.row(WORDS[tokens], DRAW[seed], DRAW[rank], arm, *cells, best, history=HIST)
    return t


def ws_stages(r: Records) -> Table:
    t = Table(
        name="ws_gluon_stages",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The same launches stage by stage (`ws_gluon_probe`'s
call): 64 tokens, draw zero, rank zero. Cells: each launch's time (us) and share of copy as the log
prints them (the touched experts' values and scales over the time, over 2.98 TB/s). fc1 (5,760 rows:
1,440 programs of 64 rows) reaches 81-83% in both probes; fc2 (2,880 rows: 720 programs) 74%
warp-specialised and 68% in the tiled probe, whose four programs an SM give 1.36 waves where three
give 1.82.""",
        columns=["launch", "fc1 us", "of copy", "fc2 us", "of copy "],
    )  # fmt: skip
    head = HEAD.format(64, 0, 0)
    for tag, words in (("arm", "the arm's"),) + VARIANTS:
        cells = []
        for stage in ("fc1", "fc2"):
            line = head + rf"{re.escape(tag)} {stage}: "
            cells += [r.text(BENCH, line + r"(\S+) us"),
                      r.text(BENCH, line + r"\S+ us, \S+ GB/s, (\S+) of copy")]  # fmt: skip
        t.row(words, *cells, history=HIST)
    return t


# The Nsight Compute log's kernels in order (`ws_bench.py --ncu`: each launch once after the
# checks): the tiled probe's fc1 and fc2, the warp-specialised 64-row fc1 and fc2, the 128-row fc1
# and its (64-row) fc2.
NCU_KERNELS = (
    (0, "fc1, the tiled Gluon probe"),
    (2, "fc1, warp-specialised, a warpgroup a tile"),
    (4, "fc1, warp-specialised, two warpgroups a tile"),
    (1, "fc2, the tiled Gluon probe"),
    (3, "fc2, warp-specialised, a warpgroup a tile"),
)


def ws_ncu(r: Records) -> Table:
    t = Table(
        name="ws_gluon_ncu",
        caption=f"""\
{H100}. Nsight Compute on the probes at 64 tokens, draw zero, rank zero (`ncu --clock-control none
--launch-skip 6 --launch-count 6 -k regex:mx_ --section SpeedOfLight --section Occupancy --metrics
... python3 docs/perf/{DAY}/scratch/ws_bench.py --tokens 64 --seeds 0 --rank 0 --variants
4:80,4:80:24:128 --ncu`, third call). Derived: "MB / us" = DRAM bytes read over the duration; "tail"
= the busiest SM's active cycles / the mean SM's - 1. Stalls: cycles a warp waits for each reason,
per issued instruction. On fc1 both probes move DRAM at 75-77% of its peak (2.44-2.49 MB/us, 82-84%
of the copy ceiling); the warp-specialised one issues 15% fewer instructions and uses 49% of its
issue slots (the tiled probe 60%), its consumers waiting on the barrier that gives a stage back and
on the data (the `ready` barrier's wait counts as a long scoreboard): fed, not issue-bound.""",
        columns=["stage, kernel", "us", "DRAM read MB", "MB / us", "DRAM % of peak", "L2 %",
                 "L2 hit %", "instructions", "issue active %", "warps an SM", "tail",
                 "long scoreboard", "barrier", "wait"],
    )  # fmt: skip
    for k, words in NCU_KERNELS:
        m = lambda metric, k=k: r.ncu(NCU, k, metric)  # noqa: E731
        us, rd = m("Duration"), m("dram__bytes_read.sum")
        tail = derive(lambda mx, av: mx / av - 1, "{:+.1%}", m("sm__cycles_active.max"),
                      m("sm__cycles_active.avg"))  # fmt: skip
        t.row(words, us, rd, derive(lambda b, u: b / u, "{:.2f}", rd, us),
              m("DRAM Throughput"), m("L2 Cache Throughput"), m("lts__t_sector_hit_rate.pct"),
              m("smsp__inst_executed.sum"),
              m("smsp__issue_active.avg.pct_of_peak_sustained_active"),
              m("sm__warps_active.avg.per_cycle_active"), tail,
              m(STALL.format("long_scoreboard")), m(STALL.format("barrier")),
              m(STALL.format("wait")), history=HIST)  # fmt: skip
    return t


TABLES = (ws_probe, ws_stages, ws_ncu)
