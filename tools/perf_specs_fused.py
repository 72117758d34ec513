"""docs/PERF.md's generated tables of the sixth H200 session of 2026-12-02 (issue 28): the fifth
session's fused fc1 + fc2 launch measured, and where the grouped decode's FP8 tile spends its time
by second methods (Nsight Compute, ablations of the conversion and of the slots' operand path, lower
register caps for more programs an SM), and an L2 prefetch of fc2's weights during fc1 at 1-4
tokens. No package kernel or launch changed.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re
from functools import partial

from perf_cells import Table, fill
from perf_records import Figure, Records, over
from perf_specs_rows import ab_rows, ab_step, ab_tokens

DAY = "2026-12-02-grouped-fused"
FUSED = f"{DAY}/fused_ab.log"
STATIC = {"fp8": f"{DAY}/fused_static_fp8.log", "mxfp4": f"{DAY}/fused_static_mxfp4.log"}
CVT = (f"{DAY}/ab_cvt.log", f"{DAY}/ab_cvt_seed1.log")
XASYNC = (f"{DAY}/ab_xasync.log", f"{DAY}/ab_xasync_seed1.log")
OCCUPANCY = {"fp8": f"{DAY}/ab_occupancy_fp8.log", "mxfp4": f"{DAY}/ab_occupancy_mxfp4.log"}
NCU = {"fp8": f"{DAY}/ncu_fp8.txt", "mxfp4": f"{DAY}/ncu_mxfp4.txt"}
NCU_STALLS = f"{DAY}/ncu_fp8_stalls.txt"
L2PF = (f"{DAY}/l2pf.log", f"{DAY}/l2pf_seed1.log")
L2PF_SIDE = f"{DAY}/l2pf_side.log"
HIST = "[issue 28][h-i28x]"
FORMATS = (("fp8", "FP8"), ("mxfp4", "MXFP4"))
CUR = "cur:16:64:128:4:4"

_HARNESS = """\
in the scratch harness (`scratch/mb.py` of the records with `CHAIN=1 PDL=1`: gpt-oss-20b EP2
rank 0's shapes, uniform random routing, random weights, fc2 reading fc1's output, one CUDA graph
a step, L2 flushed before each replay, median of 40 interleaved replays, us)"""


def _rows(r: Records, t: Table, path: str, fmt: str, label: str, launches: tuple,
          counts: tuple[int, ...], new: int = 1, old: int = 0) -> None:  # fmt: skip
    """`perf_specs_rows.ab_rows` over plain specs, each row's count after ``label``."""
    ab_rows(r, t, path, fmt, tuple((s, s) for s in launches), new, old, counts, HIST, label)


_FUSED = (CUR, "fused:16:64:128:4:4", "fused3:16:64:128:4:4", "fused2:16:64:128:4:4")


def fused_launch(r: Records) -> Table:
    t = Table(
        name="fused_launch",
        caption=f"""\
The fifth session's candidate for the 85% target, run: fc1 and fc2 of the grouped decode in ONE
persistent launch (`scratch/gd_fused.py`: programs pull tiles from an atomic queue, fc1's tiles
first; an fc2 tile waits for its expert's fc1 tiles by an acquire counter), 4, 3 or 2 programs an
SM, against the committed two launches (the arm's tile: TMA for FP8, at most 128 registers,
programmatic dependent launch), {_HARNESS}. Every launch's outputs equal the committed ones' bit
for bit at every count. Derived: "change" = one launch at 4 programs an SM / two launches - 1.
The single launch loses 4.6-8.4% at 16 to 64 tokens in both formats: the fixed cost of the
second launch it saves is smaller than what the queue and the persistent programs cost (each
pull waits for an atomic's round trip, and a program's next tile cannot start its loads before
its last one ends; not measured apart). Not shipped. At 8 tokens FP8's single launch is 3.6%
faster and MXFP4's 4.2% slower; at 4 and 1 token the first column is not the arm's launch (the
GEMV at 1, FP8's pointer tile at 4: `fused_static`, another draw).""",
        columns=[
            "precision, tokens",
            "two launches (committed)",
            "one launch, 4 an SM",
            "one launch, 3 an SM",
            "one launch, 2 an SM",
            "change",
        ],
    )
    for fmt, label in FORMATS:
        _rows(r, t, FUSED, fmt, label, _FUSED, (64, 32, 16, 8, 4, 1))
    return t


