"""docs/PERF.md's generated tables of the twenty-fifth session (2026-12-06, issue 28), all on an
H100 80GB HBM3 (asked for an H200; the device lent H100s): the sparse GEMV's fc2 waiting for fc1
expert by expert (measured slower, taken out again), the counting's cost taken apart on the
one-token timeline, and today's copy shares and gated run on the arms as they stand.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from statistics import mean

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_confirm import RUN_COLUMNS, copy_share_rows, run_rows
from perf_specs_one_token import DRAWS, _per_draw_ab
from perf_specs_placed import WORDS

DAY = "2026-12-06-sparse-ready"
HIST = "[issue 28][h-i28sr]"
H100 = "**H100 80GB HBM3** (asked for an H200; the device lent H100s), driver 580.159.04"
KINDS = {"arm": "the arm", "ready": "expert by expert", "ready_peel2": "expert by expert, two "
         "steps early", "pdl_local": "dependent launch, trigger once local",
         "local_first": "local pairs first"}  # fmt: skip


def sparse_ready(r: Records) -> Table:
    t = Table(
        name="sparse_ready",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The sparse arm's FP8 step (fc1, fc2, combine) against
the same step with fc2 waiting for fc1 expert by expert (`expert_ready`'s counters, as the grouped
arm's tile has them: each fc1 program counts itself started before it lets fc2 launch and
finished after its stores; `sparse_gemv(expert_ready=...)` at 951e170's tree), with fc1's first
step's weights before its count or its first two (`ready_peel2`), and, from 2 tokens, where the
arm has plain launches, the one-token dependent launch alone (`pdl_local`; at one token it is the
arm's own launch, so its row there shows the noise): `PYTHONPATH=$PWD:$PWD/tools:DIR python3
DIR/ready_bench.py` (DIR docs/perf/{DAY}/scratch; first call; four draws, both ranks). Each step
checked and compared bit for bit with the arm's first (all bitwise), then timed interleaved (one
CUDA graph, L2 flushed). Cells: the slower rank's step per draw and their mean, us, as the log
prints them; "change" = the kind's mean / the arm's - 1. The wait expert by expert is slower at
every count and in every draw (the eighteenth session's per-slot flags were too, `ready_slots`):
taken out again. `pdl_local` at 2 and 4 tokens is faster on the mean, in three draws of four
each; unchanged, as in `pdl_one_token`.""",
        columns=["format", "tokens", "kind", "A", "B", "C", "D", "mean", "change"],
    )  # fmt: skip
    _per_draw_ab(r, t, f"{DAY}/call1/ready_w8a16.log", "w8a16",
                 ("pdl_local", "ready", "ready_peel2"), (1, 2, 4), KINDS, HIST)  # fmt: skip
    return t


TIMELINE = f"{DAY}/call2/timeline.log"
ABLATIONS = {"arm": "the arm", "ready": "expert by expert, one line",
             "done_only": "done count alone, a line each", "started_only":
             "started count alone, a line each", "striped": "both, a line each"}  # fmt: skip


def ready_ablation(r: Records) -> Table:
    t = Table(
        name="ready_ablation",
        caption=f"""\
{H100}, copy ceiling as the log's first line gives it. Where the wait expert by expert loses, on
the one-token FP8 step program by program (`{DAY}/scratch/ready_timeline.py`, the twenty-fourth
session's stamped GEMV with the counters; second call: `--tokens 1 --seeds 0,2 --rank 0 --kinds
arm,ready,done_only,started_only,striped`; each step checked against the reference first). "one
line": the package's int32 [2, E] counters, every fc1 program's two atomics on one 128-byte line
(8,640 programs at three local slots); "a line each": each (count, expert, stripe) counter on a
line of its own, fc1's program of row block n on stripe n mod 32; "done count alone": fc1 counts
itself finished after its stores (barrier, release atomic) and fc2 keeps the whole-grid wait;
"started count alone": fc1 counts itself started and lets fc2 launch only after, fc2 the whole-grid
wait; "both": the exact form, fc2 polling its expert's 32 stripes of each count. Times in us from
fc1's first program start, the median of five replays, as the log prints them; the step by events
(with the stamps). Read: the counting alone, with no contention and no waiting, costs more than
the overlap could return (fc1 stops streaming 1.35 us before fc2's wait ends in the arm's step):
the done count lengthens each fc1 program by its store round trip (life 6.4 to 7.3 us, the step
+1.8 us at three slots), the started count holds the trigger a round trip (+1.1 us); on one line
the atomics queue (fc1's last end 20.4 to 38.6 us); on a line each, fc2's polling of 64 lines
loads the L2 that fc1's counts go through.""",
        columns=["draw, rank", "kind", "step", "fc1 life", "fc1 last end", "fc2 first wait exit",
                 "fc2 last end", "fc1 window"],
    )  # fmt: skip
    for seed in (0, 2):
        for kind, words in ABLATIONS.items():
            case = rf"^T=1 seed={seed} rank=0 local=\d+ {kind}: [^\n]*\n"
            fc1 = case + r"  fc1: [^\n]*"
            fc2 = case + r"[^\n]*\n[^\n]*\n  fc2: [^\n]*"
            cells = [
                r.text(TIMELINE, rf"^T=1 seed={seed} rank=0 local=\d+ {kind}: [^\n]* (\S+)$"),
                r.text(TIMELINE, fc1 + r" life_us=(\S+) "),
                r.text(TIMELINE, fc1 + r" last_end=(\S+) "),
                r.text(TIMELINE, fc2 + r" first_wait=(\S+) "),
                r.text(TIMELINE, fc2 + r" last_end=(\S+) "),
                r.text(TIMELINE, case + r"[^\n]*\n  fc1 window [^\n]* (\d+%) of copy"),
            ]
            draw = "A, rank zero" if seed == 0 else "C, rank zero"
            t.row(draw, words, *cells, history=HIST)
    return t


