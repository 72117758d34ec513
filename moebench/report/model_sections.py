"""The model regime's sections of the terminal table and the Markdown report (issue 27): the
measured TPOT beside its floor, the TTFT, the measured non-MoE time and the MoE share, the
goodput over batch sizes, the policy over them, and the measured TPOT beside the step regime's
derived one. Each is (title, note, header, cells), as ``sections.step_sections`` gives them.
"""

from __future__ import annotations

import math

from moebench.analysis.model_summary import MODEL_GOODPUT_DEFINITION
from moebench.analysis.rows import Comparison
from moebench.core.ceilings import GPUS
from moebench.core.vocabulary import NO_EXPERTS
from moebench.report.sections import fmt_us

TPOT_NOTE = (
    "measured: each decode step of every sequence timed (device events; mode graph: one CUDA "
    "graph a step; eager: not captured, never compared with graph); TPOT P50/P90/P99 over the "
    "blocks x steps, each with its exact {level} order-statistic interval (none where the samples "
    "are too few); tokens/s = batch / mean TPOT; floor: the bytes the step must read and write "
    f"(expert weights its routing touched, in the arm's format; the other parameters; the KV "
    "cache) over the copy ceiling measured on the run's GPU "
    f"({', '.join(f'{c.name} {c.copy_tbs:g} TB/s' for c in GPUS.values())}; none for a GPU "
    "without one); change: median of the "
    "ratios paired by (block, step) against the baseline, corrected with the table."
)
TTFT_NOTE = (
    "measured: the prefill of every sequence's prompt from an empty cache, one a block (mode "
    "graph: one CUDA graph, the device's time; eager: host launches included); P50 over the "
    "blocks with its exact interval; change: median of the ratios paired by block."
)
SHARE_NOTE = (
    f"measured: the non-MoE time is the TPOT P50 of the same model with {NO_EXPERTS}, the experts "
    "backend that does no expert work (attention, norms, routers, shared experts and the LM head "
    "remain); MoE time = TPOT P50 - non-MoE; MoE share = MoE time / TPOT P50."
)
BESIDE_NOTE = (
    "the model regime's measured TPOT beside the step regime's derived one at as many tokens a "
    "step: the MoE layers' P50 + the step run's given non-MoE time, and + the non-MoE time "
    "measured here; cases paired where both runs swept a parameter (the precision) to the same "
    "value. The model runs on one device: where the step run has EP ranks, its MoE time is a "
    "rank's share of the experts, and the two TPOTs agree only at one rank."
)
POLICY_NOTE = (
    "over each batch sweep, where an arm's TPOT is FASTER than the baseline's (compare's "
    "decisions): use it there; the boundary lies between the two batches named; the conditions "
    "hold within the batches measured. JSON: model.policy."
)


def _q(x) -> str:
    if x is None:
        return ""
    if math.isnan(x.low_us):
        return f"{fmt_us(x.us)} (no CI)"
    return f"{fmt_us(x.us)} [{fmt_us(x.low_us)}, {fmt_us(x.high_us)}]"


def _change(c: dict) -> tuple[str, str]:
    """(change [CI], result) of a change's fields."""
    pct = c.get("change_pct", math.nan)
    if math.isnan(pct):
        return "", c.get("decision", "")
    low = c.get("ci_low_pct", math.nan)
    text = f"{pct:+.1f}%" + (" (no CI)" if math.isnan(low) else
                             f" [{low:+.1f}, {c['ci_high_pct']:+.1f}]")  # fmt: skip
    return text, c.get("decision", "")


def _share(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.1%}"


