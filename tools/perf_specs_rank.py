"""docs/PERF.md's generated tables of the eleventh H200 session (2026-12-03, issue 28): the
grouped decode's launches on each rank and several routing draws at 2 to 8 tokens, and FP8's tile
through TMA at 4 tokens.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table, fill
from perf_records import Figure, Records, derive, over
from perf_specs_rows import RUN_COLUMNS, run_rows
from perf_specs_stream import STEP_COLUMNS, step_rows

DAY = "2026-12-03-rank"
HIST = "[issue 28][h-i28e]"
DRAWS = range(6)
RANKS = (0, 1)
# The logs do not name their draw or rank (the file names do): the rows say them in words, draw
# A to F for `routing.seed` 0 (the scenario's) to 5.
DRAW_NAMES = "ABCDEF"
RANK_NAMES = ("first rank", "second rank")
POINTER = "dot m16 n64 k128 w4 s4 pdl"  # the FP8 tile with pointer loads, no register cap


def _step(r: Records, path: str, prec: str, tokens: int, arm: str, variant: str,
          what: str = "step_us") -> Figure:  # fmt: skip
    """``what`` (the step, or fc1 / fc2 alone) of one arm's (and launch's) row in a bench log."""
    return r.text(path, rf"^precision={prec} tokens={tokens} .* arm={arm} variant={variant} "
                        rf"weight_bytes=.* {what}=(\S+)")  # fmt: skip


def _has(r: Records, path: str, prec: str, tokens: int, variant: str) -> bool:
    """Whether the bench timed that launch there (a variant equal to the default is skipped)."""
    pattern = rf"^precision={prec} tokens={tokens} .* variant={variant} weight_bytes="
    return re.search(pattern, r.read(path), flags=re.MULTILINE) is not None


def _touched(r: Records, path: str, prec: str, tokens: int) -> Figure:
    """The rank's experts that its slots touch and the most slots on one, as "7 / 1"."""
    head = rf"^{prec} {tokens} tokens: \d+ local slots on "
    most = r.text(path, head + r".*at most (\d+)\)")
    return fill("{} / {}", r.text(path, head + r"(\d+) of"), most)


def _log(draw: int, rank: int) -> str:
    return f"{DAY}/call3/s{draw}_r{rank}.log"


