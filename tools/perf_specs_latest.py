"""docs/PERF.md's generated tables of the ceilings and of issue 19's run (the latest figures).

Each function builds one table from the stored records: every figure is a lookup in a record
(``perf_records.Records``), every derived number a ``derive`` whose formula the caption gives.
Targets are words of the caption, not figures: no table cell holds a number of its own.
"""

from __future__ import annotations

from perf_cells import Table, bold, fill
from perf_records import Figure, Records, Value, count, derive, over, percent, ratio

# Records (paths under docs/perf/).
KERNEL = "2026-12-01-kernel"
SEED_19 = f"{KERNEL}/seed-act-microbench.md"
EP8_19 = f"{KERNEL}/v4-flash-ep8.md"
FULL_19 = f"{KERNEL}/full-buffer.md"
DECODE_19 = f"{KERNEL}/gpt-oss-20b-decode.md"
ACT_19 = f"{KERNEL}/bench_kernels-act.log"
CROSS_19 = f"{KERNEL}/bench_kernels-act-crossover.log"
ACT_FULL_19 = f"{KERNEL}/bench_kernels-act_full.log"
COMBINE_19 = f"{KERNEL}/bench_kernels-combine.log"
PROBE_19 = f"{KERNEL}/bench_kernels-gemm-probe.log"
PDL_19 = f"{KERNEL}/bench_decode-pdl.log"
STEP_19 = f"{KERNEL}/deepseek-v3-decode-step.md"
BENCH_1201 = "2026-12-01/bench_kernels.log"
SEED_1201 = "2026-12-01/seed-act-microbench.md"
EP8_1201 = "2026-12-01/v4-flash-ep8.md"
EP8_FINAL = "2026-12-01/v4-flash-ep8-final.md"
FULL_1201 = "2026-12-01/full-buffer.md"
FLOOR_DECODE = "2026-12-01-decode/bench_decode-floor.log"
DECODE_FINAL = "2026-12-01-decode/gpt-oss-20b-decode.md"
ARMS_DECODE = "2026-12-01-arms/gpt-oss-20b-decode.md"

W8_T1 = "c000-precision=w8a16-tokens_per_rank=1"
W4_T1 = "c007-precision=w4a16-tokens_per_rank=1"
MASKED = "prefix_sum_masked"
HIST_19 = "[issue 19][h-i19]"


def of_copy(r: Records, path: str, stage: str, arm: str, case: str = "c000") -> Figure:
    return r.cell(path, "Weight bandwidth", "of copy", case=case, stage=stage, arm=arm)


def ceiling(r: Records, path: str) -> Figure:
    """The device-copy ceiling (TB/s) a report's bandwidth figures are measured against."""
    return r.text(path, r"against the ([\d.]+) TB/s device-copy ceiling")


def weight_floor(r: Records, path: str, case: str = "c000", arm: str = MASKED) -> Value:
    """The FFN's expert weights read once at the copy ceiling: MB / (TB/s) = us."""
    mb = r.cell(path, "Weight bandwidth", "weight MB", case=case, stage="ffn", arm=arm)
    return derive(lambda m, c: m / c, "{:.1f}", mb, ceiling(r, path))