def model_sections(comp: Comparison) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of every model regime section; none without the regime."""
    m = comp.model
    if m is None:
        return []
    multi = len(comp.run_ids) > 1
    lead = ["run"] if multi else []
    labels = sorted({r.label for r in m.rows if r.label})
    model = "; ".join(labels) or "the model"
    level = f"{m.confidence * 100:g}%"
    tpot, ttft, share = [], [], []
    for r in m.rows:
        who = [*([r.run_id] if multi else []), r.case_id, r.arm, r.mode]
        if r.status == "mismatch":
            tpot.append(who + [str(r.batch), "", "", "", "", "", "", "", f"({r.status})",
                               r.reason])  # fmt: skip
            continue
        if r.ttft is not None:
            t_change, t_result = _change(r.ttft_change)
            ttft.append(who[:-1] + [r.ttft_mode, f"{r.batch} x {r.prompt}", _q(r.ttft), t_change,
                                    "non-MoE reference" if r.arm == NO_EXPERTS else t_result,
                                    r.ttft.note or r.ttft_change.get("reason", "")])  # fmt: skip
        if r.tpot_p50 is None:  # no decode step timed (a prefill-only scenario): no empty rows
            continue
        change, result = _change(r.change)
        if r.arm == NO_EXPERTS:
            result = "non-MoE reference"
        notes = "; ".join(x for x in (r.change.get("reason", ""), *(
            q.note for q in (r.tpot_p50, r.tpot_p99) if q)) if x)  # fmt: skip
        tpot.append(who + [str(r.batch), _q(r.tpot_p50), _q(r.tpot_p90), _q(r.tpot_p99),
                           "" if math.isnan(r.tokens_per_s) else f"{r.tokens_per_s:,.1f}",
                           fmt_us(r.floor_us),
                           "" if math.isnan(r.tpot_over_floor) else f"{r.tpot_over_floor:,.2f}x",
                           change, result, notes])  # fmt: skip
        if r.arm != NO_EXPERTS:
            share.append(who + [str(r.batch), fmt_us(r.tpot_p50.us) if r.tpot_p50 else "",
                                fmt_us(r.non_moe_us), fmt_us(r.moe_us),
                                _share(r.moe_share)])  # fmt: skip
    out = [(f"Model decode: TPOT ({model})", TPOT_NOTE.format(level=level),
            lead + ["case", "arm", "mode", "batch", "TPOT P50 us", "P90 us", "P99 us", "tokens/s",
                    "floor us", "TPOT/floor", "change [CI]", "result", "note"],
            tpot)] if tpot else []  # fmt: skip
    if ttft:
        out.append((f"Model prefill: TTFT ({model})", TTFT_NOTE,
                    lead + ["case", "arm", "mode", "batch x prompt", "TTFT P50 us", "change [CI]",
                            "result", "note"], ttft))  # fmt: skip
    if share:
        out.append((f"Model: MoE share, measured ({model})", SHARE_NOTE,
                    lead + ["case", "arm", "mode", "batch", "TPOT P50 us", "non-MoE us",
                            "MoE us", "MoE share"], share))  # fmt: skip
    out += _goodput(m, lead, multi, model) + _policy(m, lead, multi) + _beside(m)
    return out


def _goodput(m, lead, multi, model) -> list:
    cells = []
    for g in m.goodput:
        ratio = (
            ""
            if math.isnan(g.ratio)
            else f"{g.ratio:.3f}x"
            + ("" if math.isnan(g.ratio_low) else f" [{g.ratio_low:.3f}, {g.ratio_high:.3f}]")
        )
        rate = "" if math.isnan(g.tokens_per_s) else f"{g.tokens_per_s:,.1f}" + (
            "" if math.isnan(g.low) else f" [{g.low:,.1f}, {g.high:,.1f}]")  # fmt: skip
        cells.append([*([g.run_id] if multi else []), f"{g.series} [{g.mode}]", g.arm,
                      "" if g.slo_tpot_ms is None else f"{g.slo_tpot_ms:g}",
                      "" if math.isnan(g.tokens_per_step) else f"{g.tokens_per_step:g}",
                      fmt_us(g.p99_tpot_us), rate,
                      f"{ratio} vs {g.baseline}" if ratio else "", g.verdict, g.note])  # fmt: skip
    if not cells:
        return []
    given = " The SLO was given to compare (--slo-tpot-ms)." if m.slo_given else ""
    note = (f"{MODEL_GOODPUT_DEFINITION}. Intervals at {m.confidence * 100:g}% from the P99 "
            "intervals, Bonferroni over the batches; the ratio's from arm low / base high to arm "
            f"high / base low.{given}")  # fmt: skip
    return [(f"Goodput, measured ({model})", note,
             lead + ["series", "arm", "SLO ms", "batch", "P99 TPOT us", "tokens/s [CI]",
                     "goodput ratio [CI]", "result", "note"], cells)]  # fmt: skip


def _policy(m, lead, multi) -> list:
    decided = [p for p in m.policy if any(e.get("decision") for e in p["evidence"])]
    cells = []
    for p in decided:
        use = "never" if p["use_when"] is None else ", ".join(
            f"batch {op} {v}" for op, v in p["use_when"]["batch"].items())  # fmt: skip
        bound = "" if p["boundary"] is None else "between {} and {}".format(
            *p["boundary"]["between"])  # fmt: skip
        evidence = "; ".join(f"{e['batch']}: {e['decision']}" for e in p["evidence"])
        cells.append([*([p["run_id"]] if multi else []), p["series"], p["mode"],
                      f"{p['arm']} vs {p['against']}", use, bound, evidence,
                      p["note"]])  # fmt: skip
    if not cells:
        return []
    return [("Policy over the batch (model decode)", POLICY_NOTE,
             lead + ["series", "mode", "arm vs baseline", "use when", "boundary", "evidence",
                     "note"], cells)]  # fmt: skip


def _beside(m) -> list:
    cells = [[b["model"]["case_id"], b["step"]["case_id"], b["arm"], f"{b['tokens_per_step']:g}",
              fmt_us(b["model"]["tpot_p50_us"]),
              fmt_us(b["model"].get("non_moe_us") or math.nan),
              fmt_us(b["step"]["moe_p50_us"]), fmt_us(b["step"]["derived_tpot_p50_us"]),
              fmt_us(b["step"].get("with_measured_non_moe_us") or math.nan)]
             for b in m.beside_step]  # fmt: skip
    if not cells:
        return []
    return [("Measured TPOT beside the step regime's derived TPOT", BESIDE_NOTE,
             ["model case", "step case", "arm", "tokens/step", "model TPOT P50 us",
              "measured non-MoE us", "step MoE P50 us", "derived TPOT P50 us",
              "MoE + measured non-MoE us"],
             cells)]  # fmt: skip
