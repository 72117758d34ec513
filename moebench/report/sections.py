"""The text that the terminal table and the Markdown report share.

Figures as text (``fmt_us``, ``fmt_change``, ``fmt_pct``), the rows as cells (``display_rows``),
the title, and the sections below the rows: the A/A control (the false-positive rate of the
procedure on this machine), the noise of each regime, the reconciliation of profiled stage sums
with the FFN time, the distributed passes, and the work model's weight bandwidth and crossovers
(``moebench.analysis.workmodel`` computes them; the headers, notes and cells are here), and the
step regime's model step, TPOT share, goodput and policy (``step_sections``).
"""

from __future__ import annotations

import math

from moebench.analysis.goodput import GOODPUT_DEFINITION
from moebench.analysis.rows import CompareRow, Comparison
from moebench.analysis.stats import TOO_FEW
from moebench.analysis.workmodel import WorkModel
from moebench.core.ceilings import GPUS
from moebench.core.vocabulary import Regime


def fmt_us(x: float) -> str:
    if math.isnan(x):
        return ""
    if x >= 100:
        return f"{x:,.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_change(row: CompareRow) -> str:
    if math.isnan(row.change_pct):
        return ""
    if math.isnan(row.ci_low_pct):  # TOO FEW BLOCKS: the point change, no interval
        return f"{row.change_pct:+.1f}% (no CI)"
    return f"{row.change_pct:+.1f}% [{row.ci_low_pct:+.1f}, {row.ci_high_pct:+.1f}]"


def fmt_pct(x: float, digits: int = 2) -> str:
    return "" if math.isnan(x) else f"{x:.{digits}f}%"


def _spread(row: CompareRow) -> str:
    if math.isnan(row.rank_min_us):
        return ""
    return " / ".join(fmt_us(v) for v in (row.rank_min_us, row.rank_median_us, row.rank_max_us))


def _count(n: int | None) -> str:
    return "" if n is None else str(n)


# (header, right-aligned). Text columns (run, case, stage, arm, note) may fold inside a word when
# the terminal is narrow; figure columns never do.
_COLUMNS = (
    ("case", False), ("stage", False), ("arm", False), ("result", False), ("median us", True),
    ("cv %", True), ("rank min / med / max us", True), ("slowest rank", True),
    ("ranks / blocks / samples", True), ("change [CI]", True), ("note", False),
)  # fmt: skip


def _result(r: CompareRow) -> str:
    if r.status == "ok":
        return r.decision
    return f"{r.decision} ({r.status})" if r.decision else r.status


def display_rows(comp: Comparison) -> tuple[list[tuple[str, bool]], list[list[str]]]:
    columns = list(_COLUMNS)
    multi = len(comp.run_ids) > 1
    modes = any(r.mode for r in comp.rows)
    if modes:
        columns.insert(2, ("mode", False))
    if multi:
        columns.insert(0, ("run", False))
    body = []
    for r in comp.rows:
        stage = r.stage if r.regime in (Regime.FFN, "") else f"{r.regime}/{r.stage}"
        counts = " / ".join(_count(n) for n in (r.n_ranks, r.n_blocks, r.n_samples))
        cells = [r.case_id, stage, r.arm, _result(r), fmt_us(r.median_us),
                 "" if math.isnan(r.cv_pct) else f"{r.cv_pct:.2f}", _spread(r),
                 _count(r.slowest_rank), "" if r.n_ranks is None else counts, fmt_change(r),
                 r.reason]  # fmt: skip
        if modes:
            cells.insert(2, r.mode)
        body.append(([r.run_id] if multi else []) + cells)
    return columns, body


CRITICAL_PATH_NOTE = (
    "median us: median over blocks of the critical path (per block, the slowest rank's median). "
    "cv %: coefficient of variation of those block values (the cell's noise). "
    "rank min / med / max: spread of the per-rank medians."
)