_GEMV = {"fp8": "gv:1:2:1024:1:0", "mxfp4": "gv:1:16:1024:4:0"}
_STATIC = (CUR, "nocap:16:64:128:4:4", "fused:16:64:128:4:4", "fuseds:16:64:128:4:4",
           "fuseds3:16:64:128:4:4")  # fmt: skip


def fused_static(r: Records) -> Table:
    t = Table(
        name="fused_static",
        caption=f"""\
The fused launch with a static tile order (program p takes tiles p, p + P, ...: no queue, so no
atomic a tile; safe only while every program is resident), beside the queue's order, the tile
without a register cap (pointer loads, no cap: the arm's FP8 launch below 2 slots an expert)
and the GEMV at its default blocks (the arm's launch up to half a slot
an expert), {_HARNESS}; a second draw of routing and weights (other token counts than
`fused_launch`). Outputs equal the committed tile's bit for bit but the GEMV's (another order of
the fp32 sums: up to 0.002 for FP8, up to 1 in outputs of magnitude near 2^8 for MXFP4).
Derived: "change" = static order / queue order - 1. The static order is slower than the queue at
8 to 64 tokens (3.4-7.1%) but FP8's 32 (-0.7%), faster at 2 and 4 (12.5-23.8%); against the
committed two launches neither order wins at 8 to 64 tokens. At 4 tokens the arm's launches
(FP8 49.9, MXFP4 48.7) stay the fastest. At 2 tokens FP8's GEMV, the arm's launch there, takes
66.0 against the committed tile's 60.0 and the static single launch's 54.2, as the fifth session
saw in the bench (61.9 against 48.2): noticed and left, since the policy takes sparse_decode up
to 4 tokens.""",
        columns=[
            "precision, tokens",
            "two launches (committed)",
            "two launches, no cap",
            "one launch, queue",
            "one launch, static order",
            "static, 3 an SM",
            "GEMV (two launches)",
            "change",
        ],
    )
    for fmt, label in FORMATS:
        _rows(r, t, STATIC[fmt], fmt, label, (*_STATIC, _GEMV[fmt]), (64, 32, 8, 4, 2), 3, 2)
    return t


def _draws(r: Records, t: Table, logs: tuple[str, str], launches: tuple, news: tuple[int, ...],
           counts: tuple[tuple[int, ...], tuple[int, ...]]) -> None:  # fmt: skip
    """Both draws of an FP8 A/B, a row a (draw, count): each launch's step (blank where that
    draw's log has no such launch), then launch n / the first - 1 for each n of ``news``."""
    for path, draw, tokens_of in zip(logs, ("first", "second"), counts, strict=True):
        text = r.read(path)
        for tokens in tokens_of:
            steps: list[Figure | str] = [
                ab_step(r, path, "fp8", tokens, spec)
                if re.search(rf"^fp8 T={tokens} {re.escape(spec)}: step", text, re.MULTILINE)
                else ""
                for spec in launches
            ]
            changes = [over(steps[n], steps[0]) if steps[n] else "" for n in news]
            t.row(
                fill(f"{draw}, {{}}", ab_tokens(r, path, "fp8", tokens, launches[0])),
                *steps,
                *changes,
                history=HIST,
            )


