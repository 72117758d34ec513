"""docs/PERF.md's generated tables of the decode family (gpt-oss) and of the exchange (EP2).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table, bold, fill
from perf_records import Figure, Records, Value, count, derive, over, ratio
from perf_specs_latest import (
    BENCH_1201,
    DECODE_19,
    EP8_19,
    FLOOR_DECODE,
    MASKED,
    W4_T1,
    W8_T1,
    ceiling,
    of_copy,
)

DECODE = "2026-12-01-decode"
D20 = f"{DECODE}/gpt-oss-20b-decode.md"
D120 = f"{DECODE}/gpt-oss-120b-decode.md"
PTX = f"{DECODE}/bench_decode-ptx.log"
FIXED = "2026-12-01/bench_decode-fixed-cost.log"
COLD = "2026-11-30-cold/gpt-oss-20b-decode-cold.md"
X2 = "2026-11-30-x2"
EP2_DIST = f"{X2}/v4-flash-ep2-distributed.md"
EXCHANGE = f"{X2}/bench_exchange-before.log"
PACK = {2: f"{X2}/bench_exchange-pack-w2.json", 8: f"{X2}/bench_exchange-pack-w8.json"}
EP1_X2 = f"{X2}/v4-flash-ep1-distributed.md"
EP1_1129 = "2026-11-29-final/v4-flash-ep1-distributed.md"
W4_T1_120 = "c008-precision=w4a16-tokens_per_rank=1"


def decode(r: Records) -> Table:
    t = Table(
        name="decode",
        caption="""\
`ffn` regime, slowest rank, one token, us. Targets (words): sparse FP8 >= 4x faster than dense
and >= 75% of the copy ceiling on its bytes; MXFP4 sparse faster than FP8 sparse. Derived:
dense / sparse. "of copy" is the report's weight bandwidth over the copy ceiling; the read-only
step (the same graph with each GEMV replaced by a kernel that only reads its bytes) and the
time 75% of copy needs are the bench log's.""",
        columns=[
            "model, format",
            "sparse",
            "dense",
            "dense / sparse",
            "sparse GB/s (of copy)",
            "floor (how)",
        ],
    )

    def one(path: str, case: str, label: str, floor: Value | str, hist: str) -> None:
        sparse = r.result(path, "ffn", "sparse_decode", case)
        dense = r.result(path, "ffn", "dense_decode", case)
        gbs = r.cell(path, "Weight bandwidth", "GB/s", case=case, stage="ffn", arm="sparse_decode")
        t.row(
            label,
            bold(sparse),
            dense,
            ratio(dense, sparse),
            fill("{} ({})", gbs, of_copy(r, path, "ffn", "sparse_decode", case)),
            floor,
            history=hist,
        )

    def step(prec: str) -> Value:
        what = rf"{prec}  step \(.*?best reads instead of the GEMVs ([\d.]+) us"
        share = rf"{prec}  step \(.*?best reads instead of the GEMVs [\d.]+ us \((\d+%)\)"
        target = rf"{prec}  step \(.*?; (\d+%) of copy needs [\d.]+ us"
        needs = rf"{prec}  step \(.*?of copy needs ([\d.]+) us"
        return fill(
            "read-only step {} us ({}); {} of copy needs {} us",
            r.text(FLOOR_DECODE, what),
            r.text(FLOOR_DECODE, share),
            r.text(FLOOR_DECODE, target),
            r.text(FLOOR_DECODE, needs),
        )

    one(DECODE_19, W8_T1, "20b FP8 (w8a16), latest run", "", "[issue 19][h-i19]")
    one(DECODE_19, W4_T1, "20b MXFP4 (w4a16), latest run (PDL)", "", "[issue 19][h-i19]")
    one(D20, W8_T1, "20b FP8 (w8a16)", step("w8a16"), "[decode sweep][h-sweep]")
    one(D20, W4_T1, "20b MXFP4 (w4a16)", step("w4a16"), "[decode sweep][h-sweep]")
    one(
        D120, W8_T1, "120b FP8", "read floor measured at 20b shapes only", "[decode sweep][h-sweep]"
    )
    one(D120, W4_T1_120, "120b MXFP4", "", "[decode sweep][h-sweep]")
    return t


