"""docs/PERF.md's generated tables of the prefill family's activation and GEMMs (V4-Flash shapes).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table, bold, fill
from perf_records import Figure, Records, Value, count, derive, over, ratio
from perf_specs_latest import (
    BENCH_1201,
    EP8_1201,
    EP8_FINAL,
    FULL_1201,
    MASKED,
    SEED_1201,
    of_copy,
)

GROUP_M = "2026-12-01/bench_kernels-gemm-group_m.log"
FLATTEN_19 = "2026-12-01-kernel/bench_kernels-gemm-flatten.log"
SEQ_1 = "2026-12-01/bench_kernels-sequential.log"
SEQ_2 = "2026-12-01/bench_kernels-sequential-run2.log"
RUN3_1129 = "2026-11-29-kernels/bench-run3-read-flush.log"
EP1_1201 = "2026-12-01/v4-flash-ep1-distributed.md"
BF16_PEER = "2026-11-29-final/v4-flash-ep8-bf16-peer.md"
NCU_ACT = "2026-11-30-kernels/ncu_act.txt"


def act(r: Records) -> Table:
    def bench(field: str = "us", **match: str | int) -> Figure:
        return r.kv(BENCH_1201, field, **match)

    grid = dict(kernel="act_masked", schedule="grid", block_rows=16, groups=2)
    pers = dict(kernel="act_masked", schedule="persistent", block_rows=16, groups=1, per_sm=16)
    dense_same = dict(kernel="act_dense_same_call")
    seed_dense = r.result(SEED_1201, "kernel/act", "prefix_sum")
    seed_masked = r.result(SEED_1201, "kernel/act", MASKED)
    floor = bench("floor_us", kernel="act_dense", block_rows=16, groups=2)
    live_floor = bench("floor_us", routing="balanced3072", **grid)
    timer = bench(kernel="timer_one_store_kernel")
    timed_floor = derive(lambda f, t: f + t, "{:.2f}", live_floor, timer)
    t = Table(
        name="act",
        caption="""\
