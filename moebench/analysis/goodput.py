"""Goodput under an SLO, derived from the model step (issue 17): DistServe's goodput (arXiv
2401.09670) restricted to what moebench measures, the MoE layers timed plus a given non-MoE time.

Over a series of cases of one run (batch sizes: cases that share every sweep value but the tokens
per rank), per arm: TPOT at P99 is ``P99 of S + non_moe_us``; the goodput is at the largest
tokens per step whose P99 TPOT meets the SLO, in tokens per second = tokens per step / P99 TPOT
(the rate at the SLO bound). 0 when no batch meets the SLO, none without an SLO.

Its interval holds when every P99 interval it reads holds. Those are exact order-statistic
intervals (``stats.quantile_interval``) at ``alpha / k`` for the k batches (Bonferroni): when all
hold, the true largest batch meeting the SLO is at least the largest whose upper bound meets it
and is one of those whose lower bound does, and its rate lies between the bounds there. The
ratio of an arm's goodput over the baseline's (an A/A copy's: over the arm it copies) takes
each side at ``alpha / 2``: low = arm low / base high, high = arm high / base low. Where a P99
has no interval at its number of steps, neither has the goodput, and the note says so.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from moebench.analysis import stats
from moebench.core.vocabulary import aa_twin

GOODPUT_Q = 0.99
TOKENS_KEY = "shape.tokens_per_rank"
DERIVED = "derived"
_NAN = math.nan


class StepLike(Protocol):
    """What the goodput reads of a step row (``moebench.analysis.step.StepRow``)."""

    run_id: str
    case_id: str
    mode: str
    arm: str
    status: str
    params: str
    n_steps: int
    tokens_per_step: float
    non_moe_us: float
    step_us: tuple[float, ...]

    @property
    def p99(self) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class Goodput:
    """Derived: one arm's goodput over a series of cases (batch sizes) of one run."""

    run_id: str
    series: str  # the sweep values the cases share, tokens per rank left out
    mode: str
    arm: str
    baseline: str
    slo_tpot_ms: float | None
    case_id: str  # the largest batch meeting the SLO; "" when none does
    tokens_per_step: float
    p99_tpot_us: float
    tokens_per_s: float  # 0 when no batch meets the SLO; NaN without an SLO
    low: float
    high: float
    ratio: float  # over the baseline's goodput; NaN for the baseline itself
    ratio_low: float
    ratio_high: float
    verdict: str  # HIGHER | LOWER | SAME | AMBIGUOUS | "" (no interval, or the baseline)
    note: str
    points: tuple[tuple[str, float, float, float, float], ...] = ()  # case, tokens, P99 TPOT us,
    # and its interval (low, high; NaN when none): what the plot draws

    def as_dict(self) -> dict[str, Any]:
        ci = None if math.isnan(self.low) else [self.low, self.high]
        ratio_ci = None if math.isnan(self.ratio_low) else [self.ratio_low, self.ratio_high]
        return clean_json({
            DERIVED: True, "run_id": self.run_id, "series": self.series, "mode": self.mode,
            "arm": self.arm, "baseline": self.baseline, "slo_tpot_ms": self.slo_tpot_ms,
            "case_id": self.case_id, "tokens_per_step": self.tokens_per_step,
            "p99_tpot_us": self.p99_tpot_us, "tokens_per_s": self.tokens_per_s, "ci": ci,
            "ratio": self.ratio, "ratio_ci": ratio_ci, "verdict": self.verdict,
            "note": self.note,
            "points": [{"case_id": c, "tokens_per_step": t, "p99_tpot_us": p,
                        "ci": None if math.isnan(lo) else [lo, hi]}
                       for c, t, p, lo, hi in self.points],
        })  # fmt: skip


GOODPUT_DEFINITION = (
    "derived: DistServe's goodput (arXiv 2401.09670) restricted to what moebench measures (the "
    "MoE layers timed plus a non-MoE time of a step, the scenario's given unless said below): "
    "over the cases of a series, the largest tokens per step whose P99 TPOT (P99 of the model "
    "step + non-MoE time) meets the SLO, and tokens per second there = tokens per step / P99 TPOT"
)


def clean_json(d: dict) -> dict:
    """NaN and inf as None, so that the JSON holds null, never NaN."""
    out = {}
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        elif isinstance(v, dict):
            v = clean_json(v)
        out[k] = v
    return out


def series_label(params: str) -> str:
    """The sweep values other than tokens per rank: the cases of one goodput series (or one
    policy) share them; "all cases" when nothing else is swept or the params cannot be read."""
    try:
        d = json.loads(params) if params else {}
    except ValueError:
        d = {}
    rest = {k: v for k, v in sorted(d.items()) if k != TOKENS_KEY} if isinstance(d, dict) else {}
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in rest.items()) or "all cases"


@dataclass(frozen=True, kw_only=True)
class _Found:
    best: int | None  # the largest batch whose P99 TPOT meets the SLO
    rate: float
    low: float
    high: float
    note: str
    tpot: list[float]
    bounds: list[tuple[float, float] | None]  # P99 TPOT interval per batch
    need: int = 0  # steps the intervals need, when they are too few