def title(comp: Comparison) -> str:
    """The one line that heads every document: what was compared, how, on what."""
    pct = f"{comp.confidence * 100:g}%"
    m = comp.comparisons
    if m <= 1:
        ci = f"{pct} CI ({m} comparison, nothing to correct)"
    elif comp.correction == "none":
        ci = f"{pct} CI per comparison, uncorrected ({m} comparisons)"
    else:
        ci = (
            f"{pct} CIs Bonferroni-corrected for {m} comparisons "
            f"(each {_pct_text(comp.cell_confidence)})"
        )
    head = (
        f"moebench compare vs '{comp.baseline}': {ci}, exact order-statistic intervals over "
        f"paired blocks (>= {comp.blocks_needed} blocks needed), SAME within "
        f"+-{comp.threshold_pct:g}%"
    )
    if "cpu" in comp.devices:
        mixed = " mixed with GPU runs," if "cuda" in comp.devices else ""
        return f"{head}. CPU timings (Triton interpreter),{mixed} not comparable with GPU"
    if comp.devices == ("cuda",):
        return f"{head}. GPU timings (device events)"
    return head


def _pct_text(level: float) -> str:
    """99.583% rather than 99.58333333%: enough digits to tell the level from 100%."""
    miss = (1 - level) * 100
    digits = max(0, -math.floor(math.log10(miss))) if miss > 0 else 0
    return f"{level * 100:.{digits}f}%"


# ---------------------------------------------------------------------------------------------
# Sections shared by the table and the report


def aa_lines(comp: Comparison, *, heading: bool = True) -> list[str]:
    """The A/A control in one line. ``heading`` leads it with "A/A control" (the terminal table,
    where it stands among other lines); a report that puts it under its own "A/A control"
    heading passes False, so that the name is not said twice."""
    aa = comp.aa
    if aa is None:
        none = "none in these runs (run --aa measures the false-positive rate)"
        return [f"A/A control: {none}" if heading else f"None{none[4:]}."]
    pairs = sorted({f"{r.arm} vs {r.baseline}" for r in comp.rows if r.is_aa and r.baseline})
    head = f"A/A control ({', '.join(pairs)})" if heading else ", ".join(pairs)
    few = (
        f"; {aa.too_few} cell(s) {TOO_FEW} for a verdict (need >= {comp.blocks_needed})"
        if aa.too_few
        else ""
    )
    if not aa.cells:
        return [f"{head}: no cell decided{few}"]
    verdict = (
        "every cell SAME"
        if not aa.not_same
        else (f"{aa.false_positives} FASTER/SLOWER, {aa.ambiguous} AMBIGUOUS")
    )
    nominal = (1 - comp.confidence) * 100
    return [
        f"{head}: false-positive rate {aa.false_positives} of {aa.cells} cell(s) claim a "
        f"difference = {aa.fp_rate * 100:.1f}% (at most {nominal:g}% of the corrected family); "
        f"{aa.not_same} of {aa.cells} cell(s) not SAME = {aa.rate * 100:.1f}% ({verdict}); "
        f"largest |change| {aa.max_abs_change_pct:.2f}%, widest CI "
        f"+-{aa.max_half_width_pct:.2f}%{few}"
    ]


def integrity_lines(comp: Comparison, *, heading: bool = True) -> list[str]:
    """What the numbers survived: one line per integrity check of these runs."""
    if not comp.integrity:
        return []
    head = ["Integrity (what these numbers survived):"] if heading else []
    return head + [f"- {line}" for line in comp.integrity]


def noise_lines(comp: Comparison) -> list[str]:
    lines = []
    multi = len(comp.run_ids) > 1
    for n in comp.noise():
        where = (f"{n.run_id} " if multi else "") + n.regime + (f" [{n.mode}]" if n.mode else "")
        goal = ""
        if not math.isnan(n.goal_pct):
            met = "met" if not n.over_goal else f"{n.over_goal} cell(s) over"
            goal = f"; goal under {n.goal_pct:g}%: {met}"
        lines.append(
            f"noise {where}: cv of block critical paths median {n.median_cv_pct:.2f}%, max "
            f"{n.max_cv_pct:.2f}% ({n.worst}) over {n.cells} cell(s){goal}"
        )
    return lines


def per_rank(values: list[float]) -> str:
    return " / ".join(fmt_us(v) or "-" for v in values)


def pass_lines(comp: Comparison) -> list[str]:
    """Distributed runs: per (case, arm) the critical path per pass, the straggler and each
    rank's stages (moebench/analysis/critical.py)."""
    multi = len(comp.run_ids) > 1
    return [
        f"distributed {f'{p.run_id} ' if multi else ''}{p.case_id}"
        f"{f' [{p.mode}]' if p.mode else ''} {p.arm}: critical path per pass (max over "
        f"{p.ranks} ranks of layer) median {fmt_us(p.critical_median_us)} us, min "
        f"{fmt_us(p.critical_min_us)}, max {fmt_us(p.critical_max_us)} over {p.passes} passes; "
        f"straggler rank {p.straggler_rank} ({p.straggler_passes} of {p.passes} passes); "
        f"per rank ({' / '.join(str(r) for r in range(p.ranks))}) median us: "
        + ", ".join(f"{stage} {per_rank(v)}" for stage, v in p.rank_medians.items())
        for p in comp.passes
    ]


