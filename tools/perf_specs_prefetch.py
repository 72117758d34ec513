"""docs/PERF.md's generated tables of the tenth H200 session (2026-12-03, issue 28): fc1 asking L2
for fc2's weights at one token (slower), what bounds the one-token fc2 (not its DRAM reads), and
FP8's grouped decode at 2 tokens taking its tensor-core tile through TMA.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table, fill
from perf_records import Figure, Records, over
from perf_specs_fold import BENCH as BENCH_FOLD
from perf_specs_fold import RUN as RUN_FOLD
from perf_specs_rows import BENCH_COLUMNS, RUN_COLUMNS, bench_rows, run_rows

DAY = "2026-12-03-prefetch"
HIST = "[issue 28][h-i28t]"
PF = (f"{DAY}/prefetch/pf_ab_seed0.log", f"{DAY}/prefetch/pf_ab_seed1.log")
DRAWS = ("first draw", "second draw")
PRECISIONS = (("w8a16", "FP8"), ("w4a16", "MXFP4"))
VARIANTS = ("base", "ef", "pf", "pfl", "pfl_ef2")


def _pf(r: Records, path: str, prec: str, tokens: int, variant: str, what: str) -> Figure:
    """A variant's step, fc1 alone or the rest (fc2 and the combine), us, in a pf_ab log."""
    line = rf"^  {prec} T={tokens} {variant}\s+step\s+"
    pattern = {"step": line + r"(\S+) us", "fc1": line + r".* fc1 alone\s+(\S+) us",
               "rest": line + r".* rest\s+(\S+)$"}[what]  # fmt: skip
    return r.text(path, pattern)


def l2_prefetch_fc2(r: Records) -> Table:
    t = Table(
        name="l2_prefetch_fc2",
        caption="""\
sparse_decode's fc1 asking L2 for fc2's weights as it goes (`scratch/pf_ab.py` with
`scratch/prefetch.patch`, first call: each fc1 program a `prefetch.global.L2` of its share of its
slot's expert's fc2 bytes, so that they stream in with fc1's and fc2 finds them in L2; rank 0 of
gpt-oss-20b-decode-grouped, the scenario's routing and `routing.seed: 1`; the step of fc1, fc2
and the combine as one graph, and fc1 alone, L2 flushed before each replay, median of 32
interleaved replays, us). "ef": fc1's own loads evict-first, no prefetch; "pf": the prefetch, no
hint; "pfl": the prefetch evict-last and fc1's loads evict-first; "pfl_ef2": pfl with fc2's loads
evict-first too. Outputs bitwise the arm's in every variant; the compiled variants passed the
kernel tests on the H200 (`prefetch/gpu_prefetch_kernel_tests.txt`). In the second draw no slot
is routed to rank 0 at one token (the empty step). Derived: "change" = pfl's step / base's - 1;
"rest" = step - fc1 alone. The bytes come in (fc1 alone takes 4.6 us longer at one FP8 token) but
fc2 hardly shortens (rest 13.06 against 12.69 us): see `fc2_cold_hot`. Not kept.""",
        columns=["precision, tokens, draw", "base step", "ef step", "pf step", "pfl step",
                 "pfl_ef2 step", "change (pfl)", "fc1 alone, base / pfl", "rest, base / pfl"],
    )  # fmt: skip
    for prec, label in PRECISIONS:
        for tokens in (1, 2, 4, 8):
            for path, draw in zip(PF, DRAWS, strict=True):
                if f"{prec} T={tokens} base " not in r.read(path):
                    continue
                at = lambda v, w: _pf(r, path, prec, tokens, v, w)  # noqa: E731
                head = r.text(path, rf"^  {prec} T=({tokens}) base ")
                t.row(fill(f"{label}, {{}}, {draw}", head), *(at(v, "step") for v in VARIANTS),
                      over(at("pfl", "step"), at("base", "step")),
                      fill("{} / {}", at("base", "fc1"), at("pfl", "fc1")),
                      fill("{} / {}", at("base", "rest"), at("pfl", "rest")),
                      history=HIST)  # fmt: skip
    return t


HOT = f"{DAY}/fc2/fc2_hot_seed0.log"
FC2_LAUNCHES = ("n4w1", "n4w2", "n2k512", "n2k2048", "n8w4", "split2")


