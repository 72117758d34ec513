"""docs/PERF.md's generated tables of the model step (issue 17) and of the checks of issues 15,
16 and 18 (the layout move, arms from outside, the A/A control).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Piece, Table, bold, fill
from perf_records import Figure, Records, derive
from perf_specs_latest import (
    EP8_FINAL,
    FLOOR_DECODE,
    MASKED,
    STEP_19,
    W4_T1,
    W8_T1,
    weight_floor,
)

STEP = "2026-12-01-step"
V3_STEP = f"{STEP}/deepseek-v3-decode-step.md"
V3_SLO45 = f"{STEP}/deepseek-v3-decode-step-slo45.md"
PREFILL_STEP = f"{STEP}/v4-flash-prefill-step.md"
OSS_STEP = f"{STEP}/gpt-oss-20b-decode-step.md"
LAYOUT = "2026-12-01-layout"
ARMS = "2026-12-01-arms"
TRUST = "2026-12-01-trust"
DECODE_FINAL = "2026-12-01-decode/gpt-oss-20b-decode.md"


def _step(r: Records, path: str, case: str, arm: str, column: str) -> Figure:
    return r.cell(path, "Model step", column, case=case, arm=arm)


def _per_token(r: Records, path: str, case: str, arm: str, column: str) -> Figure:
    return r.cell(path, "Model step per token", column, case=case, arm=arm)


def _goodput(r: Records, path: str, arm: str, column: str) -> Figure:
    return r.cell(path, "Goodput", column, series="all cases", arm=arm)


def v3_step(r: Records) -> Table:
    t = Table(
        name="v3_step",
        caption="""\
us per step; P50 and P90 with their exact 95% intervals (P99 of 40 steps has none); change
against stock as the report gives it (median of per-step ratios, Bonferroni-corrected);
us/token = P50 of the step over the tokens of a step; tax = what per-layer imbalance adds
beyond the slowest rank's own sum (median over steps); graph / S = the whole step timed as one
graph over the sum of its layers.""",
        columns=[
            "case",
            "arm",
            "P50 [95%]",
            "P90 [95%]",
            "P99",
            "vs stock",
            "us/token (P50)",
            "imbalance tax us (%)",
            "graph / S",
        ],
    )
    for case in ("c000-tokens_per_rank=8", "c001-tokens_per_rank=32"):
        for arm in ("stock", "prefix_sum", MASKED):
            p50 = _step(r, V3_STEP, case, arm, "P50 us")
            verdict = (
                fill(
                    "{} {}",
                    _step(r, V3_STEP, case, arm, "change [CI]"),
                    _step(r, V3_STEP, case, arm, "result"),
                )
                if arm != "stock"
                else _step(r, V3_STEP, case, arm, "result")
            )
            t.row(
                _step(r, V3_STEP, case, arm, "case"),
                arm,
                bold(p50) if arm == MASKED else p50,
                _step(r, V3_STEP, case, arm, "P90 us"),
                _step(r, V3_STEP, case, arm, "P99 us"),
                verdict,
                _per_token(r, V3_STEP, case, arm, "us/token P50 / mean").part(" / "),
                _per_token(r, V3_STEP, case, arm, "tax us (%)"),
                _per_token(r, V3_STEP, case, arm, "graph/S"),
                history="[model step][h-step]",
            )
    return t


def goodput(r: Records) -> Table:
    t = Table(
        name="goodput",
        caption="""\
The reports' goodput (derived by `moebench compare`, MoE alone, no non-MoE time): the largest
tokens a step whose P99 step meets the SLO, tokens/s there, and the ratio to the baseline arm;
points without intervals (P99 of the steps measured). The DeepSeek-V3 rows are
`compare --slo-tpot-ms 45` on the same run (the scenario's SLO is met by no batch).""",
        columns=["scenario", "arm", "SLO ms", "tokens a step", "P99 us", "tokens/s", "ratio"],
    )
    for path, scenario, arms in (
        (V3_SLO45, "deepseek-v3-decode-step", ("stock", "prefix_sum", MASKED)),
        (PREFILL_STEP, "v4-flash-prefill-step", ("stock", "prefix_sum", MASKED)),
        (OSS_STEP, "gpt-oss-20b-decode-step", ("dense_decode", "sparse_decode")),
    ):
        for arm in arms:
            t.row(
                scenario,
                arm,
                *(
                    _goodput(r, path, arm, c)
                    for c in ("SLO ms", "tokens/step", "P99 TPOT us", "tokens/s [CI]")
                ),
                _goodput(r, path, arm, "goodput ratio [CI]"),
                history="[model step][h-step]",
            )
    return t


