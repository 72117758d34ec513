"""docs/PERF.md's generated tables of the thirty-second session (2026-12-07, issue 28), on an H100
80GB HBM3 (asked for an H100; the device lent one): the MXFP4 one-pass tile on the persistent,
evenly split grid (not taken), and the tile's scale pair as one multiply against the shifts and
the or it replaced (kept).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, over
from perf_specs_packed import NUM, bench_mean, packed_rows
from perf_specs_packed_mx import draw_cells
from perf_specs_placed import WORDS

DAY = "2026-12-07-stream-k"
HIST = "[issue 28][h-i28sk]"
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
LOG = f"{DAY}/call1/stream.log"
OLD = f"{DAY}/call1/old_pair.log"
ARM = " scales-packed dot-order biased"
# The bench's names of the two persistent-grid variants (field 23; fc2 then waits for the whole of
# fc1, so neither carries the arm's ready roles).
STREAM6 = "dot m16 n64 k128 w4 s3 pdl r80 passes eb rot packed" + ARM + " stream6"
STREAM8 = "dot m16 n64 k128 w4 s2 pdl r64 passes eb rot packed" + ARM + " stream8"


def mx_stream_k(r: Records) -> Table:
    t = Table(
        name="mx_stream_k",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The MXFP4 one-pass tile on the persistent grid that
splits every tile's K steps evenly over its programs (`Launch.stream_k`,
`moebench/kernels/stream_k.py`; a tile two programs share summed in program order by the last to
count; fc2 waiting for the whole of fc1) at 6 programs an SM (80 registers, 3 stages, the arm's)
and at 8 (64 registers, 2 stages), against the arm's launch, gpt-oss-20b EP2, routing draws zero
and one, both ranks: `python3 tools/bench_grouped_decode.py OUT --precision w4a16 --tokens
16,32,64 --seeds 0,1 --rank 0,1 --variants
dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:6,dot:-:-:-:-:2:-:-:64:-:-:-:-:-:-:-:-:-:-:-:-:-:8
--variant-tokens 16,32,64` (first call, `docs/perf/{DAY}/scratch/call1.sh`, 38019ad's tree).
Every step checked against the reference and the sentinels first (all passed). Cells: the slower
rank's step in each draw and their mean (us), as the bench's summary prints them. Derived:
"change" = variant's mean / arm's - 1. Slower at every count, by 31-58%: not taken
(`grouped_launch.PASS_GRID_MXFP4_STREAM_K` stays 0).""",
        columns=["tokens", "arm's, draw zero", "draw one", "mean", "6 an SM, draw zero",
                 "draw one ", "mean ", "change", "8 an SM, draw zero", "draw one  ", "mean  ",
                 "change "],
    )  # fmt: skip
    for tokens in (64, 32, 16):
        arm = draw_cells(r, LOG, tokens, "default")
        cells = list(arm)
        for variant in (STREAM6, STREAM8):
            mine = draw_cells(r, LOG, tokens, variant)
            cells += [*mine, over(mine[2], arm[2])]
        t.row(WORDS[tokens], *cells, history=HIST)
    return t


def mx_stream_k_stages(r: Records) -> Table:
    t = Table(
        name="mx_stream_k_stages",
        caption=f"""\
{H100}. The same call as `mx_stream_k`, 6 programs an SM, case by case (each draw and rank): the
step, fc1 alone and fc2 alone (us; each stage timed as its own CUDA graph, L2 flushed). Derived:
"change" = persistent / arm's - 1. fc2 (720 tiles at 32-64 tokens, 0.91 a program) loses more
than fc1 (1,440, 1.82 a program).""",
        columns=["tokens, draw, rank", "step: arm's", "persistent", "change", "fc1: arm's",
                 "persistent ", "change ", "fc2: arm's", "persistent  ", "change  "],
    )  # fmt: skip
    packed_rows(t, r, LOG, "w4a16", STREAM6, HIST)
    return t


def _arm_mean(r: Records, log: str, tokens: int, arm: str):
    """The mean over draws of the slowest rank's step of a non-grouped arm (bench summary)."""
    return r.text(log, rf"^  w4a16 {tokens:>2} {arm} default: [^\n]*mean {NUM}")


def mx_pair_ab(r: Records) -> Table:
    t = Table(
        name="mx_pair_ab",
        caption=f"""\
{H100}. The MXFP4 tile's scale pair made as the exponent field times 2^7 + 2^23 (one multiply,
`mx_rotated.rotated_tile`, 4a21460: the arm's) against the shifts and the or it replaced (put
back by `sed` in the device's copy), gpt-oss-20b EP2, draws zero and one, both ranks, in one call:
the new line's run first (`mx_stream_k`'s arm rows), then the old line's: `python3
tools/bench_grouped_decode.py OUT --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1
--variants dot --variant-tokens 1` (the arms alone). Cells: the mean over draws of the slower
rank's step (us). dense_decode, which the line does not touch, says how far the machine moved
between the two runs. Derived: "change" = new / old - 1, and the same for dense. The new line
was faster in 11 of the 12 draw-and-rank cases and its fc2 in all 12 (the logs), by about as
much as dense moved: not slower, kept.""",
        columns=["tokens", "grouped: one multiply", "shifts and or", "change", "dense: first run",
                 "second run", "change "],
    )  # fmt: skip
    for tokens in (64, 32, 16):
        new = bench_mean(r, LOG, "w4a16", tokens, "default")
        old = bench_mean(r, OLD, "w4a16", tokens, "default")
        d_new, d_old = (_arm_mean(r, log, tokens, "dense_decode") for log in (LOG, OLD))
        t.row(WORDS[tokens], new, old, over(new, old), d_new, d_old, over(d_new, d_old),
              history=HIST)  # fmt: skip
    return t


TABLES = (mx_stream_k, mx_stream_k_stages, mx_pair_ab)
