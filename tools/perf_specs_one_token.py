"""docs/PERF.md's generated tables of the twenty-fourth session (2026-12-06, issue 28), all on an
H100 80GB HBM3 (asked for an H200; the device lent H100s): the copy shares and gated runs on the
arms as they stand, MXFP4's looping tile waiting expert by expert (taken), and the one-token
sparse FP8 step: its program timeline, and two launches measured slower (local slots first, fc2
on 4 rows).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, over
from perf_specs_confirm import RUN_COLUMNS, copy_share_rows, run_rows
from perf_specs_expert_ready import _faster, _mean
from perf_specs_placed import WORDS

DAY = "2026-12-06-one-token"
HIST = "[issue 28][h-i28ot]"
H100 = "**H100 80GB HBM3** (asked for an H200; the device lent H100s), driver 580.159.04"
MX_LOOP = "dot m16 n64 k128 w4 s4 pdl r128 eb rot"
DRAWS = ("A", "B", "C", "D")  # routing.seed 0-3
KINDS = {"arm": "the arm", "local_first": "local pairs first", "fc2_4rows": "fc2 on four rows",
         "fc2_4rows_quads": "fc2 on four rows, quads", "fc2_peel2": "fc2 two steps early",
         "fc2_peel2_r64": "fc2 two steps early, capped"}  # fmt: skip


def mxfp4_loop_ready(r: Records) -> Table:
    t = Table(
        name="mxfp4_loop_ready",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. MXFP4's looping tile (the grouped arm's launch at 4 and
8 tokens) with fc2 waiting for fc1 expert by expert (`Launch.expert_ready`) against the whole-grid
dependent-launch wait, gpt-oss-20b EP2: `tools/bench_grouped_decode.py OUT --precision w4a16
--tokens 4,8 --seeds S --rank 0,1 --variants dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:X
--variant-tokens 4,8`, X 1 on the tree where the whole-grid wait was the default (call 0, the
twenty-third session's prepared `docs/perf/2026-12-06-expert-ready/scratch/next_call.sh`, draws
A, B) and X 0 on the tree where the wait expert by expert is (call 3, draws C, D). Each step
checked against the reference and the sentinels first (every row passed), then timed
interleaved, one CUDA graph, L2 flushed. Derived: a time = the mean over the draws of the slower
rank's step, us; "change" = expert by expert / whole-grid - 1; "faster in" = the draws whose
expert-by-expert step is below the whole-grid one's. Faster in all eight: now the default
(`grouped_launch.EXPERT_READY_FROM_SLOTS_PER_EXPERT`, one slot an expert in both formats).""",
        columns=["call", "tokens", "draws", "whole-grid wait", "expert by expert", "change",
                 "faster in"],
    )  # fmt: skip
    for call, log, seeds, whole, ready in (
        ("call0", "call0/ready_mxfp4_loop.log", (0, 1), "default", MX_LOOP + " ready-signal"),
        ("call3", "call3/whole_mxfp4_loop.log", (2, 3), MX_LOOP, "default"),
    ):
        for tokens in (4, 8):
            a, mean_a = _mean(r, log, "w4a16", tokens, seeds, whole, day=DAY)
            b, mean_b = _mean(r, log, "w4a16", tokens, seeds, ready, day=DAY)
            faster = _faster(b, a)
            draws = " and ".join(DRAWS[s] for s in seeds)
            t.row(call, WORDS[tokens], draws, mean_a, mean_b, over(mean_b, mean_a), faster,
                  history=HIST)  # fmt: skip
    return t


def _per_draw_ab(r: Records, t: Table, log: str, prec: str, kinds: tuple[str, ...],
                 counts: tuple[int, ...], names: dict = KINDS, hist: str = HIST,
                 draws: int = 4) -> None:  # fmt: skip
    """Rows of a `sparse_ab` log's summary ("slowest rank per draw"): each kind's slower rank per
    draw (the first ``draws``: A-D by default) and their mean, and the mean's change against the
    arm's; ``names`` the kinds' words in the table, ``hist`` its history link."""
    for tokens in counts:
        base = None
        for kind in ("arm", *kinds):
            head = rf"^  {prec} {tokens:2d} {kind}: "
            per = [r.text(log, head + r"(?:\S+ ){" + str(i) + r"}(\S+) ") for i in range(draws)]
            m = r.text(log, head + r"[^\n]*mean (\S+)$")
            base = base or m
            change = over(m, base) if kind != "arm" else "the baseline"
            t.row("FP8" if prec == "w8a16" else "MXFP4", WORDS[tokens], names[kind], *per, m,
                  change, history=hist)  # fmt: skip