Derived: masked over dense = dense / masked (the seed-act-microbench pair for the grid
schedule, the bench's balanced pair for the persistent one); "at most under this timer" =
dense / (live-row byte floor + the timer's one-store kernel); "by bytes" = whole-buffer floor /
live-row floor; "+x%" = masked / dense - 1 on the full buffer.""",
        columns=["figure", "value", "floor (how)"],
    )
    hist = "[issue 3 targets][h-i3], [masked act][h-actfloor]"
    t.row(
        "dense (stock, prefix_sum), seed shape",
        fill(
            "**{}** prefix_sum, {} stock (seed-act-microbench, kernel regime); {} (bench, "
            "16x2); {} balanced / {} full buffer (bench, interleaved)",
            seed_dense,
            r.result(SEED_1201, "kernel/act", "stock"),
            bench(kernel="act_dense", block_rows=16, groups=2),
            bench(routing="balanced3072", **dense_same),
            bench(routing="full", **dense_same),
        ),
        fill("{} (whole buffer at the copy ceiling)", floor),
        history=hist,
    )
    t.row(
        "masked, grid schedule (the arms' only launch until the per-case choice; above the "
        "crossover now)",
        fill(
            "**{}** (seed-act-microbench); {} balanced / {} one expert (bench, interleaved)",
            seed_masked,
            bench(routing="balanced3072", **grid),
            bench(routing="one_expert3072", **grid),
        ),
        fill(
            "{} (live rows at the copy ceiling); {} with the timer's one-store kernel",
            live_floor,
            timed_floor,
        ),
        history=hist,
    )
    t.row(
        fill(
            "masked, persistent 16x1 at {} programs/SM (not shipped then)",
            bench("per_sm", routing="balanced3072", **pers),
        ),
        fill(
            "{} balanced, {} one expert; full buffer {} ({})",
            bench(routing="balanced3072", **pers),
            bench(routing="one_expert3072", **pers),
            bench(routing="full", **pers),
            over(bench(routing="full", **pers), bench(routing="full", **dense_same)),
        ),
        "as above",
        history="[masked act][h-actfloor]",
    )
    t.row(
        "dense over a buffer of only the live rows (the best masking can reach)",
        bold(bench(kernel="act_dense_live_rows_only", live=3072, block_rows=16, groups=2)),
        fill(
            "the measured ideal; byte floor {}",
            bench(
                "floor_us", kernel="act_dense_live_rows_only", live=3072, block_rows=16, groups=2
            ),
        ),
        history="[masked act][h-actfloor]",
    )
    t.row(
        "masked with no live row (fixed cost)",
        fill(
            "grid {}; persistent {}",
            bench(kernel="act_masked", schedule="grid", live=0),
            bench(kernel="act_masked", schedule="persistent", live=0),
        ),
        fill("timer floor {}", timer),
        history="[masked act][h-actfloor]",
    )
    t.row(
        "masked over dense",
        fill(
            "**{}** grid, {} persistent",
            ratio(seed_dense, seed_masked),
            ratio(
                bench(routing="balanced3072", **dense_same), bench(routing="balanced3072", **pers)
            ),
        ),
        fill(
            "{} at most under this timer; {} by bytes",
            ratio(seed_dense, timed_floor),
            ratio(floor, live_floor),
        ),
        history="[issue 3 targets][h-i3]",
    )
    t.row(
        "full buffer, masked over dense",
        fill(
            "**{}** (bench, full buffer: {} against {}); **{}** (full-buffer scenario, kernel "
            "regime: {} against {})",
            over(bench(routing="full", **grid), bench(routing="full", **dense_same)),
            bench(routing="full", **grid),
            bench(routing="full", **dense_same),
            r.result(FULL_1201, "kernel/act", MASKED, column="change [CI]"),
            r.result(FULL_1201, "kernel/act", MASKED),
            r.result(FULL_1201, "kernel/act", "stock"),
        ),
        "",
        history=hist,
    )
    t.row(
        "masked / dense inside v4-flash-ep8 (kernel regime, rank shape)",
        fill(
            "{} / {}",
            r.result(EP8_1201, "kernel/act", MASKED),
            r.result(EP8_1201, "kernel/act", "prefix_sum"),
        ),
        "",
        history="[FFN after TMA][h-ffn1201]",
    )
    ncu = {
        name: r.text(NCU_ACT, rf"^\s+{label}\s+{unit}\s+([\d.,]+)\s*$")
        for name, label, unit in (
            ("us", "Duration", "us"),
            ("dram", "DRAM Throughput", "%"),
            ("tbs", "Memory Throughput", "Tbyte/s"),
            ("regs", "Registers Per Thread", "register/thread"),
            ("occ", "Achieved Occupancy", "%"),
        )
    }
    t.row(
        "Nsight Compute on the masked grid kernel",
        fill(
            "{} us, DRAM {}% of peak ({} TB/s), {} registers, {}% achieved occupancy",
            ncu["us"],
            ncu["dram"],
            ncu["tbs"],
            ncu["regs"],
            ncu["occ"],
        ),
        "",
        history="[decode after the block choice][h-blocks]",
    )
    return t


def _share(live: Value, rows: Value) -> Value:
    return derive(lambda a, b: 100 * a / b, "{:.1f}%", live, rows)


def gemm(r: Records) -> Table:
    rows = r.kv(GROUP_M, "rows", kernel="fc1_all", loads="tma", stages=3)
    t = Table(
        name="gemm",
        caption="""\
The floor is the log's: max(bytes / copy ceiling, FLOPs / fp8 ceiling) on the live rows (on
every row for the stock mode). Derived: live share = live rows / the buffer's rows (the stock
mode's row count in the same log; in the TMA session's log for the run of 2026-11-29).""",
        columns=[
            "live rows",
            "FC1 psum",
            "FC1 floor",
            "FC1 torch",
            "FC2 psum",
            "FC2 floor",
            "FC2 torch",
        ],
    )

    def tma_row(path: str, live: int, label: str, hist: str, **more: str) -> None:
        psum = dict(loads="tma", stages=3, per_sm=3, group_m=8, **more)
        cells: list = []
        for fc in ("fc1", "fc2"):
            ours = r.kv(path, "us", kernel=f"{fc}_psum", live=live, **psum)
            cells += [
                bold(ours),
                r.kv(path, "floor_us", kernel=f"{fc}_psum", live=live, **psum),
                r.kv(path, "us", kernel=f"{fc}_torch_scaled_grouped_mm", live=live),
            ]
        count_live = r.kv(path, "live", kernel="fc1_psum", live=live, **psum)
        buffer = r.kv(path, "rows", kernel="fc1_all", loads="tma", stages=3)
        t.row(
            fill(f"{{}} ({{}}){label}", count(count_live), _share(count_live, buffer)),
            *cells,
            history=hist,
        )

    for live in (3072, 24576):
        tma_row(FLATTEN_19, live, ", latest run", "[issue 19][h-i19]", flatten="False")
    for live in (3072, 12288, 24576):
        tma_row(GROUP_M, live, "", "[TMA][h-tma]")
    old = dict(block_m=64, block_n=128, persistent_per_sm=2)
    cells = []
    for fc in ("fc1", "fc2"):
        cells += [
            r.kv(RUN3_1129, "us", kernel=f"{fc}_psum", live=6144, **old),
            r.kv(RUN3_1129, "floor_us", kernel=f"{fc}_psum", live=6144, **old),
            r.kv(RUN3_1129, "us", kernel=f"{fc}_torch_scaled_grouped_mm", live=6144),
        ]
    live_old = r.kv(RUN3_1129, "live", kernel="fc1_psum", live=6144, **old)
    t.row(
        fill("{} ({}), pointer loads, before TMA", count(live_old), _share(live_old, rows)),
        *cells,
        history="[issue 3 targets 11-29][h-i3-1129]",
    )
    stock = [
        r.kv(GROUP_M, f, kernel=f"{fc}_all", loads="tma", stages=3)
        for fc in ("fc1", "fc2")
        for f in ("us", "floor_us")
    ]
    t.row(
        fill(
            "stock mode: every block of {} rows, TMA, {} stages",
            count(rows),
            r.kv(GROUP_M, "stages", kernel="fc1_all", loads="tma", stages=3),
        ),
        stock[0],
        stock[1],
        "",
        stock[2],
        stock[3],
        "",
        history="[TMA][h-tma]",
    )
    return t


def gemm_other(r: Records) -> Table:
    def fc1_24k(path: str) -> tuple[Figure, Figure]:
        shipped = {"flatten": "False"} if path == FLATTEN_19 else {}
        ours = r.kv(
            path, "us", kernel="fc1_psum", live=24576, loads="tma", stages=3, per_sm=3, **shipped
        )
        return ours, r.kv(path, "us", kernel="fc1_torch_scaled_grouped_mm", live=24576)

    t = Table(
        name="gemm_other",
        caption="""\
