"""docs/PERF.md's generated tables of the fifth H200 session of 2026-12-02 (issue 28): the grouped
decode's bench at the committed launches, the policy over the three decode arms in the step
regime (24 layers) and in the whole gpt-oss-20b served (the model regime), and the measurements
of where the FP8 tile's time goes (the read-only kernel at the tile's grid, weights packed
tile-contiguous, an L2 prefetch before the dependent-launch wait, x hoisted).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

import re

from perf_cells import Table, fill
from perf_records import Figure, Records, derive
from perf_specs_model import _change
from perf_specs_rows import BENCH_COLUMNS, BENCH_TMA, ab_draws, ab_rows, bench_rows

DAY = "2026-12-02-grouped-stream"
BENCH = f"{DAY}/bench/bench_grouped_decode.log"
STEP = f"{DAY}/gpt-oss-20b-decode-step-grouped.md"
MODELS = (f"{DAY}/gpt-oss-20b-model-batch1-16.md", f"{DAY}/gpt-oss-20b-model-batch4-64.md")
READS = (f"{DAY}/read_packed.log", f"{DAY}/read_packed_2.log")
AB_PACKED = f"{DAY}/ab_packed.log"
AB_ABLATIONS = f"{DAY}/ab_ablations.log"
AB_PREFETCH = (f"{DAY}/mb_pf_seed0.log", f"{DAY}/mb_pf_seed1.log")
HIST = "[issue 28][h-i28f]"
FORMATS = (("w8a16", "FP8"), ("w4a16", "MXFP4"))


def grouped_stream(r: Records) -> Table:
    t = Table(
        name="grouped_stream",
        caption="""\
`tools/bench_grouped_decode.py` at every token count at 6da3c3c (as `grouped_tma`), beside the
bench at 2661532 (`grouped_tma`): the same kernels, with the FP8 tile's pointer loads and no
register cap below 2 slots an expert (9f3b33e), which at 4 tokens is the launch timed here for
the first time in the bench's default column. Derived: "change" = grouped now / grouped before
- 1. Issue 28's targets here: grouped faster than dense at every count (met, both formats);
MXFP4's grouped step faster than FP8's at every count (met but at 4 tokens: 57.4 against 56.1,
where the step regime and the gated scenario have MXFP4 faster, `step_grouped_run`); >= 85% of
copy at 32 and 64 tokens (FP8 68% and 66%, MXFP4 39% and 37%: missed; `read_tile` gives the
read-only kernel at the tile's grid); >= 75% at one token (the best arm, sparse FP8, 33.3 us
against a read floor of 23.22: missed).""",
        columns=BENCH_COLUMNS,
    )
    return bench_rows(r, t, BENCH, BENCH_TMA, history=HIST)


_STEP_TOKENS = (1, 4, 16, 32, 64)

STEP_COLUMNS = [
    "tokens",
    "FP8 dense P50",
    "FP8 sparse P50, change",
    "FP8 grouped P50, change",
    "MXFP4 dense P50",
    "MXFP4 sparse P50, change",
    "MXFP4 grouped P50, change",
    "MXFP4 / FP8 grouped",
    "MXFP4 / FP8 best",
]


def step_grouped_run(r: Records) -> Table:
    t = Table(
        name="step_grouped_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-step-grouped.yaml` through `moebench run` at 6da3c3c (the step
regime: gpt-oss-20b's 24 MoE layers, each with its own weights and a seeded uniform routing per
step and layer, EP2 simulated, one step = the sum over layers of each layer's slowest rank; 40
steps a case; every correctness gate and integrity check of the regime passed: 30 inputs
unchanged, 60 post-timing checks). P50 of the step with its exact 95% order-statistic interval,
us; change against dense_decode, paired by step, Bonferroni-corrected over the run's 30
comparisons (P99 has no interval at 40 steps; not shown). Derived: "MXFP4 / FP8 grouped" =
MXFP4's grouped P50 / FP8's; "MXFP4 / FP8 best" = the faster of MXFP4's three arms over the
faster of FP8's (below 1.00x: MXFP4 faster). The run's policy (compare's): grouped FASTER than
dense at every count in both formats; sparse FASTER than grouped up to 4 tokens, SLOWER from
16.""",
        columns=STEP_COLUMNS,
    )
    return step_rows(r, t, STEP)