def crossover(r: Records) -> Table:
    t = Table(
        name="crossover",
        caption="""\
The reports' crossover: sparse / dense time in the `ffn` regime by tokens a rank, the smallest
count from which dense is faster at it and every larger count, and the byte ledger's prediction
(where the busiest rank's routed slots first reach all its local experts).""",
        columns=["model, series", "sparse / dense by tokens", "dense faster from", "ledger"],
    )
    for path, model in ((D20, "20b"), (D120, "120b")):
        for series in ("precision=w8a16", "precision=w4a16"):

            def cell(column: str, s: str = series, p: str = path) -> Figure:
                return r.cell(p, "Crossover", column, series=s)

            t.row(
                fill(f"{model}, {{}}", cell("series")),
                cell("arm / baseline time by tokens"),
                cell("baseline faster from"),
                cell("ledger"),
                history="[decode sweep][h-sweep]",
            )
    return t


def gemv(r: Records) -> Table:
    def floor_text(pattern: str, path: str = FLOOR_DECODE) -> Figure:
        return r.text(path, pattern)

    def best(path: str, prec: str, fc: str) -> Value:
        return fill(
            "{} ({})",
            r.text(path, rf"best {prec} {fc}: ([\d.]+) us"),
            r.text(path, rf"best {prec} {fc}: [\d.]+ us \((\d+%) of copy"),
        )

    def read(prec: str, fc: str) -> Value:
        return fill(
            "{} ({})",
            floor_text(rf"read floor {prec} {fc}: ([\d.]+) us"),
            floor_text(rf"read floor {prec} {fc}: [\d.]+ us \((\d+%) of copy"),
        )

    def torch(prec: str, op: str, fc: str) -> Figure:
        return floor_text(rf"{prec}  torch {op} of the {fc} bytes .*?: ([\d.]+) us")

    def step(path: str, prec: str) -> Value:
        return fill(
            "{} us ({})",
            r.text(path, rf"{prec}  step \(.*?sparse ([\d.]+) us"),
            r.text(path, rf"{prec}  step \(.*?sparse [\d.]+ us \((\d+%) of copy"),
        )

    timer = r.kv(BENCH_1201, "us", kernel="timer_one_store_kernel")
    cap = ceiling(r, EP8_19)
    bounds = [
        derive(
            lambda b, c, s: 100 * (b / 1e6 / c) / (b / 1e6 / c + s),
            "{:.0f}%",
            r.kv(FLOOR_DECODE, "bytes_read", precision="w8a16", stage=fc, torch_op="copy"),
            cap,
            timer,
        )
        for fc in ("fc1", "fc2")
    ]
    t = Table(
        name="gemv",
        caption="""\
gpt-oss-20b rank 0, one token, three of its four slots local. Percentages are of the copy
ceiling on the bytes each kernel reads, as the logs give them. Derived: the bound from the empty
launch = bytes at the copy ceiling / (the same + the timer's one-store kernel), per projection
alone.""",
        columns=["figure", "value", "floor (how)", "peer"],
    )
    for case, fmt, hist in (
        (W8_T1, "FP8", "[decode sweep][h-sweep]"),
        (W4_T1, "MXFP4", "[decode sweep][h-sweep]"),
    ):
        t.row(
            f"{fmt} GEMV fc1 / fc2, in the 20b scenario (kernel regime)",
            fill(
                "{} / {}",
                r.result(D20, "kernel/fc1", "sparse_decode", case),
                r.result(D20, "kernel/fc2", "sparse_decode", case),
            ),
            "",
            "",
            history=hist,
        )
    t.row(
        "FP8 GEMV fc1 / fc2, bench",
        fill("{} / {}", best(FLOOR_DECODE, "w8a16", "fc1"), best(FLOOR_DECODE, "w8a16", "fc2")),
        fill("best read of the same bytes: {} / {}", read("w8a16", "fc1"), read("w8a16", "fc2")),
        fill(
            "torch copy of as many bytes (read + written): {} / {}; torch amax {} / {}",
            torch("w8a16", "copy", "fc1"),
            torch("w8a16", "copy", "fc2"),
            torch("w8a16", "amax", "fc1"),
            torch("w8a16", "amax", "fc2"),
        ),
        history="[read floor][h-rfloor]",
    )
    t.row(
        "MXFP4 GEMV gate_up / down, bench, after the PTX bit-select",
        fill("{} / {}", best(PTX, "w4a16", "fc1"), best(PTX, "w4a16", "fc2")),
        fill("best read of the values: {} / {}", read("w4a16", "fc1"), read("w4a16", "fc2")),
        fill(
            "torch copy {} / {}; amax {} / {}",
            torch("w4a16", "copy", "fc1"),
            torch("w4a16", "copy", "fc2"),
            torch("w4a16", "amax", "fc1"),
            torch("w4a16", "amax", "fc2"),
        ),
        history="[PTX][h-ptx], [read floor][h-rfloor]",
    )
    t.row(
        "sparse step (fc1, fc2, combine), bench",
        fill(
            "FP8 {}; MXFP4 {} after the PTX bit-select",
            step(FLOOR_DECODE, "w8a16"),
            step(PTX, "w4a16"),
        ),
        fill(
            "the same graph with reads instead of the GEMVs: FP8 {} us, MXFP4 {} us",
            floor_text(r"w8a16  step \(.*?best reads instead of the GEMVs ([\d.]+) us"),
            floor_text(r"w4a16  step \(.*?best reads instead of the GEMVs ([\d.]+) us"),
        ),
        "",
        history="[read floor][h-rfloor], [PTX][h-ptx]",
    )
    t.row(
        "bound from the empty launch, FP8",
        fill("fc1 alone at most {} of copy, fc2 alone {}", *bounds),
        "the timer's one-store kernel + bytes at the copy ceiling",
        "",
        history="[GEMV fixed cost][h-fixed]",
    )
    t.row(
        "FP8 launch with no local slot (fixed cost), fc1 / fc2",
        fill(
            "{} / {}",
            r.text(FIXED, r"w8a16  no local slot \(fixed cost\): fc1 ([\d.]+) us"),
            r.text(FIXED, r"w8a16  no local slot \(fixed cost\): fc1 [\d.]+ us, fc2 ([\d.]+)"),
        ),
        "",
        "",
        history="[GEMV fixed cost][h-fixed]",
    )
    cold = "c003-cold_weights=true-tokens_per_rank=1"
    warm = "c000-cold_weights=false-tokens_per_rank=1"
    fc2 = [r.result(COLD, "kernel/fc2", "sparse_decode", c) for c in (warm, cold)]
    t.row(
        "cold against warm weights (kernel regime, no flush; the GEMV defaults before the block "
        "choice)",
        fill(
            "sparse fc2 {} warm / {} cold ({}); whole sparse step {} / {}",
            *fc2,
            over(fc2[1], fc2[0]),
            *(r.result(COLD, "ffn", "sparse_decode", c) for c in (warm, cold)),
        ),
        "",
        "",
        history="[cold weights][h-cold]",
    )
    return t