def copy_share_today(r: Records) -> Table:
    t = Table(
        name="copy_share_today",
        caption=f"""\
{H100}. Issue 28's copy-rate targets on the arms as they stand at the end of the twenty-fifth
session (third call: `tools/bench_grouped_decode.py OUT --precision P --tokens 1,32,64 --seeds 0,1
--rank 0,1`; copy ceiling 2.98 TB/s, measured by the bench at its start). "of copy" is the bench's:
the step's weight bytes (the touched experts once) over its time, over that ceiling, rank 0 of draw
A, then the mean over draws A and B of the slower rank's step. Targets: at one token the best arm
(FP8: sparse) at 75% or more, missed (70%); at 32 and 64 tokens the grouped step at 85% or more,
met for FP8 on this H100 (90% and 89%), missed for MXFP4 (58% and 56%); as the session before
(`copy_share_now`).""",
        columns=["precision", "tokens", "arm", "step us, draw 0 rank 0", "of copy",
                 "the slower rank, mean of two draws"],
    )  # fmt: skip
    copy_share_rows(t, r, f"{DAY}/call3/copy_share_{{}}.log", (0, 1), HIST)
    return t


def sparse_ready_run(r: Records) -> Table:
    t = Table(
        name="sparse_ready_run",
        caption=f"""\
{H100}. The gated scenario on the arms as they stand at the end of the session (third call:
`DEADLINE=... PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`, 199 s; every gate and integrity check passed, 952
pass and 112 skip, `call3/checks_count.txt`): the step (`ffn`, one CUDA graph, the slowest rank's
median over 13 blocks, us) of each arm. Derived as in `expert_ready_run`. Grouped beats dense and
MXFP4's best arm beats FP8's at every count.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, f"{DAY}/call3/report.md", HIST)
    return t


PF_TIMELINE = f"{DAY}/call4/timeline_pf.log"
PF_KINDS = ("arm", "pf_both", "pf_fc1", "pf_fc2")


def own_rows_prefetch(r: Records) -> Table:
    t = Table(
        name="own_rows_prefetch",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The one-token FP8 step with each GEMV program asking
the L2 for its own rows at its start (one `cp.async.bulk.prefetch.L2` of its 2 rows x 2,880 bytes,
`jit.prefetch_l2_box`; in fc2 before its dependent-launch wait), so that its second and third K
steps' loads find their bytes on the way instead of each waiting a DRAM round trip: in fc1 and fc2,
in fc1 only, in fc2 only, against the arm's step, on the timeline (`{DAY}/scratch/ready_timeline.py
--tokens 1 --seeds 0,1,2,3 --rank 0,1 --kinds arm,pf_both,pf_fc1,pf_fc2`, fourth call; each step
checked against the reference first, the stamps in every kind). Cells: the step by events, us, the
median of five replays, as the log prints it; "mean" = the mean over the eight cases; "change" =
the kind's mean / the arm's - 1. Slower on the mean in every form; of the seven cases with a local
slot, fc1 and fc2 together slower in all seven, fc1 only in six (one equal), fc2 only in six (one
0.3% faster). In draw A's rank 0 fc1's programs live 8.86 us against 6.66 and its last ends at
27.78 against 21.25 (the log): the prefetches and the demand loads behind them queue. Not
built.""",
        columns=["kind", "A, rank zero", "A, rank one", "B, rank zero", "B, rank one",
                 "C, rank zero", "C, rank one", "D, rank zero", "D, rank one", "mean", "change"],
    )  # fmt: skip
    base = None
    for kind in PF_KINDS:
        cells = [r.text(PF_TIMELINE, rf"^T=1 seed={seed} rank={rank} local=\d+ {kind}: "
                        r"[^\n]* (\S+)$")
                 for seed in range(4) for rank in (0, 1)]  # fmt: skip
        m = derive(lambda *v: mean(v), "{:.2f}", *cells)
        base = base or m
        words = {"arm": "the arm", "pf_both": "fc1 and fc2", "pf_fc1": "fc1 only",
                 "pf_fc2": "fc2 only"}[kind]  # fmt: skip
        t.row(words, *cells, m, over(m, base) if kind != "arm" else "the baseline",
              history=HIST)  # fmt: skip
    return t