def local_first(r: Records) -> Table:
    t = Table(
        name="local_first",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The sparse arm's step (fc1, fc2, combine; the
dependent launches as the arm has them) against the same step with its GEMV serving the local
(token, slot) pairs first in launch order (`sparse_gemv(local_first=True)`,
`gemv_parts.program_expert`: each program reads the whole routing and takes the (t K + k)-th local
pair; the programs past their count leave last), gpt-oss-20b EP2, four draws A-D, both ranks:
`PYTHONPATH=$PWD:$PWD/tools python3 docs/perf/{DAY}/scratch/local_bench.py --precision P` (first
call). Each step checked and compared bit for bit with the arm's first (all bitwise), then timed
interleaved (one CUDA graph, L2 flushed). Cells: the slower rank's step per draw and their mean,
us, as the log prints them; "change" = the kind's mean / the arm's - 1. Slower at every count in
both formats (FP8 +3.9% in draw A, rank 0, whose third slot is remote, the case it was built
for): a remote slot's programs between the local ones cost less than every program's read of the
whole routing. Built and kept off (`sparse_launch.default_local_first`). Corrected in the
twenty-fifth session: `sparse_ab.steps_with`, which built the local-first kind, had called its
GEMV with natural MXFP4 weights and the broadcast token load at every count, where the arm reads
rotated weights and quads (MXFP4) and quads from 2 tokens (FP8); so the MXFP4 rows and FP8's at
2 and 4 tokens timed other launches than the arm's besides local-first, and only FP8's one-token
row compares like with like (the launches the same there).""",
        columns=["format", "tokens", "kind", "A", "B", "C", "D", "mean", "change"],
    )  # fmt: skip
    for prec in ("w8a16", "w4a16"):
        _per_draw_ab(r, t, f"{DAY}/call1/local_{prec}.log", prec, ("local_first",), (1, 2, 4))
    return t


def fc2_rows(r: Records) -> Table:
    t = Table(
        name="fc2_four_rows",
        caption=f"""\
{H100}. The one-token sparse FP8 step with fc2 on 4 rows a program at 512 bytes a row a step
(2,160 local programs at three local slots, one wave) instead of 2 rows at 1,024 (4,320, more than
the 4,224 one-warp programs an H100 holds), fc1 unchanged, the token through the row-broadcast
tile or as quads: `python3 docs/perf/{DAY}/scratch/fc2_rows_bench.py` (fourth call; four draws,
both ranks; checked, bitwise the arm's here). Cells as in `local_first`. Faster only in draw A
(three local slots) with quads, -1.3%; slower on the mean: not taken.""",
        columns=["format", "tokens", "kind", "A", "B", "C", "D", "mean", "change"],
    )  # fmt: skip
    _per_draw_ab(r, t, f"{DAY}/call4/fc2_rows.log", "w8a16", ("fc2_4rows", "fc2_4rows_quads"),
                 (1,))  # fmt: skip
    return t


def fc2_peel_two(r: Records) -> Table:
    t = Table(
        name="fc2_peel_two",
        caption=f"""\
{H100}. The one-token sparse FP8 step with fc2 loading its first two K steps' weights before its
dependent-launch wait (`sparse_gemv(pdl_peel=2)`, the same bits) instead of one, so that its
programs, resident from about 17 us while they wait for fc1 (`one_token_timeline`), hold two
thirds of their bytes when the wait ends: 80 registers (25 programs an SM) or capped at 64 (32 an
SM, 16 bytes of stack; sm_90a offline), fc1 unchanged: `python3
docs/perf/{DAY}/scratch/fc2_peel_bench.py` (sixth call; four draws, both ranks; checked, bitwise
the arm's). Cells as in `local_first`. Uncapped: the mean the arm's within 0.2%, faster in draws C
and D, slower in A and B; capped: slower. Not taken (`pdl_peel=2` kept as a launch option).""",
        columns=["format", "tokens", "kind", "A", "B", "C", "D", "mean", "change"],
    )  # fmt: skip
    _per_draw_ab(r, t, f"{DAY}/call6/fc2_peel.log", "w8a16", ("fc2_peel2", "fc2_peel2_r64"),
                 (1,))  # fmt: skip
    return t


TIMELINE = f"{DAY}/call2/timeline.log"
CASES = ((0, 0), (0, 1), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1))  # every case with a local slot


def one_token_timeline(r: Records) -> Table:
    t = Table(
        name="one_token_timeline",
        caption=f"""\
{H100}, copy ceiling 2.98 TB/s (the log's first line). The one-token sparse FP8 step program by
program: the arm's GEMV body for body with %globaltimer stamps, swapped in while the arm's step
(fc1, fc2, combine; one CUDA graph, L2 flushed) is captured, checked against the reference first:
`PYTHONPATH=$PWD:$PWD/tools python3 docs/perf/{DAY}/scratch/gemv_timeline.py --tokens 1 --seeds
0,1,2,3 --rank 0,1` (second call). Times in us from fc1's first program start, the median of five
replays: "local slots" the routing's slots in launch order (1 local); fc1's last program start
(11,520 programs, 2,880 a slot) and last end; fc2's first program start, first exit from its
dependent-launch wait, last program start and last end; each stage's "window" (its weight bytes
over last end - first wait exit) against copy, as the log prints it; the step by events (with the
stamps). The case with no local slot (B, rank 0) is in the log. Read: fc1's programs start at
about 1.2 ns each while the SMs are full, so its last starts 13.7 us in at three slots; fc2, a
dependent launch, starts 2.8-3.4 us after fc1's last program start, its wait ends 0.4-2.1 us
after fc1's last end (1.3 at three slots), and at three slots its last programs (4,320 local,
more than an H100 holds at once) start about 5 us after that. Inside their windows fc1 streams
at 76-87% of copy and fc2 at
57-94%; the step's remaining time is these edges, the launch and the combine.""",
        columns=["draw, rank", "local slots", "step", "fc1 last start", "fc1 last end",
                 "fc2 first start", "fc2 wait exit", "fc2 last start", "fc2 last end",
                 "fc1 window", "fc2 window"],
    )  # fmt: skip
    for seed, rank in CASES:
        case = rf"^T=1 seed={seed} rank={rank} local=\d+: [^\n]*\n"
        fc1 = case + r"  fc1: [^\n]*"
        fc2 = case + r"[^\n]*\n[^\n]*\n  fc2: [^\n]*"
        cells = [
            r.text(TIMELINE, rf"^T=1 seed={seed} rank={rank} local=(\d+): "),
            r.text(TIMELINE, rf"^T=1 seed={seed} rank={rank} local=\d+: [^\n]* (\S+)$"),
            r.text(TIMELINE, fc1 + r" last_start=(\S+) "),
            r.text(TIMELINE, fc1 + r" last_end=(\S+) "),
            r.text(TIMELINE, fc2 + r" first_start=(\S+) "),
            r.text(TIMELINE, fc2 + r" first_wait=(\S+) "),
            r.text(TIMELINE, fc2 + r" last_start=(\S+) "),
            r.text(TIMELINE, fc2 + r" last_end=(\S+) "),
            r.text(TIMELINE, case + r"[^\n]*\n  fc1 window [^\n]* (\d+%) of copy"),
            r.text(TIMELINE, fc2 + r"\n  fc2 window [^\n]* (\d+%) of copy"),
        ]
        t.row(f"{DRAWS[seed]}, rank {WORDS.get(rank, 'zero')}", *cells, history=HIST)
    return t


