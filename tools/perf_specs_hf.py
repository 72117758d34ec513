"""docs/PERF.md's generated tables of transformers' experts backends beside moebench's arms
(issue 26), and the decode policies of the sixth session's sweeps (issues 26 and 28).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Piece, Table, bold, fill
from perf_records import Figure, Records
from perf_specs_grouped import HIST_28, SWEEP
from perf_specs_integrity import LIFE, transformers_version
from perf_specs_latest import MASKED

HF_EP8 = f"{LIFE}/v4-flash-ep8-hf.md"
HF_OSS = f"{LIFE}/gpt-oss-20b-decode-hf.md"
HIST_26 = "[issue 26][h-i26]"
HF_PREFILL = ("hf:grouped_mm", "hf:batched_mm", "hf:eager")
HF_DECODE = tuple(f"{a}@gpt_oss" for a in HF_PREFILL)


def ffn_cases(r: Records, path: str, baseline: str) -> list[str]:
    """The report's cases in its order (those its baseline arm has an `ffn` row for)."""
    rows = r.report(path)["Results"]
    return [row["case"] for row in rows if row["stage"] == "ffn" and row["arm"] == baseline]


def hf_prefill(r: Records) -> Table:
    t = Table(
        name="hf_prefill",
        caption="""\
v4-flash-ep8-hf: DeepSeek-V4-Flash's MoE FFN at EP8 (simulated), 8 tokens per rank, bf16, every
gate passed; `ffn` regime, slowest rank, us, with the cell's cv; change against
`prefix_sum_masked` as the report gives it. The hf: arms run transformers' DeepSeek-V4 experts
class with each rank's local experts. `hf:eager` reads the experts hit back to the host, so it is
timed eager and compared with no graph cell. "weight MB" is each arm's own byte model and "of copy"
its weight bandwidth over the copy ceiling, as the report gives them.""",
        columns=[
            "arm",
            "origin",
            "mode",
            "us (cv)",
            "against prefix_sum_masked",
            "weight MB",
            "of copy",
        ],
    )
    version = transformers_version(r)
    for arm in (MASKED, "prefix_sum", "stock", *HF_PREFILL):
        us = fill(
            "{} ({}%)", r.result(HF_EP8, "ffn", arm), r.result(HF_EP8, "ffn", arm, column="cv %")
        )
        if arm == MASKED:
            against: Figure | Piece | str = r.result(HF_EP8, "ffn", arm, column="result")
        elif arm == "hf:eager":
            against = "not compared (eager against graph)"
        else:
            against = fill(
                "{} {}",
                r.result(HF_EP8, "ffn", arm, column="change [CI]"),
                r.result(HF_EP8, "ffn", arm, column="result"),
            )

        def bandwidth(column: str, a: str = arm) -> Figure:
            return r.cell(HF_EP8, "Weight bandwidth", column, case="c000", stage="ffn", arm=a)

        t.row(
            arm,
            fill("transformers {}", version) if arm.startswith("hf:") else "built-in",
            r.result(HF_EP8, "ffn", arm, column="mode"),
            bold(us) if arm == MASKED else us,
            against,
            bandwidth("weight MB"),
            bandwidth("of copy"),
            history=HIST_26,
        )
    return t


def hf_decode(r: Records) -> Table:
    t = Table(
        name="hf_decode",
        caption="""\
gpt-oss-20b-decode-hf: gpt-oss-20b's MoE at ep 2 = dp 1 x tp 2 (simulated), 1 to 64 tokens, FP8
(w8a16) and MXFP4 (w4a16) weights, every gate passed; `ffn` regime, slowest rank, us. The hf:
arms run transformers' gpt-oss experts class with the weights dequantised to bf16 before timing
(the precision's arithmetic at bf16's bytes, docs/TRANSFORMERS.md); `hf:eager@gpt_oss` is timed
eager and not compared with the graph cells. The decisions against dense and between the arms
are in the policy table below.""",
        columns=[
            "case",
            "dense_decode",
            "sparse_decode",
            *HF_DECODE[:2],
            f"{HF_DECODE[2]} (eager)",
        ],
    )
    for case in ffn_cases(r, HF_OSS, "dense_decode"):
        t.row(
            r.cell(HF_OSS, "Results", "case", case=case, stage="ffn", arm="dense_decode"),
            *(
                r.result(HF_OSS, "ffn", a, case)
                for a in ("dense_decode", "sparse_decode", *HF_DECODE)
            ),
            history=HIST_26,
        )
    return t


def decode_policy(r: Records) -> Table:
    t = Table(
        name="decode_policy",
        caption="""\
The reports' policy over each token sweep (`ffn` regime): where the arm is FASTER than the
baseline named (compare's corrected decisions), the boundary between the two sweep points named,
and compare's note. The grouped rows are the first grouped kernels, superseded for MXFP4 by the
rewrite (the grouped bench table).""",
        columns=["run", "series", "arm vs baseline", "use when", "boundary", "note"],
    )
    runs = (
        (HF_OSS, "gpt-oss-20b-decode-hf", HIST_26, (
            "sparse_decode vs hf:grouped_mm@gpt_oss",
            "hf:grouped_mm@gpt_oss vs dense_decode",
            "sparse_decode vs dense_decode",
        )),
        (SWEEP, "gpt-oss-20b-decode-grouped", HIST_28, (
            "grouped_decode vs dense_decode",
            "sparse_decode vs grouped_decode",
        )),
    )  # fmt: skip
    for path, run, hist, pairs in runs:
        for series in ("precision=w8a16", "precision=w4a16"):
            for pair in pairs:

                def policy(column: str, p: str = path, s: str = series, a: str = pair) -> Figure:
                    return r.cell(p, "Policy", column, series=s, **{"arm vs baseline": a})

                t.row(
                    run,
                    policy("series"),
                    pair,
                    policy("use when"),
                    policy("boundary"),
                    policy("note"),
                    history=hist,
                )
    return t


TABLES = [hf_prefill, hf_decode, decode_policy]