def _cold_hot(r: Records, prec: str, tokens: int, name: str, hot: bool) -> Figure:
    """A kernel's median us in fc2_hot's log, L2 flushed before each replay or (``hot``) not."""
    cold = rf"^  {prec} T={tokens} {name}\s+cold\s+"
    return r.text(HOT, cold + (r"\S+ us  hot\s+(\S+) us" if hot else r"(\S+) us"))


def fc2_cold_hot(r: Records) -> Table:
    t = Table(
        name="fc2_cold_hot",
        caption="""\
What bounds sparse_decode's fc1 and fc2 at 1-2 tokens (`scratch/fc2_hot.py`, second call: rank 0
of gpt-oss-20b-decode-grouped, the scenario's routing; each kernel alone from a graph, median of
32 interleaved replays, us): "cold" with L2 flushed before each replay, as every step is timed,
"hot" without (the replay before leaves the stage's weights in L2: 24.9 MB for FP8's fc2 at one
token, about half that for MXFP4). FP8's fc2 reads its weights from L2 in 11.04 us against
12.96 from DRAM: its time is the launch's (5,760 one-warp programs, each a few dependent loads),
not its bytes, which is why the prefetch of `l2_prefetch_fc2` could not shorten it. The other
launches of fc2 (FP8: "n4w1" 4 rows a program, "n4w2" 4 rows on 2 warps, "n2k512" / "n2k2048"
512 / 2,048 bytes a row a step, "n8w4" 8 rows on 4 warps, "split2" split-K in two; MXFP4 the
same with 8x the rows and 4x the warps) are each slower cold than the arm's; the best of them is
given. Their outputs: bitwise the arm's where the sums keep their order, all within the
tolerance. Derived: "hot / cold" = hot / cold - 1.""",
        columns=["precision, tokens", "fc1 cold / hot", "fc2 cold / hot", "fc2 hot / cold",
                 "fastest other fc2 launch, cold"],
    )  # fmt: skip
    for prec, label in PRECISIONS:
        for tokens in (1, 2):
            at = lambda name, hot: _cold_hot(r, prec, tokens, name, hot)  # noqa: E731
            names = [r.text(HOT, rf"^  {prec} T={tokens} ({n})\s+cold") for n in FC2_LAUNCHES]
            times = [at(n, False) for n in FC2_LAUNCHES]
            best = min(range(len(times)), key=lambda i: times[i].number())
            head = r.text(HOT, rf"^  {prec} T=({tokens}) fc1\s+cold")
            t.row(fill(f"{label}, {{}}", head),
                  fill("{} / {}", at("fc1", False), at("fc1", True)),
                  fill("{} / {}", at("arm", False), at("arm", True)),
                  over(at("arm", True), at("arm", False)),
                  fill("{}: {}", names[best], times[best]), history=HIST)  # fmt: skip
    return t


TWO = (  # (record, what it is): benches of rank 0, then the scenario's runs (slowest rank)
    (BENCH_FOLD, "ninth session's bench, first draw"),
    (f"{DAY}/bench2/bench_2_4_seed0.log", "second call, first draw"),
    (f"{DAY}/bench2/bench_2_4_seed1.log", "second call, second draw"),
    (f"{DAY}/pointer_tile/bench_grouped_decode.log", "third call (pointer tile), first draw"),
    (f"{DAY}/bench/bench_grouped_decode.log", "fourth call, first draw"),
    (f"{DAY}/bench/bench_2_4_seed1.log", "fourth call, second draw"),
)
LAUNCHES = ("gemv m1 n2 k1024 w1 pdl", "dot m16 n64 k128 w4 s4 pdl",
            "dot m16 n64 k128 w4 s4 pdl tma r128")  # fmt: skip
# (report, what it is, the column of LAUNCHES its grouped arm ran)
RUNS = ((RUN_FOLD, "the GEMV (ninth session)", 0),
        (f"{DAY}/pointer_tile/gpt-oss-20b-decode-grouped.md", "tile, pointers (third call)", 1),
        (f"{DAY}/gpt-oss-20b-decode-grouped.md", "tile, TMA (fourth call)", 2))  # fmt: skip
CASE = "c001-precision=w8a16-tokens_per_rank=2"