FLOOR = f"{DAY}/call5/read_floor_w8a16.log"


def one_token_floor(r: Records) -> Table:
    t = Table(
        name="one_token_floor",
        caption=f"""\
{H100}, copy ceiling 2.99 TB/s (the log's second line). The one-token FP8 sparse step beside the
read floor, the fastest of `tools/bench_decode.py`'s read kernels over the same touched experts'
fc1 and fc2 bytes, timed as one step (two launches, one CUDA graph, L2 flushed):
`tools/bench_grouped_decode.py OUT --precision w8a16 --tokens 1 --floor 1 --seeds 0,1,2,3 --rank
0,1` (fifth call; every step checked first). Cells: the step and "of copy" as the log prints
them (the read floor's bytes are the values alone, without scales and biases); derived: "above
the floor" = the step - the floor, us; "of the floor" = the floor / the step. The target's 75% of
copy at three local slots (draw A, rank 0) is a step of 33.3 us against this floor's 30.3: at most
3.0 us above a step that only reads its bytes, where the arm is 5.8 above. With no local slot the
arm's step is 16.8 us against the floor's 1.3: its two GEMV launches over 17,280 one-warp programs
and the combine.""",
        columns=["draw, rank", "local slots", "sparse step", "of copy", "read floor", "of copy",
                 "above the floor", "of the floor"],
    )  # fmt: skip
    for seed in range(4):
        for rank in (0, 1):
            head = rf"^precision=w8a16 tokens=1 seed={seed} rank={rank} local_slots=(\d+) "
            slots = r.text(FLOOR, head + r"[^\n]*arm=sparse_decode ")
            cells = {}
            for arm in ("sparse_decode", "read_floor"):
                line = rf"^precision=w8a16 tokens=1 seed={seed} rank={rank} [^\n]*arm={arm} [^\n]*"
                cells[arm] = (r.text(FLOOR, line + r" step_us=(\S+)"),
                              r.text(FLOOR, line + r" of_copy=(\S+)"))  # fmt: skip
            (s_us, s_copy), (f_us, f_copy) = cells["sparse_decode"], cells["read_floor"]
            share = lambda v: derive(lambda x: 100 * x, "{:.0f}%", v)  # noqa: E731
            t.row(f"{DRAWS[seed]}, rank {WORDS.get(rank, 'zero')}", slots, s_us, share(s_copy),
                  f_us, share(f_copy), derive(lambda a, b: a - b, "{:.1f}", s_us, f_us),
                  derive(lambda a, b: 100 * b / a, "{:.0f}%", s_us, f_us),
                  history=HIST)  # fmt: skip
    return t


PDL_LOG = f"{DAY}/call6/pdl_w8a16.log"
EIGHT = ("A", "B", "C", "D", "E", "F", "G", "H")  # routing.seed 0-7