def prefill_step(r: Records) -> Table:
    case = "c000"
    t = Table(
        name="prefill_step",
        caption="""\
us per step over 16 steps: P50 with its exact 95% interval (P90 and P99 have none at 16 steps);
change against stock as the report gives it. Derived: floor = 43 layers x the one-layer floor of
v4-flash-ep8 (its expert weights read once at the copy ceiling, the ffn table's floor), in us.""",
        columns=[
            "arm",
            "P50 [95%]",
            "P99",
            "vs stock",
            "us/token (P50 / mean)",
            "imbalance tax us (%)",
            "floor",
        ],
    )
    layers = r.text(PREFILL_STEP, r"## Model step \((\d+) of \d+ MoE layers\)")
    floor = derive(lambda n, f: n * f, "{:,.0f}", layers, weight_floor(r, EP8_FINAL))
    for arm in ("stock", "prefix_sum", MASKED):
        p50 = _step(r, PREFILL_STEP, case, arm, "P50 us")
        verdict = (
            fill(
                "{} {}",
                _step(r, PREFILL_STEP, case, arm, "change [CI]"),
                _step(r, PREFILL_STEP, case, arm, "result"),
            )
            if arm != "stock"
            else _step(r, PREFILL_STEP, case, arm, "result")
        )
        t.row(
            arm,
            bold(p50) if arm == MASKED else p50,
            _step(r, PREFILL_STEP, case, arm, "P99 us"),
            verdict,
            _per_token(r, PREFILL_STEP, case, arm, "us/token P50 / mean"),
            _per_token(r, PREFILL_STEP, case, arm, "tax us (%)"),
            fill("{} (weights once)", floor) if arm == MASKED else "",
            history="[model step][h-step]",
        )
    return t


def oss_step(r: Records) -> Table:
    t = Table(
        name="oss_step",
        caption="""\
P50 of the step in us; change of sparse against dense as the report gives it; tax as above;
graph / S = the whole step timed as one graph over the sum of its layers.""",
        columns=[
            "case",
            "dense_decode P50",
            "sparse_decode P50",
            "sparse vs dense",
            "sparse tax",
            "graph / S (sparse)",
        ],
    )
    for case in (
        "c000-tokens_per_rank=1",
        "c001-tokens_per_rank=4",
        "c002-tokens_per_rank=16",
        "c003-tokens_per_rank=64",
    ):
        sparse = "sparse_decode"
        t.row(
            _step(r, OSS_STEP, case, sparse, "case"),
            _step(r, OSS_STEP, case, "dense_decode", "P50 us"),
            _step(r, OSS_STEP, case, sparse, "P50 us"),
            fill(
                "{} {}",
                _step(r, OSS_STEP, case, sparse, "change [CI]"),
                _step(r, OSS_STEP, case, sparse, "result"),
            ),
            _per_token(r, OSS_STEP, case, sparse, "tax us (%)"),
            _per_token(r, OSS_STEP, case, sparse, "graph/S"),
            history="[model step][h-step]",
        )
    return t


def layout(r: Records) -> Table:
    ep8 = f"{LAYOUT}/v4-flash-ep8.md"
    oss = f"{LAYOUT}/gpt-oss-20b-decode.md"
    t = Table(
        name="layout",
        caption="""\
"before": the last run before the move (the final code of the TMA session and the decode
sweep); "after": the restructured tree. Derived: the FFN floor as in the ffn table.""",
        columns=["figure", "before", "after", "floor"],
    )
    hist = "[layout][h-layout]"

    def ffn(path: str, arm: str) -> Figure:
        return r.result(path, "ffn", arm)

    t.row(
        "v4-flash-ep8 `ffn`, prefix_sum_masked",
        ffn(EP8_FINAL, MASKED),
        fill("**{}** (cv {}%)", ffn(ep8, MASKED), r.result(ep8, "ffn", MASKED, column="cv %")),
        weight_floor(r, ep8),
        history=hist,
    )
    t.row(
        "v4-flash-ep8 `ffn`, prefix_sum / stock",
        fill("{} / {}", ffn(EP8_FINAL, "prefix_sum"), ffn(EP8_FINAL, "stock")),
        fill("{} / {}", ffn(ep8, "prefix_sum"), ffn(ep8, "stock")),
        "",
        history=hist,
    )
    stages = ("profile/act", "profile/fc1", "profile/fc2")
    t.row(
        "v4-flash-ep8 profile: masked act / FC1 / FC2 (masked arm)",
        fill("{} / {} / {}", *(r.result(EP8_FINAL, s, MASKED) for s in stages)),
        fill("{} / {} / {}", *(r.result(ep8, s, MASKED) for s in stages)),
        "",
        history=hist,
    )
    for case, fmt in ((W8_T1, "FP8"), (W4_T1, "MXFP4")):

        def one(path: str, c: str = case) -> Piece:
            return fill(
                "{} (dense {})",
                r.result(path, "ffn", "sparse_decode", c),
                r.result(path, "ffn", "dense_decode", c),
            )

        floor = (
            fill(
                "{} at {} of copy",
                r.text(FLOOR_DECODE, r"w8a16  step \(.*?of copy needs ([\d.]+) us"),
                r.text(FLOOR_DECODE, r"w8a16  step \(.*?; (\d+%) of copy needs"),
            )
            if fmt == "FP8"
            else ""
        )
        t.row(
            f"gpt-oss-20b-decode, sparse {fmt}, one token",
            one(DECODE_FINAL),
            bold(one(oss)),
            floor,
            history=hist,
        )
    for series in ("precision=w8a16", "precision=w4a16"):
        t.row(
            fill(
                "crossover (dense faster from), {}",
                r.cell(oss, "Crossover", "series", series=series),
            ),
            r.cell(DECODE_FINAL, "Crossover", "baseline faster from", series=series),
            r.cell(oss, "Crossover", "baseline faster from", series=series),
            fill("ledger: {}", r.cell(oss, "Crossover", "ledger", series=series)),
            history=hist,
        )
    return t


