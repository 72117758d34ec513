"""docs/PERF.md's generated tables of the twenty-third session (2026-12-06, issue 28), all on an
H100 80GB HBM3 (asked for an H200; the device lent H100s): fc2 waiting for fc1 expert by expert
(taken), what no wait at all would save (the bound), L2 prefetches of the tile's weights (not
taken), the packed read-only kernel's ceiling, the copy shares and the gated runs.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_confirm import RUN_COLUMNS, copy_share_rows, run_rows
from perf_specs_passes16 import _slowest
from perf_specs_placed import WORDS

DAY = "2026-12-06-expert-ready"
HIST = "[issue 28][h-i28er]"
H100 = "**H100 80GB HBM3** (asked for an H200; the device lent H100s), driver 580.159.04"
ONE_PASS = "dot m16 n64 k64 w4 s6 pdl tma r80 passes eb placed packed"
LOOP = "dot m16 n64 k128 w4 s4 pdl tma r128 eb placed"
MX_PASS = "dot m16 n64 k128 w4 s3 pdl r80 passes eb rot"
READY = " ready-signal"  # the bench names a pair by its fc1 launch
PREC = {"FP8": "w8a16", "MXFP4": "w4a16"}


def _faster(a: list, b: list):
    """The draws whose ``a`` is below ``b``, "K of N"."""
    n = len(a)
    return derive(lambda *v: sum(p < q for p, q in zip(v[:n], v[n:], strict=True)),
                  f"{{:.0f}} of {({2: 'two', 4: 'four'}[n])}", *a, *b)  # fmt: skip


def _mean(r: Records, log: str, prec: str, tokens: int, seeds, variant: str, day: str = DAY):
    """(the slower rank's step per draw, their mean) of a bench log under docs/perf/``day``."""
    per = [_slowest(r, f"{day}/{log}", prec, tokens, s, variant) for s in seeds]
    return per, derive(lambda *v: sum(v) / len(v), "{:.1f}", *per)


def expert_ready(r: Records) -> Table:
    t = Table(
        name="expert_ready",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. fc2 waiting for fc1 expert by expert
(`Launch.expert_ready`, `moebench/kernels/expert_ready.py`: each fc1 program counts itself
started on its expert after its dependent-launch wait, then lets fc2 launch, and counts itself
finished after its stores; an fc2 program reads its expert's finished count, acquire, until it
equals the started one) against the whole-grid dependent-launch wait, gpt-oss-20b EP2:
`PYTHONPATH=$PWD:$PWD/tools python3 tools/bench_grouped_decode.py OUT --precision P --tokens N
--seeds S --rank 0,1 --variants dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:X` with X 1 (the wait
expert by expert a variant: calls 6-8) or 0 (the whole-grid wait a variant, on the tree where
the other is the default: calls 7 and 9), `scratch/callN.sh`. Each step checked against the
reference and the sentinels first (every row passed), then timed interleaved, one CUDA graph, L2
flushed. Derived: a time = the mean over the draws of the slower rank's step, us; "change" =
expert by expert / whole-grid - 1; "faster in" = the draws whose expert-by-expert step is below
the whole-grid one's. Taken where faster: FP8's tile from one slot an expert (4-64 tokens here)
and MXFP4's one-pass tile (16-64); FP8 at 2 tokens (half a slot an expert) keeps the whole-grid
wait (`grouped_launch.EXPERT_READY_FROM_SLOTS_PER_EXPERT`). The same bits either way.""",
        columns=["format, tile", "tokens", "call", "whole-grid wait", "expert by expert",
                 "change", "faster in"],
    )  # fmt: skip
    # (format, tile, log, seeds, token counts, the whole-grid launch, the expert-by-expert one)
    rows = [("FP8", "one pass", f"call6/ready_{i}.log", (0, 1), (16, 32, 64), "default",
             ONE_PASS + READY) for i in (1, 2)]  # fmt: skip
    rows += [("FP8", "one pass", "call7/copy_share_w8a16.log", (0, 1), (32, 64), ONE_PASS,
              "default"),
             ("FP8", "loop", "call7/ready_loop.log", (0, 1), (2, 4, 8), "default", LOOP + READY),
             ("FP8", "loop", "call8/ready_loop4.log", (0, 1, 2, 3), (2, 4, 8), "default",
              LOOP + READY),
             ("FP8", "loop", "call9/whole_loop.log", (0, 1), (4, 8), LOOP, "default"),
             ("MXFP4", "one pass", "call8/ready_mxfp4.log", (0, 1), (16, 32, 64), "default",
              MX_PASS + READY),
             ("MXFP4", "one pass", "call9/whole_mxfp4.log", (0, 1), (16, 32, 64), MX_PASS,
              "default")]  # fmt: skip
    for fmt, tile, log, seeds, counts, whole, ready in rows:
        for tokens in counts:
            a, mean_a = _mean(r, log, PREC[fmt], tokens, seeds, whole)
            b, mean_b = _mean(r, log, PREC[fmt], tokens, seeds, ready)
            t.row(f"{fmt}, {tile}", WORDS[tokens], log.split("/")[0], mean_a, mean_b,
                  over(mean_b, mean_a), _faster(b, a), history=HIST)  # fmt: skip
    return t


NOWAIT = f"{DAY}/call5/nowait.log"
FORMS = ("step", "fc2 no wait", "fc1+fc2", "fc1")


def no_wait_bound(r: Records) -> Table:
    t = Table(
        name="no_wait_bound",
        caption=f"""\
{H100}. What fc2 could gain from not waiting for the whole of fc1, bounded by a timing ablation
that does not wait at all (wrong outputs on purpose, not checked): the arm's FP8 grouped step as
it stood (the whole-grid wait) against the same step with fc2's tile compiled without its
dependent-launch wait, so its programs stream as soon as they are resident during fc1's second
wave; beside them fc1 + fc2 without the combine and fc1 alone
(`PYTHONPATH=$PWD:$PWD/tools python3 docs/perf/{DAY}/scratch/nowait.py --tokens 16,32,64 --seeds
0,1`, fifth call; the arm's step checked against the reference first). The slower rank's step
per draw (each form at that rank, us), the mean of the two draws as the script prints it.
Derived: "saved" = step - fc2 no wait. 10.9-11.6 us at every count, about 7%: the lead that the
expert-by-expert wait (`expert_ready`) then took most of.""",
        columns=["tokens", "step", "fc2 no wait", "fc1+fc2", "fc1", "saved"],
    )  # fmt: skip
    for tokens in (16, 32, 64):
        cells = [r.text(NOWAIT, rf"^  T={tokens:2d} {re.escape(f'{form:12s}')}: "
                                r"[^\n]*mean ([\d.]+)") for form in FORMS]  # fmt: skip
        t.row(WORDS[tokens], *cells, derive(lambda a, b: a - b, "{:.2f}", cells[0], cells[1]),
              history=HIST)  # fmt: skip
    return t


def tile_l2_prefetch(r: Records) -> Table:
    t = Table(
        name="tile_l2_prefetch",
        caption=f"""\
{H100}. Two ways of asking the L2 for the packed FP8 tile's weights ahead of its TMA copies, both
built (sm_90 bulk prefetch, `jit.prefetch_l2`; interpreter tests give the same bits) and off by
default: a program's first boxes before its dependent-launch wait (`Launch.fp8_prefetch`, 4, 8,
16 or all 45 of fc2's boxes, 8 of fc1's, 8 of both; third call, `scratch/call3.sh`), and at each
K step the box that many steps on (`Launch.fp8_prefetch_ahead`, 8 to 24, and 12 with 8 first;
fourth call, `scratch/call4.sh`): `tools/bench_grouped_decode.py OUT --precision w8a16 --tokens
16,32,64 --seeds 0,1 --rank 0,1 --variants V`. Every step checked first (all passed). Derived: a
time = the mean over the two draws of the slower rank's step, us; "change" = the variant / the
arm's - 1. The first boxes are worth 0.0-0.8% (8 of both: faster in six of six draws, by
0.3-1.0%), more of them cost up to 13%; each step's prefetch costs 3-40% (the L2 evicts the
boxes asked for before the copies use them). Neither is taken.""",
        columns=["variant", "call", "tokens", "the arm's launch", "the variant", "change"],
    )  # fmt: skip
    say = {4: "four", 8: "eight", 12: "twelve", 16: "sixteen", 24: "twenty-four", 45: "all"}
    pf = [(f"first {say[n]} boxes, fc2", "call3/prefetch.log", f"{ONE_PASS} pf{n} fc2")
          for n in (4, 8, 16, 45)]  # fmt: skip
    pf += [("first eight boxes, fc1", "call3/prefetch.log", f"{ONE_PASS} pf8 fc1"),
           ("first eight boxes, both", "call3/prefetch.log", f"{ONE_PASS} pf8")]  # fmt: skip
    pf += [(f"each step, {say[n]} on", "call4/ahead.log", f"{ONE_PASS} ahead{n}")
           for n in (8, 12, 16, 24)]  # fmt: skip
    pf += [("first eight, each step twelve on", "call4/ahead.log", f"{ONE_PASS} pf8 ahead12")]
    for name, log, variant in pf:
        for tokens in (16, 32, 64):
            _, base = _mean(r, log, "w8a16", tokens, (0, 1), "default")
            _, mine = _mean(r, log, "w8a16", tokens, (0, 1), variant)
            t.row(name, log.split("/")[0], WORDS[tokens], base, mine, over(mine, base),
                  history=HIST)  # fmt: skip
    return t


RDP = f"{DAY}/call2/rdp.log"


def read_packed(r: Records) -> Table:
    t = Table(
        name="read_packed",
        caption=f"""\
{H100}. The read-only kernel on the FP8 tile's grid and box through TMA (every expert of a rank,
16 x N rows x 2,880 bytes; rows in natural order or packed box by box), the ceiling the tile's
streaming can reach at each shape: `RSPECS=64:64:6:4,64:64:4:4,64:128:4:4,32:64:6:4 python3
docs/perf/2026-12-02-grouped-stream/scratch/rdp.py` (second call, `scratch/call2.sh`), each form
the median of 30 runs after an L2 flush, against a 400 MiB copy timed the same way (first line
of the log). Figures as the log prints them. fc1's shape (N = 5,760) reads at 88-91% of copy
packed, fc2's (N = 2,880; 720 programs, one wave) at 77-80%: the same call's grouped step (call 1)
streams fc1 at about 90% and fc2 at about 81%, at those ceilings.""",
        columns=["stage's shape", "N", "rows a box", "bytes a step", "stages", "natural: us",
                 "of copy", "packed: us", "of copy "],
    )  # fmt: skip
    for n, shape in ((5760, "fc1's"), (2880, "fc2's")):
        for bn, bk, ns in ((64, 64, 6), (64, 64, 4), (64, 128, 4), (32, 64, 6)):
            head = rf"^read N={n} bn={bn} bk={bk} stages={ns} warps=4 packed=False: "
            cells = [
                r.text(RDP, rf"^read N=({n}) bn={bn} bk={bk} stages={ns} warps=4 packed=False"),
                r.text(RDP, rf"^read N={n} bn=({bn}) bk={bk} stages={ns} warps=4 packed=False"),
                r.text(RDP, rf"^read N={n} bn={bn} bk=({bk}) stages={ns} warps=4 packed=False"),
                r.text(RDP, rf"^read N={n} bn={bn} bk={bk} stages=({ns}) warps=4 packed=False"),
            ]
            for packed in ("False", "True"):
                head = rf"^read N={n} bn={bn} bk={bk} stages={ns} warps=4 packed={packed}: "
                cells += [r.text(RDP, head + r"([\d.]+) us"),
                          r.text(RDP, head + r"[^\n]*= (\d+%) of copy")]  # fmt: skip
            t.row(shape, *cells, history=HIST)
    return t


def copy_share_ready(r: Records) -> Table:
    t = Table(
        name="copy_share_ready",
        caption=f"""\
{H100}. Issue 28's copy-rate targets with FP8's tiles waiting expert by expert (seventh call,
`scratch/call7.sh`: `tools/bench_grouped_decode.py OUT --precision P --tokens 1,32,64 --seeds
0,1 --rank 0,1`; MXFP4 before its own expert-by-expert default, call 9's `expert_ready` rows give
it). "of copy" is the bench's: the step's weight bytes (the touched experts once) over its time,
over the copy ceiling the bench measured at its start (2.96 TB/s), rank 0 of the scenario's
routing (draw 0), then the mean over the two draws of the slower rank's step. Targets: at one
token the best arm (FP8: sparse) at 75% or more, missed (71%); at 32 and 64 tokens the grouped
step at 85% or more, met on this H100: 94% and 92% (every draw and rank 91-94%).""",
        columns=["precision", "tokens", "arm", "step us, draw 0 rank 0", "of copy",
                 "the slower rank, mean of two draws"],
    )  # fmt: skip
    copy_share_rows(t, r, f"{DAY}/call7/copy_share_{{}}.log", (0, 1), HIST)
    return t


def expert_ready_run(r: Records) -> Table:
    t = Table(
        name="expert_ready_run",
        caption=f"""\
{H100}. The gated scenario on the arms as they now stand (ninth call: the expert-by-expert wait
the default for FP8 from 4 tokens and MXFP4's one-pass tile;
`DEADLINE=... PER_RUN_TIMEOUT=280 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`, 231 s; every gate and integrity check passed, 952
pass and 112 skip in its checks, `call9/checks_count.txt`): the step (`ffn`, one CUDA graph, the
slowest rank's median over 13 blocks, us) of each arm. Derived: "grouped / dense" = the ratio;
"MXFP4 best / FP8 best" = the faster of the sparse and grouped steps of MXFP4 over FP8's. Grouped
beats dense and MXFP4 beats FP8 at every count. The first call's run of the same scenario (packed
boxes the default, before the expert-by-expert wait; 952 pass, 112 skip) is in `call1/`.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, f"{DAY}/call9/report.md", HIST)
    return t


TABLES = (expert_ready, no_wait_bound, copy_share_ready, expert_ready_run, tile_l2_prefetch,
          read_packed)  # fmt: skip
