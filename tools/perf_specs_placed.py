"""docs/PERF.md's generated tables of the nineteenth session (2026-12-05, issue 28), the first on an
H100 80GB HBM3 (the device lent at the session's end): the grouped FP8 tile reading its weights in
`fp8_placed`'s layout, its A/B, Nsight Compute beside it, and the gated scenario with it on.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_passes16 import _slowest
from perf_specs_rotated import _cells

DAY = "2026-12-05-placed-fp8"
HIST = "[issue 28][h-i28pl]"
AB = f"{DAY}/call1/ab_placed.log"
NCU = f"{DAY}/call1/ncu.txt"
RUN = f"{DAY}/call2/gpt-oss-20b-decode-grouped.md"
SEEDS = (0, 1, 2)
WORDS = {1: "one", 2: "two", 4: "four", 8: "eight", 16: "sixteen", 32: "thirty-two",
         64: "sixty-four"}  # fmt: skip
LOOP = "dot m16 n64 k128 w4 s4 pdl tma r128 eb placed"  # the expert loop, 2-8 tokens
PASSES = "dot m16 n64 k128 w4 s3 pdl tma r80 passes eb placed"  # one pass a program, 16-64


def placed_ab(r: Records) -> Table:
    t = Table(
        name="placed_ab",
        caption="""\
