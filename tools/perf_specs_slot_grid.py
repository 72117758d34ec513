"""docs/PERF.md's generated tables of the thirty-eighth session (2026-12-07, issue 28), all on an
H100: the one-slot GEMV's grid led by slots against the grid led by touched experts (taken); the
one- and two-token steps against what reading their bytes takes in two launches, in one launch
and an empty launch under this timer; the gated scenario with the slot grid the default.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table
from perf_records import Records, derive
from perf_specs_gluon_gated import DRAW, H100, PRECISION, gated_shares
from perf_specs_placed import WORDS

DAY = "2026-12-07-one-token"
HIST = "[issue 28][h-i28sg]"
CALL1, CALL3 = f"{DAY}/call1", f"{DAY}/call3"
SLOTS = {"w8a16": "gemv m1 n2 k1024 w1 pdl r64 slots",
         "w4a16": "gemv m1 n16 k1024 w4 pdl r96 rot slots"}  # fmt: skip
READS = {"two": "best read of the touched values", "one": "one launch reading the touched values",
         "empty": "an empty launch"}  # fmt: skip


def _slowest(r: Records, path: str, precision: str, tokens: int, arm: str, name: str, seed: int):
    """The slower rank's step of draw ``seed`` in the bench's summary line of ``arm``'s launch
    ``name``."""
    line = rf"^  {precision} +{tokens} {arm} {re.escape(name)}: (?:\d+:\S+ +)*?{seed}:(\S+)"
    return r.text(path, line)


def slot_grid_h100(r: Records) -> Table:
    t = Table(
        name="slot_grid_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. `grouped_decode`'s one-slot GEMV on the grid led by
slots (`Launch.slot_grid`: program j serves slot j's expert where j is its first slot; FP8 capped
at 64 registers) against the grid led by touched experts (the arm's launch until this session),
gpt-oss-20b EP2, four routing draws, both ranks (`python3 tools/bench_grouped_decode.py
/tmp/bench8 --tokens 1 --precision w8a16 --variants=<slots ...> --variant-tokens 1 --seeds
0,1,2,3 --rank 0,1`, MXFP4 at 1 and 2 tokens; `docs/perf/{DAY}/scratch/call1.sh`). Each step
checked first (reference, sentinels), then timed interleaved, each a CUDA graph. Cells: the
slower rank's step (us) of each draw as the log's summary prints it, the sparse arm's beside;
derived: "change" = slot grid / expert grid - 1. Faster in all twelve cells: taken
(`grouped_launch.GEMV_SLOT_GRID`). The sparse arm is still faster at one and two tokens.""",
        columns=["precision", "tokens", "draw", "expert grid", "slot grid", "change", "sparse"],
    )  # fmt: skip
    for precision, tokens in (("w8a16", 1), ("w4a16", 1), ("w4a16", 2)):
        path = f"{CALL1}/bench_{'fp8' if precision == 'w8a16' else 'mxfp4'}.log"
        for seed in range(4):
            base = _slowest(r, path, precision, tokens, "grouped_decode", "default", seed)
            slots = _slowest(r, path, precision, tokens, "grouped_decode", SLOTS[precision], seed)
            sparse = _slowest(r, path, precision, tokens, "sparse_decode", "default", seed)
            t.row(PRECISION[precision], WORDS[tokens], DRAW[seed], base, slots,
                  derive(lambda a, b: a / b - 1, "{:+.1%}", slots, base), sparse,
                  history=HIST)  # fmt: skip
    return t