def ceilings(r: Records) -> Table:
    def copy_text(prec: str, stage: str, group: str) -> Figure:
        what = r"\(([\d.]+) MB read" if group == "mb" else r"\(.*?\): ([\d.]+) us"
        return r.text(FLOOR_DECODE, rf"{prec}  torch copy of the {stage} bytes {what}")

    sizes = [("w4a16", "fc2"), ("w8a16", "fc2"), ("w8a16", "fc1")]
    mb = [copy_text(p, s, "mb") for p, s in sizes]
    us = [copy_text(p, s, "us") for p, s in sizes]
    b1, b2 = (
        r.kv(FLOOR_DECODE, "bytes_read", precision="w8a16", stage=s, torch_op="copy")
        for s in ("fc1", "fc2")
    )
    rate = derive(
        lambda x1, x2, t1, t2: 2 * (x1 - x2) / 1e6 / (t1 - t2), "{:.2f}", b1, b2, us[2], us[1]
    )
    fixed = derive(lambda t2, x2, v: t2 - 2 * x2 / 1e6 / v, "{:.2f}", us[1], b2, rate)
    live = dict(kernel="act_dense_live_rows_only", block_rows=16, groups=2)
    dense = [r.kv(BENCH_1201, "us", live=n, **live) for n in (6144, 12288)]
    floor = [r.kv(BENCH_1201, "floor_us", live=n, **live) for n in (6144, 12288)]
    rows = [count(r.kv(BENCH_1201, "live", live=n, **live)) for n in (6144, 12288)]
    cap = ceiling(r, EP8_19)
    act_rate = derive(
        lambda c, f1, f2, t1, t2: c * (f2 - f1) / (t2 - t1),
        "{:.2f}",
        cap,
        floor[0],
        floor[1],
        dense[0],
        dense[1],
    )
    act_fixed = derive(
        lambda t1, f1, c, v: t1 - f1 * c / v, "{:.1f}", dense[0], floor[0], cap, act_rate
    )
    t = Table(
        name="ceilings",
        caption="""\
Fits (derived): torch copy's rate = 2 x (fc1 bytes - fc2 bytes) / (time at fc1 - time at fc2)
over the two largest FP8 copies (a copy moves what it reads and as much again written), its
fixed cost = time at fc2 - 2 x fc2 bytes / rate; the dense activation's rate = ceiling x (floor
at the larger count - floor at the smaller) / (time at the larger - time at the smaller), the
log's floor being its bytes at the copy ceiling, and its fixed cost = time - floor x ceiling /
rate at the smaller count.""",
        columns=["quantity", "figure", "how"],
    )
    t.row(
        "device copy ceiling",
        fill("**{} TB/s**", cap),
        "bytes read + written; every report's 'of copy' is against it",
        history="[intro][h-intro]",
    )
    t.row(
        "torch copy at decode sizes",
        fill(
            "{} / {} / {} us for {} / {} / {} MB read: {} TB/s above a fixed {} us",
            *us,
            *mb,
            rate,
            fixed,
        ),
        "gpt-oss-20b expert weights (`tools/bench_decode.py`); fit: caption",
        history="[read floor][h-rfloor]",
    )
    t.row(
        "the timer's own floor",
        fill(
            "{} us (graph with no kernel), **{} us** (a kernel that stores one word)",
            r.kv(BENCH_1201, "us", kernel="timer_empty_graph"),
            r.kv(BENCH_1201, "us", kernel="timer_one_store_kernel"),
        ),
        "kernel regime: L2 flushed, device events around one graph replay",
        history="[masked act][h-actfloor]",
    )
    t.row(
        "dense activation kernel over live rows only",
        fill("{} us + bytes at {} TB/s", act_fixed, act_rate),
        fill("between {} and {} live rows; fit: caption", *rows),
        history="[masked act][h-actfloor]",
    )
    return t


