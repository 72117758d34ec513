"""docs/PERF.md's generated tables of the thirty-sixth session (2026-12-07, issue 28), all on an
H100: FP8's one-pass tile in Gluon against the Triton tile and through FP8's gated cases; MXFP4's
Gluon default against the Triton tile the arm really falls back to; the gated scenario whole with
MXFP4's Gluon default (the thirty-fifth session's H200 run was cut after 12 of 14 cases), and the
Gluon tile's stages and register cap against its default.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table
from perf_records import Records, derive
from perf_specs_placed import WORDS

DAY = "2026-12-07-gluon-gated"
HIST = "[issue 28][h-i28gg]"
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
GATED1 = f"{DAY}/call1/report.md"
BENCH1 = f"{DAY}/call1/bench.log"
DRAW = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
PRECISION = {"w8a16": "FP8", "w4a16": "MXFP4"}


def gated_h100(r: Records) -> Table:
    t = Table(
        name="gluon_gated_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The whole gated scenario with the Gluon tile as MXFP4's
one-pass default (`bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml`, its
deadline 270 s, `docs/perf/{DAY}/scratch/call1.sh`, the thirty-fifth session's prepared call):
all 14 cases in 199 s, every check passed (952 pass, 112 skip, `call1/checks_count.txt`). Cells:
each arm's whole-step weight bandwidth's share of the copy ceiling (2.97 TB/s on this card) from
the report's "Weight bandwidth" table, over the touched experts' bytes on the slowest rank. MXFP4
grouped from 16 tokens is the Gluon tile: 74% / 73% / 69% at 16 / 32 / 64 tokens. At one and two
tokens the sparse arm streams faster than the grouped arm's one-slot GEMV in both formats.""",
        columns=["precision", "tokens", "dense", "sparse", "grouped"],
    )  # fmt: skip
    return gated_shares(t, r, GATED1, HIST)


def gated_shares(t: Table, r: Records, report: str, history: str) -> Table:
    """``t``'s rows from a whole run of the gated scenario (`gpt-oss-20b-decode-grouped`, its 14
    cases in order): per case, each arm's whole-step share of copy from ``report``'s "Weight
    bandwidth" table."""
    cases = [(p, n) for p in ("w8a16", "w4a16") for n in (1, 2, 4, 8, 16, 32, 64)]
    for i, (precision, tokens) in enumerate(cases):
        case = f"c{i:03d}-precision={precision}-tokens_per_rank={tokens}"
        cells = [r.cell(report, "Weight bandwidth", "of copy", case=case, stage="ffn", arm=arm)
                 for arm in ("dense_decode", "sparse_decode", "grouped_decode")]  # fmt: skip
        t.row(PRECISION[precision], WORDS[tokens], *cells, history=history)
    return t


def _step(r: Records, path: str, tokens: int, seed: int, rank: int, variant: str):
    line = (rf"^precision=\S+ tokens={tokens} seed={seed} rank={rank} \S+ \S+ \S+ "
            rf"arm=grouped_decode variant={variant}\b.* step_us=(\S+)")  # fmt: skip
    return r.text(path, line)


def stages_h100(r: Records) -> Table:
    t = Table(
        name="gluon_stages_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The MXFP4 Gluon tile on 4 stages of slots and capped
at 96 registers against its default (3 stages, the compiler's 127 registers: 4 programs an SM;
at 96, 5 an SM but ptxas serialises the warpgroup MMAs, offline), gpt-oss-20b EP2, draw zero,
both ranks (`python3 tools/bench_grouped_decode.py /tmp/bench --tokens 32,64 --precision w4a16
--variants=<s4>,<r96> --variant-tokens 32,64 --seeds 0 --rank 0,1`, `docs/perf/{DAY}/scratch/
call1.sh`). Each step checked first, then timed interleaved, each a CUDA graph. Cells: the step
(us) as the log prints it; derived: "change" = variant / default - 1. Both are slower in every
cell: the default stays.""",
        columns=["tokens", "rank", "default", "4 stages", "change", "96 registers", "change"],
    )  # fmt: skip
    s4 = re.escape("dot m16 n64 k128 w4 s4 pdl passes")
    r96 = re.escape("dot m16 n64 k128 w4 s3 pdl r96 passes")
    change = lambda a, b: derive(lambda x, y: x / y - 1, "{:+.1%}", a, b)  # noqa: E731
    for tokens in (32, 64):
        for rank in (0, 1):
            base = _step(r, BENCH1, tokens, 0, rank, "default")
            four = _step(r, BENCH1, tokens, 0, rank, s4)
            capped = _step(r, BENCH1, tokens, 0, rank, r96)
            t.row(WORDS[tokens], DRAW[rank], base, four, change(four, base), capped,
                  change(capped, base), history=HIST)  # fmt: skip
    return t


CALL2 = f"{DAY}/call2"
FP8_GLUON_NAME = "dot m16 n64 k64 w4 s3 pdl tma r128 passes eb placed packed gluon ready-signal"
MX_TRITON_NAME = ("dot m16 n64 k128 w4 s3 pdl r80 passes eb rot packed scales-packed dot-order "
                  "biased ready-signal")  # fmt: skip


def _slowest(r: Records, path: str, precision: str, tokens: int, name: str, seed: int):
    """The slower rank's step of draw ``seed`` in the bench's summary line of launch ``name``."""
    line = (rf"^  {precision} {tokens} grouped_decode {re.escape(name)}: (?:\d+:\S+ +)*?"
            rf"{seed}:(\S+)")  # fmt: skip
    return r.text(path, line)


def fp8_gluon_h100(r: Records) -> Table:
    t = Table(
        name="fp8_gluon_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. `grouped_decode`'s FP8 step with the one-pass tile in
Gluon (`moebench/kernels/fp8_gluon.py`, capped at 128 registers: the launch
`grouped_launch.FP8_GLUON` now takes) against the Triton one-pass tile (the default until this
session), gpt-oss-20b EP2, both ranks, six routing draws at 16 tokens and four at 32 and 64
(`python3 tools/bench_grouped_decode.py /tmp/bench8 --tokens 16,32,64 --precision w8a16
--variants=<gluon 1> --variant-tokens 16,32,64 --seeds 0,1 --rank 0,1`, then seeds 2,3 and, at 16
tokens, 4,5; `docs/perf/{DAY}/scratch/call2.sh` and the two calls after it on the same machine).
Each step checked first (reference, sentinels), then timed interleaved, each a CUDA graph. Cells:
the slower rank's step (us) of each draw as the log's summary prints it; derived: "change" =
Gluon / Triton - 1. Faster in 13 of the 14 cells: 0.3-6.8% at 16 tokens, within 1.5% either way at
32 and 64, where the Triton tile already streams at 85-88% of this card's copy ceiling.""",
        columns=["tokens", "draw", "Gluon step", "Triton step", "change"],
    )  # fmt: skip
    logs = {0: "bench_fp8.log", 1: "bench_fp8.log", 2: "bench_fp8_variants.log",
            3: "bench_fp8_variants.log", 4: "bench_fp8_16_seeds45.log",
            5: "bench_fp8_16_seeds45.log"}  # fmt: skip
    for tokens, seeds in ((16, range(6)), (32, range(4)), (64, range(4))):
        for seed in seeds:
            path = f"{CALL2}/{logs[seed]}"
            gluon = _slowest(r, path, "w8a16", tokens, FP8_GLUON_NAME, seed)
            triton = _slowest(r, path, "w8a16", tokens, "default", seed)
            t.row(WORDS[tokens], DRAW[seed], gluon, triton,
                  derive(lambda a, b: a / b - 1, "{:+.1%}", gluon, triton),
                  history=HIST)  # fmt: skip
    return t


