"""The policy threshold (issue 17): over a sweep of tokens per rank, where an arm's advantage
disappears, written as a small machine-readable policy that a serving engine could read to
switch paths.

A series is the cases of one run that share every sweep value but ``shape.tokens_per_rank``
(``goodput.series_label``). For each arm against the baseline (the decisions of ``compare``'s
rows on the ``ffn`` regime, and of the model step on the ``step`` regime), and for each pair of
other arms (``prefix_sum_masked`` against ``prefix_sum``: where masking stops paying; the later
name against the earlier, paired the same way and counted in ``compare``'s correction), the
evidence is the decision at each token count. The arm is used where it is FASTER; the boundary
is where FASTER meets a count that is not, and its uncertainty is the gap between those two
sweep points (the sweep measured nothing between them). The count that is not FASTER says how
the advantage ended: SAME (gone, within +-threshold), SLOWER (reversed), or AMBIGUOUS / TOO FEW
BLOCKS (not shown either way).

One entry per (run, series, regime, mode, arm, against)::

    {"arm": "sparse_decode", "against": "dense_decode", "regime": "ffn",
     "use_when": {"tokens_per_rank": {"<=": 8}},        # null: never FASTER in the sweep
     "boundary": {"between": [8, 16], "faster": "below"},  # null: none, or more than one
     "evidence": [{"tokens_per_rank": 1, "change_pct": -40.1, "ci": [-41.0, -39.2],
                   "decision": "FASTER"}, ...],
     "live_fraction": [0.01, ...], ...}

A condition holds only inside the measured range (``measured``); when the arm is FASTER at every
count, ``use_when`` is that range. The same run-finding code gives the work model's one-layer
crossover (``workmodel``: where the baseline's median is lower from some count on), so that
both families' thresholds come from one mechanism.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from moebench.analysis.goodput import TOKENS_KEY, clean_json, series_label
from moebench.analysis.step import decide_paired
from moebench.core.vocabulary import WHOLE_FFN, Regime, aa_twin

_NAN = math.nan
_HOW = {"SAME": "the advantage is gone (SAME)", "SLOWER": "reversed (SLOWER)"}


def edges(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """The runs of consecutive True in ``flags``, as (first, last) indices."""
    out, start = [], None
    for i, f in enumerate([*flags, False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i - 1))
            start = None
    return out


@dataclass(frozen=True, kw_only=True)
class Evidence:
    tokens_per_rank: int
    case_id: str
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    decision: str
    live_fraction: float  # mean over ranks of live rows / capacity rows (NaN: no buffer)


@dataclass(frozen=True, kw_only=True)
class Policy:
    run_id: str
    series: str
    regime: str  # ffn | step (the model step's S)
    mode: str
    arm: str
    against: str
    use_when: dict | None
    boundary: dict | None
    boundaries: tuple[dict, ...]
    measured: tuple[int, int]
    evidence: tuple[Evidence, ...]
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm, "against": self.against, "regime": self.regime,
            "use_when": self.use_when, "boundary": self.boundary,
            "boundaries": list(self.boundaries), "measured": list(self.measured),
            "evidence": [clean_json({
                "tokens_per_rank": e.tokens_per_rank, "case_id": e.case_id,
                "change_pct": e.change_pct,
                "ci": None if math.isnan(e.ci_low_pct) else [e.ci_low_pct, e.ci_high_pct],
                "decision": e.decision}) for e in self.evidence],
            "live_fraction": [None if math.isnan(e.live_fraction) else e.live_fraction
                              for e in self.evidence],
            "run_id": self.run_id, "series": self.series, "mode": self.mode, "note": self.note,
        }  # fmt: skip


def _tokens(info) -> int | None:
    """The swept tokens per rank of a case (``CaseInfo``), None when tokens are not swept."""
    try:
        params = json.loads(info.params) if info.params else {}
    except ValueError:
        return None
    value = params.get(TOKENS_KEY) if isinstance(params, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _swept(cases: dict) -> dict[tuple[str, str], tuple[str, int]]:
    """(run, case) -> (series, tokens) for cases of series with two token counts or more."""
    found = {k: (series_label(c.params), t) for k, c in cases.items()
             if (t := _tokens(c)) is not None}  # fmt: skip
    counts: dict[tuple[str, str], set] = defaultdict(set)
    for (run_id, _), (label, t) in found.items():
        counts[(run_id, label)].add(t)
    return {k: v for k, v in found.items() if len(counts[(k[0], v[0])]) >= 2}


@dataclass(frozen=True, kw_only=True)
class Pair:
    """Two arms that are not the baseline, paired in one case, awaiting their interval."""

    run_id: str
    case_id: str
    regime: str
    mode: str
    arm: str
    against: str
    values: np.ndarray
    base: np.ndarray
    unit: str  # blocks | steps


def _paired(a: dict, b: dict) -> tuple[np.ndarray, np.ndarray] | None:
    common = sorted(a.keys() & b.keys())
    if len(common) < 2:
        return None
    return np.array([a[k] for k in common]), np.array([b[k] for k in common])


def pairs(groups: dict, step_series: dict, cases: dict, baseline: str,
          status: dict) -> list[Pair]:  # fmt: skip
    """Every pair of arms other than the baseline (and not A/A copies), in the cases of a token
    sweep: on the ``ffn`` regime from ``compare``'s groups (their per-block critical paths), on
    the ``step`` regime from the per-step model step times."""
    swept = _swept(cases)
    cells: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for (run_id, case_id, regime, stage, mode, arm), g in groups.items():
        if regime == Regime.FFN and stage == WHOLE_FFN:
            cells[(run_id, case_id, "ffn", mode, "blocks")][arm] = g.critical
    for (run_id, case_id, mode, arm), x in step_series.items():
        cells[(run_id, case_id, "step", mode, "steps")][arm] = dict(
            zip(x.steps.tolist(), x.s.tolist(), strict=True)
        )
    out = []
    for (run_id, case_id, regime, mode, unit), arms in sorted(cells.items()):
        if (run_id, case_id) not in swept:
            continue
        ok = sorted(a for a in arms if a != baseline and aa_twin(a) is None
                    and status.get((run_id, case_id, a), ("",))[0] != "mismatch")  # fmt: skip
        for i, against in enumerate(ok):
            for arm in ok[i + 1 :]:
                found = _paired(arms[arm], arms[against])
                if found is not None:
                    out.append(Pair(run_id=run_id, case_id=case_id, regime=regime, mode=mode,
                                    arm=arm, against=against, values=found[0], base=found[1],
                                    unit=unit))  # fmt: skip
    return out


def _evidence(rows, step_rows, decided: list[tuple[Pair, dict]], cases: dict, baseline: str):
    """(run, series, regime, mode, arm, against) -> [Evidence], from every source."""
    swept = _swept(cases)
    out: dict[tuple, list[Evidence]] = defaultdict(list)

    def add(run_id, case_id, regime, mode, arm, against, change: dict) -> None:
        label, tokens = swept[(run_id, case_id)]
        out[(run_id, label, regime, mode, arm, against)].append(Evidence(
            tokens_per_rank=tokens, case_id=case_id,
            change_pct=change.get("change_pct", _NAN), ci_low_pct=change.get("ci_low_pct", _NAN),
            ci_high_pct=change.get("ci_high_pct", _NAN), decision=change.get("decision", ""),
            live_fraction=cases[(run_id, case_id)].live_fraction,
        ))  # fmt: skip

    for r in [*rows, *step_rows]:
        regime = getattr(r, "regime", Regime.STEP)
        if (r.run_id, r.case_id) not in swept or r.is_aa or r.arm == baseline:
            continue
        if r.status == "mismatch" or (regime == Regime.FFN and r.stage != WHOLE_FFN):
            continue
        if regime not in (Regime.FFN, Regime.STEP):
            continue
        add(r.run_id, r.case_id, regime, r.mode, r.arm, r.baseline, vars(r))
    for p, change in decided:
        add(p.run_id, p.case_id, p.regime, p.mode, p.arm, p.against, change)
    return out


def decide(found: list[Pair], alpha: float, threshold: float) -> list[tuple[Pair, dict]]:
    """Each pair's change and decision at ``compare``'s corrected ``alpha``."""
    return [(p, decide_paired(p.values, p.base, alpha, threshold, p.unit)) for p in found]


def build(rows, step_rows, decided: list[tuple[Pair, dict]], cases: dict,
          baseline: str) -> list[Policy]:  # fmt: skip
    """The policy entries of every token sweep (see the module docstring)."""
    out = []
    for key, found in sorted(_evidence(rows, step_rows, decided, cases, baseline).items()):
        run_id, label, regime, mode, arm, against = key
        found.sort(key=lambda e: e.tokens_per_rank)
        tokens = [e.tokens_per_rank for e in found]
        if len(set(tokens)) != len(tokens) or len(tokens) < 2:
            continue  # cases that share a token count are not one sweep
        use, bounds, note = threshold_of(found)
        out.append(Policy(
            run_id=run_id, series=label, regime=regime, mode=mode, arm=arm, against=against,
            use_when=use, boundary=bounds[0] if len(bounds) == 1 else None,
            boundaries=tuple(bounds), measured=(tokens[0], tokens[-1]), evidence=tuple(found),
            note=note,
        ))  # fmt: skip
    return out


def threshold_of(found: list[Evidence]) -> tuple[dict | None, list[dict], str]:
    """(use_when, boundaries, note) from the evidence of one series, in token order."""
    t = [e.tokens_per_rank for e in found]
    runs = edges([e.decision == "FASTER" for e in found])
    if not runs:
        return None, [], f"never FASTER within the sweep ({t[0]} to {t[-1]} tokens per rank)"
    bounds, notes = [], []
    for i, j in runs:
        for side, k, inner in (("above", i - 1, i), ("below", j + 1, j)):
            if 0 <= k < len(found):
                bounds.append({"between": sorted([t[k], t[inner]]), "faster": side})
                how = _HOW.get(found[k].decision, f"not shown either way ({found[k].decision})")
                notes.append(f"at {t[k]}: {how}" if found[k].decision else f"at {t[k]}: no verdict")
    # A count between two FASTER runs bounds both: say it once.
    notes = list(dict.fromkeys(notes))
    if len(runs) > 1:
        faster = [t[k] for i, j in runs for k in range(i, j + 1)]
        notes.insert(0, "not monotone in tokens")
        return {"tokens_per_rank": {"in": faster}}, bounds, "; ".join(notes)
    i, j = runs[0]
    cond = {}
    if i > 0:
        cond[">="] = t[i]
    if j < len(t) - 1:
        cond["<="] = t[j]
    if not cond:
        cond = {">=": t[0], "<=": t[-1]}
        notes.append("FASTER at every token count measured; beyond them, unknown")
    return {"tokens_per_rank": cond}, bounds, "; ".join(notes)


def without_verdicts(policies: list[Policy], reason: str) -> list[Policy]:
    """The policy with its decisions blanked (CPU timings decide nothing): no condition, no
    boundary, the evidence's changes and intervals removed as the rows' are."""
    blank = lambda e: replace(e, decision="", change_pct=_NAN, ci_low_pct=_NAN,  # noqa: E731
                              ci_high_pct=_NAN)  # fmt: skip
    return [replace(p, use_when=None, boundary=None, boundaries=(), note=reason,
                    evidence=tuple(blank(e) for e in p.evidence)) for p in policies]  # fmt: skip