def reconciliation_lines(comp: Comparison) -> list[str]:
    return [
        f"profile {r.case_id}{f' [{r.mode}]' if r.mode else ''} {r.arm}: stage sum "
        f"{fmt_us(r.stage_sum_us)} us / ffn {fmt_us(r.ffn_us)} us = {r.ratio:.3f}"
        for r in comp.reconciliation()
    ]


# ---------------------------------------------------------------------------------------------
# The work model's sections (plain cells; the table and the report lay them out)

BANDWIDTH_HEADER = ("case", "stage", "arm", "tokens", "weight MB", "GB/s", "of copy")
CROSSOVER_HEADER = ("series", "arm vs baseline", "arm / baseline time by tokens",
                    "baseline faster from", "ledger")  # fmt: skip
BANDWIDTH_NOTE = (
    "expert weight bytes the step (or stage) reads on the slowest rank over that "
    "rank's median time; 'of copy' against the device-copy ceiling measured on the run's GPU "
    f"({', '.join(f'{c.name} {c.copy_tbs:g} TB/s' for c in GPUS.values())}), empty for CPU runs "
    "and for GPUs whose ceiling moebench has not measured."
)
CROSSOVER_NOTE = (
    "on the ffn regime, the smallest token count from which the baseline is faster at it "
    "and every larger count; ledger: where the busiest rank's routed slots first reach its local "
    "experts (a per-slot GEMV then streams as many expert weights as a dense pass)."
)


def workmodel_sections(comp: Comparison) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of the work-model sections that have rows."""
    wm = comp.workmodel
    if not wm:
        return []
    multi = len(comp.run_ids) > 1
    lead = ["run"] if multi else []
    sections = []
    if wm.bandwidth:
        sections.append(("Weight bandwidth", BANDWIDTH_NOTE, lead + list(BANDWIDTH_HEADER),
                         bandwidth_cells(wm, multi)))  # fmt: skip
    if wm.crossover:
        sections.append(("Crossover", CROSSOVER_NOTE, lead + list(CROSSOVER_HEADER),
                         crossover_cells(wm, multi)))  # fmt: skip
    return sections


def _tokens(t: int | None) -> str:
    if t is None:
        return ""
    return f"{t} token" if t == 1 else f"{t} tokens"


def _gbps(x: float) -> str:
    """GB/s with one decimal, or three significant digits below 10 (interpreter runs on the CPU
    reach a few MB/s, which one decimal would print as 0.0)."""
    if math.isnan(x):
        return ""
    return f"{x:,.1f}" if x >= 10 else f"{x:.3g}"


def bandwidth_cells(wm: WorkModel, multi_run: bool) -> list[list[str]]:
    out = []
    for b in wm.bandwidth:
        stage = b.stage if b.regime == Regime.FFN else f"{b.regime}/{b.stage}"
        frac = "" if math.isnan(b.copy_fraction) else f"{b.copy_fraction:.0%}"
        cells = [b.case_id, stage, b.arm, str(b.tokens_per_rank), f"{b.weight_bytes / 1e6:,.2f}",
                 _gbps(b.gbps), frac]  # fmt: skip
        out.append(([b.run_id] if multi_run else []) + cells)
    return out


def crossover_cells(wm: WorkModel, multi_run: bool) -> list[list[str]]:
    out = []
    for c in wm.crossover:
        ratios = ", ".join(
            f"{t}: {'' if math.isnan(q) else f'{q:.2f}x'}"
            for t, q in zip(c.tokens, c.ratios, strict=True)
        )
        if c.crossover_tokens is None:
            cross = "never (arm faster at every count)" if not c.note.startswith("fewer") else ""
        else:
            cross = _tokens(c.crossover_tokens)
        if c.note:
            cross = f"{cross} ({c.note})" if cross else c.note
        cells = [c.series, f"{c.arm} vs {c.baseline}", ratios, cross, _tokens(c.ledger_tokens)]
        out.append(([c.run_id] if multi_run else []) + cells)
    return out


# ---------------------------------------------------------------------------------------------
# The step regime's sections (moebench.analysis.step, goodput, policy): plain cells as above

STEP_ONLY = "No rows outside the step regime: its figures are in the model step sections below."
STEP_NOTE = (
    "per step S = the sum over layers of each layer's slowest rank (EP ranks meet at every "
    "layer); P50/P90/P99 over steps, each with its exact {level} order-statistic interval (none "
    "where the steps are too few: see the note); change: median of per-step ratios against the "
    "baseline (an A/A copy: the arm it copies), corrected with the table."
)
PER_TOKEN_NOTE = (
    "tokens per step = tokens per rank x data ranks (mean over steps); us/token: P50 of S, and "
    "mean of S, over them; tax = S minus the slowest rank's own sum over layers, what per-layer "
    "imbalance costs (median over steps); graph/S: the whole step timed as one graph, over S."
)
TPOT_NOTE = (
    "derived: TPOT = a percentile of the model step + a non-MoE time of a step (the scenario's "
    "given unless said below); MoE share = S / TPOT (100% with no non-MoE time: MoE alone)."
)


def _given_text(setups) -> str:
    """Where the step regime's SLO and non-MoE time came from, when not from the scenario."""
    measured = sorted({x.non_moe_source for x in setups if x.non_moe_source})
    if measured:
        return (f" The non-MoE time was measured, not given: {'; '.join(measured)} "
                "(--non-moe-from); the SLO is "
                + ("compare's (--slo-tpot-ms)." if any(x.given_by == "compare" for x in setups)
                   else "the scenario's."))  # fmt: skip
    if any(x.given_by == "compare" for x in setups):
        return (
            " The SLO and the non-MoE time were given to compare (--slo-tpot-ms, "
            "--non-moe-us), not taken from the scenario."
        )
    return ""