def four_token_launch(r: Records) -> Table:
    t = Table(
        name="four_token_launch",
        caption="""\
FP8's grouped decode at 4 tokens a rank (one slot an expert at gpt-oss-20b EP2), its tile through
TMA capped at 128 registers (the arm's launch from 1c4511d) against pointer loads uncapped (the
launch before), each rank of gpt-oss-20b-decode-grouped and six routing draws (`routing.seed` 0,
the scenario's, to 5): `tools/bench_grouped_decode.py --tokens 4 --rank R --variants
dot:-:-:-:-:-:-:-:0:0` (third call; each step checked against the reference and the sentinels
before it is timed; the step of fc1, fc2 and the combine as one graph, L2 flushed before each
replay, us; fc1 and fc2 each alone). Draws A to F: `routing.seed` 0 to 5. "touched": the rank's
experts that hold a slot / the most slots on one. Derived: "change" = TMA / pointers - 1; "slowest
rank" rows = the larger of the two ranks' steps (a step of EP waits for its slowest rank); the mean
rows = the mean over those six or all twelve. The pointer tile wins where 5 or 7 experts are
touched, TMA where 4, 6, 9 or 10 are; on the slowest rank TMA's mean is lower and its worst much
lower, which is why the arm takes it. sparse_decode's step is the policy's choice at this count in
4 of the 6 draws.""",
        columns=["draw, rank", "touched", "sparse", "grouped, TMA (now)", "grouped, pointers "
                 "(before)", "change", "fc1 / fc2 alone, TMA", "fc1 / fc2 alone, pointers"],
    )  # fmt: skip
    tma: dict[tuple[int, int], Figure] = {}
    ptr: dict[tuple[int, int], Figure] = {}
    for draw in DRAWS:
        for rank in RANKS:
            path = _log(draw, rank)
            at = lambda arm, v, w="step_us": _step(r, path, "w8a16", 4, arm, v, w)  # noqa: E731
            tma[draw, rank] = at("grouped_decode", "default")
            ptr[draw, rank] = at("grouped_decode", POINTER)
            t.row(f"{DRAW_NAMES[draw]}, {RANK_NAMES[rank]}", _touched(r, path, "w8a16", 4),
                  at("sparse_decode", "default"), tma[draw, rank], ptr[draw, rank],
                  over(tma[draw, rank], ptr[draw, rank]),
                  fill("{} / {}", at("grouped_decode", "default", "fc1_us"),
                       at("grouped_decode", "default", "fc2_us")),
                  fill("{} / {}", at("grouped_decode", POINTER, "fc1_us"),
                       at("grouped_decode", POINTER, "fc2_us")),
                  history=HIST)  # fmt: skip
    slow_t, slow_p = [], []
    for draw in DRAWS:
        slow_t.append(derive(max, "{:.2f}", tma[draw, 0], tma[draw, 1]))
        slow_p.append(derive(max, "{:.2f}", ptr[draw, 0], ptr[draw, 1]))
        t.row(f"{DRAW_NAMES[draw]}, slowest rank", "", "", slow_t[-1], slow_p[-1],
              over(slow_t[-1], slow_p[-1]), "", "", history=HIST)  # fmt: skip
    mean = lambda *v: sum(v) / len(v)  # noqa: E731
    for label, a, b in (("mean, slowest rank", slow_t, slow_p),
                        ("mean, all twelve", list(tma.values()), list(ptr.values()))):  # fmt: skip
        ma, mb = derive(mean, "{:.2f}", *a), derive(mean, "{:.2f}", *b)
        t.row(label, "", "", ma, mb, over(ma, mb), "", "", history=HIST)
    return t


CALL1 = ((f"{DAY}/call1/rank0.log", "A, first rank"), (f"{DAY}/call1/rank1.log", "A, second rank"),
         (f"{DAY}/call1/seed1_rank1.log", "B, second rank"))  # fmt: skip
LAUNCHES = {
    "w8a16": ("dot m16 n64 k128 w4 s4 pdl tma r128", POINTER, "gemv m1 n2 k1024 w1 pdl"),
    "w4a16": ("dot m16 n64 k128 w4 s4 pdl r128", POINTER, "gemv m1 n16 k1024 w4 pdl"),
}


def rank_launches(r: Records) -> Table:
    t = Table(
        name="rank_launches",
        caption="""\
The grouped decode's launches at 2, 4 and 8 tokens on each rank (first call, 8ed42ee's arm: FP8's
tile with pointer loads at 4 tokens): `tools/bench_grouped_decode.py --tokens 2,4,8,32,64 --rank R
--variants dot:-:-:-:-:-:-:-:128:1,dot:-:-:-:-:-:-:-:0:0,gemv --variant-tokens 2,4,8` (and
`--scenario docs/perf/2026-12-03-mx-fold/scratch/seed1.yaml` for draw B), draws and ranks named as
in `four_token_launch`, the step as in `four_token_launch`, us. "tile, capped": 128 registers a
thread (FP8 through TMA); "tile, uncapped": no cap (FP8 through pointers); "GEMV": the one-slot
GEMV. An empty cell is the arm's own launch (its "default" column) or a launch equal to it. The
GEMV loses wherever the tile runs (2 tokens FP8, 4 and 8 both formats) but MXFP4 at 4 tokens on
draw A's second rank (66.4 against 71.2, 7 experts with one slot each); FP8 at 4 tokens on the
second rank is where the tile through TMA won (draw B by 10%), the lead `four_token_launch` follows
over six draws. MXFP4 at 2 tokens keeps the GEMV: the tile won on draw A's first rank (42.1 against
44.6) and lost by 7-20% on the others.""",
        columns=["precision, tokens, draw, rank", "sparse", "grouped (default)", "tile, capped",
                 "tile, uncapped", "GEMV"],
    )  # fmt: skip
    for prec in ("w8a16", "w4a16"):
        for tokens in (2, 4, 8):
            for path, label in CALL1:
                cells = [
                    _step(r, path, prec, tokens, "grouped_decode", v)
                    if _has(r, path, prec, tokens, v) else ""
                    for v in LAUNCHES[prec]
                ]  # fmt: skip
                name = "FP8" if prec == "w8a16" else "MXFP4"
                head = r.text(path, rf"^{prec} ({tokens}) tokens: ")
                t.row(fill(f"{name}, {{}}, {label}", head),
                      _step(r, path, prec, tokens, "sparse_decode", "default"),
                      _step(r, path, prec, tokens, "grouped_decode", "default"), *cells,
                      history=HIST)  # fmt: skip
    return t


