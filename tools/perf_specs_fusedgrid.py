"""docs/PERF.md's generated table of the thirteenth H200 session (2026-12-04, issue 28): the
grouped decode's fc1 and fc2 tiles in one non-persistent, ticketed launch against the arm's two
launches (measured slower; not shipped).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Derived, Figure, Records, derive, over

DAY = "2026-12-04-fused-grid"
HIST = "[issue 28][h-i28g]"
LOG = f"{DAY}/call3/fused2.log"
PRECISIONS = (("w8a16", "FP8"), ("w4a16", "MXFP4"))
mean = lambda *v: sum(v) / len(v)  # noqa: E731


def _step(r: Records, prec: str, tokens: int, seed: int, rank: int, kind: str) -> Figure:
    """The step time of one launch (``kind``: "arm" or "fused KIND") on one rank of one draw."""
    head = rf"^{prec} T={tokens} seed={seed} rank={rank} slots=\d+ touched=\d+ "
    return r.text(LOG, head + rf"{kind}: ok=True bitwise=True \S+ diff=\S+ step_us=(\S+)")


def _mean_slowest(r: Records, prec: str, tokens: int, kind: str) -> Derived:
    """The mean over the two draws of the slower rank's step."""
    slowest = [derive(max, "{:.2f}", *(_step(r, prec, tokens, seed, k, kind) for k in (0, 1)))
               for seed in (0, 1)]  # fmt: skip
    return derive(mean, "{:.1f}", *slowest)


def fused_grid(r: Records) -> Table:
    t = Table(
        name="fused_grid",
        caption="""\
The grouped decode's step (fc1, fc2, combine; one CUDA graph, L2 flushed before each replay, us)
as the arm launches it (fc1 and fc2 two launches of the one-pass tile, 3 stages, 80 registers)
against fc1 and fc2 in one launch: one pass a program, each program's role (an fc1 or an fc2 tile)
taken from an atomic ticket so that no fc2 program starts before every fc1 program has, an fc2
program waiting on a counter of its pass's fc1 programs. First form: the two passes inlined,
capped at 80 registers a thread (6 programs an SM; triton's n_spills 14-24 in the log) or at 88 (5
programs an SM; n_spills 6-8); second form: one weight loop whose operands the role selects
(n_spills 18-24 at 80; MXFP4 only here: FP8's second form, its weights through one descriptor over
both tensors, was not bitwise the arm's on the GPU and was not timed).
`PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/fused_bench.py --tokens 64,32,16 --seeds 0,1 --rank
0,1 --kinds pdl,pdl-r88,one-pdl,one-pdl-r88` (third call, DIR the records' scratch/); each step
checked against the reference and the sentinels and each fused step compared bit for bit with
the arm's before timing and again after 200 more replays (every timed one equal). Derived: a cell
= the mean over two routing draws of the slower rank's step (an EP step waits for its slowest
rank); "change" = fused / arm - 1. The one launch is slower from 32 tokens in every form, so the
gap to the 85% target is not the boundary between the two launches.""",
        columns=["precision", "tokens", "arm (two launches)", "one launch, 80 registers",
                 "change", "88 registers", "change", "one loop, 80 registers", "change"],
    )  # fmt: skip
    for prec, name in PRECISIONS:
        for tokens in (16, 32, 64):
            arm = _mean_slowest(r, prec, tokens, "arm")
            cells = [arm]
            for kind in ("fused pdl", "fused pdl-r88"):
                v = _mean_slowest(r, prec, tokens, kind)
                cells += [v, over(v, arm)]
            if prec == "w4a16":
                v = _mean_slowest(r, prec, tokens, "fused one-pdl")
                cells += [v, over(v, arm)]
            else:
                cells += ["not bitwise", "-"]
            count = r.text(LOG, rf"^{prec} T=({tokens}) seed=0 rank=0 .* arm: ")
            t.row(name, count, *cells, history=HIST)
    return t


TABLES = [fused_grid]