def step_rows(r: Records, t: Table, path: str, history: str = HIST) -> Table:
    """The step regime's P50 at each count of `scenarios/gpt-oss-20b-decode-step-grouped.yaml`,
    both formats side by side, from its report ``path``."""
    section = "Model step"
    for i, tokens in enumerate(_STEP_TOKENS):
        cells: dict[str, dict[str, Figure]] = {}
        for f, (prec, name) in enumerate(FORMATS):
            case = f"c{f * len(_STEP_TOKENS) + i:03d}-precision={prec}-tokens_per_rank={tokens}"
            cells[name] = {
                f"{arm} {column}": r.cell(path, section, column, case=case, arm=arm)
                for arm in ("dense_decode", "sparse_decode", "grouped_decode")
                for column in ("P50 us", "change [CI]", "result")
            }
        fp8, mx = cells["FP8"], cells["MXFP4"]

        def cell(c: dict[str, Figure], name: str):
            return fill(
                "{}, {}",
                c[f"{name} P50 us"],
                _change(c[f"{name} change [CI]"], c[f"{name} result"]),
            )

        p50s = [
            c[f"{a} P50 us"]
            for c in (fp8, mx)
            for a in ("dense_decode", "sparse_decode", "grouped_decode")
        ]
        t.row(
            r.text(
                path,
                rf"^\| c00{i}-precision=w8a16-tokens_per_rank=({tokens}) \| dense_decode "
                r"\| \d+ \| [\d,.]+ \[",
            ),
            fp8["dense_decode P50 us"],
            cell(fp8, "sparse_decode"),
            cell(fp8, "grouped_decode"),
            mx["dense_decode P50 us"],
            cell(mx, "sparse_decode"),
            cell(mx, "grouped_decode"),
            derive(
                lambda a, b: a / b,
                "{:.2f}x",
                mx["grouped_decode P50 us"],
                fp8["grouped_decode P50 us"],
            ),
            derive(lambda a, b, c, d, e, f: min(d, e, f) / min(a, b, c), "{:.2f}x", *p50s),
            history=history,
        )
    return t
    return t


_MODEL_ARMS = ("dense_decode", "sparse_decode", "grouped_decode", "hf:grouped_mm")


def model_grouped(r: Records) -> Table:
    tpot = "Model decode: TPOT"
    t = Table(
        name="model_grouped",
        caption="""\
gpt-oss-20b served whole on one H200 (`scenarios/gpt-oss-20b-model.yaml` at 6da3c3c, its batch
sweep split over two runs for the device time: batch 1 and 16, then 4 and 64; all 24 layers,
random weights at the real shapes, the experts rounded to FP8 (w8a16) or MXFP4 (w4a16), context
1,024, 16 blocks of 36 decode steps, each step one CUDA graph; every gate passed for every arm
and case, the logits gate included). TPOT P50 with its exact 95% order-statistic interval, us;
change against dense_decode paired by (block, step), Bonferroni-corrected over each run's 12
comparisons; moebench:none does no expert work (the model's non-MoE time); hf:grouped_mm is
transformers' own backend on the model's bf16 experts. Derived: "grouped MoE us" = grouped's P50
- moebench:none's P50. The runs' policy over the batch: grouped FASTER than dense at every
batch in both formats; sparse FASTER up to 4 (SAME for MXFP4 at 16, SLOWER for FP8 at 16).""",
        columns=[
            "precision, batch",
            "moebench:none P50",
            *(f"{a} P50, change" for a in _MODEL_ARMS),
            "grouped MoE us",
        ],
    )
    rows: dict[tuple[str, int], tuple[str, str]] = {}
    for path in MODELS:
        for row in r.report(path)[tpot]:
            found = re.fullmatch(r"c\d+-precision=(\w+)-batch=(\d+)", row["case"])
            if found is None:
                raise ValueError(f"{path}: unexpected case {row['case']!r}")
            rows[(found[1], int(found[2]))] = (path, row["case"])
    for prec, _ in FORMATS:
        for batch in sorted(b for p, b in rows if p == prec):
            path, case = rows[(prec, batch)]

            def c(column: str, arm: str, path: str = path, case: str = case) -> Figure:
                return r.cell(path, tpot, column, case=case, arm=arm)

            none = c("TPOT P50 us", "moebench:none")
            t.row(
                fill(f"{prec}, {{}}", c("batch", "dense_decode")),
                none,
                c("TPOT P50 us", "dense_decode"),
                *(
                    fill(
                        "{}, {}", c("TPOT P50 us", a), _change(c("change [CI]", a), c("result", a))
                    )
                    for a in _MODEL_ARMS[1:]
                ),
                derive(lambda a, b: a - b, "{:,.1f}", c("TPOT P50 us", "grouped_decode"), none),
                history=HIST,
            )
    return t