def fp8_conversion_ablation(r: Records) -> Table:
    t = Table(
        name="fp8_conversion_ablation",
        caption=f"""\
What the e4m3 -> bf16 conversion costs the FP8 tile (the loop's largest block of instructions:
10 integer and bf16 instructions for four values, `jit._E4M3_BF16_ASM`), {_HARNESS}, two draws.
"4 a pair": the same values in four instructions a pair instead of five (`scratch/gd_abl.py`
ABL 5: prmt's sign mode fills the byte above each e4m3 byte with its sign, so one shift and one
mask place sign and magnitude); `cvt_check.log`: all 256 bytes in each of the four positions of
a packed word give the committed conversion's bits, and the outputs equal the committed tile's bit
for bit. "permute only" (ABL 4, timing only: wrong values): each byte moved into its bf16 by one
byte permute a pair, the cheapest data flow from the fp8 bytes to the tensor cores. Derived:
"change" = 4 a pair / committed - 1; "permute only, change" the same for ABL 4. Cutting the
conversion to almost nothing gains 1.3-3.5%, so the conversion is not what holds the tile at 66%
of copy; the exact four-instruction form is 0.5-2.4% slower (not shipped; its SASS not looked
at).""",
        columns=[
            "draw, tokens",
            "committed",
            "4 a pair (exact)",
            "permute only (wrong)",
            "change",
            "permute only, change",
        ],
    )
    launches = (CUR, "abl5:16:64:128:4:4", "abl4:16:64:128:4:4")
    _draws(r, t, CVT, launches, (1, 2), ((64, 32, 16, 8), (64, 32)))
    return t


def fp8_x_async(r: Records) -> Table:
    t = Table(
        name="fp8_x_async",
        caption=f"""\
The slots' operand: the committed tile loads it through registers and permutes it to the dot's K
order there (`grouped_dot.dot_order_rows`), then stores it to shared memory for the tensor cores
each step. ABL 6 (`scratch/gd_abl.py`, timing only: wrong values) feeds the loaded operand to the
dot unpermuted, the path the pipeliner can copy asynchronously like the weights: what the tile
would gain if x were stored in the dot's order in memory. {_HARNESS}, two draws, at 4 stages and
(first draw) 3 and 5. Derived: "change" = ABL 6 at 4 stages / committed - 1. 0.7-2.6% faster:
the slots' operand path is not it either, and storing x in the dot's order would cost its own
pass.""",
        columns=[
            "draw, tokens",
            "committed",
            "ABL 6, 4 stages",
            "ABL 6, 3 stages",
            "ABL 6, 5 stages",
            "change",
        ],
    )
    launches = (CUR, "abl6:16:64:128:4:4", "abl6:16:64:128:4:3", "abl6:16:64:128:4:5")
    _draws(r, t, XASYNC, launches, (1,), ((64, 32, 16, 8), (64, 32)))
    return t


_CAPS = (CUR, "cap96:16:64:128:4:3", "cap96:16:64:128:4:4", "cap80:16:64:128:4:3",
         "cap80:16:64:128:4:2")  # fmt: skip


def tile_occupancy(r: Records) -> Table:
    t = Table(
        name="tile_occupancy",
        caption=f"""\
More programs an SM (Nsight Compute, `tile_ncu`: the tile holds 4 programs of 4 warps an SM,
limited by its 128 registers a thread and, at 4 stages, its shared memory): the committed tile
with at most 96 or 80 registers a thread on 2 to 4 stages (5 programs an SM at 96 registers and
3 stages, 6 at 80 and 3, by the registers and shared memory they need: counted, not profiled),
{_HARNESS}. Every launch's outputs equal the committed tile's bit for bit. Derived: "change" = 96
registers, 3 stages / committed - 1. Every capped launch is slower at 32 and 64 tokens (7.4-10.4%
at 96 registers and 3 stages), within 2% at 16, and faster only for MXFP4 at 8 tokens (-3.2%):
more programs an SM is not the way either (why the lower caps lose was not looked into: no SASS
taken).""",
        columns=[
            "precision, tokens",
            "committed (128, 4 stages)",
            "96 registers, 3 stages",
            "96, 4 stages",
            "80, 3 stages",
            "80, 2 stages",
            "change",
        ],
    )
    for fmt, label in FORMATS:
        _rows(r, t, OCCUPANCY[fmt], fmt, label, _CAPS, (64, 32, 16, 8))
    return t


_NCU_GRID = {"fc1": "90, 16, 1", "fc2": "45, 16, 1"}


