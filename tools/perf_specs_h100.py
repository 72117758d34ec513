"""docs/PERF.md's generated tables of the thirty-third session (2026-12-07, issue 28), on an H100
80GB HBM3 (asked for an H100; the device lent one): the card's own ceilings, measured as the
H200's were (`tools/measure_ceilings.py`, now `moebench.core.ceilings.H100_SXM`), and the gated
scenario before and after they were in place (the run's 'of copy' and physical floors on its own
card's figures).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, derive
from perf_specs_confirm import RUN_COLUMNS, run_rows
from perf_specs_placed import WORDS

DAY = "2026-12-07-h100-ceilings"
HIST = "[issue 28][h-i28hc]"
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
CEIL = f"{DAY}/call1/ceilings.log"
BEFORE = f"{DAY}/call0/report.md"  # the H100 bounded by the H200's ceilings, no fraction
AFTER = f"{DAY}/call2/report.md"  # the H100 SXM's own ceilings
NUM = r"([\d.]+)"


def h100_ceilings(r: Records) -> Table:
    t = Table(
        name="h100_ceilings",
        caption=f"""\
{H100}, torch 2.11.0+cu130: `python3 tools/measure_ceilings.py OUT.json --repeats 5` (second
call, `docs/perf/{DAY}/scratch/call1.sh`), the method of the H200's record: the device copy of
two 1 GiB buffers (each repeat the median of 20 copies timed with CUDA events, bytes read plus
written), 8192-cube products on random normal data (median of 20 after 5: `torch.mm` in bf16,
`torch._scaled_mm` on e4m3 operands with bf16 out), the L2 the driver reports. These are the
figures of `moebench.core.ceilings.H100_SXM` (copy rounded to 2.97 TB/s, products to whole
TFLOP/s), found by the driver's name `NVIDIA H100 80GB HBM3` only: the PCIe and NVL cards keep
the H200's bound. The copy matches what every bench since 2026-12-03 measured at its start on
this model (2.98-3.01 TB/s, the `copy_share_h100` captions). The fp8 product outran the H200's
record (1,286 TFLOP/s, 2026-11-29) on the same torch: a product's rate is not the card's
ordering, and no floor of the decode scenarios is set by it.""",
        columns=["quantity", "figure", "each repeat"],
    )  # fmt: skip
    copies = r.text(CEIL, r"1 GiB\): ([\d., ]+); median")
    t.row("device copy (TB/s, read + written)",
          r.text(CEIL, rf"; median {NUM}$"), copies, history=HIST)  # fmt: skip
    for prec in ("bf16", "fp8"):
        rate = r.text(CEIL, rf"^8192-cube {prec} product: {NUM} TFLOP/s")
        t.row(f"the cube product in {prec} (TFLOP/s)", rate, "", history=HIST)
    t.row("L2 (bytes)", r.text(CEIL, r"^L2: (\d+) bytes"), "", history=HIST)
    return t


def h100_gated_run(r: Records) -> Table:
    t = Table(
        name="h100_gated_run",
        caption=f"""\
{H100}. The gated scenario on the arm as it stands (the scale pair as one multiply, 4a21460,
through every gate for the first time): first call (f0a4e15's tree, the H100 then bounded by the
H200's ceilings; `{BEFORE}`), every gate and integrity check passed, 952 pass and 112 skip
(`call0/checks_count.txt`). Cells: the step (`ffn`, one CUDA graph, the slowest rank's median
over 13 blocks, us) of each arm. Derived: "grouped / dense" = FP8 grouped / FP8 dense; "MXFP4
best / FP8 best" = the faster MXFP4 arm over the faster FP8 arm. Grouped beats dense and MXFP4
beats FP8 at every count.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, BEFORE, HIST)
    return t


def h100_of_copy(r: Records) -> Table:
    t = Table(
        name="h100_of_copy",
        caption=f"""\
{H100}. The gated scenario again with the H100 SXM's own ceilings in `moebench.core.ceilings`
(third call, 5e8732c's tree; its manifest names f0a4e15 (dirty), the device's copy of the
repository's history being that of its first call; `{AFTER}`): every gate and integrity check
passed, 952 pass and 112 skip (`call2/checks_count.txt`), the physical floors now drawn at
2.97 TB/s less 50 MiB of L2, not at the H200's 4.27 less 60. Cells: the report's weight
bandwidth (the touched experts' bytes on the slowest rank over its median step, GB/s, and the
report's own 'of copy', now against 2.97 TB/s; the first call's report left it empty) of the
grouped and sparse arms. Issue 28's copy-share targets read here: FP8 grouped 88-90% at 16-64
tokens (85% at 32 and 64: met); MXFP4 grouped 72% and 66% at 32 and 64 (missed); at one token the
best FP8 arm (sparse) 70% (75%: missed).""",
        columns=["tokens", "FP8 grouped GB/s", "of copy", "FP8 sparse GB/s", "of copy ",
                 "MXFP4 grouped GB/s", "of copy  ", "MXFP4 sparse GB/s", "of copy   "],
    )  # fmt: skip
    for i, tokens in enumerate((1, 2, 4, 8, 16, 32, 64)):
        cells = []
        for case, prec in ((i, "w8a16"), (i + 7, "w4a16")):
            for arm in ("grouped_decode", "sparse_decode"):
                match = dict(case=f"c{case:03d}-precision={prec}-tokens_per_rank={tokens}",
                             stage="ffn", arm=arm)  # fmt: skip
                cells += [r.cell(AFTER, "Weight bandwidth", "GB/s", **match),
                          r.cell(AFTER, "Weight bandwidth", "of copy", **match)]  # fmt: skip
        t.row(WORDS[tokens], *cells, history=HIST)
    return t