# The read-only kernel's launches: (log, fc1 or fc2 columns N, rows, bytes a row a step, stages,
# warps), the arm's tile first.
_READS = (
    (0, 5760, 64, 128, 4, 4),
    (0, 2880, 64, 128, 4, 4),
    (0, 5760, 64, 128, 6, 4),
    (0, 2880, 64, 128, 6, 4),
    (1, 5760, 64, 128, 3, 4),
    (1, 2880, 64, 128, 3, 4),
    (0, 5760, 128, 128, 4, 8),
    (0, 5760, 64, 256, 4, 4),
    (1, 5760, 32, 128, 4, 4),
    (1, 2880, 32, 128, 4, 4),
    (1, 5760, 32, 256, 4, 4),
    (1, 2880, 32, 256, 4, 4),
)


def _read(r: Records, log: str, launch: tuple, packed: bool, field: str) -> Figure:
    """One figure of the read-only kernel's line for ``launch`` (N, rows, bytes, stages, warps)."""
    n, bn, bk, ns, nw = launch
    line = rf"^read N={n} bn={bn} bk={bk} stages={ns} warps={nw} packed={packed}: "
    pattern = {"us": r"(\S+) us", "GB/s": r"\S+ us (\d+) GB/s", "%": r".* = (\d+%) of copy"}
    return r.text(log, line + pattern[field])


def _reads(r: Records, log: str, launch: tuple, packed: bool):
    """us, GB/s and share of copy of one launch, natural or packed."""
    return fill("{}, {}, {}", *(_read(r, log, launch, packed, f) for f in ("us", "GB/s", "%")))


def read_tile(r: Records) -> Table:
    t = Table(
        name="read_tile",
        caption="""\
The second method for the FP8 tile's gap: a read-only kernel on the tile's grid (a program a
block of rows of one expert, 16 experts, gpt-oss-20b's fc1 (N = 5,760) or fc2 (N = 2,880) FP8
weights, R = 2,880), its box read through a TMA descriptor on a software pipeline of the given
stages and XOR-folded (`scratch/rdp.py`, `scratch/gd_pack.py` of the records); each launch alone
after an L2 flush, device events, median of 30. "natural": the weights as the arm holds them
(rows of 2,880 bytes; the 22 whole steps read, 2,816 bytes a row); "packed": the same weights
rearranged at build time so that each step's box is one contiguous run and a program's steps
follow each other (R zero-padded to whole steps, 2,944 or 3,072 bytes a row). GB/s and "of copy"
as the script printed them, over its bytes read and the copy measured in the same call (4,144
and 4,174 GB/s, read + write of 400 MiB: the first and second log). Derived: "fc1 + fc2" = both
stages' natural bytes over the sum of their times, over the call's copy. The arm's tile (64
rows, 128 bytes, 4 stages) reads fc1 at 84% and fc2 at 73% of copy on their own, 80% for the
two: the issue's 85% is above the read-only kernel at this grid (no launch here reaches it for
the two stages), and packing moves the read by 4 to 8 points but the kernel not at all
(`fp8_packed`).""",
        columns=[
            "stage, launch",
            "natural us, GB/s, of copy",
            "packed us, GB/s, of copy",
            "fc1 + fc2 natural, of copy",
        ],
    )
    copies = [r.text(log, r"^copy 400 MiB: \S+ us, (\d+) GB/s") for log in READS]
    for i, (k, *launch) in enumerate(_READS):
        log = READS[k]
        n, bn, bk, ns, nw = launch
        both = ""
        if n == 2880 and _READS[i - 1] == (k, 5760, bn, bk, ns, nw):
            fc1 = [_read(r, log, (5760, *launch[1:]), False, f) for f in ("us", "GB/s")]
            fc2 = [_read(r, log, launch, False, f) for f in ("us", "GB/s")]
            both = derive(
                lambda t1, g1, t2, g2, c: 100 * (g1 * t1 + g2 * t2) / (t1 + t2) / c,
                "{:.0f}%",
                *fc1,
                *fc2,
                copies[k],
            )
        t.row(
            fill(
                f"fc{1 if n == 5760 else 2}, {{}}",
                r.text(log, rf"^read N={n} (bn={bn} bk={bk} stages={ns} warps={nw}) packed=False"),
            ),
            _reads(r, log, launch, False),
            _reads(r, log, launch, True),
            both,
            history=HIST,
        )
    return t