**H100 80GB HBM3**, not the H200 of the tables below. The grouped arm's FP8 step with its tile
reading the weights in `fp8_placed`'s layout (each word's bits placed on the host so that a word's
four e4m3 values take 7 decode instructions against 11) against the same launches on the natural
layout (the arm's default before this): `bash docs/perf/2026-12-05-placed-fp8/scratch/next_call.sh`
(its `tools/bench_grouped_decode.py --precision w8a16 --tokens 2,4,8,16,32,64 --seeds 0,1,2 --rank
0,1 --variants dot:-:-:-:-:-:-:-:-:-:-:-:-:1`, on 1a6639b's tree). Each step checked against the
reference and the sentinels first, then timed interleaved (one CUDA graph, L2 flushed). Derived:
a step = the slower rank's (an EP step waits for it); natural, placed = the mean over three
routing draws of it, us; "change" = placed / natural - 1; "faster in" = the draws whose step is
below the natural one's. Faster in every draw at every count: the arm takes the placed layout
(`grouped_launch.FP8_PLACED`).""",
        columns=["tokens", "natural (before)", "placed (now)", "change", "faster in"],
    )  # fmt: skip
    for tokens in (2, 4, 8, 16, 32, 64):
        variant = LOOP if tokens < 16 else PASSES
        nat = [_slowest(r, AB, "w8a16", tokens, s, "default") for s in SEEDS]
        pla = [_slowest(r, AB, "w8a16", tokens, s, variant) for s in SEEDS]
        mean_nat = derive(lambda *v: sum(v) / len(v), "{:.1f}", *nat)
        mean_pla = derive(lambda *v: sum(v) / len(v), "{:.1f}", *pla)
        n = len(SEEDS)
        wins = derive(lambda *v: sum(p < q for p, q in zip(v[n:], v[:n], strict=True)),
                      f"{{:.0f}} of {n}", *nat, *pla)  # fmt: skip
        t.row(WORDS[tokens], mean_nat, mean_pla, over(mean_pla, mean_nat), wins, history=HIST)
    return t


def _ncu(r: Records, layout: str, grid: str, metric: str):
    """``metric`` of the launch of grid ``grid`` in metric set 1 or 2 of ``layout``'s ncu run."""
    kernels = "grouped-placed" if layout == "placed" else "grouped"
    sets = 2 if metric.startswith("sm__") else 1
    head = rf"^== ncu_kernels\.py {kernels}, metric set {sets}\n(?:.*\n)*?"
    launch = rf".*_grouped_dot_fp8 \({grid}\)x.*\n(?:.*\n)*?"
    return r.text(NCU, head + launch + rf"\s*{metric}\s+\S+\s+(\S+)")


def placed_ncu(r: Records) -> Table:
    t = Table(
        name="placed_ncu",
        caption="""\
**H100 80GB HBM3**. The second method beside the A/B: Nsight Compute on the FP8 tile's two
launches at 64 tokens (gpt-oss-20b EP2 shapes, random routing: `ncu --clock-control none -k
regex:_grouped_dot --launch-skip 4 --launch-count 2 --metrics ... python3 tools/ncu_kernels.py
grouped` and `grouped-placed`, two metric sets each, same call). Warp instructions executed; the
integer ALU's and the FMA pipe's; warps stalled a issued instruction on a throttled math pipe and
on loads (long scoreboard); DRAM throughput, % of peak. The placed decode moves work off the
integer ALU (one shift becomes a multiply) and drops byte permutes.""",
        columns=["launch", "layout", "us", "instructions", "integer ALU", "FMA pipe",
                 "math pipe throttle", "long scoreboard", "DRAM %"],
    )  # fmt: skip
    for name, grid in (("fc1", "90, 32, 1"), ("fc2", "45, 32, 1")):
        for layout in ("natural", "placed"):
            m = lambda metric: _ncu(r, layout, grid, metric)  # noqa: E731
            t.row(name, layout, m(r"gpu__time_duration\.sum"), m(r"smsp__inst_executed\.sum"),
                  m(r"sm__inst_executed_pipe_alu\.sum"), m(r"sm__inst_executed_pipe_fma\.sum"),
                  m(r"smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active\.ratio"),
                  m(r"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active\.ratio"),
                  m(r"dram__throughput\.avg\.pct_of_peak_sustained_elapsed"),
                  history=HIST)  # fmt: skip
    return t


def placed_run(r: Records) -> Table:
    t = Table(
        name="placed_run",
        caption="""\
**H100 80GB HBM3**. The gated scenario with the placed layout on (second call, 244 s:
`DEADLINE=... PER_RUN_TIMEOUT=500 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`; every gate and integrity check passed): the step
(`ffn`, one CUDA graph, the slowest rank's median over 13 blocks, us) of the grouped arm against
the dense one, both formats, and the best arm of each format. Derived: "grouped / dense" = the
ratio; "MXFP4 best / FP8 best" = the faster of the sparse and grouped steps of MXFP4 over FP8's.
On the H100 grouped beats dense and MXFP4 beats FP8 at every count; issue 28's copy-rate targets
are the H200's and stay to be judged there.""",
        columns=["tokens", "FP8 grouped", "FP8 dense", "grouped / dense", "MXFP4 grouped",
                 "MXFP4 dense", "grouped / dense", "MXFP4 best / FP8 best"],
    )  # fmt: skip
    for i, tokens in enumerate((1, 2, 4, 8, 16, 32, 64)):

        def cell(prec: str, case: int, arm: str):
            return r.result(
                RUN, "ffn", arm, f"c{case:03d}-precision={prec}-tokens_per_rank={tokens}"
            )

        f8 = {a: cell("w8a16", i, a) for a in ("grouped_decode", "dense_decode", "sparse_decode")}
        f4 = {
            a: cell("w4a16", i + 7, a) for a in ("grouped_decode", "dense_decode", "sparse_decode")
        }
        best = derive(lambda a, b, c, d: min(a, b) / min(c, d), "{:.2f}",
                      f4["grouped_decode"], f4["sparse_decode"], f8["grouped_decode"],
                      f8["sparse_decode"])  # fmt: skip
        t.row(WORDS[tokens], f8["grouped_decode"], f8["dense_decode"],
              derive(lambda a, b: a / b, "{:.2f}", f8["grouped_decode"], f8["dense_decode"]),
              f4["grouped_decode"], f4["dense_decode"],
              derive(lambda a, b: a / b, "{:.2f}", f4["grouped_decode"], f4["dense_decode"]),
              best, history=HIST)  # fmt: skip
    return t


READY = "2026-12-05-ready-slots/call3"


def ready_h100(r: Records) -> Table:
    t = Table(
        name="ready_h100",
        caption="""\
**H100 80GB HBM3**. The eighteenth session's prepared call, run in the nineteenth
(`bash docs/perf/2026-12-05-ready-slots/scratch/next_call.sh`, 114 s, on 1a6639b's tree with the
placed layout on; records in docs/perf/2026-12-05-ready-slots/call3/): the sparse arm's step
against its hand-over kinds at one FP8 token (fc2 waiting per slot on fc1: `ready`, its trigger
only in local programs `ready_local` or never `ready_none`, fc1's counting alone `count`) and
against the arm's GEMVs as programmatic dependent launches triggered at each program's start
(`pdl`) or once its slot is known local (`pdl_local`, `sparse_gemv(pdl_trigger="local")`), six
routing draws, both ranks, each step checked and bitwise the arm's first (hand-over checks: every
output the arm's for its own token, the cells back at zero). Derived: a time = the mean over the
draws of the slower rank's step, us; "change" = kind / the arm - 1; "faster in" = the draws whose
slower rank's step is below the arm's. `pdl_local` is faster in every draw at one and four FP8
tokens and mixed at two; not yet measured on the H200, the arm unchanged.""",
        columns=["case", "kind", "the arm", "the kind", "change", "faster in"],
    )  # fmt: skip
    rows = [
        ("FP8, one token", f"{READY}/ready.log", "w8a16", 1, k)
        for k in ("ready", "ready_local", "ready_none", "count", "pdl", "pdl_local")
    ]
    rows += [
        (f"FP8, {w} tokens", f"{READY}/pdl_fp8.log", "w8a16", n, k)
        for n, w in ((2, "two"), (4, "four"))
        for k in ("pdl", "pdl_local")
    ]
    rows += [(f"MXFP4, {w}", f"{READY}/pdl_mxfp4.log", "w4a16", n, "pdl_local")
             for n, w in ((1, "one token"), (2, "two tokens"), (4, "four tokens"))]  # fmt: skip
    for case, log, prec, tokens, kind in rows:
        t.row(case, kind, *_cells(r, log, prec, tokens, 6, (kind,)), history=HIST)
    return t


TABLES = (placed_ab, placed_ncu, placed_run, ready_h100)