RUN = f"{DAY}/gpt-oss-20b-decode-grouped.md"


def rank_run(r: Records) -> Table:
    t = Table(
        name="rank_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (`tools/gpu_run.sh`, EP2
simulated, both ranks, 13 blocks of 20; 184 s) on 1c4511d's tree (FP8's tile through TMA at 4
tokens; the run manifest names 8ed42ee, dirty: the device's copy of git's HEAD lagged): every
correctness gate and integrity check passed (952 pass, 112 skip, none failed;
`gpt-oss-20b-decode-grouped.run-tail.txt`). The `ffn` regime, median us of the slowest rank as
`moebench compare` printed them. Derived: "MXFP4 / FP8, best arm" = the faster of MXFP4's sparse
and grouped steps over the faster of FP8's. The scenario's routing is draw A of
`four_token_launch`, where the two launches are within 3%: FP8's grouped step at 4 tokens 79.58 us
against 79.22 in the tenth session's run (`two_token_run`), every other cell within about 1% of it;
grouped FASTER than dense at every count in both formats; the policy unchanged (FP8 sparse up to 4
tokens, MXFP4 up to 2 and the SAME at 4, grouped above).""",
        columns=RUN_COLUMNS,
    )
    return run_rows(r, t, RUN, history=HIST)


STEP = f"{DAY}/step/gpt-oss-20b-decode-step-grouped.md"


def rank_step(r: Records) -> Table:
    t = Table(
        name="rank_step",
        caption="""\
`scenarios/gpt-oss-20b-decode-step-grouped.yaml` through `moebench run` (`tools/gpu_run.sh`, 355
s; fifth call) on 1252c1c's tree (FP8's tile through TMA at 4 tokens; the run manifest names
8ed42ee, dirty, as in `rank_run`): the step regime, gpt-oss-20b's 24 MoE layers, each with its own
weights and a seeded uniform routing per step and layer, EP2 simulated, one step = the sum over
layers of each layer's slowest rank, so each step crosses 24 routing draws; 40 steps a case;
every correctness gate and integrity check of the regime passed (410 pass, 50 skip). P50 of the
step with its exact 95% order-statistic interval, us; change against dense_decode, paired by
step, Bonferroni-corrected. Derived as in `fold_step`. FP8's grouped step at 4 tokens: P50
1,892.5 us against 1,903.6 in the ninth session's run (`fold_step`, the pointer tile), P90
1,932.9 against 1,974.3: within the intervals, the tail lower. The policy moved at that count:
FP8's sparse step is now the SAME as grouped at 4 tokens (-1.7%; the ninth session's run had
sparse the faster), sparse FASTER only at one token in both formats, grouped from 4 (MXFP4) or
16 (FP8) on.""",
        columns=STEP_COLUMNS,
    )
    return step_rows(r, t, STEP, history=HIST)


TABLES = [four_token_launch, rank_launches, rank_run, rank_step]