def h100_run_drift(r: Records) -> Table:
    t = Table(
        name="h100_run_drift",
        caption=f"""\
{H100}. The two gated runs of the session side by side (first call, `{BEFORE}`; third call,
`{AFTER}`; no kernel changed between them, only the ceilings the run draws its floors and
fractions against): the grouped arm's step (`ffn`, us). Derived: "change" = third / first - 1,
the two machines' and runs' difference.""",
        columns=["tokens", "FP8: first", "third", "change", "MXFP4: first", "third ", "change "],
    )  # fmt: skip
    for i, tokens in enumerate((1, 2, 4, 8, 16, 32, 64)):
        cells = []
        for case, prec in ((i, "w8a16"), (i + 7, "w4a16")):
            name = f"c{case:03d}-precision={prec}-tokens_per_rank={tokens}"
            a, b = (r.result(run, "ffn", "grouped_decode", name) for run in (BEFORE, AFTER))
            cells += [a, b, derive(lambda x, y: y / x - 1, "{:+.1%}", a, b)]
        t.row(WORDS[tokens], *cells, history=HIST)
    return t


NCU = {"arm": f"{DAY}/call4/ncu_grouped-mxfp4.txt",
       "stream": f"{DAY}/call4/ncu_grouped-mxfp4-stream.txt"}  # fmt: skip
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def mx_stream_k_ncu(r: Records) -> Table:
    t = Table(
        name="mx_stream_k_ncu",
        caption=f"""\
{H100}. Where the thirty-second session's persistent grid lost (`mx_stream_k_stages`): Nsight
Compute on the arm's MXFP4 one-pass grid and on the persistent, evenly split grid (6 programs an
SM, 80 registers, 3 stages), fc1 and fc2 of the second iteration, 64 tokens of random routing
(`ncu --clock-control none --launch-skip 2 --launch-count 2 -k regex:_grouped_dot_mxfp4
--section SpeedOfLight --section Occupancy --metrics ... python3 tools/ncu_kernels.py
grouped-mxfp4` and `grouped-mxfp4-stream`; fourth call, `docs/perf/{DAY}/scratch/call4.sh`,
6891e4e's tree). Derived: "DRAM MB" = bytes read + written; "MB / us" = that over the duration;
"tail" = the busiest SM's active cycles / the mean SM's - 1. Both grids move DRAM at the same
63-64% (fc1) and 57-58% (fc2) of its peak; the persistent grid moves 21% (fc1) and 27% (fc2)
more bytes, its fp32 partial sums written 5-6 times the arm's writes, and issues 9% and 23% more
instructions, its warps waiting longer on global loads and the barrier. The arm's busiest SM is 5%
(fc1) and 6% (fc2) past the mean: no more than that was there for an even split to take.""",
        columns=["stage, grid", "us", "DRAM read MB", "written MB", "DRAM MB", "MB / us",
                 "DRAM % of peak", "L2 hit %", "instructions", "tail", "long scoreboard",
                 "barrier", "not selected"],
    )  # fmt: skip
    for k, stage in enumerate(("fc1", "fc2")):
        for grid, name in (("arm", "one pass a program (the arm's)"),
                           ("stream", "persistent, even split")):  # fmt: skip
            log = NCU[grid]
            m = lambda metric, log=log, k=k: r.ncu(log, k, metric)  # noqa: E731
            us, rd, wr = m("Duration"), m("dram__bytes_read.sum"), m("dram__bytes_write.sum")
            moved = derive(lambda a, b: a + b, "{:.2f}", rd, wr)
            tail = derive(lambda mx, av: mx / av - 1, "{:+.1%}", m("sm__cycles_active.max"),
                          m("sm__cycles_active.avg"))  # fmt: skip
            t.row(f"{stage}, {name}", us, rd, wr, moved,
                  derive(lambda b, u: b / u, "{:.2f}", moved, us), m("DRAM Throughput"),
                  m("lts__t_sector_hit_rate.pct"), m("smsp__inst_executed.sum"), tail,
                  m(STALL.format("long_scoreboard")), m(STALL.format("barrier")),
                  m(STALL.format("not_selected")), history=HIST)  # fmt: skip
    return t


TABLES = (h100_ceilings, h100_gated_run, h100_of_copy, h100_run_drift, mx_stream_k_ncu)
