"""docs/PERF.md's generated tables of the eighth H200 session of 2026-12-02 (issue 28): the
grouped tile's launches at 2-8 tokens (narrower row blocks, more warps, one pass, no cap: none
faster than the arm's), and the MXFP4 tile's scales read as 32-bit words inside its pipeline.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table, fill
from perf_records import Figure, Records, over
from perf_specs_grouped import grouped
from perf_specs_passes import BENCH as BENCH_PASSES
from perf_specs_rows import BENCH_COLUMNS, RUN_COLUMNS, bench_rows, run_rows

DAY = "2026-12-02-low-counts"
CALL1 = (f"{DAY}/call1/bench_seed0.log", f"{DAY}/call1/bench_seed1.log")
HIST = "[issue 28][h-i28w]"
DRAWS = ("first draw", "second draw")
PRECISIONS = (("w8a16", "FP8"), ("w4a16", "MXFP4"))


def _step(r: Records, path: str, prec: str, tokens: int, variant: str) -> Figure:
    """A grouped launch's step in a bench log (``variant`` as the log names it)."""
    return grouped(r, path, prec, tokens, variant, "step_us")


# (column, variant as the bench names it, per format; None: not run for that format)
_LOW = (
    ("the arm's launch", {"w8a16": "default", "w4a16": "default"}),
    ("32-row blocks", {"w8a16": "dot m16 n32 k128 w4 s4 pdl",
                       "w4a16": "dot m16 n32 k128 w4 s4 pdl r128"}),
    ("8 warps", {"w8a16": "dot m16 n64 k128 w8 s4 pdl",
                 "w4a16": "dot m16 n64 k128 w8 s4 pdl r128"}),
    ("16-row blocks", {"w8a16": "dot m16 n16 k128 w4 s4 pdl",
                       "w4a16": "dot m16 n16 k128 w4 s4 pdl r128"}),
    ("one pass, 4 stages, 96 registers", {"w8a16": "dot m16 n64 k128 w4 s4 pdl tma r96 passes",
                                          "w4a16": "dot m16 n64 k128 w4 s4 pdl r96 passes"}),
    ("no register cap", {"w8a16": None, "w4a16": "dot m16 n64 k128 w4 s4 pdl"}),
)  # fmt: skip


def low_count_launches(r: Records) -> Table:
    t = Table(
        name="low_count_launches",
        caption="""\
The grouped tile's launch at 4 tokens, where the bench had MXFP4's grouped step slower than
FP8's (`tools/bench_grouped_decode.py --tokens 2,4,8 --variants ...`, first call: rank 0 of
gpt-oss-20b-decode-grouped with the scenario's routing and with `routing.seed: 1`,
`scratch/seed1.yaml`; each step checked against the reference and the sentinels, then timed with
the arm's in one interleaved set, us). The arm's launch at 4 tokens: FP8's tile with pointer loads
and no cap, MXFP4's capped at 128 registers, both 64 rows, 4 warps, 4 stages, the expert loop.
Narrower row blocks (more programs for the few touched experts) are 3.7-10.4x slower (the tile's
operand falls off the 64-row warpgroup MMA), 8 warps 1.2-1.5x, and the candidate the last session
left, one pass on 4 stages capped at 96 registers, was 10.7% and 2.5% slower for MXFP4 (FP8: 15.2%
slower, 3.5% faster), so it was not taken. No launch of the tile moved MXFP4 at 4
tokens; the scale loads did (`scale_words_ab`).""",
        columns=["precision, tokens, draw", *(c for c, _ in _LOW)],
    )
    for prec, label in PRECISIONS:
        for tokens in (4,):
            for path, draw in zip(CALL1, DRAWS, strict=True):
                cells: list[Figure | str] = []
                for _, variants in _LOW:
                    v = variants[prec]
                    cells.append(_step(r, path, prec, tokens, v) if v else "")
                head = r.text(path, rf"^precision={prec} tokens=({tokens}) .* arm=dense_decode")
                t.row(fill(f"{label}, {{}}, {draw}", head), *cells, history=HIST)
    return t