def issue19(r: Records) -> Table:
    masked = r.result(SEED_19, "kernel/act", MASKED)
    dense = r.result(SEED_19, "kernel/act", "prefix_sum")
    live_only = dict(
        kernel="act_dense_live_rows_only", routing="balanced3072", block_rows=16, groups=1
    )
    persistent = dict(
        kernel="act_masked",
        routing="balanced3072",
        schedule="persistent",
        block_rows=16,
        groups=1,
        per_sm=16,
    )
    old_dense = r.result(SEED_1201, "kernel/act", "prefix_sum")
    old_masked = r.result(SEED_1201, "kernel/act", MASKED)

    def cross(live: int, schedule: str, field: str = "us") -> Figure:
        return r.kv(
            CROSS_19, field, kernel="act_masked", routing=f"balanced{live}", schedule=schedule
        )

    def full(rows: int, variant: str, field: str = "us") -> Figure:
        return r.kv(ACT_FULL_19, field, kernel="act_full", rows=rows, variant=variant)

    lookup = derive(
        lambda a, b: a - b, "{:.2f}", full(12288, "probe_lookup"), full(12288, "probe_no_lookup")
    )
    ffn = r.result(EP8_19, "ffn", MASKED)
    floor_ffn = weight_floor(r, EP8_19)
    fc = [r.result(EP8_19, f"kernel/{s}", MASKED) for s in ("fc1", "fc2")]
    fc_before = [r.result(EP8_FINAL, f"kernel/{s}", MASKED) for s in ("fc1", "fc2")]
    no_promote = [
        r.kv(PROBE_19, "us", kernel=f"{s}_gemm_probe", promote="False") for s in ("fc1", "fc2")
    ]
    gemm_floor = [
        r.kv(PROBE_19, "floor_us", kernel=f"{s}_gemm_probe", promote="False")
        for s in ("fc1", "fc2")
    ]
    step = dict(precision="w8a16", kind="step_floor")
    t = Table(
        name="issue19",
        caption="""\
Targets of issue 19 (words, not records): masked act <= 12.5 us in the kernel regime and <= 11
us in the profile regime, masked over dense >= 5.8x, full buffer masked <= +1% over dense, whole
FFN <= 300 us, FC1 / FC2 psum <= 168 / 84 us, combine <= 20.5 us (1.5 x its floor), sparse FP8
decode >= 60% of copy. None is met (HISTORY has the reasoning). "before": the same figure in
the run before issue 19's changes. Derived: masked over dense = dense (prefix_sum) / masked of
the same report; "+x%" = a / b - 1 of the two figures the row names; the lookup's cost = the
probe with the endpoint lookup - the probe without it, full buffer of the bench; the FFN floor
= the local FP8 weights the report counts (805.5 MB), read once at the copy ceiling it names
(MB / (TB/s) = us), and "x the floor" = time / floor.""",
        columns=["figure", "now", "before", "floor / bound (measured)"],
    )
    t.row(
        "masked act + quant, seed shape, kernel regime",
        bold(masked),
        old_masked,
        fill(
            "dense over only the live rows {}; the masked kernel on that buffer {}",
            r.kv(ACT_19, "us", **live_only),
            r.kv(ACT_19, "us", kernel="act_masked_live_rows_only", schedule="persistent"),
        ),
        history=HIST_19,
    )
    t.row(
        "same, profile regime (device time inside the FFN graph)",
        bold(r.result(SEED_19, "profile/act", MASKED)),
        "",
        fill(
            "bench device time alone {} (dense-live {})",
            r.kv(ACT_19, "device_us", **persistent),
            r.kv(ACT_19, "device_us", **live_only),
        ),
        history=HIST_19,
    )
    t.row(
        "masked over dense, seed shape",
        bold(ratio(dense, masked)),
        ratio(old_dense, old_masked),
        fill(
            "{} if masking cost nothing (dense / dense over the live rows)",
            ratio(dense, r.kv(ACT_19, "us", **live_only)),
        ),
        history=HIST_19,
    )
    t.row(
        "masked act schedule, grid / persistent around the crossover",
        fill(
            "{} live rows: {} / {}; {}: {} / {}",
            count(cross(6144, "grid", "live")),
            cross(6144, "grid"),
            cross(6144, "persistent"),
            count(cross(7168, "grid", "live")),
            cross(7168, "grid"),
            cross(7168, "persistent"),
        ),
        "grid always",
        "persistent below the crossover, grid above (`masked_act_launch`)",
        history=HIST_19,
    )
    t.row(
        "full buffer, masked over dense, full-buffer scenario",
        fill(
            "**{}** kernel, {} profile",
            r.result(FULL_19, "kernel/act", MASKED, column="change [CI]"),
            r.result(FULL_19, "profile/act", MASKED, column="change [CI]"),
        ),
        r.result(FULL_1201, "kernel/act", MASKED, column="change [CI]"),
        fill("the endpoint lookup: the probe with it minus the probe without it, {} us", lookup),
        history=HIST_19,
    )
    t.row(
        "full buffer, masked grid over dense, bench",
        fill(
            "{} rows: {} ({} device time)",
            count(full(28672, "dense_16x2", "rows")),
            over(full(28672, "masked_grid_16x2"), full(28672, "dense_16x2")),
            over(
                full(28672, "masked_grid_16x2", "device_us"), full(28672, "dense_16x2", "device_us")
            ),
        ),
        over(
            r.kv(BENCH_1201, "us", kernel="act_masked", routing="full", schedule="grid"),
            r.kv(BENCH_1201, "us", kernel="act_dense_same_call", routing="full"),
        ),
        "",
        history=HIST_19,
    )
    t.row(
        "whole FFN, prefix_sum_masked, v4-flash-ep8",
        bold(ffn),
        r.result(EP8_FINAL, "ffn", MASKED),
        fill("{} (weights once); now {} the floor", floor_ffn, ratio(ffn, floor_ffn)),
        history=HIST_19,
    )
    t.row(
        "FC1 / FC2 psum, v4-flash-ep8 rank shape, kernel regime",
        fill("**{} / {}**", *fc),
        fill("{} / {}", *fc_before),
        fill(
            "bytes {} / {}; a probe of the same tiles with no scale promotion {} / {}",
            *gemm_floor,
            *no_promote,
        ),
        history=HIST_19,
    )
    t.row(
        "combine, v4-flash-ep8, kernel regime",
        bold(r.result(EP8_19, "kernel/combine", MASKED)),
        r.result(EP8_1201, "kernel/combine", MASKED),
        fill(
            "bytes {}; torch's `zero_` of y alone {}",
            r.kv(COMBINE_19, "floor_us", kernel="combine", block_t=1, block_d=2048),
            r.kv(COMBINE_19, "us", kernel="torch_zero_y"),
        ),
        history=HIST_19,
    )
    t.row(
        "sparse FP8 decode, gpt-oss-20b, one token",
        fill(
            "**{}** ({} of copy)",
            r.result(DECODE_19, "ffn", "sparse_decode", W8_T1),
            of_copy(r, DECODE_19, "ffn", "sparse_decode", W8_T1),
        ),
        fill(
            "{} ({})",
            r.result(DECODE_FINAL, "ffn", "sparse_decode", W8_T1),
            of_copy(r, DECODE_FINAL, "ffn", "sparse_decode", W8_T1),
        ),
        fill(
            "read-only step {} ({} of copy); the target's time {}",
            r.kv(PDL_19, "read_step_us", **step),
            percent(r.kv(PDL_19, "read_step_of_copy", **step)),
            r.kv(PDL_19, "target60_us", **step),
        ),
        history=HIST_19,
    )
    t.row(
        "sparse MXFP4 decode, same (PDL)",
        bold(r.result(DECODE_19, "ffn", "sparse_decode", W4_T1)),
        r.result(ARMS_DECODE, "ffn", "sparse_decode", W4_T1),
        "",
        history=HIST_19,
    )
    return t


