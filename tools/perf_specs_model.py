"""docs/PERF.md's generated tables of the H200 session of 2026-12-02: what the host's gaps between
samples do to the clock (issue 25, tools/bench_integrity.py), and the model regime's runs of
Qwen3-30B-A3B and gpt-oss-20b (issue 27).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own. The figures a caption
quotes are the records' figures, put in when the table is built.
"""

from __future__ import annotations

from perf_cells import Piece, Table, fill
from perf_records import Derived, Figure, Records, derive, over

DAY = "2026-12-02-model-integrity"
README = f"{DAY}/README.md"
LOGS = {
    (kind, scenario): f"{DAY}/bench_integrity-{scenario}-{kind}.log"
    for kind in ("idle", "defences")
    for scenario in ("v4-flash-ep8", "gpt-oss-20b-decode")
}
QWEN = f"{DAY}/qwen3-30b-a3b-model.md"
OSS = f"{DAY}/gpt-oss-20b-model-w8a16-tenth-rule.md"
HIST_25 = "[issue 25][h-i25c]"
HIST_27 = "[issue 27][h-i27]"
NONE = "moebench:none"
TTFT_ARMS = ("stock", "prefix_sum", "prefix_sum_masked", "hf:grouped_mm", NONE)
# The variants of each bench_integrity run, with what comes before each sample (tools/
# bench_integrity.py's docstring; its IDLE_S, SPIN_LONG and BUSY in the caption).
VARIANTS = {
    "idle": (
        ("plain", "nothing (the clock's own short spin)"),
        ("idle", "host idle"),
        ("idle_spin", "host idle, then a long spin"),
        ("idle_busy", "host idle, then memory traffic"),
        ("load", "an input set loaded"),
        ("all", "load, L2 reset, check and fingerprint"),
    ),
    "defences": (
        ("plain", "nothing (the clock's own short spin)"),
        ("flush", "L2 flushed by a write (a cold L2)"),
        ("reset_l2", "the persisting L2 lines reset"),
        ("load", "an input set loaded"),
        ("check", "the previous output checked"),
        ("fingerprint", "every input fingerprinted"),
        ("all", "load, L2 reset, check and fingerprint"),
    ),
}


def _median(r: Records, kind: str, scenario: str, variant: str) -> Figure:
    return r.text(LOGS[kind, scenario], rf"^{variant}\s+median\s+([\d.]+) us ")


def _host(r: Records, kind: str, scenario: str, variant: str) -> Figure:
    return r.text(LOGS[kind, scenario], rf"^{variant}\s+median .* host\s+([\d.]+) us a sample$")


def _commit(r: Records, kind: str) -> Figure:
    """The commit of the tree a bench_integrity run ran, as the folder's README gives it."""
    return r.text(README, rf"^\| `bench_integrity-\*-{kind}\.\{{log,json\}}` \| (\w+) \|")


def _shift(r: Records, kind: str, scenario: str, variant: str) -> Piece:
    """variant - plain in us, and variant / plain - 1."""
    now, plain = _median(r, kind, scenario, variant), _median(r, kind, scenario, "plain")
    return fill("{} ({})", derive(lambda a, b: a - b, "{:+.2f}", now, plain), over(now, plain))


def clock_wake(r: Records) -> Table:
    def m(kind: str, scenario: str, variant: str) -> str:
        return _median(r, kind, scenario, variant).text

    v4, oss = "v4-flash-ep8", "gpt-oss-20b-decode"
    caption = f"""\
`tools/bench_integrity.py`: one arm's `ffn` graph on rank 0, timed with the run's `Clock`, each
variant doing one thing before (or after) every sample, the variants interleaved in rotating
rounds (10 rounds x 8 samples); v4-flash-ep8 prefix_sum_masked and gpt-oss-20b-decode
sparse_decode (its first case: one token, w8a16). Two runs, each on its own tree (the folder's
README). "median us" and "host us" (the host time a sample took, everything between samples
included) are the logs'. Derived: "- plain" = variant's median - plain's median of the same run,
in us, and in brackets variant / plain - 1. "idle" is 5 ms of host sleep before each sample
(IDLE_S), "idle_spin" the same then a spin of about 1 ms (SPIN_LONG),
"idle_busy" the same then about 1 ms of memory writes (BUSY).

A host gap slows the next sample: with 5 ms of host idle first, prefix_sum_masked read
{m("idle", v4, "idle")} us against {m("idle", v4, "plain")} and sparse_decode
{m("idle", oss, "idle")} against {m("idle", oss, "plain")}; a ~1 ms spin first gave
{m("idle", v4, "idle_spin")} and {m("idle", oss, "idle_spin")}, as if there were no gap; memory
traffic first gave {m("idle", v4, "idle_busy")} and {m("idle", oss, "idle_busy")}, sparse_decode
only partly restored. The defences' per-sample host work moves the figures by the same
mechanism: at v4-flash-ep8 the more host time a sample took (check, load, fingerprint, all), the
more its median rose, while "flush", a cold L2 with little host time, did not slow it (its median
is below plain's), nor did the persisting-L2 reset. At gpt-oss-20b-decode the defences run
moved every variant by half a us or less, although "all" of the idle run moved it by more: the
shift of a sample this short follows the host time only roughly. Hence commit c66fa57:
moebench's `Clock` now spins ~1 ms before a sample that follows more than 200 us of host time
since the device last finished (moebench/measure/clock.py). **The rerun of the scenarios with
that fix did not run** (the session's device time ran out): that the defences' figures are then
unchanged within noise is not yet shown by a run."""
    t = Table(
        name="clock_wake",
        caption=caption,
        columns=[
            "run (tree)",
            "variant",
            "before each sample",
            "v4-flash-ep8 median us",
            "host us",
            "- plain",
            "gpt-oss-20b-decode median us",
            "host us",
            "- plain",
        ],
    )
    for kind, variants in VARIANTS.items():
        for variant, before in variants:
            cells: list[Figure | Piece | str] = [fill(f"{kind} ({{}})", _commit(r, kind))]
            cells += [f"`{variant}`", before]
            for scenario in (v4, oss):
                cells += [
                    _median(r, kind, scenario, variant),
                    _host(r, kind, scenario, variant),
                    "" if variant == "plain" else _shift(r, kind, scenario, variant),
                ]
            t.row(*cells, history=HIST_25)
    return t