AB_ARM = (f"{DAY}/ab_arm_seed0.log", f"{DAY}/ab_arm_seed1.log")
AB_PADDED = (f"{DAY}/ab_scales_seed0.log", f"{DAY}/ab_scales_seed1.log")
BENCH = f"{DAY}/bench/bench_grouped_decode.log"
RUN = f"{DAY}/gpt-oss-20b-decode-grouped.md"
CALL6 = (f"{DAY}/call6/bench_seed0.log", f"{DAY}/call6/bench_seed1.log")
CALL7 = (f"{DAY}/call7/bench_seed0.log", f"{DAY}/call7/bench_seed1.log")


def _ab(r: Records, path: str, tokens: int, kind: str) -> Figure:
    return r.text(path, rf"^T={tokens} {re.escape(kind)}: step median (\S+) us")


_ARM = (
    ("the arm before: byte loads, the problem's 90-byte rows", "old:u"),
    ("the arm now: words, rows padded to 96 bytes", "pkg"),
    ("the working tree's byte loads, 90-byte rows", "pkg:u"),
    ("the committed byte loads on the padded rows", "old"),
)


def scale_words_ab(r: Records) -> Table:
    t = Table(
        name="scale_words_ab",
        caption="""\
The MXFP4 tile's scale loads, A/B as the arm runs them (`scratch/ab_scales.py`, fifth call: the
step of fc1 and fc2 through `grouped_gemv` with the arm's default launch at each count,
programmatic dependent launch; gpt-oss-20b EP2 rank 0's shapes, each token's 4 experts drawn from
32, about half local; random weights and scales; one CUDA graph a step, L2 flushed before each
replay, median of 40 interleaved replays, us). Before: the committed kernel
(`scratch/grouped_dot_old.py`) on the problem's scales (90 bytes a row), a step's scale bytes
loaded a step ahead in plain loads that triton 3.6's pipeline leaves synchronous. Now: the arm
pads the rows to 96 bytes once when it builds its stages and the tile loads a step's scales as
32-bit words inside the pipelined loop (sm_90a: four-byte asynchronous copies, no synchronous load
left in the loop, 9.0 instructions a weight byte against 10.0). The working tree's byte path on
90-byte rows is the committed kernel's time (its code is the same). The last column: the
committed byte loads on rows padded to 96 bytes are 1.16-1.36x slower (a stride divisible by 16
changes the code triton 3.6 makes for the byte tile; `scale_layout`), so padding alone is no
gain. "equal": every kind's outputs bit for bit the first kind's in the log. Derived: "change" =
now / before - 1.""",
        columns=["tokens, draw", *(c for c, _ in _ARM), "equal", "change"],
    )
    for tokens in (64, 32, 16, 8, 4):
        for path, draw in zip(AB_ARM, DRAWS, strict=True):
            cells = [_ab(r, path, tokens, k) for _, k in _ARM]
            equal = [r.text(path, rf"^T={tokens} {re.escape(k)}: equal_to_first=(\S+)")
                     for _, k in _ARM[1:]]  # fmt: skip
            head = r.text(path, rf"^T=({tokens}) old:u: step median")
            t.row(fill(f"{{}}, {draw}", head), *cells, fill("{}, {}, {}", *equal),
                  over(cells[1], cells[0]), history=HIST)  # fmt: skip
    return t


_PADDED = (
    ("committed byte loads", "old"),
    ("the same kernel again", "a1"),
    ("no scale load in the loop (wrong values)", "a-1"),
    ("words (the arm now)", "pkg"),
    ("words, the probe's code", "a4"),
)