def pdl_four_tokens(r: Records) -> Table:
    t = Table(
        name="pdl_four_tokens",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. FP8's sparse step at 2 and 4 tokens, where the arm
launched its GEMVs and combine plainly, against the same step with the one-token dependent launch
(each GEMV program letting the next kernel launch once its slot is known local;
`pipeline.build_stages(pdl=True, pdl_trigger="local")`): `PYTHONPATH=$PWD:$PWD/tools python3
docs/perf/{DAY}/scratch/pdl_bench.py` (sixth call; eight draws A-H, both ranks; each step checked
and bitwise the arm's first, then timed interleaved, one CUDA graph, L2 flushed). Cells: the slower
rank's step per draw and their mean, us, as the log prints them; "change" = the dependent launch's
mean / the plain one's - 1. Faster on the mean, -2.9% at 2 tokens (in five draws of eight) and
-1.2% at 4 (six of eight); draw C slower at both, as in the first call (`sparse_ready`) and the
nineteenth session's (`pdl_one_token`: -0.6% and -1.2%). Taken: `sparse_launch.FP8_PDL_LOCAL_TOKENS`
is now 4 (`pdl_four_run`).""",
        columns=["format", "tokens", "launch", *EIGHT, "mean", "change"],
    )  # fmt: skip
    _per_draw_ab(
        r,
        t,
        PDL_LOG,
        "w8a16",
        ("pdl_local",),
        (2, 4),
        {"arm": "plain", "pdl_local": "dependent, trigger once local"},
        HIST,
        draws=8,
    )
    return t


def mxfp4_trigger(r: Records) -> Table:
    t = Table(
        name="mxfp4_trigger",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. MXFP4's sparse step, whose GEMVs and combine are
dependent launches at every count with each GEMV program letting the next kernel launch at its
start, against the trigger once the slot is known local (FP8's), 1, 2 and 4 tokens:
`PYTHONPATH=$PWD:$PWD/tools python3 docs/perf/{DAY}/scratch/pdl_bench.py --precision w4a16
--tokens 1,2,4` (eighth call; eight draws, both ranks; each step checked and bitwise the arm's
first). Cells and "change" as in `pdl_four_tokens`. The same within 0.2% at every count (MXFP4's
GEMV has 16 rows on 4 warps a program, an eighth of FP8's programs): unchanged.""",
        columns=["format", "tokens", "trigger", *EIGHT, "mean", "change"],
    )  # fmt: skip
    _per_draw_ab(r, t, f"{DAY}/call8/pdl_w4a16.log", "w4a16", ("pdl_local",), (1, 2, 4),
                 {"arm": "at the program's start", "pdl_local": "once the slot is local"}, HIST,
                 draws=8)  # fmt: skip
    return t


def pdl_four_run(r: Records) -> Table:
    t = Table(
        name="pdl_four_run",
        caption=f"""\
{H100}. The gated scenario with FP8's one-token dependent launch taken up to 4 tokens (seventh
call: `DEADLINE=... PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`; every gate and integrity check passed, 952 pass and
112 skip, `call7/checks_count.txt`). `moebench run` was stopped by its 219 s limit at 220 s, after
its last case and its line "14 cases run" (`call7/run_tail.txt`), while it printed its closing
summary: every case had been written, and the report is `moebench compare` over them. Derived as
in `expert_ready_run`. Against the third call's run (`sparse_ready_run`, another machine), FP8
sparse went from 47.84 to 45.79 us at 2 tokens and from 76.48 to 75.46 at 4, where it is FP8's
best arm; at one token (36.45, 36.38) and 8 (138.6, 138.5), where nothing changed, the same within
0.2%. Grouped beats dense and MXFP4's best arm beats FP8's at every count.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, f"{DAY}/call7/report.md", HIST)
    return t


def local_first_again(r: Records) -> Table:
    t = Table(
        name="local_first_again",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The twenty-fourth session's `local_first` A/B again
where it was confounded, with `sparse_ab.steps_with` now calling the kind's GEMV with the arm's
own arguments (MXFP4's rotated weights and quads, FP8's quads from 2 tokens; before, natural MXFP4
weights and the broadcast load at every count): `PYTHONPATH=$PWD:$PWD/tools python3
docs/perf/2026-12-06-one-token/scratch/local_bench.py --precision P` (ninth call; FP8 at 2 and 4
tokens only, its one-token row was not confounded; four draws, both ranks; checked and bitwise the
arm's first). Cells as in `local_first`. Local-first is still slower on the mean at every count,
by less than the confounded rows said (MXFP4 +1.7% to +5.1% against +16% to +23%; FP8 +2.5% and
+4.3% against +5.7% and +4.8%): the default stays off.""",
        columns=["format", "tokens", "kind", "A", "B", "C", "D", "mean", "change"],
    )  # fmt: skip
    for prec, counts in (("w8a16", (2, 4)), ("w4a16", (1, 2, 4))):
        _per_draw_ab(r, t, f"{DAY}/call9/local_{prec}.log", prec, ("local_first",), counts,
                     KINDS, HIST)  # fmt: skip
    return t


def copy_share_final(r: Records) -> Table:
    t = Table(
        name="copy_share_final",
        caption=f"""\
{H100}. Issue 28's copy-rate targets at the end of the session, on FP8's dependent launch up to 4
tokens (ninth call: `tools/bench_grouped_decode.py OUT --precision P --tokens 1,32,64 --seeds 0,1
--rank 0,1`; copy ceiling measured by the bench at its start). Cells and derivations as in
`copy_share_today`. One token: the best arm (FP8 sparse) at 70%, missed (the change does not touch
one token); 32 and 64 tokens: FP8 grouped 91% and 90% (met on this H100), MXFP4 58% and 56%
(missed).""",
        columns=["precision", "tokens", "arm", "step us, draw 0 rank 0", "of copy",
                 "the slower rank, mean of two draws"],
    )  # fmt: skip
    copy_share_rows(t, r, f"{DAY}/call9/copy_share_{{}}.log", (0, 1), HIST)
    return t


TABLES = (pdl_four_run, pdl_four_tokens, mxfp4_trigger, copy_share_final, copy_share_today,
          sparse_ready_run, one_token_floor, sparse_ready, ready_ablation, own_rows_prefetch,
          local_first_again)  # fmt: skip