def _change(change: Figure, result: Figure) -> Figure | Piece:
    """A report's change [CI] and its result, or the result alone where there is no change."""
    return fill("{} {}", change, result) if change.text else result


def _ms(value: Figure, fmt: str) -> Derived:
    return derive(lambda us: us / 1000, fmt, value)


def model_serving(r: Records) -> Table:
    ttft, tpot = "Model prefill: TTFT", "Model decode: TPOT"
    measured = [row for row in r.report(OSS)[tpot] if row["TPOT P50 us"]]

    def oss(column: str, case: str, arm: str) -> Figure:
        return r.cell(OSS, tpot, column, case=case, arm=arm)

    first = measured[0]
    none_b1 = oss("TPOT P50 us", first["case"], NONE)
    floor_b1 = oss("H200 floor us", first["case"], NONE)
    caption = f"""\
The model regime (issue 27) on the H200, one GPU, the models' layers random (no checkpoint):
Qwen3-30B-A3B cut to 24 of its 48 layers, bf16, prefill of one prompt; gpt-oss-20b's 24 layers,
experts in FP8 (w8a16), decode steps each captured in one CUDA graph. Figures as the reports
give them: P50 and P99 with their exact 95% order-statistic intervals, us; the floor is the
report's (the bytes the step must move over the H200's copy ceiling) and "x floor" its TPOT /
floor; "change" against the report's baseline (stock for Qwen3, dense_decode for gpt-oss-20b).
Derived: "above {NONE}" = the arm's P50 - {NONE}'s P50 in the same case, us ({NONE} does no
expert work, so this is the experts' time in the step).

Qwen3-30B-A3B passed every gate. The gpt-oss-20b run was made under the earlier logits rule
(commit b0a7bbd: the logits held to the reference within the larger of the precision's
tolerance and a tenth of {NONE}'s distance): under it the arms failed the logits gate in the
cases not shown (every arm at batch 1, 4 and 16, hf:grouped_mm at 64; the report's Results),
though every per-layer experts gate (each layer within 2e-5 of transformers' eager experts on
its own inputs) and every graph gate (the captured step equal to its eager step, exactly 0)
passed (commit 15d94b3's message: the report names only the failing gates). The rule is now a
half (15d94b3); the rerun under it did not happen (no device time left). The study's published
gpt-oss-20b TPOT (13.9 ms dense FP8, 7.6 ms sparse FP8, scenarios/gpt-oss-20b-model.yaml) is an
RTX 5090 at TP2, another GPU and another parallelism, and is not a column. The non-MoE time of
transformers' gpt-oss decode step ({NONE}) is {_ms(none_b1, "{:.1f}").text} ms at batch 1
against a floor of {_ms(floor_b1, "{:.2f}").text} ms (derived: us / 1000): the step is far above
its bytes, which points at the count of its kernel launches, not at its memory traffic (not
profiled here)."""
    t = Table(
        name="model_serving",
        caption=caption,
        columns=[
            "model, figure",
            "case",
            "arm",
            "P50 us [CI]",
            "P99 us [CI]",
            "floor us",
            "x floor",
            "change [CI], result",
            f"above {NONE}",
        ],
    )
    cases = list(dict.fromkeys(row["case"] for row in r.report(QWEN)[ttft]))
    for case in cases:
        none = r.cell(QWEN, ttft, "TTFT P50 us", case=case, arm=NONE)
        for arm in TTFT_ARMS:

            def q(column: str, a: str = arm, c: str = case) -> Figure:
                return r.cell(QWEN, ttft, column, case=c, arm=a)

            p50 = q("TTFT P50 us")
            t.row(
                "Qwen3-30B-A3B, TTFT",
                fill("{}, batch x prompt {}", q("case"), q("batch x prompt")),
                arm,
                p50,
                "",
                "",
                "",
                _change(q("change [CI]"), q("result")),
                "" if arm == NONE else derive(lambda a, b: a - b, "{:+,.1f}", p50, none),
                history=HIST_27,
            )
    for row in measured:
        case, arm = row["case"], row["arm"]
        p50 = oss("TPOT P50 us", case, arm)
        none = oss("TPOT P50 us", case, NONE)
        t.row(
            "gpt-oss-20b w8a16, TPOT",
            fill("{}, batch {}", oss("case", case, arm), oss("batch", case, arm)),
            arm,
            p50,
            oss("P99 us", case, arm),
            oss("H200 floor us", case, arm),
            oss("TPOT/floor", case, arm),
            _change(oss("change [CI]", case, arm), oss("result", case, arm)),
            "" if arm == NONE else derive(lambda a, b: a - b, "{:+,.1f}", p50, none),
            history=HIST_27,
        )
    return t


TABLES = [clock_wake, model_serving]
