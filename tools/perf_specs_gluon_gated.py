"""docs/PERF.md's generated tables of the thirty-sixth session (2026-12-07, issue 28): the gated
scenario with MXFP4's one-pass tile in Gluon as the `grouped_decode` arm's default, whole, on an
H100 (the thirty-fifth session's H200 run was cut after 12 of 14 cases), and the Gluon tile's
stages and register cap against its default.

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
DRAW = {0: "zero", 1: "one"}
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
    cases = [(p, n) for p in ("w8a16", "w4a16") for n in (1, 2, 4, 8, 16, 32, 64)]
    for i, (precision, tokens) in enumerate(cases):
        case = f"c{i:03d}-precision={precision}-tokens_per_rank={tokens}"
        cells = [r.cell(GATED1, "Weight bandwidth", "of copy", case=case, stage="ffn", arm=arm)
                 for arm in ("dense_decode", "sparse_decode", "grouped_decode")]  # fmt: skip
        t.row(PRECISION[precision], WORDS[tokens], *cells, history=HIST)
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


TABLES = (gated_h100, stages_h100)