def arms(r: Records) -> Table:
    torch_md = f"{ARMS}/v4-flash-ep8-torch.md"
    cheat = f"{ARMS}/cheat.md"
    t = Table(
        name="arms",
        caption="""\
The v4-flash-ep8 shape, `ffn` regime, critical path in us, change against the built-in
`prefix_sum_masked` as the report gives it; the memoising arm is not timed: the report's row is
its gate failures.""",
        columns=["arm", "origin", "us", "against prefix_sum_masked"],
    )
    hist = "[arms][h-arms]"
    t.row(
        "prefix_sum_masked",
        "built-in",
        fill(
            "**{}** (cv {}%)",
            r.result(torch_md, "ffn", MASKED),
            r.result(torch_md, "ffn", MASKED, column="cv %"),
        ),
        r.result(torch_md, "ffn", MASKED, column="result"),
        history=hist,
    )
    for arm, origin in (
        ("masked_persistent", "`examples/arms/persistent_masked.py`, staged"),
        ("torch_grouped", "`examples/arms/torch_grouped.py`, whole FFN"),
    ):
        t.row(
            arm,
            origin,
            r.result(torch_md, "ffn", arm),
            fill(
                "{} {}",
                r.result(torch_md, "ffn", arm, column="change [CI]"),
                r.result(torch_md, "ffn", arm, column="result"),
            ),
            history=hist,
        )
    variants = ("reversed", "empty", "all_empty", "full")
    t.row(
        "memoised",
        "`examples/arms/cheating.py`",
        r.cell(cheat, "Results", "result", arm="memoised"),
        fill(
            "not timed: graph replay fails, calc_diff {} / {} / {} / {} (reversed counts, "
            "every other expert empty, all empty, full buffer)",
            *(
                r.text(cheat, rf"graph_replay_{v} fail \(rank [\d,]+, error ([\d.]+)\)")
                for v in variants
            ),
        ),
        history=hist,
    )
    for stage in ("kernel/act", "profile/act"):
        t.row(
            f"masked_persistent's activation, {stage}",
            "`examples/arms/persistent_masked.py`",
            fill(
                "{} against {}",
                r.result(torch_md, stage, "masked_persistent"),
                r.result(torch_md, stage, MASKED),
            ),
            r.result(torch_md, stage, "masked_persistent", column="change [CI]"),
            history=hist,
        )
    built = f"{ARMS}/v4-flash-ep8.md"
    dec = f"{ARMS}/gpt-oss-20b-decode.md"
    t.row(
        "built-in arms through the Arm interface: v4-flash-ep8 masked / prefix_sum / stock",
        "built-in",
        fill("{} / {} / {}", *(r.result(built, "ffn", a) for a in (MASKED, "prefix_sum", "stock"))),
        "",
        history=hist,
    )
    t.row(
        "same: gpt-oss-20b-decode one token, sparse FP8 (dense) / sparse MXFP4",
        "built-in",
        fill(
            "{} ({}) / {}",
            r.result(dec, "ffn", "sparse_decode", W8_T1),
            r.result(dec, "ffn", "dense_decode", W8_T1),
            r.result(dec, "ffn", "sparse_decode", W4_T1),
        ),
        "",
        history=hist,
    )
    return t