def ncu_metric(r: Records, path: str, head: str, metric: str) -> Figure:
    """A metric's value in Nsight Compute text: the first line naming ``metric`` after the
    kernel line ``head`` matches (its name and launch)."""
    return r.text(path, head + r"[\s\S]*?^\s+" + metric + r"\s+(?:\S+\s+)?([\d.,]+)\s*$")


def _ncu(r: Records, path: str, kernel: str, stage: str, metric: str) -> Figure:
    """A metric's value in the Nsight Compute text of one kernel (its grid names the stage)."""
    return ncu_metric(r, path, rf"{kernel} \({_NCU_GRID[stage]}\)x\(128, 1, 1\)", metric)


def tile_ncu(r: Records) -> Table:
    t = Table(
        name="tile_ncu",
        caption="""\
The grouped decode's tile under Nsight Compute (`ncu --clock-control none`, the sections of the
records' README; `tools/ncu_kernels.py grouped` and `grouped-mxfp4`: fc1 with the GLU then fc2 at
64 tokens, gpt-oss-20b EP2 rank 0's shapes, random routing and weights, each stage with the arm's
default launch; the third of three calls profiled, caches flushed before each kernel as ncu does,
clocks as the GPU set them: SM 1.73 GHz, memory 3.20 GHz). "DRAM": the kernel's own read rate
while it runs, and ncu's share of the DRAM peak. "issued": instructions a scheduler issues a
cycle (at most 1). "warps": warps a scheduler holds, and of those eligible to issue, on average.
The FP8 fc1 reads at 3.00 TB/s inside the kernel (70% of the 4.27 TB/s copy), fc2 at 2.46
(58%); each scheduler holds 3.6 warps (4 programs of 4 warps an SM, 25% theoretical occupancy,
limited by registers and shared memory) and issues in 57% of its cycles. MXFP4's fc1 reads at
1.71 TB/s (40%) and issues in 67%: more instructions a byte. Stalls are in `tile_stalls`.""",
        columns=[
            "precision, stage",
            "duration us",
            "DRAM TB/s, of peak",
            "issued",
            "warps active, eligible",
            "registers",
            "waves an SM",
        ],
    )
    for fmt, label in FORMATS:
        kernel = f"_grouped_dot_{fmt}"
        for stage in ("fc1", "fc2"):
            m = partial(_ncu, r, NCU[fmt], kernel, stage)
            t.row(
                f"{label}, {stage}",
                m("Duration"),
                fill("{}, {}%", m(r"Memory Throughput\s+Tbyte/s"), m(r"DRAM Throughput")),
                m("Issued Warp Per Scheduler"),
                fill("{}, {}", m("Active Warps Per Scheduler"), m("Eligible Warps Per Scheduler")),
                m("Registers Per Thread"),
                m("Waves Per SM"),
                history=HIST,
            )
    return t


_STALLS = (
    ("wait", "wait"),
    ("long scoreboard", "long_scoreboard"),
    ("math pipe throttle", "math_pipe_throttle"),
    ("barrier", "barrier"),
    ("short scoreboard", "short_scoreboard"),
    ("selected", "selected"),
    ("not selected", "not_selected"),
)


def tile_stalls(r: Records) -> Table:
    t = Table(
        name="tile_stalls",
        caption="""\
Where the FP8 tile's warps wait (Nsight Compute, the launches of `tile_ncu`, call 6: each reason's
average warps stalled per issued instruction,
`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`; the rest below 0.15 each).
Their sum is the cycles between a warp's instructions (6.26 for fc1). No one reason dominates:
fixed-latency dependencies ("wait"), loads through L1 not yet back ("long scoreboard"), a busy pipe
("math pipe throttle") and the step's barrier share it (by reason only: no per-instruction
attribution was taken), which is what the ablations say (`fp8_conversion_ablation`, `fp8_x_async`:
no single part removed gains more than 4%). The reading: the tile lacks warps to switch to (3.6
a scheduler), and neither more programs an SM (`tile_occupancy`) nor warp specialization (not
available for this loop in the GPU's triton 3.6, fifth session) gives it more.""",
        columns=["stage", *(name for name, _ in _STALLS), "instructions, of them wgmma"],
    )
    for stage in _NCU_GRID:
        m = partial(_ncu, r, NCU_STALLS, "_grouped_dot_fp8", stage)
        t.row(
            stage,
            *(
                m(rf"smsp__average_warps_issue_stalled_{key}_per_issue_active\.ratio")
                for _, key in _STALLS
            ),
            fill(
                "{}, {}",
                m(r"smsp__inst_executed\.sum"),
                m(r"sm__inst_executed_pipe_tensor_op_gmma\.sum"),
            ),
            history=HIST,
        )
    return t