def step_floor_h100(r: Records) -> Table:
    t = Table(
        name="step_floor_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The one- and two-token steps (the slot grid the
grouped arm's default) against what reading the same touched experts' fc1 and fc2 weight values
takes under this timer (`python3 tools/bench_grouped_decode.py /tmp/floor --tokens 1,2 --floor
1,2 --seeds 0,1,2,3 --rank 0,1`, `docs/perf/{DAY}/scratch/call3.sh`): "two reads", the best read
kernel of fc1's values then of fc2's (two launches, as today's steps' GEMVs are); "one read", one
launch reading both (`bench_decode._read_two`: the least any step can take, whatever its kernels);
"empty", a graph of one launch that does nothing. The arms timed interleaved, then the three
reads interleaved, each a CUDA graph with L2 flushed. Cells: the slower rank's step (us) of each
draw as the log's summary prints it (draw one's rank zero has no local slot at one token);
derived: "sparse / one read". One launch reads the bytes about 2 us faster than two; the empty
launch takes 3.4-3.7 us, so at these sizes the timer's fixed cost is 8-27% of the least step.""",
        columns=["precision", "tokens", "draw", "sparse", "grouped", "two reads", "one read",
                 "empty", "sparse / one read"],
    )  # fmt: skip
    path = f"{CALL3}/floor.log"
    for precision in ("w8a16", "w4a16"):
        for tokens in (1, 2):
            for seed in range(4):
                cell = lambda arm, name: _slowest(r, path, precision, tokens, arm, name, seed)  # noqa: E731
                sparse = cell("sparse_decode", "default")
                one = cell("read_floor", READS["one"])
                t.row(PRECISION[precision], WORDS[tokens], DRAW[seed], sparse,
                      cell("grouped_decode", "default"), cell("read_floor", READS["two"]), one,
                      cell("read_floor", READS["empty"]),
                      derive(lambda a, b: a / b, "{:.2f}x", sparse, one), history=HIST)  # fmt: skip
    return t


def _share(r: Records, path: str, seed: int, rank: int, arm: str, variant: str):
    line = (rf"^precision=w8a16 tokens=1 seed={seed} rank={rank} .* arm={arm} "
            rf"variant={re.escape(variant)} .*of_copy=(\S+)")  # fmt: skip
    return r.text(path, line)


def one_token_shares_h100(r: Records) -> Table:
    t = Table(
        name="one_token_shares_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. FP8 at one token, issue 28's 75% target, per rank and
draw with a local slot (the same run as `step_floor_h100`, `docs/perf/{DAY}/call3/floor.log`):
each step's share of this card's copy ceiling (2.97 TB/s) over its touched experts' bytes, as the
log prints it. Reading the bytes in one launch reaches 67% with one touched expert, 82-83% with
two, 90% with three and 95% with four; in two launches 59%, 76%, 84% and 88%; the sparse step 39%,
61-64%, 71% and 79%. So with two touched experts even a step of two GEMVs that read at the read
kernel's speed, with nothing between them and no combine, would reach 76%, one point over the
target, where one launch leaves seven.""",
        columns=["draw", "rank", "touched experts", "sparse", "grouped", "two reads", "one read"],
    )  # fmt: skip
    path = f"{CALL3}/floor.log"
    cases = [(0, 0), (0, 1), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    for seed, rank in cases:
        touched = r.text(path, rf"^precision=w8a16 tokens=1 seed={seed} rank={rank} \S+ "
                               r"touched=(\d+) .* arm=sparse_decode ")  # fmt: skip
        t.row(DRAW[seed], DRAW[rank], touched,
              _share(r, path, seed, rank, "sparse_decode", "default"),
              _share(r, path, seed, rank, "grouped_decode", "default"),
              _share(r, path, seed, rank, "read_floor", READS["two"]),
              _share(r, path, seed, rank, "read_floor", READS["one"]), history=HIST)  # fmt: skip
    return t


def gated_h100(r: Records) -> Table:
    t = Table(
        name="slot_grid_gated_h100",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The whole gated scenario with the slot grid the
grouped arm's default (`bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml`,
`docs/perf/{DAY}/scratch/call3.sh`): all 14 cases in 204 s, every check passed (952 pass, 112
skip, `call3/checks_count.txt`; call 1's run with the slot grid switched on for it, the same
counts). Cells: each arm's whole-step weight bandwidth's share of the copy ceiling (2.97 TB/s)
from the report's "Weight bandwidth" table, over the touched experts' bytes on the slowest
rank.""",
        columns=["precision", "tokens", "dense", "sparse", "grouped"],
    )  # fmt: skip
    return gated_shares(t, r, f"{CALL3}/report.md", HIST)


TABLES = (slot_grid_h100, step_floor_h100, one_token_shares_h100, gated_h100)
