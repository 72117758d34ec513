"""docs/PERF.md's generated tables of the twenty-second session (2026-12-06, issue 28): the FP8
one-pass tile's weights packed box by box against the arm's launch (taken), and 128 rows a
program (not taken), on an H100 (no H200 was lent).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table
from perf_records import Records, over
from perf_specs_placed import WORDS

DAY = "2026-12-06-wide-rows"
HIST = "[issue 28][h-i28pk]"
H100 = "**H100 80GB HBM3** (asked for an H200; the device lent an H100), driver 580.159.04"
LOG = f"{DAY}/call1/wide_rows.log"
NUM = r"([\d.]+)"
PACKED = "dot m16 n64 k64 w4 s6 pdl tma r80 passes eb placed packed"
WIDE = "dot m16 n128 k64 w4 s6 pdl tma passes eb placed"
WIDE_96 = "dot m16 n128 k64 w4 s5 pdl tma r96 passes eb placed"
DRAWS = ("zero", "one")


def bench_field(r: Records, log: str, prec: str, tokens: int, seed: int, rank: int,
                variant: str, field: str):  # fmt: skip
    """``field`` of the bench's row of the grouped arm's ``variant`` in one case of ``log``."""
    pat = (rf"^precision={prec} tokens={tokens} seed={seed} rank={rank} [^\n]*?"
           rf"arm=grouped_decode variant={re.escape(variant)} weight_bytes"
           rf"[^\n]*?\b{field}={NUM}")  # fmt: skip
    return r.text(log, pat)


def bench_mean(r: Records, log: str, prec: str, tokens: int, variant: str):
    """The mean over draws of the slowest rank's step (the bench's summary line in ``log``)."""
    head = rf"^  {prec} {tokens:>2} grouped_decode {re.escape(variant)}: "
    return r.text(log, head + rf"[^\n]*mean {NUM}")


def packed_rows(t: Table, r: Records, log: str, prec: str, packed: str, hist: str) -> None:
    """A row each (tokens, draw, rank) of ``log``: the step, fc1 and fc2 of the arm's launch and
    of the ``packed`` variant, and the change of each."""
    for tokens in (64, 32, 16):
        for seed in (0, 1):
            for rank in (0, 1):
                cells = []
                for field in ("step_us", "fc1_us", "fc2_us"):
                    arm = bench_field(r, log, prec, tokens, seed, rank, "default", field)
                    pk = bench_field(r, log, prec, tokens, seed, rank, packed, field)
                    cells += [arm, pk, over(pk, arm)]
                t.row(f"{WORDS[tokens]}, {DRAWS[seed]}, {DRAWS[rank]}", *cells, history=hist)


def _mean(r: Records, tokens: int, variant: str):
    return bench_mean(r, LOG, "w8a16", tokens, variant)


def packed_boxes(r: Records) -> Table:
    t = Table(
        name="packed_boxes",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The FP8 one-pass tile's weights packed box by box
(`Launch.fp8_packed`, `tile_packed`: each [64 rows, 64 bytes] box one contiguous 4 KB run, a
program's boxes one after the other; placed words, as the arm's) against the arm's launch as it
stood (the same placed words in their rows, unpacked), gpt-oss-20b EP2, each routing draw and rank
(us): `PYTHONPATH=$PWD:$PWD/tools python3 tools/bench_grouped_decode.py OUT --precision w8a16
--tokens 16,32,64 --seeds 0,1 --rank 0,1 --variants dot:-:-:-:-:-:-:-:-:-:-:-:-:-:1,...
--variant-tokens 16,32,64` (first call, `scratch/call1.sh`). Each step checked against the reference
and the sentinels first (every row passed); steps timed interleaved, one CUDA graph each, L2
flushed. Derived: "change" = packed / arm's - 1. Faster in all twelve cells, fc1 and fc2 both: now
the arm's launch where R is whole 64-value steps (`grouped_launch.FP8_PACKED`).""",
        columns=["tokens, draw, rank", "step: arm's", "packed", "change", "fc1: arm's",
                 "packed ", "change ", "fc2: arm's", "packed  ", "change  "],
    )  # fmt: skip
    packed_rows(t, r, LOG, "w8a16", PACKED, HIST)
    return t


def wide_rows(r: Records) -> Table:
    t = Table(
        name="wide_rows",
        caption=f"""\
{H100}. The FP8 one-pass tile over 128 rows a program on 4 warps, which reads each step's slots'
operand (up to 2 KB, from L2) once for 128 weight rows instead of 64: half the operand's L2
traffic a weight byte (the lead: the H200's Nsight Compute record of 2026-12-04 has fc1's L2 at
76.6% of its peak while DRAM is at 68.0%). Uncapped (94-100 registers, no spill, 4 programs an SM;
sm_90a offline; at the arm's 80 it spills) on 6 stages: fc1 alone, fc2 alone (2,880 rows: an
expert's last row block ragged, the new `RAGGED` tile), both; and both on 5 stages at 96
registers (5 programs an SM). The same call as `packed_boxes`; the step on the slowest rank of
each draw, the mean of the two draws (us), as the bench's summary prints it. Derived: "change" =
variant / arm's - 1. Slower everywhere, by 3-12%: not taken. Fewer programs (half as many an
expert, 4 or 5 an SM against 6) cost more than the L2 traffic saves.""",
        columns=["tokens", "arm's", "fc1 on 128 rows", "change", "fc2 on 128 rows", "change ",
                 "both", "change  ", "both, 5 stages", "change   "],
    )  # fmt: skip
    for tokens in (64, 32, 16):
        arm = _mean(r, tokens, "default")
        cells = []
        for variant in (f"{WIDE} fc1", f"{WIDE} fc2", WIDE, WIDE_96):
            v = _mean(r, tokens, variant)
            cells += [v, over(v, arm)]
        t.row(WORDS[tokens], arm, *cells, history=HIST)
    return t


TABLES = (packed_boxes, wide_rows)