def exchange(r: Records) -> Table:
    def stage(stage: str, arm: str, path: str = EP2_DIST) -> Figure:
        return r.result(path, stage, arm)

    def line(label: str, what: str = "us") -> Figure:
        group = r"([\d.]+) us" if what == "us" else r"[\d.]+ us\s+([\d.]+) GB/s"
        return r.text(EXCHANGE, rf"^{label}\s+{group}")

    def pack(path: str, piece: str) -> Value:
        return derive(lambda x: x, "{:.1f}", r.json_row(path, "us", piece=piece))

    arms = ("stock", "prefix_sum", MASKED)
    layer = stage("layer", MASKED)
    exchanged = derive(
        lambda d, c, lay: 100 * (d + c) / lay,
        "{:.0f}%",
        stage("dispatch", MASKED),
        stage("combine_a2a", MASKED),
        layer,
    )
    t = Table(
        name="exchange",
        caption="""\
Scenario rows: critical path in us (slowest rank). The collectives' rows: median of 30
repetitions, GB/s across, as the bench log prints them; the packing rows: device time from the
bench's JSON, rounded to 0.1 us. Derived: the exchange's share = (dispatch + combine_a2a) /
layer, masked arm.""",
        columns=["figure", "value", "floor / peer"],
    )
    hist = "[two H200s][h-x2]"
    for name, label in (
        ("dispatch", "dispatch (pack + counts + rows all-to-all), before the packing fix"),
        ("combine_a2a", "combine_a2a (rows back)"),
        ("sync_wait", "sync_wait (all_reduce meeting point)"),
    ):
        t.row(
            label,
            fill("stock {}, prefix_sum {}, masked {}", *(stage(name, a) for a in arms)),
            "",
            history=hist,
        )
    t.row(
        "layer (whole pass)",
        fill("stock {}, prefix_sum {}, masked **{}**", *(stage("layer", a) for a in arms)),
        fill("the exchange is {} of the masked layer", exchanged),
        history=hist,
    )
    rows = r.text(EXCHANGE, r"R (\d+) rows")
    row_bytes = r.text(EXCHANGE, r"B (\d+) bytes")
    t.row(
        fill("rows all_to_all [{} x {} B] (dispatch)", count(rows), count(row_bytes)),
        fill(
            "{} us, {} GB/s across",
            line(r"all_to_all rows \[R, B\] uint8"),
            line(r"all_to_all rows \[R, B\] uint8", "GB/s"),
        ),
        fill(
            "ceiling: one block copied to the other GPU with `copy_`, {} us, {} GB/s",
            line(r"peer copy_ of one block \(no NCCL\)"),
            line(r"peer copy_ of one block \(no NCCL\)", "GB/s"),
        ),
        history=hist,
    )
    t.row(
        "counts all_to_all [W] int32",
        fill("{} us (latency, host included)", line(r"all_to_all counts \[W\] int32")),
        "",
        history=hist,
    )
    t.row(
        "combine all_to_all [R, D] bf16",
        fill(
            "{} us, {} GB/s",
            line(r"combine all_to_all \[R, D\] bf16"),
            line(r"combine all_to_all \[R, D\] bf16", "GB/s"),
        ),
        "",
        history=hist,
    )
    sizes = [r.text(EXCHANGE, rf"^all_to_all ({mb}) MB total") for mb in (64, 16, 4, 1)]
    t.row(
        fill("plain all_to_all of {} / {} / {} / {} MB", *sizes),
        fill(
            "{} / {} / {} / {} us; {} / {} / {} / {} GB/s",
            *(line(rf"all_to_all {s.text} MB total") for s in sizes),
            *(line(rf"all_to_all {s.text} MB total", "GB/s") for s in sizes),
        ),
        "",
        history=hist,
    )
    shipped, first = "pack (Exchange.pack, word-wise)", "pack (first version; same bytes: True)"
    worlds = [r.json_meta(p, "world") for p in PACK.values()]
    t.row(
        fill(
            "dispatch packing (shipped: row-wise scan, word-wise copies), W = {} / W = {}", *worlds
        ),
        fill("**{} / {}**", *(pack(p, shipped) for p in PACK.values())),
        fill("first version {} / {}", *(pack(p, first) for p in PACK.values())),
        history=hist,
    )
    t.row(
        "dispatch with one rank (one H200, NCCL, v4-flash-ep1-distributed)",
        fill(
            "**{}** ({} before the fix)",
            stage("dispatch", MASKED, EP1_X2),
            stage("dispatch", MASKED, EP1_1129),
        ),
        "",
        history=hist,
    )
    t.row(
        "one rank, other stages (masked, before the fix)",
        fill(
            "combine_a2a {}, sync_wait {}, layer {}",
            *(stage(s, MASKED, EP1_1129) for s in ("combine_a2a", "sync_wait", "layer")),
        ),
        "",
        history="[world size 1][h-ws1]",
    )
    return t


TABLES = [decode, crossover, gemv, exchange]
