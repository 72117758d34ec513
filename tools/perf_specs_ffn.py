"""docs/PERF.md's generated tables of the prefill family's scatter, combine and whole FFN.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table, bold, fill
from perf_records import Figure, Records, Value, count, over, ratio, verdict
from perf_specs_latest import (
    COMBINE_19,
    EP8_19,
    EP8_1201,
    EP8_FINAL,
    FULL_1201,
    MASKED,
    of_copy,
    weight_floor,
)
from perf_specs_prefill import BF16_PEER, EP1_1201

EP1_1129 = "2026-11-29-final/v4-flash-ep1.md"
SCATTER_1130 = "2026-11-30-kernels/bench_kernels.log"
LAYOUT_EP8 = "2026-12-01-layout/v4-flash-ep8.md"
EP2_DIST = "2026-11-30-x2/v4-flash-ep2-distributed.md"
EP2_SIM = "2026-11-30-x2/v4-flash-ep2-simulated.md"
TRACE = "2026-11-29-final/deepseek-trace-prefill.md"
SKEW = "2026-11-29-baseline/skew.md"
ARMS = ("stock", "prefix_sum", MASKED)


def scatter(r: Records) -> Table:
    def variant(routing: str, name: str, field: str = "us") -> Figure:
        return r.kv(SCATTER_1130, field, kernel="scatter_variant", routing=routing, variant=name)

    launches = [
        r.kv(
            SCATTER_1130,
            f,
            kernel="scatter_variant_launches",
            routing="uniform",
            variant="fusion=maps",
        )
        for f in ("_scatter_count", "_scatter_assign_maps", "_scatter_copy")
    ]
    copy = "fusion=maps_copy,chunk=1024,copy_block_t=4,copy_block_d=4096,copy_warps=4"
    floor = variant("uniform", "fusion=maps", "floor_us")
    target = variant("uniform", "fusion=maps", "target_us")
    t = Table(
        name="scatter",
        caption="""\
The floor and issue 3's target (2 x floor + 5 us) are the bench logs'. Derived: "met", or
"missed by" time - target.""",
        columns=["figure", "value", "floor / target"],
    )
    for path, label in ((EP8_19, "latest run"), (EP8_1201, "first run of the day")):
        time = r.result(path, "kernel/scatter", MASKED)
        t.row(
            f'scatter, three launches (`fusion="maps"`, shipped), v4-flash-ep8 kernel regime, '
            f"{label}",
            bold(time),
            fill("{} / {}: {}", floor, target, verdict(time, target)),
            history="[issue 3 targets][h-i3]",
        )
    t.row(
        fill(
            "scatter, bench, uniform routing ({} live rows) / one hot expert",
            count(r.text(SCATTER_1130, r"uniform: (\d+) live rows")),
        ),
        fill(
            "{} ({} + {} + {}) / {}",
            variant("uniform", "fusion=maps"),
            *launches,
            variant("hot_expert", "fusion=maps"),
        ),
        fill("{} / {}", floor, target),
        history="[scatter plans][h-scatter]",
    )
    t.row(
        "scatter with the copy inside assign (`maps_copy`, not shipped)",
        fill("{} uniform / {} hot expert", variant("uniform", copy), variant("hot_expert", copy)),
        "",
        history="[scatter plans][h-scatter]",
    )
    comb = r.kv(COMBINE_19, "floor_us", kernel="combine", block_t=1, block_d=2048)
    old_target = r.kv(COMBINE_19, "target_us", kernel="combine", block_t=1, block_d=2048)
    for path, label, hist in (
        (EP8_19, "latest run", "[issue 19][h-i19]"),
        (EP8_1201, "first run of the day", "[issue 3 targets][h-i3]"),
    ):
        time = r.result(path, "kernel/combine", MASKED)
        t.row(
            f"combine, v4-flash-ep8 kernel regime, {label}",
            bold(time),
            fill("{} / {}: {}", comb, old_target, verdict(time, old_target)),
            history=hist,
        )
    t.row(
        "combine tiles, bench: shipped / the launch before",
        fill(
            "{} / {}",
            r.kv(COMBINE_19, "us", kernel="combine", block_t=1, block_d=2048),
            r.kv(COMBINE_19, "us", kernel="combine", block_t=1, block_d=1024, warps=4),
        ),
        fill(
            "torch's `zero_` of y alone {}, `index_select` of the live rows {}",
            r.kv(COMBINE_19, "us", kernel="torch_zero_y"),
            r.kv(COMBINE_19, "us", kernel="torch_index_select_live_rows"),
        ),
        history="[issue 19][h-i19]",
    )
    t.row(
        "scatter / combine profiled inside the FFN graph (masked arm)",
        fill(
            "{} / {}",
            r.result(EP8_19, "profile/scatter", MASKED),
            r.result(EP8_19, "profile/combine", MASKED),
        ),
        "",
        history="[issue 19][h-i19]",
    )
    return t


def ffn(r: Records) -> Table:
    t = Table(
        name="ffn",
        caption="""\