def mx_gluon_h100(r: Records) -> Table:
    t = Table(
        name="mx_gluon_triton_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. `grouped_decode`'s MXFP4 step with its Gluon default
against the Triton one-pass tile exactly as the arm falls back to it (`grouped_launch.triton_tile`:
80 registers, its values in K order; the bench's gluon 0 now gives that launch), gpt-oss-20b EP2,
both ranks, draws zero and one at 32 and 64 tokens and two and three at 16, 32 and 64
(`python3 tools/bench_grouped_decode.py /tmp/bench4 --tokens 32,64 --precision w4a16
--variants=<gluon 0> --variant-tokens 32,64 --seeds 0,1 --rank 0,1`, then `--tokens 16,32,64
--seeds 2,3`; `docs/perf/{DAY}/scratch/call2.sh`). Cells: the slower rank's step (us) of each
draw; derived: "change" = Gluon / Triton - 1. The Gluon tile is faster in all ten cells, by 1-7%
(6-7% at 64 tokens): the thirty-fifth session's 19-23% (`gluon_arm_h200`, on an H200) was against
a Triton tile the bench had built uncapped and in the natural K order.""",
        columns=["tokens", "draw", "Gluon step", "Triton step", "change"],
    )  # fmt: skip
    cells = [(16, 2), (16, 3), (32, 0), (32, 1), (32, 2), (32, 3), (64, 0), (64, 1), (64, 2),
             (64, 3)]  # fmt: skip
    for tokens, seed in cells:
        path = f"{CALL2}/{'bench_mxfp4.log' if seed < 2 else 'bench_mxfp4_seeds23.log'}"
        gluon = _slowest(r, path, "w4a16", tokens, "default", seed)
        triton = _slowest(r, path, "w4a16", tokens, MX_TRITON_NAME, seed)
        t.row(WORDS[tokens], DRAW[seed], gluon, triton,
              derive(lambda a, b: a / b - 1, "{:+.1%}", gluon, triton), history=HIST)  # fmt: skip
    return t


def fp8_gluon_gated_h100(r: Records) -> Table:
    t = Table(
        name="fp8_gluon_gated_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. FP8's cases of the gated scenario that take the one-pass
tile (16, 32 and 64 tokens: `docs/perf/{DAY}/scratch/gpt-oss-20b-decode-grouped-fp8.yaml`) with
`grouped_launch.FP8_GLUON` switched on for the run (the manifest marks the tree dirty; `bash
tools/gpu_run.sh /tmp/g8 ...`, `scratch/call2.sh`): every check passed (204 pass, 24 skip,
`call2/checks_count_fp8.txt`). Cells: each arm's whole-step weight bandwidth's share of the copy
ceiling (2.97 TB/s) from the report's "Weight bandwidth" table, over the touched experts' bytes on
the slowest rank. Grouped FP8 with the Gluon tile 92% / 91% / 88% at 16 / 32 / 64 tokens; the
first call's run with the Triton tile (`gluon_gated_h100`, another machine start) 86% / 88% /
85%.""",
        columns=["tokens", "dense", "sparse", "grouped"],
    )  # fmt: skip
    for i, tokens in enumerate((16, 32, 64)):
        case = f"c{i:03d}-precision=w8a16-tokens_per_rank={tokens}"
        cells = [r.cell(f"{CALL2}/report_fp8.md", "Weight bandwidth", "of copy", case=case,
                        stage="ffn", arm=arm)
                 for arm in ("dense_decode", "sparse_decode", "grouped_decode")]  # fmt: skip
        t.row(WORDS[tokens], *cells, history=HIST)
    return t


TABLES = (fp8_gluon_h100, fp8_gluon_gated_h100, mx_gluon_h100, gated_h100, stages_h100)