def _goodput_of(rows: list[StepLike], slo_us: float, alpha: float) -> _Found:
    """The goodput over ``rows`` (one series, batches in order of tokens per step), each P99
    interval at ``alpha / len(rows)`` so that all of them hold together at ``1 - alpha``."""
    k = len(rows)
    tpot = [r.p99.us + r.non_moe_us for r in rows]
    meets = [i for i in range(k) if tpot[i] <= slo_us]
    best = max(meets, key=lambda i: rows[i].tokens_per_step) if meets else None
    rate = rows[best].tokens_per_step / (tpot[best] * 1e-6) if best is not None else 0.0
    found = [stats.quantile_interval(np.array(r.step_us), GOODPUT_Q, alpha / k) for r in rows]
    bounds = [None if b is None else (b[0] + r.non_moe_us, b[1] + r.non_moe_us)
              for b, r in zip(found, rows, strict=True)]  # fmt: skip
    done = dict(best=best, rate=rate, tpot=tpot, bounds=bounds)
    if any(b is None for b in bounds):
        n = min(r.n_steps for r in rows)
        need = stats.quantile_needed(GOODPUT_Q, alpha / k)
        note = (f"no interval: P99 of n={n} steps; {k} batch(es) together need {need} steps "
                f"({(1 - alpha / k) * 100:.4g}% each)")  # fmt: skip
        return _Found(**done, low=_NAN, high=_NAN, note=note, need=need)
    tokens = [r.tokens_per_step for r in rows]
    # When every interval holds, the true largest batch meeting the SLO is at least the largest
    # whose upper bound meets it, and is one of those whose lower bound meets it.
    sure = [i for i in range(k) if bounds[i][1] <= slo_us]
    floor = max((tokens[i] for i in sure), default=-math.inf)
    maybe = [i for i in range(k) if bounds[i][0] <= slo_us and tokens[i] >= floor]
    if not maybe:  # no batch can meet the SLO: the goodput is 0
        return _Found(**done, low=0.0, high=0.0, note="")
    low = min(tokens[i] / (min(bounds[i][1], slo_us) * 1e-6) for i in maybe) if sure else 0.0
    high = max(tokens[i] / (bounds[i][0] * 1e-6) for i in maybe)
    return _Found(**done, low=low, high=high, note="")


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def goodput(rows: list[StepLike], slo_ms: dict[str, float | None], baseline: str, alpha: float,
            threshold: float) -> list[Goodput]:  # fmt: skip
    """Per (run, series, mode, arm): the goodput at the run's SLO and its ratio over the
    baseline's (an A/A copy: over the arm it copies)."""
    groups: dict[tuple, list[StepLike]] = defaultdict(list)
    for r in rows:
        groups[(r.run_id, series_label(r.params), r.mode, r.arm)].append(r)
    out: dict[tuple, Goodput] = {}
    for key, found in sorted(groups.items()):
        run_id, label, mode, arm = key
        slo = slo_ms[run_id]
        ref = aa_twin(arm) or baseline
        found.sort(key=lambda r: r.tokens_per_step)
        common = dict(run_id=run_id, series=label, mode=mode, arm=arm,
                      baseline="" if arm == ref else ref, slo_tpot_ms=slo, ratio=_NAN,
                      ratio_low=_NAN, ratio_high=_NAN, verdict="")  # fmt: skip
        empty = dict(case_id="", tokens_per_step=_NAN, p99_tpot_us=_NAN, tokens_per_s=_NAN,
                     low=_NAN, high=_NAN)  # fmt: skip
        failed = [r.case_id for r in found if r.status == "mismatch"]
        if failed:
            out[key] = Goodput(
                **common, **empty, note=f"failed its checks in {', '.join(failed)}: no goodput"
            )
            continue
        if slo is None:
            out[key] = Goodput(**common, **empty, note="no SLO given")
            continue
        g = _goodput_of(found, slo * 1e3, alpha)
        at = found[g.best] if g.best is not None else None
        out[key] = Goodput(
            **common, case_id=at.case_id if at else "",
            tokens_per_step=at.tokens_per_step if at else _NAN,
            p99_tpot_us=g.tpot[g.best] if at else _NAN, tokens_per_s=g.rate, low=g.low,
            high=g.high, note=_join("" if at else "no batch meets the SLO", g.note),
            points=tuple((r.case_id, r.tokens_per_step, t, *(b or (_NAN, _NAN)))
                         for r, t, b in zip(found, g.tpot, g.bounds, strict=True)),
        )  # fmt: skip
    return [_ratio(key, g, out, groups, slo_ms, alpha, threshold) for key, g in out.items()]


def _ratio(key, g: Goodput, out: dict, groups: dict, slo_ms, alpha, threshold) -> Goodput:
    """The goodput over the reference's, with the interval its bounds give: each side's goodput
    at ``alpha / 2``, so that the ratio's interval holds at ``1 - alpha``."""
    ref_key = (*key[:3], g.baseline)
    base = out.get(ref_key)
    if not g.baseline or base is None or math.isnan(g.tokens_per_s):
        return g
    if math.isnan(base.tokens_per_s) or base.tokens_per_s <= 0:
        return replace(g, note=_join(g.note, f"{g.baseline} has no goodput: no ratio"))
    ratio = g.tokens_per_s / base.tokens_per_s
    slo_us = slo_ms[key[0]] * 1e3
    a = _goodput_of(groups[key], slo_us, alpha / 2)
    b = _goodput_of(groups[ref_key], slo_us, alpha / 2)
    if math.isnan(a.low) or math.isnan(b.low):
        need = max(a.need, b.need)
        return replace(g, ratio=ratio, note=_join(g.note, f"ratio: no interval below {need} steps"))
    if b.low <= 0:
        return replace(
            g,
            ratio=ratio,
            note=_join(
                g.note, f"{g.baseline}'s goodput may be 0 within its interval: no ratio interval"
            ),
        )
    low, high = a.low / b.high, a.high / b.low
    verdict, why = stats.decide((ratio - 1) * 100, (low - 1) * 100, (high - 1) * 100, threshold)
    verdict = {"FASTER": "LOWER", "SLOWER": "HIGHER"}.get(verdict, verdict)
    return replace(g, ratio=ratio, ratio_low=low, ratio_high=high, verdict=verdict,
                   note=_join(g.note, why))  # fmt: skip