def copy_share_now(r: Records) -> Table:
    t = Table(
        name="copy_share_now",
        caption=f"""\
{H100}. Issue 28's copy-rate targets on the arms as the twenty-third session left them (call 0, the
prepared `docs/perf/2026-12-06-expert-ready/scratch/next_call.sh`: `tools/bench_grouped_decode.py
OUT --precision P --tokens 1,32,64 --seeds 0,1 --rank 0,1`), on another H100 than that session's
(copy ceiling 2.99 TB/s, measured by the bench at its start). "of copy" is the bench's: the step's
weight bytes (the touched experts once) over its time, over that ceiling, rank 0 of draw A, then the
mean over draws A and B of the slower rank's step. Targets: at one token the best arm (FP8: sparse)
at 75% or more, missed (70%); at 32 and 64 tokens the grouped step at 85% or more, met for FP8 on
this H100 (89% and 88%; every draw and rank 86-89%, against 91-94% the session before, at 145.0 and
147.3 us), missed for MXFP4 (58% and 56%).""",
        columns=["precision", "tokens", "arm", "step us, draw 0 rank 0", "of copy",
                 "the slower rank, mean of two draws"],
    )  # fmt: skip
    copy_share_rows(t, r, f"{DAY}/call0/copy_share_{{}}.log", (0, 1), HIST)
    return t


def one_token_run(r: Records) -> Table:
    t = Table(
        name="one_token_run",
        caption=f"""\
{H100}. The gated scenario on MXFP4's looping tile waiting expert by expert (third call, the
arms as they now stand: `DEADLINE=... PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`, 201 s; every gate and integrity check passed, 952
pass and 112 skip, `call3/checks_count.txt`): the step (`ffn`, one CUDA graph, the slowest rank's
median over 13 blocks, us) of each arm. Derived as in `expert_ready_run`. Against the same
scenario at the session's start (call 0, the whole-grid wait on MXFP4's looping tile; 952 pass,
112 skip; `call0/report.md`), MXFP4 grouped went from 77.28 to 67.68 us at 4 tokens and from
104.2 to 101.0 at 8, where it is now the best MXFP4 arm. Grouped beats dense and MXFP4 beats FP8
at every count.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, f"{DAY}/call3/report.md", HIST)
    return t


TABLES = (copy_share_now, mxfp4_loop_ready, one_token_run, one_token_timeline, local_first,
          fc2_rows, fc2_peel_two)  # fmt: skip