_PACKED = (
    ("as committed (TMA, capped)", "cur:16:64:128:4:4"),
    ("packed, TMA", "packtma:16:64:128:4:4"),
    ("packed, pointers", "packptr:16:64:128:4:4"),
    ("packed, pointers, no cap", "packptrnc:16:64:128:4:4"),
    ("packed, TMA, 128 rows, 8 warps", "packtma:16:128:128:8:4"),
    ("packed, TMA, 256 bytes, 3 stages", "packtma:16:64:256:4:3"),
)


def fp8_packed(r: Records) -> Table:
    t = Table(
        name="fp8_packed",
        caption="""\
The FP8 step (fc1 + fc2) with its weights packed tile-contiguous at build time
(`scratch/gd_pack.py`: the layout of `read_tile`'s "packed", R zero-padded to whole steps), in
the harness of `fp8_cap` (`scratch/mb.py`: gpt-oss-20b EP2 rank 0's shapes, uniform random
routing, one CUDA graph a step, L2 flushed before each replay, median of 40 interleaved; 6da3c3c
with the records' scratch). Every 128-byte launch's outputs equal the committed tile's bit for
bit; the 256-byte one's differ by up to 0.0039 (another order of the fp32 sums). Derived:
"change" = packed through TMA / as committed - 1. "As committed" is the tile's launch from 2
slots an expert (8 tokens); at 4 tokens the arm takes its pointer loads. Packing the weights
changes nothing the step can see: the kernel, not the read pattern, sets its pace; not shipped.""",
        columns=["tokens", *(c for c, _ in _PACKED), "change"],
    )
    return ab_rows(r, t, AB_PACKED, "fp8", _PACKED, 1, 0, (4, 8, 32, 64), history=HIST)


_PREFETCH = (
    ("as committed (TMA, capped, PDL)", "cur:16:64:128:4:4"),
    ("2 steps prefetched", "pf2:16:64:128:4:4"),
    ("4 steps", "pf4:16:64:128:4:4"),
    ("8 steps", "pf8:16:64:128:4:4"),
)


def fp8_prefetch(r: Records) -> Table:
    t = Table(
        name="fp8_prefetch",
        caption="""\
The FP8 step with each program's first 2, 4 or 8 K steps of weights prefetched into L2
(`cp.async.bulk.prefetch.L2`, one a row) before the programmatic-dependent-launch wait, so that
fc2's programs, launched early while fc1 drains, would start their stream before fc1 ends
(`scratch/gd_pf.py`), in the harness of `fp8_packed` with PDL on in every launch; two draws of
routing and weights. Outputs equal to the committed tile's bit for bit. Derived: "change" = 2
steps prefetched / as committed - 1. No gain beyond the harness's noise, 8 steps slower: not
shipped.""",
        columns=["draw, tokens", *(c for c, _ in _PREFETCH), "change"],
    )
    return ab_draws(r, t, AB_PREFETCH, "fp8", _PREFETCH, 1, (8, 16, 32, 64), history=HIST)


_HOISTED = (
    ("as committed", "cur:16:64:128:4:4"),
    ("x of the first step at every step", "abl1:16:64:128:4:4"),
)


def fp8_x_hoisted(r: Records) -> Table:
    t = Table(
        name="fp8_x_hoisted",
        caption="""\
An ablation for timing only (`scratch/gd_abl.py`, outputs wrong on purpose): the FP8 tile with
the slots' operand of the first K step used at every step, so that its per-step global loads and
shared-memory stores leave the loop (sm_90a SASS: 239 instructions a step against 280), in the
harness of `fp8_packed`. Derived: "change" = ablation / as committed - 1. Within the harness's
noise at 32 and 64 tokens: the slots' operand is not what holds the tile below its read. The
log's two other ablations (no e4m3 conversion, no dot) changed the tile's layouts and ran
slower than the kernel they ablate, so they say nothing and are not tabled.""",
        columns=["tokens", *(c for c, _ in _HOISTED), "change"],
    )
    return ab_rows(r, t, AB_ABLATIONS, "fp8", _HOISTED, 1, 0, (8, 32, 64), history=HIST)


TABLES = [
    grouped_stream,
    step_grouped_run,
    model_grouped,
    read_tile,
    fp8_packed,
    fp8_prefetch,
    fp8_x_hoisted,
]