POLICY_NOTE = (
    "over each token sweep, where an arm's advantage disappears: use the arm where it is FASTER "
    "(compare's decisions, corrected with the table); the boundary lies between the two sweep "
    "points named; the conditions hold within the counts measured. JSON: 'policy'."
)


def _quantile(x) -> str:
    if x is None:
        return ""
    if math.isnan(x.low_us):
        return f"{fmt_us(x.us)} (no CI)"
    return f"{fmt_us(x.us)} [{fmt_us(x.low_us)}, {fmt_us(x.high_us)}]"


def _interval(point: float, low: float, high: float, fmt) -> str:
    if math.isnan(point):
        return ""
    return fmt(point) + ("" if math.isnan(low) else f" [{fmt(low)}, {fmt(high)}]")


def _signed(x: float) -> str:
    return f"{x:+.1f}%"


def layers_text(comp: Comparison) -> str:
    """The layers each run timed, for every table that uses them."""
    setups = comp.step.setups if comp.step else ()
    texts = {s.layers_text for s in setups}
    if len(texts) == 1:
        return texts.pop()
    return "; ".join(f"{s.run_id}: {s.layers_text}" for s in setups)


def step_sections(comp: Comparison) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of the model step, TPOT share, goodput and policy sections."""
    multi = len(comp.run_ids) > 1
    lead = ["run"] if multi else []
    out = []
    if comp.step is not None:
        layers = layers_text(comp)
        modes = len({r.mode for r in comp.step.rows}) > 1
        steps, tokens, tpot = [], [], []
        for r in comp.step.rows:
            who = [*([r.run_id] if multi else []), r.case_id + (f" [{r.mode}]" if modes else ""),
                   r.arm]  # fmt: skip
            result = r.decision if r.status == "ok" else f"{r.decision} ({r.status})".strip()
            notes = "; ".join(
                x for x in (r.reason, *(q.note for q in (r.p50, r.p90, r.p99) if q)) if x
            )
            steps.append(who + [str(r.n_steps), _quantile(r.p50), _quantile(r.p90),
                                _quantile(r.p99),
                                _interval(r.change_pct, r.ci_low_pct, r.ci_high_pct, _signed),
                                result, notes])  # fmt: skip
            tax = "" if math.isnan(r.imbalance_tax_us) else (
                f"{fmt_us(r.imbalance_tax_us)} ({r.imbalance_tax_pct:.1f}%)")  # fmt: skip
            tokens.append(who + [
                "" if math.isnan(r.tokens_per_step) else f"{r.tokens_per_step:,.0f}",
                f"{fmt_us(r.moe_us_per_token)} / {fmt_us(r.moe_us_per_token_mean)}".strip(" /"),
                fmt_us(r.slowest_rank_sum_us), tax,
                "" if math.isnan(r.graph_ratio) else f"{r.graph_ratio:.3f}"])  # fmt: skip
            share = lambda x: "" if math.isnan(x) else f"{x:.1%}"  # noqa: E731
            tpot.append(who + [fmt_us(r.non_moe_us), fmt_us(r.tpot_p50_us), fmt_us(r.tpot_p99_us),
                               share(r.moe_share_p50), share(r.moe_share_p99)])  # fmt: skip
        head = lead + ["case", "arm"]
        level = f"{comp.step.confidence * 100:g}%"
        given = _given_text(comp.step.setups)
        out.append((f"Model step ({layers})", STEP_NOTE.format(level=level),
                    head + ["steps", "P50 us", "P90 us", "P99 us", "change [CI]", "result",
                            "note"], steps))  # fmt: skip
        out.append((f"Model step per token ({layers})", PER_TOKEN_NOTE,
                    head + ["tokens/step", "us/token P50 / mean", "slowest rank sum us",
                            "tax us (%)", "graph/S"], tokens))  # fmt: skip
        out.append((f"TPOT share (derived; {layers})", TPOT_NOTE + given,
                    head + ["non-MoE us", "TPOT P50 us", "TPOT P99 us", "MoE share P50",
                            "MoE share P99"], tpot))  # fmt: skip
        cells = []
        for g in comp.step.goodput:
            ratio = _interval(g.ratio, g.ratio_low, g.ratio_high, lambda x: f"{x:.3f}x")
            cells.append([*([g.run_id] if multi else []), g.series + (f" [{g.mode}]" if modes
                                                                      else ""),
                          g.arm, "" if g.slo_tpot_ms is None else f"{g.slo_tpot_ms:g}",
                          "" if math.isnan(g.tokens_per_step) else f"{g.tokens_per_step:,.0f}",
                          fmt_us(g.p99_tpot_us),
                          _interval(g.tokens_per_s, g.low, g.high, lambda x: f"{x:,.0f}"),
                          f"{ratio} vs {g.baseline}" if ratio else "", g.verdict,
                          g.note])  # fmt: skip
        out.append((f"Goodput (derived; {layers})",
                    f"{GOODPUT_DEFINITION}. Intervals at {level}: from the P99 intervals, "
                    "Bonferroni over the batches; the ratio's from arm low / base high to arm "
                    "high / base low." + given, lead + ["series", "arm", "SLO ms", "tokens/step",
                                                "P99 TPOT us", "tokens/s [CI]",
                                                "goodput ratio [CI]", "result", "note"],
                    cells))  # fmt: skip
    # Without a decision anywhere (CPU timings), a policy says nothing: no section.
    decided = [p for p in comp.policy if any(e.decision for e in p.evidence)]
    if decided:
        cells = []
        for p in decided:
            use = "never" if p.use_when is None else ", ".join(
                _use_text(op, v) for op, v in p.use_when["tokens_per_rank"].items())  # fmt: skip
            bound = "" if p.boundary is None else "between {} and {}".format(*p.boundary["between"])
            evidence = "; ".join(
                f"{e.tokens_per_rank}: {'' if math.isnan(e.change_pct) else _signed(e.change_pct)}"
                f" {e.decision}".rstrip() for e in p.evidence)  # fmt: skip
            cells.append([*([p.run_id] if multi else []), p.series, p.regime,
                          f"{p.arm} vs {p.against}", use, bound, evidence, p.note])  # fmt: skip
        steps = any(p.regime == Regime.STEP for p in decided)
        heading = f"Policy (model step: {layers_text(comp)})" if steps else "Policy"
        header = ["series", "regime", "arm vs baseline", "use when", "boundary", "evidence", "note"]
        out.append((heading, POLICY_NOTE, lead + header, cells))
    return out


def _use_text(op: str, value) -> str:
    """One condition of a policy: "tokens <= 8", or for the counts of a series that is not
    monotone the set of counts measured FASTER ("tokens in {8, 128}": those counts, not a range)."""
    if op == "in":
        return "tokens in {" + ", ".join(str(v) for v in value) + "}"
    return f"tokens {op} {value}"
