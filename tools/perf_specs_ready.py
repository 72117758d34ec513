"""docs/PERF.md's generated tables of the eighteenth H200 session (2026-12-05, issue 28): the
one-token sparse FP8 step with fc2 waiting per slot on fc1 (a programmatic dependent launch and
ready flags), measured and not shipped.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_earlyloads import _early_step
from perf_specs_rotated import _cells

DAY = "2026-12-05-ready-slots"
HIST = "[issue 28][h-i28rs]"
CALL1 = f"{DAY}/call1/ready.log"
CALL2 = f"{DAY}/call2/ready.log"
EMPTY = (1, 0)  # the draw and rank with no local slot at one token (slots=0 in both logs)


def ready_slots(r: Records) -> Table:
    t = Table(
        name="ready_slots",
        caption="""\
The one-token sparse FP8 step with fc2 waiting per (token, slot) on fc1 instead of on fc1's whole
grid (`scratch/ready_gemv.py`: fc2 a programmatic dependent launch; each fc1 program counts itself
after its stores, the one completing a slot's count publishes its ready flags; each fc2 program
loads its weight rows, polls its slot's flag, then reads the activation; the last fc2 program
resets the cells), against the arm's step in the same call. `PYTHONPATH=$PWD:$PWD/tools:DIR
python3 DIR/ready_bench.py --tokens 1 --seeds 0,1,2,3,4,5` (DIR the records' scratch/; first
call on 079a4ac, second on 43f6805). Each step checked and bitwise the arm's before it
was timed (one CUDA graph, L2 flushed); a hand-over check first alternated the token between two
draws from one step to the next, 40 steps a rank, each output the arm's for its own token and the
cells back at zero. In the first call the last fc1 program released its 32 flag copies one at a
time (33 fences in its SASS), in the second all at once; in both, a slot's count was one address
(its 2,880 atomics one after another in the L2; sub-counts came after the second call, not
timed). "After the wait": fc2 loads its weights after its poll. Derived: a time = the mean over
six routing draws of the slower rank's step, us; "change" = kind / the arm - 1; "faster in" =
the draws whose slower rank's step is below the arm's. Slower in every draw: not shipped.""",
        columns=["the flags", "fc2's weights", "the arm", "hand-over", "change", "faster in"],
    )  # fmt: skip
    rows = (("one at a time", "before the wait", CALL1, "ready"),
            ("together", "before the wait", CALL2, "ready"),
            ("together", "after the wait", CALL2, "late"))  # fmt: skip
    for flags, weights, log, kind in rows:
        t.row(flags, weights, *_cells(r, log, "w8a16", 1, 6, (kind,)), history=HIST)
    return t


def ready_empty(r: Records) -> Table:
    t = Table(
        name="ready_empty",
        caption="""\
The same calls' step on the one rank of the six draws with no local slot at one token (rank 0 of
the second routing draw: every GEMV program leaves after its routing load; nothing
is counted and no program waits), from the same logs: the arm's fc1 and fc2 each timed alone and
its step, the hand-over's fc1 and fc2 launches timed together (fc2 cannot run without the fc1
before it) and its step. Derived: "the two" = the arm's fc1 + fc2; "change" = the hand-over's
launches / the two - 1. With no work at all the two launches take about 4 us more than the arm's:
the cost is the dependent launch over 11,520 + 5,760 one-warp programs (each of fc1's asks for
fc2's launch at its start), not the hand-over; issue 19 measured FP8's sparse step with the
dependent launch slower too (34.5-36.4 against 33.4 us, without a reading of why).""",
        columns=["the flags", "the arm's fc1 alone", "fc2 alone", "the two",
                 "hand-over fc1 and fc2", "change", "the arm's step", "hand-over step"],
    )  # fmt: skip
    seed, rank = EMPTY
    for flags, log in (("one at a time", CALL1), ("together", CALL2)):
        one = lambda kind, what: _early_step(r, log, "w8a16", 1, seed, rank, kind, what)  # noqa: E731
        fc1, fc2 = one("arm", "fc1_us"), one("arm", "fc2_us")
        two = derive(lambda a, b: a + b, "{:.2f}", fc1, fc2)
        both = one("ready", "fc1_us")
        t.row(flags, fc1, fc2, two, both, over(both, two), one("arm", "step_us"),
              one("ready", "step_us"), history=HIST)  # fmt: skip
    return t


TABLES = (ready_slots, ready_empty)