def l2_prefetch(r: Records) -> Table:
    t = Table(
        name="l2_prefetch",
        caption="""\
The sparse decode step at 1 to 4 tokens (the policy's arm there: fc1 and fc2, the arm's GEMVs as
shipped, programmatic dependent launch as the arm sets it: MXFP4 on, FP8 off) with fc2's weights of
the routed local experts prefetched into L2 by a kernel launched before fc1 (`scratch/l2pf.py`:
`cp.async.bulk.prefetch.L2`, 64 KiB a thread, one program a slot; fc1 reads its own bytes at about
half the copy rate at one token, so the idea was that the DRAM fetches fc2's bytes meanwhile and fc2
reads L2). Same harness as the A/Bs above but the sparse arm's kernels; two draws of routing and
weights. "evict-last": the prefetch with an L2 evict-last cache hint; "fc1's too": fc1's weights
prefetched as well; "as a module": the same prefetch as a candidate package function
(`scratch/prefetch_pkg.py`, the size in a register; with MXFP4's scales too). Outputs equal the
plain step's bit for bit. Derived: "change" = prefetched / plain - 1. The prefetch makes every step
slower, by more than fc2 itself takes (FP8 one token: +35 us on a 34 us step): the prefetches are
not overlapped with fc1 as hoped (whether the prefetch kernel waits for its lines or its traffic
holds fc1's reads back was not measured apart). Not shipped; the candidate module was removed.""",
        columns=[
            "draw, precision, tokens",
            "plain",
            "fc2 prefetched",
            "evict-last",
            "fc1's too",
            "as a module",
            "change",
        ],  # fmt: skip
    )
    kinds = ("base", "pf", "pfh", "pfa", "pkg")
    for path, draw in zip(L2PF, ("first", "second"), strict=True):
        for fmt, label in FORMATS:
            _rows(r, t, path, fmt, f"{draw}, {label}", kinds, (1, 2, 4))
    return t


def l2_prefetch_side(r: Records) -> Table:
    t = Table(
        name="l2_prefetch_side",
        caption="""\
`l2_prefetch`'s next try (call 11, the first draw's routing and weights again): the prefetch
kernel on a side stream of the step's graph, so that fc1 need not wait for it (fc2 waits for
both), with its 4 programs as before ("side stream") or spread over 16 programs an FP8 expert of
one warp, 16 KiB a thread ("side stream, wide"). Outputs equal the plain step's bit for bit.
Derived: "change" = side stream, wide / plain - 1. Better than the prefetch in the stream, still
slower than no prefetch at every count in both formats (FP8 one token 40.1 against 35.4 us):
the L2 prefetch of fc2's weights is dropped.""",
        columns=[
            "precision, tokens",
            "plain",
            "prefetched",
            "side stream",
            "side stream, wide",
            "change",
        ],  # fmt: skip
    )
    for fmt, label in FORMATS:
        _rows(r, t, L2PF_SIDE, fmt, label, ("base", "pf", "pfs", "pfws"), (1, 2, 4), 3, 0)
    return t


TABLES = [
    fused_launch,
    fused_static,
    tile_ncu,
    tile_stalls,
    fp8_conversion_ablation,
    fp8_x_async,
    tile_occupancy,
    l2_prefetch,
    l2_prefetch_side,
]