Derived: "+x%" = psum / torch - 1. Inside the FFN the figures are kernel-regime critical paths
of the arm named; "of copy" is the report's weight bandwidth over the copy ceiling.""",
        columns=["figure", "value", "peer"],
    )
    runs = [
        (FLATTEN_19, "latest run"),
        (BENCH_1201, "first interleaved run"),
        (SEQ_1, "sequential protocol"),
        (SEQ_2, "sequential protocol, another run"),
    ]
    for path, label in runs:
        ours, torch = fc1_24k(path)
        t.row(
            fill(
                f"FC1 at {{}} live rows, {label}",
                count(r.kv(path, "live", kernel="fc1_torch_scaled_grouped_mm", live=24576)),
            ),
            fill("{} against torch {} ({})", ours, torch, over(ours, torch)),
            "torch._scaled_grouped_mm",
            history="[issue 19][h-i19]" if path == FLATTEN_19 else "[TMA][h-tma]",
        )
    for path, label, hist in (
        (EP8_FINAL, "final code", "[EP1][h-ep1]"),
        (EP8_1201, "same day's first run", "[FFN after TMA][h-ffn1201]"),
    ):
        fc1 = r.result(path, "kernel/fc1", MASKED)
        fc2 = r.result(path, "kernel/fc2", MASKED)
        t.row(
            f"inside v4-flash-ep8 (kernel regime, {label})",
            fill(
                "FC1 psum **{}** ({} of copy), FC2 psum **{}** ({}); stock FC1 {}, FC2 {}",
                fc1,
                of_copy(r, path, "kernel/fc1", MASKED),
                fc2,
                of_copy(r, path, "kernel/fc2", MASKED),
                r.result(path, "kernel/fc1", "stock"),
                r.result(path, "kernel/fc2", "stock"),
            ),
            "",
            history=hist,
        )
    t.row(
        "inside v4-flash-ep1-distributed (all experts on one GPU; pointer loads by the "
        "per-case choice)",
        fill(
            "FC1 psum **{}**, FC2 psum **{}**, FC1 stock {}",
            r.result(EP1_1201, "kernel/fc1", "prefix_sum"),
            r.result(EP1_1201, "kernel/fc2", "prefix_sum"),
            r.result(EP1_1201, "kernel/fc1", "stock"),
        ),
        "",
        history="[EP1][h-ep1]",
    )
    tri, tor = "c000-gemm=triton", "c001-gemm=torch"

    def bf16(case: str) -> Value:
        return fill(
            "prefix_sum fc1 {}, fc2 {}; stock fc1 {}, fc2 {}",
            *(
                r.result(BF16_PEER, f"kernel/{s}", a, case)
                for a in ("prefix_sum", "stock")
                for s in ("fc1", "fc2")
            ),
        )

    t.row(
        "bf16 inside the FFN (v4-flash-ep8-bf16-peer, two ranks)",
        bf16(tri),
        fill("torch._grouped_mm: {}", bf16(tor)),
        history="[bf16 peer][h-bf16]",
    )
    return t


TABLES = [act, gemm, gemm_other]