def trust(r: Records) -> Table:
    runs = (
        (f"{TRUST}/v4-flash-ep8-__aa_.md", "v4-flash-ep8 `--aa`", "stock"),
        (f"{TRUST}/gpt-oss-20b-decode-__aa_.md", "gpt-oss-20b-decode `--aa`", "dense_decode"),
    )
    t = Table(
        name="trust",
        caption="""\
The A/A control (`--aa`: a copy of the baseline arm, identical code) with exact intervals,
Bonferroni over the cells: the reports' own summary, and the one cell that claims a difference.
Derived: both runs together = claims / cells.""",
        columns=[
            "scenario",
            "ranks / blocks / samples",
            "A/A cells claiming a difference",
            "not SAME",
            "nominal bound",
        ],
    )
    claims, cells = [], []
    for path, label, base in runs:
        summary = r"false-positive rate (\d+) of (\d+) cell"
        claim = r.text(path, summary.replace(r"(\d+) of (\d+)", r"(\d+) of \d+"))
        cell_count = r.text(path, summary.replace(r"(\d+) of (\d+)", r"\d+ of (\d+)"))
        claims.append(claim)
        cells.append(cell_count)
        case = "c000" if base == "stock" else W8_T1
        t.row(
            label,
            r.result(path, "ffn", base, case, column="ranks / blocks / samples"),
            fill(
                "**{}** of {} ({})",
                claim,
                cell_count,
                r.text(path, r"claim a difference = ([\d.]+%)"),
            ),
            r.text(path, r"cell\(s\) not SAME = [\d.]+% \(([^)]*)\)"),
            r.text(path, r"\(at most (\d+% of the corrected family)\)"),
            history="[trust][h-trust]",
        )
    ep8 = runs[0][0]
    t.row(
        "v4-flash-ep8 `--aa`, `ffn`: masked / prefix_sum / stock; stock's copy",
        "",
        fill(
            "{} / {} / {}; stock~aa {} {}",
            *(r.result(ep8, "ffn", a) for a in (MASKED, "prefix_sum", "stock")),
            r.result(ep8, "ffn", "stock~aa", column="change [CI]"),
            r.result(ep8, "ffn", "stock~aa", column="result"),
        ),
        "",
        "",
        history="[trust][h-trust]",
    )
    aa = f"{TRUST}/gpt-oss-20b-decode-__aa_.md"
    t.row(
        "the claim, gpt-oss-20b-decode",
        "",
        fill(
            "{} {}: {} {}",
            r.cell(aa, "A/A control", "case", decision="SLOWER"),
            r.cell(aa, "A/A control", "stage", decision="SLOWER"),
            r.cell(aa, "A/A control", "change [CI]", decision="SLOWER"),
            r.cell(aa, "A/A control", "decision", decision="SLOWER"),
        ),
        "",
        "",
        history="[trust][h-trust]",
    )
    both = derive(lambda a, b, c, d: 100 * (a + b) / (c + d), "{:.1f}%", *claims, *cells)
    t.row(
        "both",
        "",
        fill(
            "{} of {} ({})",
            derive(lambda a, b: a + b, "{:.0f}", *claims),
            derive(lambda a, b: a + b, "{:.0f}", *cells),
            both,
        ),
        "",
        "",
        history="[trust][h-trust]",
    )
    return t


def policy(r: Records) -> Table:
    t = Table(
        name="policy",
        caption="""\
The reports' policy over each token sweep of the model step: where the arm is FASTER than its
baseline (compare's corrected decisions), the boundary between the two sweep points named, and
the evidence.""",
        columns=["scenario", "arm vs baseline", "use when", "boundary", "evidence"],
    )
    for path, scenario, pair in (
        (STEP_19, "deepseek-v3-decode-step, latest run", "prefix_sum_masked vs prefix_sum"),
        (V3_STEP, "deepseek-v3-decode-step", "prefix_sum_masked vs prefix_sum"),
        (OSS_STEP, "gpt-oss-20b-decode-step", "sparse_decode vs dense_decode"),
    ):
        t.row(
            scenario,
            pair,
            *(
                r.cell(path, "Policy", c, **{"arm vs baseline": pair})
                for c in ("use when", "boundary", "evidence")
            ),
            history="[issue 19][h-i19]" if path == STEP_19 else "[model step][h-step]",
        )
    return t


TABLES = [v3_step, policy, goodput, prefill_step, oss_step, layout, arms, trust]