Critical path in us with the report's change against stock [95% interval]. Derived: floor = the
slowest rank's expert weights as the report counts them, read once at the copy ceiling it names
(MB / (TB/s) = us); "x the floor" = masked / floor; "against prefix_sum" = masked / prefix_sum -
1.""",
        columns=["scenario", "stock", "prefix_sum", "prefix_sum_masked", "floor", "peer"],
    )

    def cell(path: str, arm: str, case: str = "c000", bolded: bool = False) -> Value:
        time = r.result(path, "ffn", arm, case)
        if arm == "stock":
            return time
        return fill(
            "**{}** ({})" if bolded else "{} ({})",
            time,
            r.result(path, "ffn", arm, case, column="change [CI]"),
        )

    def ep8(path: str, label: str, hist: str) -> None:
        floor = weight_floor(r, path)
        masked = r.result(path, "ffn", MASKED)
        t.row(
            label,
            cell(path, "stock"),
            cell(path, "prefix_sum"),
            fill(
                "{}; {} the floor; {} against prefix_sum",
                cell(path, MASKED, bolded=True),
                ratio(masked, floor),
                over(masked, r.result(path, "ffn", "prefix_sum")),
            ),
            floor,
            "",
            history=hist,
        )

    ep8(EP8_19, "v4-flash-ep8, latest run", "[issue 19][h-i19]")
    ep8(LAYOUT_EP8, "v4-flash-ep8, after the layout restructuring", "[layout][h-layout]")
    ep8(EP8_FINAL, "v4-flash-ep8, final code of the TMA session", "[EP1][h-ep1]")
    ep8(EP8_1201, "v4-flash-ep8, same day's first run", "[FFN after TMA][h-ffn1201]")
    tri, tor = "c000-gemm=triton", "c001-gemm=torch"
    t.row(
        "v4-flash-ep8-bf16-peer (bf16, two ranks), Triton GEMMs",
        *(cell(BF16_PEER, a, tri) for a in ARMS),
        "",
        fill(
            "torch._grouped_mm GEMMs: stock {}, prefix_sum {}, masked {}",
            *(r.result(BF16_PEER, "ffn", a, tor) for a in ARMS),
        ),
        history="[bf16 peer][h-bf16]",
    )
    t.row(
        "full-buffer (every row live)",
        *(cell(FULL_1201, a) for a in ARMS),
        "",
        "",
        history="[FFN after TMA][h-ffn1201]",
    )
    t.row(
        "v4-flash-ep1-distributed, one process on one GPU (every expert local), per-case launch",
        *(cell(EP1_1201, a) for a in ARMS),
        weight_floor(r, EP1_1201),
        "",
        history="[EP1][h-ep1]",
    )
    t.row(
        "v4-flash-ep1 (simulated)",
        *(cell(EP1_1129, a) for a in ARMS),
        weight_floor(r, EP1_1129),
        "",
        history="[world size 1][h-ws1]",
    )
    t.row(
        "EP2 on two H200s, distributed (zipf routing), before the TMA change",
        *(cell(EP2_DIST, a) for a in ARMS),
        fill(
            "{}; the FFN reads its weights at {} / {} of copy (prefix_sum / masked)",
            weight_floor(r, EP2_DIST),
            of_copy(r, EP2_DIST, "ffn", "prefix_sum"),
            of_copy(r, EP2_DIST, "ffn", MASKED),
        ),
        fill(
            "simulated twin on one GPU: {} / {} / {}", *(r.result(EP2_SIM, "ffn", a) for a in ARMS)
        ),
        history="[two H200s][h-x2]",
    )
    for case in (
        "c000-preset=deepseek-v4-flash-layer=46",
        "c001-preset=deepseek-v4-flash-layer=48",
        "c002-preset=deepseek-v3-layer=46",
        "c003-preset=deepseek-v3-layer=48",
    ):
        t.row(
            fill(
                "deepseek-trace-prefill, {}",
                r.cell(TRACE, "Results", "case", case=case, stage="ffn", arm="stock"),
            ),
            *(cell(TRACE, a, case) for a in ARMS),
            "",
            "",
            history="[recorded routing][h-trace]",
        )
    for case in ("c000-family=zipf", "c001-family=hot_rank"):
        t.row(
            fill(
                "skew, {} (baseline protocol: not comparable with the rows above)",
                r.cell(SKEW, "", "case", case=case, stage="ffn", arm="stock"),
            ),
            *(cell(SKEW, a, case) for a in ARMS),
            "",
            "",
            history="[skew][h-skew]",
        )
    return t


def controls(r: Records) -> Table:
    aa = "2026-11-29-final/v4-flash-ep8-aa.md"
    gates = "2026-11-29-final/v4-flash-ep8-gates.md"
    profile = "2026-11-29-final/v4-flash-ep8-profile.md"
    t = Table(
        name="controls",
        caption="""\
Controls of the v4-flash-ep8 figures, as the reports give them: the A/A copy of stock, the noise
of the `ffn` regime (cv of the block critical paths), and the profile regime's stage sums over
the whole-FFN replay.""",
        columns=["control", "value"],
    )
    t.row(
        "A/A copy of stock (`--aa`), `ffn`",
        fill(
            "{} {}",
            r.cell(aa, "A/A control", "change [CI]", stage="ffn"),
            r.cell(aa, "A/A control", "decision", stage="ffn"),
        ),
        history="[A/A][h-aa]",
    )
    t.row(
        "`ffn` cv of block critical paths, gates run",
        fill(
            "median {}, max {} ({})",
            *(r.cell(gates, "Noise", c, regime="ffn") for c in ("median cv", "max cv", "goal")),
        ),
        history="[gates][h-gates]",
    )
    t.row(
        "profiled stage sums over the `ffn` replay, stock / prefix_sum / masked",
        fill(
            "{} / {} / {}",
            *(r.cell(profile, "Profile reconciliation", "ratio", arm=a) for a in ARMS),
        ),
        history="[profile][h-prof]",
    )
    return t


TABLES = [scatter, ffn, controls]
