"""docs/PERF.md's generated tables of the twenty-first session (2026-12-05, issue 28), on an H100
80GB HBM3 (the device asked for an H200 and lent an H100): where the grouped FP8 step's time goes
program by program, and fc2 split in K as a timing ablation.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table, fill
from perf_records import Records, over
from perf_specs_placed import WORDS

DAY = "2026-12-05-step-timeline"
HIST = "[issue 28][h-i28z]"
H100 = "**H100 80GB HBM3** (asked for an H200; the device lent an H100), driver 580.159.04"
LOG = f"{DAY}/call2/timeline.log"
NUM = r"([\d.]+)"
LINE = r"[^\n]*\n"


def _case(tokens: int, rank: int) -> str:
    return rf"T={tokens} seed=0 rank={rank} weight_bytes{LINE}"


def _block(split: int) -> str:
    """From a case's first line to split ``split``'s block."""
    return "".join(rf" split{s}:{LINE}(?:  {LINE}){{4}}" for s in range(1, split))


def _stage(r: Records, tokens: int, rank: int, split: int, stage: str, field: str):
    """``field`` of ``stage``'s stamp line in split ``split``'s block of the case."""
    before = rf"(?:  fc1: {LINE}  fc1 window{LINE})" if stage == "fc2" else ""
    pat = (_case(tokens, rank) + _block(split) + rf" split{split}:{LINE}" + before
           + rf"  {stage}: [^\n]*\b{field}={NUM}")  # fmt: skip
    return r.text(LOG, pat)


def _window(r: Records, tokens: int, rank: int, split: int, stage: str, what: str):
    """The window line's us (``what`` "us") or share of copy ("share")."""
    before = rf"(?:  fc1: {LINE}  fc1 window{LINE})" if stage == "fc2" else ""
    pat = (_case(tokens, rank) + _block(split) + rf" split{split}:{LINE}" + before
           + rf"  {stage}: {LINE}  {stage} window \(first wait exit -> last end\) ")  # fmt: skip
    pat += NUM + " us" if what == "us" else r"[\d.]+ us: [\d.]+ TB/s, (\d+)% of copy"
    return r.text(LOG, pat)


def _interleaved(r: Records, tokens: int, rank: int, split: int):
    return r.text(LOG, rf"T={tokens} seed=0 rank={rank} weight_bytes[^\n]*split{split}={NUM}")


def step_timeline(r: Records) -> Table:
    t = Table(
        name="step_timeline",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. Where the grouped FP8 step's time goes, program by
program: `PYTHONPATH=$PWD:$PWD/tools python3 docs/perf/{DAY}/scratch/timeline.py --tokens
16,32,64 --seeds 0 --rank 0,1 --reps 5 --splits 1,2,3` (second call). The arm's one-pass tile
(`grouped_dot._grouped_dot_fp8`, body for body) stamps %globaltimer at each program's start, past
its dependent-launch wait, past its K loop and at its end, with its SM; the arm's step (one CUDA
graph, L2 flushed), checked against the reference first with the stamps on; medians of five
replays. Times in us from fc1's first program start. "fc1 loops: half, 90%, last" = when half,
90% and all of fc1's programs had left their K loop; "window" = a stage's last program end minus
its first wait exit, and its weight bytes over that, over the copy ceiling measured at the call's
start (2.98 TB/s), as the tool printed them. fc2's programs sit resident from about 80 us (the
dependent launch) but wait for all of fc1: fc1's last tenth of programs ends over 7 us while the
SMs' other slots hold fc2's idle programs, and fc2, one wave, ends over about 14 us.""",
        columns=["tokens, rank", "step us (alone)", "fc1 loops: half, 90%, last", "fc1 window",
                 "fc1 of copy", "fc2 first wait exit", "fc2 window", "fc2 of copy"],
    )  # fmt: skip
    for tokens in (16, 32, 64):
        for rank in (0, 1):
            half = _stage(r, tokens, rank, 1, "fc1", "loop50")
            p90 = _stage(r, tokens, rank, 1, "fc1", "loop90")
            last = _stage(r, tokens, rank, 1, "fc1", "last_loop")
            step = r.text(LOG, _case(tokens, rank) + r" split1: step us \(alone, median of 5\) "
                          + NUM)  # fmt: skip
            t.row(f"{WORDS[tokens]}, rank {['zero', 'one'][rank]}", step,
                  fill("{}, {}, {}", half, p90, last),
                  _window(r, tokens, rank, 1, "fc1", "us"),
                  fill("{}%", _window(r, tokens, rank, 1, "fc1", "share")),
                  _stage(r, tokens, rank, 1, "fc2", "first_wait"),
                  _window(r, tokens, rank, 1, "fc2", "us"),
                  fill("{}%", _window(r, tokens, rank, 1, "fc2", "share")),
                  history=HIST)  # fmt: skip
    return t


def split_ablation(r: Records) -> Table:
    t = Table(
        name="split_ablation",
        caption=f"""\
{H100}. fc2 split in K, a timing ablation with wrong outputs on purpose (the same call as
`step_timeline`, `--splits 1,2,3`): each of fc2's programs reads a half or a third of K, twice or
three times as many programs, every part storing its partial sums over the same outputs; no
reduction is paid. The three steps timed interleaved (moebench's clock and rotation, one CUDA
graph each, L2 flushed), rank by rank, draw 0. Derived: "change" = split / whole - 1. Finer
pieces do not shorten fc2's window (`step_timeline`'s tool prints it per split): a split-K fc2
would not pay for its reduction, and is not built.""",
        columns=["tokens, rank", "fc2 whole, step us", "halves", "change", "thirds", "change "],
    )  # fmt: skip
    for tokens in (16, 32, 64):
        for rank in (0, 1):
            one, two, three = (_interleaved(r, tokens, rank, s) for s in (1, 2, 3))
            t.row(f"{WORDS[tokens]}, rank {['zero', 'one'][rank]}", one, two, over(two, one),
                  three, over(three, one), history=HIST)  # fmt: skip
    return t


TABLES = (step_timeline, split_ablation)