def scale_layout(r: Records) -> Table:
    t = Table(
        name="scale_layout",
        caption="""\
The same A/B with every kind on scale rows padded to 96 bytes (`scratch/ab_scales.py`, fourth
call; the probe kernel `scratch/grouped_dot_probe.py` takes SCALES_AHEAD: 1 the committed code,
-1 no scale load in the loop, step 0's scales reused, wrong values; 4 words). On these rows every
byte-loading kind is slow, the one without any scale load in its loop too: the cost is not the
loads but the code the compiler makes for a byte tile whose rows it knows to be 16-byte aligned
(the stride divisible by 16). The word loads are the fast kinds here and, on the problem's own
rows, against the committed arm (`scale_words_ab`). A window of 2 or 3 steps of byte loads ahead
(SCALES_AHEAD 2, 3; not timed) made triton 3.6 drop the weights' pipeline altogether (sm_90a,
offline: 4 KB of shared memory instead of 28, synchronous weight loads). us, median of 40.""",
        columns=["tokens, draw", *(c for c, _ in _PADDED)],
    )
    for tokens in (64, 32, 16, 8, 4):
        for path, draw in zip(AB_PADDED, DRAWS, strict=True):
            cells = [_ab(r, path, tokens, k) for _, k in _PADDED]
            head = r.text(path, rf"^T=({tokens}) old: step median")
            t.row(fill(f"{{}}, {draw}", head), *cells, history=HIST)
    return t


def scale_words_bench(r: Records) -> Table:
    t = Table(
        name="scale_words_bench",
        caption="""\
`tools/bench_grouped_decode.py` at every token count (rank 0 of gpt-oss-20b-decode-grouped, the
scenario's routing; each step checked against the reference and the sentinels before it is timed)
with the MXFP4 tile's scales read as words, beside the seventh session's bench (`grouped_passes`).
FP8 did not change (its rows move by the bench's noise); MXFP4's tile runs from 4 tokens (1-2
tokens: the GEMV, unchanged). Derived: "change" = grouped now / grouped before - 1. Issue 28's
targets here: grouped faster than dense at every count (met); MXFP4's grouped step faster than
FP8's at every count (met but at 4 tokens: 58.6 against 56.5); >= 85% of copy at 32 and 64 tokens
(FP8 71% and 70%, MXFP4 42% and 40%: missed).""",
        columns=BENCH_COLUMNS,
    )
    return bench_rows(r, t, BENCH, BENCH_PASSES, history=HIST)


def scale_words_run(r: Records) -> Table:
    t = Table(
        name="scale_words_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (`tools/gpu_run.sh`, EP2
simulated, both ranks, 13 blocks of 20; 182 s) on 37f2627's tree (the run manifest names e7dc86d,
dirty: the device's copy of git's HEAD lagged, the tree was the commit's): every correctness gate
and integrity check passed (`gpt-oss-20b-decode-grouped.run-tail.txt`). The `ffn` regime, median us
of the slowest rank as `moebench compare` printed them. Derived: "MXFP4 / FP8, best arm" = the
faster of MXFP4's sparse and grouped steps over the faster of FP8's (below 1.00x: MXFP4 faster).
grouped_decode FASTER than dense_decode at every count in both formats; MXFP4's best arm faster than
FP8's at every count; MXFP4's grouped step 3.7-6.4% below the seventh session's run at 16-64 tokens
(`grouped_passes_run`).""",
        columns=RUN_COLUMNS,
    )
    return run_rows(r, t, RUN, history=HIST)


# (column, variant in call 6's logs, per format)
_STAGES = (
    ("the arm's launch", {"w8a16": "default", "w4a16": "default"}),
    ("5 stages", {"w8a16": "dot m16 n64 k128 w4 s5 pdl",
                  "w4a16": "dot m16 n64 k128 w4 s5 pdl r128"}),
    ("3 stages", {"w8a16": "dot m16 n64 k128 w4 s3 pdl",
                  "w4a16": "dot m16 n64 k128 w4 s3 pdl r128"}),
    ("no programmatic dependent launch", {"w8a16": "dot m16 n64 k128 w4 s4",
                                          "w4a16": "dot m16 n64 k128 w4 s4 r128"}),
)  # fmt: skip


def low_count_stages(r: Records) -> Table:
    t = Table(
        name="low_count_stages",
        caption="""\
