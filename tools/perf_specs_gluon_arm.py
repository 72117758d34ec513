"""docs/PERF.md's generated tables of the thirty-fifth session (2026-12-07, issue 28): the MXFP4
one-pass tile in Gluon as the `grouped_decode` arm's default (`moebench/kernels/mx_gluon.py`,
``Launch.mx_gluon``), timed against the Triton tile and put through the gated scenario on an H200;
and, on an H100, the warp-specialised probe's read-only stream beside its tile.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table
from perf_records import Records, derive
from perf_specs_placed import WORDS

DAY = "2026-12-07-ws-readonly"
HIST = "[issue 28][h-i28gl]"
H200 = "**H200** (the device lent an H200), driver 580.159.04"
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
BENCH = f"{DAY}/call2/bench.log"
GATED = f"{DAY}/call2/report.md"
PROBE = f"{DAY}/call1/ws_bench.log"
DRAW = {0: "zero", 1: "one"}


def _bench_line(tokens: int, seed: int, rank: int, variant: str) -> str:
    return (rf"^precision=w4a16 tokens={tokens} seed={seed} rank={rank} \S+ \S+ \S+ "
            rf"arm=grouped_decode variant={variant}\b.*")  # fmt: skip


def gluon_arm(r: Records) -> Table:
    t = Table(
        name="gluon_arm_h200",
        caption=f"""\
{H200}, torch 2.11.0+cu130, triton 3.6.0. `grouped_decode`'s MXFP4 step with the one-pass tile
in Gluon (the arm's default from this session: `moebench/kernels/mx_gluon.py`, weights decoded
from registers straight into the MMA operand, its passes from a table the routing fills) against
the Triton tile it replaces (the variant with the gluon field 0), gpt-oss-20b EP2, 32 and 64
tokens, draws zero and one, both ranks (`python3 tools/bench_grouped_decode.py /tmp/bench
--tokens 32,64 --precision w4a16 --variants=-:...:0 --variant-tokens 32,64 --seeds 0,1 --rank
0,1`, `docs/perf/{DAY}/scratch/call2.sh`). Each step checked first (reference within the
tolerance, sentinels), then timed interleaved, each a CUDA graph, L2 flushed. Cells: the step, fc1
and fc2 (us) as the log prints them; "of copy" the log's (the touched experts' bytes over the
step, over 4.27 TB/s). Derived: "change" = Gluon step / Triton step - 1. Faster in all eight
cells, 19-23%: fc1 57-58 us against 68-71, fc2 32-33 against 43-45. Still 58-59% of the H200's copy
ceiling (the target is 85%). Correction (thirty-sixth session): the bench built that Triton tile
as the Gluon launch with the flag off, so it ran uncapped and in the natural K order (its name
lacks " r80" and " dot-order"), not as the arm's former default; the bench's gluon 0 now gives
the Triton tile the arm falls back to (`grouped_launch.triton_tile`), and `mx_gluon_triton_h100`
compares against that (2-7% on an H100).""",
        columns=["tokens", "draw", "rank", "Gluon step", "Triton step", "change", "Gluon fc1",
                 "Triton fc1", "Gluon fc2", "Triton fc2", "Gluon of copy"],
    )  # fmt: skip
    for tokens in (32, 64):
        for seed in (0, 1):
            for rank in (0, 1):
                g, tr = (
                    _bench_line(tokens, seed, rank, "default"),
                    _bench_line(tokens, seed, rank, "dot"),
                )
                field = lambda line, key: r.text(BENCH, line + rf" {key}=(\S+)")  # noqa: E731
                gs, ts = field(g, "step_us"), field(tr, "step_us")
                t.row(WORDS[tokens], DRAW[seed], DRAW[rank], gs, ts,
                      derive(lambda a, b: a / b - 1, "{:+.1%}", gs, ts),
                      field(g, "fc1_us"), field(tr, "fc1_us"), field(g, "fc2_us"),
                      field(tr, "fc2_us"), field(g, "of_copy"), history=HIST)  # fmt: skip
    return t


def gluon_gated(r: Records) -> Table:
    t = Table(
        name="gluon_gated_h200",
        caption=f"""\
{H200}, torch 2.11.0+cu130, triton 3.6.0. The gated scenario with the Gluon tile as MXFP4's
one-pass default (`bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml`, its
deadline 230 s, `docs/perf/{DAY}/scratch/call2.sh`): 12 of its 14 cases finished before the
deadline (MXFP4 at 32 and 64 tokens did not), every check of them passed (816 pass, 96 skip,
`call2/checks_count.txt`). Cells: each arm's whole-step weight bandwidth's share of the copy
ceiling (4.27 TB/s) from the report's "Weight bandwidth" table, over the touched experts' bytes on
the slowest rank. MXFP4 grouped from 16 tokens is the Gluon tile (58% there); FP8 grouped reaches
82% / 81% / 76% at 16 / 32 / 64 tokens on the H200 (the H100: 89-90%), the one-token best 56% (FP8
dense; sparse 55%).""",
        columns=["precision", "tokens", "dense", "sparse", "grouped"],
    )  # fmt: skip
    cases = [("w8a16", n) for n in (1, 2, 4, 8, 16, 32, 64)]
    cases += [("w4a16", n) for n in (1, 2, 4, 8, 16)]
    for i, (precision, tokens) in enumerate(cases):
        case = f"c{i:03d}-precision={precision}-tokens_per_rank={tokens}"
        cells = [r.cell(GATED, "Weight bandwidth", "of copy", case=case, stage="ffn", arm=arm)
                 for arm in ("dense_decode", "sparse_decode", "grouped_decode")]  # fmt: skip
        t.row("FP8" if precision == "w8a16" else "MXFP4", WORDS[tokens], *cells, history=HIST)
    return t


PROBE_VARIANTS = (
    ("probe s3 tiled", "the tiled Gluon probe (the arm's Gluon tile's loop)"),
    ("ws s4 n80 p24 r64", "warp-specialised, the whole tile"),
    ("ws s4 n64 p24 r64", "warp-specialised, fewer registers (four an SM)"),
    ("ws s4 n80 p24 r64 pairs", "warp-specialised, two K steps a stage"),
    ("ws s4 n80 p24 r64 read-only", "the producer's stream alone (three an SM)"),
    ("ws s4 n40 p24 r64 read-only", "the stream alone at six an SM"),
    ("ws s4 n80 p24 r128 read-only", "the stream alone, two warpgroups a tile"),
)


def read_only(r: Records) -> Table:
    t = Table(
        name="ws_read_only_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The thirty-fourth session's prepared call (`bash
docs/perf/2026-12-07-ws-gluon/scratch/next_call.sh`, run by this session's first call): the
warp-specialised probe's producer alone (read-only: each stage given back as it lands, nothing
decoded or multiplied, zeros out) on the tile's grids, beside the full tiles, 64 tokens, draw
zero, rank zero. Cells: each launch's share of copy as the log prints it (the touched experts'
bytes over the time, over 2.97 TB/s). The stream alone reaches 90-91% of copy in fc1 and 82-84%
in fc2, where the best tiles reach 83-85% and 74%: the tiles lose 6-9 points to their consumers,
so this access pattern is not what holds them below 85%.""",
        columns=["launch", "fc1 of copy", "fc2 of copy"],
    )  # fmt: skip
    head = r"^T=64 seed=0 rank=0 \S+ \S+ block_m=16 "
    for tag, words in PROBE_VARIANTS:
        cells = [r.text(PROBE, head + rf"{re.escape(tag)} {s}: \S+ us, \S+ GB/s, (\S+) of copy")
                 for s in ("fc1", "fc2")]  # fmt: skip
        t.row(words, *cells, history=HIST)
    return t


TABLES = (gluon_arm, gluon_gated, read_only)