def step19(r: Records) -> Table:
    t = Table(
        name="step19",
        caption="""\
P50 of the model step in us over its steps, with the exact 95% interval, as the report gives it;
"masked vs prefix_sum" is the report's policy evidence for `prefix_sum_masked` against
`prefix_sum` (change and decision); us/token = P50 of the step over the tokens of a step.""",
        columns=[
            "case",
            "tokens a step",
            "stock",
            "prefix_sum",
            "prefix_sum_masked",
            "masked vs prefix_sum",
            "us/token, masked / prefix_sum / stock",
        ],
    )
    evidence = r.cell(
        STEP_19, "Policy", "evidence", **{"arm vs baseline": "prefix_sum_masked vs prefix_sum"}
    )
    for case in ("c000-tokens_per_rank=8", "c001-tokens_per_rank=32", "c002-tokens_per_rank=128"):
        p50 = [
            r.cell(STEP_19, "Model step", "P50 us", case=case, arm=a)
            for a in ("stock", "prefix_sum", MASKED)
        ]
        tokens = case.rsplit("=", 1)[1]
        t.row(
            r.cell(STEP_19, "Model step", "case", case=case, arm=MASKED),
            r.cell(STEP_19, "Model step per token", "tokens/step", case=case, arm=MASKED),
            p50[0],
            p50[1],
            bold(p50[2]),
            evidence.part("; ", prefix=f"{tokens}: "),
            fill(
                "{} / {} / {}",
                *(
                    r.cell(
                        STEP_19, "Model step per token", "us/token P50 / mean", case=case, arm=a
                    ).part(" / ")
                    for a in (MASKED, "prefix_sum", "stock")
                ),
            ),
            history=HIST_19,
        )
    return t


TABLES = [ceilings, issue19, step19]