The tile's stage count at 4 tokens with the scales as words (`tools/bench_grouped_decode.py
--tokens 2,4,8 --variants=...`, sixth call, and `--tokens 4,8,16`, seventh call, both routing
draws as `low_count_launches`, us; each call its own interleaved set). MXFP4 on 5 stages was 1.8%
and 2.2% faster than the arm's 4 in the sixth call and 4.0% slower and 2.3% faster in the
seventh; 6 stages 1.1% and 1.7% slower; at 8 tokens (not in the table) 5 stages were 1.1-2.0%
faster in all four. No stage count is faster in every draw at 4 tokens, so the arm keeps 4. Without
programmatic dependent launch the draws disagree too. The MXFP4-against-FP8 item at 4 tokens
stays open in the bench (the first draw; the second has MXFP4 faster).""",
        columns=["precision, tokens, draw, call", *(c for c, _ in _STAGES), "6 stages"],
    )
    for prec, label in PRECISIONS:
        for tokens in (4,):
            for calls, name in ((CALL6, "sixth"), (CALL7, "seventh")):
                for path, draw in zip(calls, DRAWS, strict=True):
                    cells: list[Figure | str] = []
                    for _, v in _STAGES:
                        here = re.search(rf"variant={re.escape(v[prec])} weight", r.read(path))
                        cells.append(_step(r, path, prec, tokens, v[prec]) if here or
                                     v[prec] == "default" else "")  # fmt: skip
                    six = _SIX[prec]
                    here = re.search(rf"tokens={tokens} .*variant={re.escape(six)} weight",
                                     r.read(path))  # fmt: skip
                    cells.append(_step(r, path, prec, tokens, six) if here else "")
                    head = r.text(
                        path, rf"^precision={prec} tokens=({tokens}) .* arm=sparse_decode"
                    )
                    t.row(fill(f"{label}, {{}}, {draw}, {name}", head), *cells, history=HIST)
    return t


_SIX = {"w8a16": "dot m16 n64 k128 w4 s6 pdl", "w4a16": "dot m16 n64 k128 w4 s6 pdl r128"}


def fp8_gemv_pdl(r: Records) -> Table:
    t = Table(
        name="fp8_gemv_pdl",
        caption="""\
Noticed, left: the FP8 grouped GEMV (the arm's launch at 1-2 tokens) with and without
programmatic dependent launch at 2 tokens (sixth call, both draws, us). Without it the step is
19% and 22% faster, in the draw whose 3 slots sit one an expert as at one token too, where the
launch with it was the faster (39.1 against 40.5 in `grouped_passes`' bench). The GEMV's grid
holds one program a (2-row block, possible touched expert): at 2 tokens 8 such experts, twice
one token's, most returning at once. The policy's arm at 2 tokens is sparse_decode (in the
table), so the grouped arm's launch was not changed on this; the FP8 tile capped through TMA is
within 6% of the launch without it.""",
        columns=["draw", "sparse_decode", "grouped GEMV, with it (the arm)", "without it",
                 "the tile, through TMA, capped"],
    )  # fmt: skip
    sparse = r"^precision=w8a16 tokens=2 .* arm=sparse_decode .* step_us=(\S+) "
    grouped = ("default", "gemv m1 n2 k1024 w1", "dot m16 n64 k128 w4 s4 pdl tma r128")
    for path, draw in zip(CALL6, DRAWS, strict=True):
        cells = [_step(r, path, "w8a16", 2, v) for v in grouped]
        t.row(draw, r.text(path, sparse), *cells, history=HIST)
    return t


TABLES = [scale_words_bench, scale_words_ab, scale_layout, scale_words_run, low_count_launches,
          low_count_stages, fp8_gemv_pdl]  # fmt: skip
