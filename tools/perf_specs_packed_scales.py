"""docs/PERF.md's generated tables of the twenty-eighth session (2026-12-06, issue 28), on an H100
80GB HBM3 (asked for an H200 or an H100; the device lent an H100): the MXFP4 tile's scale bytes
packed box by box (taken), where its time goes (Nsight Compute), and its values stored in its K
order (timed in the twenty-ninth session, the same day: taken).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_confirm import RUN_COLUMNS, run_rows
from perf_specs_packed import DRAWS, bench_field, bench_mean, packed_rows
from perf_specs_packed_mx import draw_cells
from perf_specs_placed import WORDS

DAY = "2026-12-06-packed-scales"
HIST = "[issue 28][h-i28ps]"
HIST_DO = "[issue 28][h-i28do]"  # the values in K order, timed in the twenty-ninth session
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
LOG = f"{DAY}/call1/packed_scales.log"
ROWS128 = f"{DAY}/call1/rows128.log"
ONE_PASS = "dot m16 n64 k128 w4 s3 pdl r80 passes eb rot packed{} ready-signal"
LOOP = "dot m16 n64 k128 w4 s4 pdl r128 eb rot packed{} ready-signal"
SCALES = " scales-packed"


def arm_variant(words: str):
    """The bench's name at a token count of the arm's launch with ``words`` after "packed" (its
    one-pass tile from 16 tokens, its expert loop below)."""
    return lambda tokens: (ONE_PASS if tokens >= 16 else LOOP).format(words)


_scales_variant = arm_variant(SCALES)  # the scales packed


def draw_rows(t: Table, r: Records, log: str, variant_at, hist: str) -> None:
    """A row a token count of ``log``: the slower rank's step in each draw and their mean, of the
    arm's launch and of its variant (``variant_at(tokens)``, the bench's name), and the change of
    the means."""
    for tokens in (64, 32, 16, 8, 4):
        cells = []
        for variant in ("default", variant_at(tokens)):
            cells += draw_cells(r, log, tokens, variant)
        t.row(WORDS[tokens], *cells, over(cells[5], cells[2]), history=hist)


def copy_share_rows(t: Table, r: Records, log: str, variant_at, hist: str) -> None:
    """A row a case of ``log`` at 64 and 32 tokens (each draw and rank): the step of the variant
    ``variant_at(tokens)`` (the bench's name) and its share of copy as the bench's row gives it."""
    for tokens in (64, 32):
        for seed in (0, 1):
            for rank in (0, 1):
                field = lambda f: bench_field(r, log, "w4a16", tokens, seed, rank,
                                              variant_at(tokens), f)  # fmt: skip
                share = derive(lambda v: 100 * v, "{:.1f}%", field("of_copy"))
                t.row(WORDS[tokens], DRAWS[seed], DRAWS[rank], field("step_us"), share,
                      history=hist)  # fmt: skip


def stall_rows(t: Table, r: Records, sources, hist: str) -> None:
    """A row a stall reason (STALLS, with the tensor cores' ``gmma``), then the cycles a warp
    spends per issued instruction, the DRAM throughput and the duration, a column a report of
    ``sources``: (path, prefix), the prefix a regex that picks which kernel of the report."""
    figure = lambda pattern: [r.text(path, at + pattern) for path, at in sources]  # noqa: E731
    reasons = (*STALLS[:7], ("gmma", "the tensor cores (wgmma)"), *STALLS[7:])
    for reason, words in reasons:
        pat = rf"smsp__average_warps_issue_stalled_{reason}_per_issue_active\.ratio\s+inst\s+(\S+)"
        t.row(f"`{reason}`", words, *figure(pat), history=hist)
    for metric, words in (
        (r"Warp Cycles Per Issued Instruction\s+cycle\s+(\S+)",
         "all (cycles a warp per issued instruction)"),
        (r"^\s+DRAM Throughput\s+%\s+(\S+)", "DRAM throughput (% of peak)"),
        (r"^\s+Duration\s+us\s+(\S+)", "duration (us)"),
    ):  # fmt: skip
        t.row(words, "", *figure(metric), history=hist)


def mx_scales(r: Records) -> Table:
    t = Table(
        name="mx_scales",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The MXFP4 tile's e8m0 scale bytes packed box by box
like its bytes (`Launch.mx_packed_scales`, `tile_packed.pack_tiles` with 4 bytes a row a box:
a step's scales one run of 256 bytes, against 64 words 96 bytes apart in the padded rows the
arm read) against the arm's launch as it stood (its bytes packed, its scales padded), gpt-oss-20b
EP2, routing draws zero and one, both ranks: `python3 tools/bench_grouped_decode.py OUT
--precision w4a16 --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 --variants
dot:-:-:-:-:-:-:-:-:-:-:-:-:-:2 --variant-tokens 4,8,16,32,64` (first call,
`docs/perf/{DAY}/scratch/call1.sh`; the expert loop at 4 and 8 tokens, one pass a program
from 16). Every step checked against the reference and the sentinels first. Cells: the slower
rank's step in each draw and their mean (us), as the bench's summary prints them. Derived:
"change" = packed scales / arm's - 1. Faster in every draw at every count: now the arm's launch
(`grouped_launch.MX_PACKED_SCALES`).""",
        columns=["tokens", "arm's, draw zero", "draw one", "mean", "scales packed, draw zero",
                 "draw one ", "mean ", "change"],
    )  # fmt: skip
    draw_rows(t, r, LOG, _scales_variant, HIST)
    return t


def mx_scales_cells(r: Records) -> Table:
    t = Table(
        name="mx_scales_cells",
        caption=f"""\
{H100}. The same call as `mx_scales`, the one-pass tile's cases one by one (each draw and rank):
the step, fc1 alone and fc2 alone (us; fc1 and fc2 each timed as its own CUDA graph, L2 flushed).
Derived: "change" = packed scales / arm's - 1.""",
        columns=["tokens, draw, rank", "step: arm's", "scales packed", "change", "fc1: arm's",
                 "scales packed ", "change ", "fc2: arm's", "scales packed  ", "change  "],
    )  # fmt: skip
    packed_rows(t, r, LOG, "w4a16", ONE_PASS.format(SCALES), HIST)
    return t


ROWS = "dot m16 n128 k128 w8 s3 pdl r80 passes eb rot packed{} ready-signal fc1"


def mx_rows128(r: Records) -> Table:
    t = Table(
        name="mx_rows128",
        caption=f"""\
{H100}. fc1 on 128 rows a program (two warpgroups, 8 warps: a step's slots loaded once for twice
the weight bytes; fc2 the arm's, its 2,880 rows taking 64), its scales padded or packed, against
the arm's launch as it stood: `--tokens 32,64 --seeds 0,1 --rank 0,1 --variants
dot:-:128:-:8:-:-:-:-:-:-:1,dot:-:128:-:8:-:-:-:-:-:-:1:-:-:2` (first call). The slower rank's
step, mean of two draws (us). Derived: "change" = variant / arm's - 1. With packed scales it is
no faster than the 64-row tile with packed scales (`mx_scales`): not taken.""",
        columns=["tokens", "arm's", "128 rows", "change", "128 rows, scales packed", "change "],
    )  # fmt: skip
    for tokens in (64, 32):
        arm = bench_mean(r, ROWS128, "w4a16", tokens, "default")
        cells = []
        for scales in ("", SCALES):
            v = bench_mean(r, ROWS128, "w4a16", tokens, ROWS.format(scales))
            cells += [v, over(v, arm)]
        t.row(WORDS[tokens], arm, *cells, history=HIST)
    return t


NCU = (
    ("grouped-mxfp4", "MXFP4, bytes packed, scales padded (the arm's then)"),
    ("grouped-mxfp4-scales", "MXFP4, bytes and scales packed (the arm's now)"),
    ("grouped-mxfp4-natural", "MXFP4, natural rows (before the twenty-seventh session)"),
    ("grouped", "FP8, the arm's (placed, packed, through TMA)"),
)
NCU_METRICS = (
    r"Duration\s+us\s+(\S+)",
    r"DRAM Throughput\s+%\s+(\S+)",
    r"L1/TEX Cache Throughput\s+%\s+(\S+)",
    r"L2 Cache Throughput\s+%\s+(\S+)",
    r"Issued Warp Per Scheduler\s+(\S+)",
    r"Eligible Warps Per Scheduler\s+warp\s+(\S+)",
    r"Achieved Active Warps Per SM\s+warp\s+(\S+)",
    r"Local Memory Spilling Requests\s+(\S+)",
)


def mx_ncu(r: Records) -> Table:
    t = Table(
        name="mx_ncu",
        caption=f"""\
{H100}. Nsight Compute on fc1 at 64 tokens (`ncu --clock-control none --launch-skip 2
--launch-count 1 -k regex:_grouped_dot_mxfp4` (or `_fp8`) with the SpeedOfLight, Occupancy,
WarpStateStats, SchedulerStats and MemoryWorkloadAnalysis sections, `python3
tools/ncu_kernels.py FORM`: random weights, gpt-oss-20b EP2 shapes, 16 local experts, the arm's
launches; first call, `scratch/call1.sh`), and on the twenty-sixth session's Gluon probe's fc1 on
its tiled layout (`docs/perf/2026-12-06-packed-mx/scratch/probe_bench.py --tokens 64 --seeds 0
--variants 3:1:0:0:0:1`, its third launch). Cells as the reports print them. The MXFP4 tile's
L1/TEX pipeline is the busiest of its units (73-76%, against 50% for FP8's and 40% for the
probe's), and its warps issue more often than FP8's (0.61-0.62 against 0.52 a scheduler a cycle)
for a lower DRAM share: the tile is bound by its instructions and shared-memory traffic, not by
DRAM. ("ncu_kernels form": grouped-mxfp4-scales is the form that call ran under that name, the arm's
launches with the scales packed; the arm's default since.)""",
        columns=["kernel", "ncu_kernels form", "duration us", "DRAM %", "L1/TEX %", "L2 %",
                 "issued a scheduler", "eligible warps a scheduler", "active warps an SM",
                 "spill requests"],
    )  # fmt: skip
    for form, words in NCU:
        path = f"{DAY}/call1/ncu_fc1_{form}.txt"
        t.row(words, f"`{form}`", *[r.text(path, rf"^\s+{m}") for m in NCU_METRICS],
              history=HIST)  # fmt: skip
    probe = f"{DAY}/call1/ncu_probe_tiled_fc1.txt"
    t.row("the Gluon probe, tiled (weight loop only)", "(probe_bench.py)",
          *[r.text(probe, rf"^\s+{m}") for m in NCU_METRICS], history=HIST)  # fmt: skip
    return t


STALLS = (
    ("barrier", "block barrier"),
    ("not_selected", "eligible, another warp issued"),
    ("selected", "issuing"),
    ("short_scoreboard", "shared memory or MUFU result"),
    ("wait", "fixed latency"),
    ("long_scoreboard", "global or local memory result"),
    ("mio_throttle", "shared-memory instruction queue full"),
    ("math_pipe_throttle", "math pipe busy"),
    ("dispatch_stall", "dispatch"),
)
STALL_RUNS = (
    ("grouped-mxfp4_fc1", "MXFP4 fc1"),
    ("grouped-mxfp4_fc2", "MXFP4 fc2"),
    ("grouped_fc1", "FP8 fc1"),
)


def mx_stalls(r: Records) -> Table:
    t = Table(
        name="mx_stalls",
        caption=f"""\
{H100}. Where the warps of the arm's grouped tiles wait, at 64 tokens (second call,
`scratch/call2.sh`, on the arm with its MXFP4 scales packed): Nsight Compute's
`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio` (a warp's cycles in each
state per instruction it issued) and the total, `Warp Cycles Per Issued Instruction`, for MXFP4's
fc1 and fc2 and FP8's fc1 (`tools/ncu_kernels.py grouped-mxfp4` / `grouped`; fc1 the kernel's
third launch, fc2 its fourth). Reasons under 0.3 in all three are left out (branch resolving,
no instruction, drain, membar and the like; the reports keep every one). FP8's warps wait on
memory (long scoreboard: 4.89 of 10.4 cycles); MXFP4's wait on the block barrier, on each other
for the issue slot and on shared memory, each a cycle or so, and on global memory less than a
cycle: more bytes in flight would not help it, fewer instructions and barriers a step would.""",
        columns=["reason", "what the warp waits for", *[words for _, words in STALL_RUNS]],
    )  # fmt: skip
    for reason, words in STALLS:
        cells = [r.text(f"{DAY}/call2/ncu_stalls_{run}.txt",
                        rf"smsp__average_warps_issue_stalled_{reason}_per_issue_active\.ratio"
                        rf"\s+inst\s+(\S+)") for run, _ in STALL_RUNS]  # fmt: skip
        t.row(f"`{reason}`", words, *cells, history=HIST)
    t.row("all (cycles a warp per issued instruction)", "",
          *[r.text(f"{DAY}/call2/ncu_stalls_{run}.txt",
                   r"Warp Cycles Per Issued Instruction\s+cycle\s+(\S+)")
            for run, _ in STALL_RUNS], history=HIST)  # fmt: skip
    return t


def mx_scales_run(r: Records) -> Table:
    t = Table(
        name="mx_scales_run",
        caption=f"""\
{H100}. The gated scenario with the MXFP4 tile's scales packed (second call, 04ae5e3's tree:
`DEADLINE=... PER_RUN_TIMEOUT=260 bash tools/gpu_run.sh OUT
scenarios/gpt-oss-20b-decode-grouped.yaml`, 219 s; every gate and integrity check passed, 952
pass and 112 skip, `call2/checks_count.txt`): the step (`ffn`, one CUDA graph, the slowest
rank's median over 13 blocks, us) of each arm. Derived as in `mx_packed_run`. Against the
twenty-seventh session's final run (`mx_final_run`: 59.41, 92.16, 98.90, 104.8 and 115.2 us at 4
to 64 tokens), MXFP4 grouped is 1.6-3.7% faster from 4 tokens up; 1 and 2 tokens take the GEMV,
unchanged. Grouped beats dense and MXFP4 beats FP8 at every count.""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, f"{DAY}/call2/report.md", HIST)
    return t


DOT_LOG = f"{DAY}/call3/dot_order.log"
DOT = " scales-packed dot-order"


_dot_variant = arm_variant(DOT)  # the values in K order


def mx_dot(r: Records) -> Table:
    t = Table(
        name="mx_dot",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The MXFP4 tile's values stored in its K order
(`Launch.mx_dot_order`, `mx_dot_order.dot_order_mxfp4`: each step's values where the tile's
decode and `dot_order` put natural value k at position k, so that the slots' operand is read as
the pipeline copies it instead of loaded, permuted and stored again every step; a last step of 64
values its own step) against the arm's launch as it stood (bytes and scales packed, natural K
order), gpt-oss-20b EP2, routing draws zero and one, both ranks: `python3
tools/bench_grouped_decode.py OUT --precision w4a16 --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1
--variants dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1 --variant-tokens 4,8,16,32,64` (third call,
run in the twenty-ninth session, `docs/perf/{DAY}/scratch/call3.sh`; the expert loop at 4 and 8
tokens, one pass a program from 16). Every step checked against the reference and the sentinels
first. Cells: the slower rank's step in each draw and their mean (us), as the bench's summary
prints them. Derived: "change" = K order / arm's - 1. Faster at every count on the mean and in
all 20 draw-and-rank cases (`mx_dot_cells`): now the arm's launch
(`grouped_launch.MX_DOT_ORDER`).""",
        columns=["tokens", "arm's, draw zero", "draw one", "mean", "K order, draw zero",
                 "draw one ", "mean ", "change"],
    )  # fmt: skip
    draw_rows(t, r, DOT_LOG, _dot_variant, HIST_DO)
    return t


def mx_dot_cells(r: Records) -> Table:
    t = Table(
        name="mx_dot_cells",
        caption=f"""\
{H100}. The same call as `mx_dot`, the one-pass tile's cases one by one (each draw and rank): the
step, fc1 alone and fc2 alone (us; fc1 and fc2 each timed as its own CUDA graph, L2 flushed).
Derived: "change" = K order / arm's - 1. The expert loop's cases (4 and 8 tokens) are in the
log: -2.6% to -12.5% on the step.""",
        columns=["tokens, draw, rank", "step: arm's", "K order", "change", "fc1: arm's",
                 "K order ", "change ", "fc2: arm's", "K order  ", "change  "],
    )  # fmt: skip
    packed_rows(t, r, DOT_LOG, "w4a16", ONE_PASS.format(DOT), HIST_DO)
    return t


def mx_dot_copy_share(r: Records) -> Table:
    t = Table(
        name="mx_dot_copy_share",
        caption=f"""\
{H100}. The share of copy of the grouped MXFP4 step in K order, as the arm now launches it (the
same call as `mx_dot`): the step (us) and its share as the bench's rows give them (the touched
experts' weight bytes over the step, over the copy ceiling measured at the call's start, 3.00
TB/s). Target 85%: missed (67-72%).""",
        columns=["tokens", "draw", "rank", "step", "of copy"],
    )  # fmt: skip
    copy_share_rows(t, r, DOT_LOG, _dot_variant, HIST_DO)
    return t


DOT_STALLS = (
    (f"{DAY}/call2/ncu_stalls_grouped-mxfp4_fc1.txt", "natural K order (second call)"),
    (f"{DAY}/call3/ncu_stalls_dot_order_fc1.txt", "K order (third call)"),
)


def mx_dot_stalls(r: Records) -> Table:
    t = Table(
        name="mx_dot_stalls",
        caption=f"""\
{H100}. Where the warps of MXFP4's fc1 wait at 64 tokens, in the natural K order and in its own
(`tools/ncu_kernels.py grouped-mxfp4` in the second call, `grouped-mxfp4-dot` in the third; the
kernel's third launch; metrics as in `mx_stalls`, with the reasons the K order adds: `gmma`,
waiting for the tensor cores). In K order a warp spends 7.8 cycles an issued instruction
against 8.9: less on the block barrier, on shared memory and on its queue, more waiting for
issue slots and the math pipes. DRAM at 64% of peak against 62%.""",
        columns=["reason", "what the warp waits for", *[words for _, words in DOT_STALLS]],
    )  # fmt: skip
    stall_rows(t, r, [(path, "") for path, _ in DOT_STALLS], HIST_DO)
    return t


def mx_dot_run(r: Records) -> Table:
    t = Table(
        name="mx_dot_run",
        caption=f"""\
{H100}. The gated scenario with the MXFP4 tile's values in K order (third call, 4374baa's tree
with `MX_DOT_ORDER = True` set by the call, 185 s; every gate and integrity check passed, 952
pass and 112 skip, `call3/checks_count.txt`): the step (`ffn`, one CUDA graph, the slowest rank's
median over 13 blocks, us) of each arm. Derived as in `mx_packed_run`. Grouped beats dense and
MXFP4 beats FP8 at every count; against `mx_scales_run` MXFP4 grouped is faster from 4 tokens up
(1 and 2 tokens take the GEMV, unchanged).""",
        columns=RUN_COLUMNS,
    )  # fmt: skip
    run_rows(t, r, f"{DAY}/call3/report.md", HIST_DO)
    return t


TABLES = (
    mx_dot_run,
    mx_dot,
    mx_dot_cells,
    mx_dot_copy_share,
    mx_dot_stalls,
    mx_scales_run,
    mx_scales,
    mx_scales_cells,
    mx_stalls,
    mx_ncu,
    mx_rows128,
)