def fp8_two_tokens(r: Records) -> Table:
    t = Table(
        name="fp8_two_tokens",
        caption="""\
grouped_decode's FP8 launch at 2 tokens a rank (half a slot an expert at gpt-oss-20b EP2), the
step of fc1, fc2 and the combine. Benches: `tools/bench_grouped_decode.py` (rank 0; the scenario's
routing, "first draw", or `routing.seed: 1`; each step checked against the reference before it
is timed; us) with the arm's launch and the other path beside it: the one-slot GEMV (the arm's
launch until 193fc89), the tensor-core tile with pointer loads and no register cap (the arm's
launch at 4 tokens, and at 2 in 193fc89, third call), the tile through TMA with 128 registers at
most (the arm's from 356f593). Runs: `scenarios/gpt-oss-20b-decode-grouped.yaml` through
`moebench run`, the `ffn` regime's median of the slowest rank (both ranks' medians beside it), us;
every correctness gate and integrity check passed in each (fourth call: 952 pass, 112 skip). The
tile through TMA is the fastest in every record that has it; rank 1's routing gains less (59.07
against 62.11 us). Derived: "TMA tile / GEMV" = the tile through TMA / the GEMV - 1.""",
        columns=["record", "GEMV", "tile, pointers, no cap", "tile, TMA, capped",
                 "TMA tile / GEMV"],
    )  # fmt: skip
    for path, what in TWO:
        cells: list = []
        for launch in LAUNCHES:
            # The step whose fc1 launch is ``launch``, where the bench ran one.
            pattern = (rf"^precision=w8a16 tokens=2 .*arm=grouped_decode variant=.* "
                       rf"fc1_launch={launch} fc2_launch=.* step_us=(\S+)")  # fmt: skip
            ran = re.search(pattern, r.read(path), flags=re.MULTILINE) is not None
            cells.append(r.text(path, pattern) if ran else "")
        ratio = over(cells[2], cells[0]) if cells[0] and cells[2] else ""
        t.row(fill(f"bench: {what}"), *cells, ratio, history=HIST)
    for path, what, column in RUNS:
        median = r.result(path, "ffn", "grouped_decode", CASE, "median us")
        ranks = r.result(path, "ffn", "grouped_decode", CASE, "rank min / med / max us")
        cells = [""] * len(LAUNCHES)
        cells[column] = fill("{} ({})", median, ranks)
        t.row(fill(f"run: {what}"), *cells, "", history=HIST)
    return t


BENCH = f"{DAY}/bench/bench_grouped_decode.log"


def two_token_bench(r: Records) -> Table:
    t = Table(
        name="two_token_bench",
        caption="""\
`tools/bench_grouped_decode.py` at every token count (rank 0 of gpt-oss-20b-decode-grouped, the
scenario's routing; each step checked against the reference and the sentinels before it is
timed) at 356f593 (FP8's tile through TMA at 2 tokens), beside the ninth session's bench
(`fold_bench`). Only FP8 at 2 tokens changed; the other rows move by the bench's noise. Issue
28's targets here: grouped faster than dense at every count (met); MXFP4's grouped step faster
than FP8's at every count (met); >= 85% of copy at 32 and 64 tokens (FP8 71% and 70%, MXFP4 43%
and 41%: missed). Derived: "change" = grouped now / grouped before - 1.""",
        columns=BENCH_COLUMNS,
    )
    return bench_rows(r, t, BENCH, BENCH_FOLD, history=HIST)


RUN = f"{DAY}/gpt-oss-20b-decode-grouped.md"


def two_token_run(r: Records) -> Table:
    t = Table(
        name="two_token_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (`tools/gpu_run.sh`, EP2
simulated, both ranks, 13 blocks of 20; 196 s) on 356f593's tree (the run manifest names 6df6224:
the device's copy of git's HEAD lagged): every correctness gate and integrity check passed (952
pass, 112 skip, none failed; `gpt-oss-20b-decode-grouped.run-tail.txt`). The `ffn` regime, median
us of the slowest rank as `moebench compare` printed them. Derived: "MXFP4 / FP8, best arm" = the
faster of MXFP4's sparse and grouped steps over the faster of FP8's (below 1.00x: MXFP4 faster).
grouped_decode FASTER than dense_decode at every count in both formats; FP8's grouped step at 2
tokens 59.09 us against 62.11 in the ninth session's run (`fold_run`); the policy unchanged
(FP8 sparse up to 4 tokens, MXFP4 up to 2 and the SAME at 4, grouped above).""",
        columns=RUN_COLUMNS,
    )
    return run_rows(r, t, RUN, history=HIST)


TABLES = [two_token_bench, fp8_two_tokens, two_token_run, fc2_cold_hot, l2_prefetch_fc2]
