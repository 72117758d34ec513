"""The model step: every timed MoE layer of a model in one step, its tail and its share of TPOT
(issue 17), from the ``step`` regime's rows; the goodput under an SLO is in
``moebench.analysis.goodput``, the per-step critical paths in ``moebench.analysis.step_paths``.

Per (run, case, mode, arm) and step: the model step ``S = sum_l c_l`` (``c_l``: layer l's
critical path, the slowest rank's median), the slowest rank's own sum ``R``, the imbalance tax
``S - R`` (what per-layer imbalance costs over the whole model), and ``G`` (the whole step timed
as one graph, without a flush between layers: a check on ``S`` by another method).

Over the steps of a case: P50, P90 and P99 of ``S`` with exact distribution-free intervals
(``stats.quantile_interval``, 95% each, uncorrected: they describe, they decide nothing). Issue
17 asked for bootstrap intervals; a percentile bootstrap of a tail quantile does not reach its
nominal coverage at tens or hundreds of steps (its resamples never reach beyond the largest step
seen, which is all P99 of 64 steps has), so the interval is the order-statistic one, and where
none exists at the number of steps the figure stands alone with a note saying how many steps one
needs (P99 at 95%: 368). The MoE time per token is P50 of ``S`` over the tokens of a step (and
the mean of ``S`` over them: total time over total tokens).

An arm against its baseline (an A/A copy against the arm it copies) is paired over steps: every
arm ran the same steps (the same routing draws and token counts), so the change is the median of
per-step ratios ``S_arm / S_base`` minus 1 with ``stats.paired_change``'s exact interval, at
``compare``'s corrected level (these comparisons count toward its correction), decided by
``stats.decide``.

Derived, not measured, and labelled so wherever they appear: TPOT at a percentile ``P`` is ``P of
S + non_moe_us`` (the scenario's non-MoE time of a step, a given); the MoE share of TPOT is ``S /
(S + non_moe_us)`` at P50 and P99 (1.0 when the non-MoE time is 0: MoE alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from moebench.analysis import stats
from moebench.analysis.goodput import DERIVED, GOODPUT_DEFINITION, Goodput, clean_json, goodput
from moebench.analysis.step_paths import REGIME, Series, series, split, without_whole_steps
from moebench.core.vocabulary import WHOLE_STEP, aa_twin

__all__ = ["Prepared", "Quantile", "StepRow", "StepSetup", "StepSummary", "prepare", "split",
           "summarise", "without_whole_steps"]  # fmt: skip
QUANTILES = (0.5, 0.9, 0.99)
_NAN = math.nan


@dataclass(frozen=True, kw_only=True)
class StepSetup:
    """What a run's manifest says of its step regime (``manifest["step"]``)."""

    run_id: str
    layers: tuple[int, ...]  # model layer ids timed, in order
    model_layers: int | None  # MoE layers the model has
    subset: bool
    steps: int | None
    blocks: int | None
    data_ranks: int  # tokens of a step = tokens_per_rank * data_ranks
    non_moe_us: float
    slo_tpot_ms: float | None
    tokens: str  # how token counts were drawn (a label)
    routing: str
    # Where the SLO and the non-MoE time come from: "scenario" (the run's manifest) or
    # "compare" (compare's --slo-tpot-ms / --non-moe-us: the same samples, another assumption).
    given_by: str = "scenario"
    # Where compare's non-MoE time was measured (--non-moe-from: a model run's moebench:none
    # TPOT), "" where it is a given.
    non_moe_source: str = ""

    @property
    def layers_text(self) -> str:
        """The layers timed, as every table that uses them prints them: "58 of 58 MoE layers",
        or "a subset: 3, 4, 10 (3 of 58 MoE layers)" when the scenario named some."""
        of = f" of {self.model_layers}" if self.model_layers else ""
        count = f"{len(self.layers)}{of} MoE layers"
        if not self.subset:
            return count
        return f"a subset: {', '.join(str(x) for x in self.layers)} ({count})"


@dataclass(frozen=True, kw_only=True)
class Quantile:
    q: float
    us: float
    low_us: float  # NaN: no interval at this number of steps (see note)
    high_us: float
    coverage: float
    note: str


@dataclass(frozen=True, kw_only=True)
class StepRow:
    """One (run, case, mode, arm) of the step regime."""

    run_id: str
    case_id: str
    mode: str
    arm: str
    baseline: str  # what this arm is compared with (an A/A copy: the arm it copies)
    status: str  # ok | unchecked | mismatch (no figures then)
    n_steps: int
    n_blocks: int  # most blocks of one step
    n_ranks: int
    layers: tuple[int, ...]
    tokens_per_rank: float  # mean over steps
    tokens_per_step: float  # mean over steps of tokens_per_rank * data_ranks
    mean_us: float
    p50: Quantile | None
    p90: Quantile | None
    p99: Quantile | None
    moe_us_per_token: float  # P50 of S / tokens per step
    moe_us_per_token_mean: float  # mean S / tokens per step
    slowest_rank_sum_us: float  # median over steps of R
    imbalance_tax_us: float  # median over steps of S - R
    imbalance_tax_pct: float  # median over steps of (S - R) / S
    graph_step_us: float  # median over steps of G; NaN without stage-step samples
    graph_ratio: float  # median over steps of G / S
    layer_us: tuple[tuple[int, float], ...]  # (layer, median over steps of c_l)
    non_moe_us: float
    tpot_p50_us: float  # derived
    tpot_p99_us: float  # derived
    moe_share_p50: float  # derived
    moe_share_p99: float  # derived
    decision: str
    reason: str
    n_paired_steps: int
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    incomplete_blocks: int
    step_us: tuple[float, ...] = field(default=(), repr=False)  # S per step: plots, goodput
    params: str = field(default="", repr=False)  # the case's sweep values, JSON

    @property
    def is_aa(self) -> bool:
        return aa_twin(self.arm) is not None

    # What the A/A summary reads of a compare row (``rows.AASummary``): a step cell's identity.
    regime = property(lambda self: REGIME)
    stage = property(lambda self: WHOLE_STEP)
    cv_pct = property(lambda self: _NAN)  # steps differ by their routing draws: not noise

    def as_dict(self) -> dict[str, Any]:
        """The row for JSON: intervals as [low, high] or null with a note, NaN as null."""

        def quantile(x: Quantile | None) -> dict | None:
            if x is None:
                return None
            ci = None if math.isnan(x.low_us) else [x.low_us, x.high_us]
            return clean_json({"us": x.us, "ci": ci, "coverage": x.coverage, "note": x.note})

        ci = None if math.isnan(self.ci_low_pct) else [self.ci_low_pct, self.ci_high_pct]
        return clean_json({
            "run_id": self.run_id, "case_id": self.case_id, "mode": self.mode, "arm": self.arm,
            "baseline": self.baseline, "status": self.status, "n_steps": self.n_steps,
            "n_blocks": self.n_blocks, "n_ranks": self.n_ranks, "n_layers": len(self.layers),
            "tokens_per_rank": self.tokens_per_rank, "tokens_per_step": self.tokens_per_step,
            "mean_us": self.mean_us, "p50": quantile(self.p50), "p90": quantile(self.p90),
            "p99": quantile(self.p99), "moe_us_per_token": self.moe_us_per_token,
            "moe_us_per_token_mean": self.moe_us_per_token_mean,
            "slowest_rank_sum_us": self.slowest_rank_sum_us,
            "imbalance_tax_us": self.imbalance_tax_us,
            "imbalance_tax_pct": self.imbalance_tax_pct, "graph_step_us": self.graph_step_us,
            "graph_ratio": self.graph_ratio,
            "layers": [{"layer": layer, "us": us} for layer, us in self.layer_us],
            "change": {"pct": self.change_pct, "ci": ci, "decision": self.decision,
                       "reason": self.reason, "n_paired_steps": self.n_paired_steps},
            "tpot_share": {DERIVED: True, "non_moe_us": self.non_moe_us,
                           "tpot_p50_us": self.tpot_p50_us, "tpot_p99_us": self.tpot_p99_us,
                           "moe_share_p50": self.moe_share_p50,
                           "moe_share_p99": self.moe_share_p99},
            "incomplete_blocks": self.incomplete_blocks,
        })  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class StepSummary:
    setups: tuple[StepSetup, ...]
    rows: tuple[StepRow, ...]
    goodput: tuple[Goodput, ...]
    confidence: float  # of each percentile interval and of each goodput interval

    def setup(self, run_id: str) -> StepSetup | None:
        return next((s for s in self.setups if s.run_id == run_id), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "confidence": self.confidence,
            "runs": [
                clean_json(vars(s) | {"layers": list(s.layers), "layers_text": s.layers_text})
                for s in self.setups
            ],
            "rows": [r.as_dict() for r in self.rows],
            "goodput": [g.as_dict() for g in self.goodput],
            "goodput_definition": GOODPUT_DEFINITION,
        }

    def without_verdicts(self, reason: str) -> StepSummary:
        """Decisions and their intervals blanked (CPU timings decide nothing); figures kept."""
        rows = tuple(
            r if r.decision == "baseline" or r.status == "mismatch" else replace(
                r, decision="", change_pct=_NAN, ci_low_pct=_NAN, ci_high_pct=_NAN,
                reason=reason)
            for r in self.rows
        )  # fmt: skip
        goodput = tuple(
            replace(g, verdict="", ratio_low=_NAN, ratio_high=_NAN,
                    note=f"{g.note}; {reason}" if g.note else reason)
            if not math.isnan(g.ratio) else g
            for g in self.goodput
        )  # fmt: skip
        return replace(self, rows=rows, goodput=goodput)


# ---------------------------------------------------------------------------------------------
# Setups, pairing, decisions


def setups(runs, found: dict[tuple, Series], warnings: list[str]) -> dict[str, StepSetup]:
    """Each run's step setup, from its manifest; what a run without one has, from its rows."""
    out = {}
    for run in runs:
        mine = [v for k, v in found.items() if k[0] == run.run_id]
        if not mine:
            continue
        m = run.manifest.get("step")
        seen = tuple(sorted({x for v in mine for x in v.layers}))
        if not isinstance(m, dict):
            m = {}
            warnings.append(
                f"{run.run_id}: step rows but no manifest 'step' section; layers and data ranks "
                "taken from the rows, no non-MoE time, no SLO"
            )
        layers = tuple(int(x) for x in (m.get("layers") or seen))
        slo = m.get("slo_tpot_ms")
        out[run.run_id] = StepSetup(
            run_id=run.run_id, layers=layers, model_layers=m.get("model_layers"),
            subset=bool(m.get("subset", False)), steps=m.get("steps"), blocks=m.get("blocks"),
            data_ranks=int(m.get("data_ranks") or max(v.n_ranks for v in mine)),
            non_moe_us=float(m.get("non_moe_us") or 0.0),
            slo_tpot_ms=None if slo is None else float(slo), tokens=str(m.get("tokens") or ""),
            routing=str(m.get("routing") or ""),
        )  # fmt: skip
    return out


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """The step regime before the correction is known: figures, and pairs awaiting intervals."""

    series: dict[tuple[str, str, str, str], Series]
    setups: dict[str, StepSetup]
    status: dict[tuple[str, str, str], tuple[str, str]]
    baseline: str

    def pairs(self) -> dict[tuple, tuple[np.ndarray, np.ndarray] | dict]:
        """Per cell key, the paired per-step S values against its reference, or the change
        fields that say why there are none."""
        out: dict[tuple, tuple[np.ndarray, np.ndarray] | dict] = {}
        for key, x in self.series.items():
            run_id, case_id, mode, arm = key
            ref = aa_twin(arm) or self.baseline
            if arm == ref or self.status.get((run_id, case_id, arm), ("",))[0] == "mismatch":
                continue
            ref_status = self.status.get((run_id, case_id, ref), ("unchecked", ""))
            base = self.series.get((run_id, case_id, mode, ref))
            if ref_status[0] == "mismatch":
                out[key] = {"reason": f"baseline {ref!r} failed its checks: {ref_status[1]}"}
            elif base is None:
                out[key] = {"reason": f"no baseline {ref!r} step samples for this case and mode"}
            else:
                both, ia, ib = np.intersect1d(x.steps, base.steps, return_indices=True)
                n = len(both)
                out[key] = (x.s[ia], base.s[ib]) if n >= 2 else {
                    "decision": "AMBIGUOUS", "n_paired": n,
                    "reason": f"{n} step(s) paired with {ref!r}; need at least 2"}  # fmt: skip
        return out

    @property
    def comparisons(self) -> int:
        """Cells that get an interval: they count toward compare's correction."""
        return sum(not isinstance(v, dict) for v in self.pairs().values())


def prepare(
    samples: pa.Table,
    runs,
    status: dict,
    baseline: str,
    warnings: list[str],
    *,
    slo_tpot_ms: float | None = None,
    non_moe_us: float | None = None,
    non_moe_source: str = "",
) -> Prepared:
    """The step regime's per-step figures of every (run, case, mode, arm). ``slo_tpot_ms`` and
    ``non_moe_us``, when given, replace every run's own (both are assumptions about the serving
    system, not measurements, so another value needs no new run); ``non_moe_source`` says where
    a given non-MoE time was measured (compare's --non-moe-from), "" where it is assumed."""
    found = series(samples, warnings)
    given = setups(runs, found, warnings)
    if slo_tpot_ms is not None or non_moe_us is not None:
        given = {
            run_id: replace(
                s,
                slo_tpot_ms=s.slo_tpot_ms if slo_tpot_ms is None else float(slo_tpot_ms),
                non_moe_us=s.non_moe_us if non_moe_us is None else float(non_moe_us),
                # a measured non-MoE time alone is not an assumption given to compare
                given_by="compare" if slo_tpot_ms is not None or not non_moe_source else s.given_by,
                non_moe_source=non_moe_source if non_moe_us is not None else s.non_moe_source,
            )
            for run_id, s in given.items()
        }
    return Prepared(series=found, setups=given, status=status,
                    baseline=baseline)  # fmt: skip


def decide_paired(
    arm: np.ndarray, base: np.ndarray, alpha: float, threshold: float, unit: str = "steps"
) -> dict[str, Any]:
    """Change fields of a paired comparison, as compare's cells have them: the median ratio
    with its exact interval and a decision, or TOO_FEW with the point change when the pairs
    cannot reach ``1 - alpha``."""
    n = len(arm)
    found = stats.paired_change(arm, base, alpha)
    if found is None:
        needed = stats.blocks_needed(alpha)
        return {"decision": stats.TOO_FEW, "n_paired": n,
                "change_pct": float(np.median(arm / base) - 1) * 100,
                "reason": f"n={n} paired {unit}, need >= {needed} for "
                          f"{(1 - alpha) * 100:.4g}% per cell"}  # fmt: skip
    point, low, high, _ = (v * 100 for v in found)
    decision, reason = stats.decide(point, low, high, threshold)
    return {"decision": decision, "reason": reason, "n_paired": n, "change_pct": point,
            "ci_low_pct": low, "ci_high_pct": high}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The summary


def _quantile(values: np.ndarray, q: float, alpha: float) -> Quantile:
    point = float(np.quantile(values, q, method="inverted_cdf"))
    ci = stats.quantile_interval(values, q, alpha)
    level = f"{(1 - alpha) * 100:g}%"
    if ci is None:
        need = stats.quantile_needed(q, alpha)
        note = f"P{q * 100:g} of n={len(values)} steps: no {level} interval below {need} steps"
        return Quantile(q=q, us=point, low_us=_NAN, high_us=_NAN, coverage=_NAN, note=note)
    return Quantile(q=q, us=point, low_us=ci[0], high_us=ci[1], coverage=ci[2], note="")


def _row(key, x: Series, setup: StepSetup, status, change: dict, alpha: float,
         ref: str) -> StepRow:  # fmt: skip
    run_id, case_id, mode, arm = key
    st, why = status
    tokens = float(np.mean(x.tokens_per_rank)) * setup.data_ranks
    p50, p90, p99 = (_quantile(x.s, q, alpha) for q in QUANTILES)
    non = setup.non_moe_us
    share = lambda v: v / (v + non) if v + non > 0 else _NAN  # noqa: E731
    with np.errstate(invalid="ignore", divide="ignore"):
        tax_pct = float(np.median(x.tax / x.s) * 100)
        ratio = x.g / x.s
        graph_ratio = float(np.median(ratio[~np.isnan(ratio)])) if (~np.isnan(x.g)).any() else _NAN
    graph = float(np.median(x.g[~np.isnan(x.g)])) if (~np.isnan(x.g)).any() else _NAN
    layer_us = tuple(
        (lid, float(np.nanmedian(x.c[:, j])) if (~np.isnan(x.c[:, j])).any() else _NAN)
        for j, lid in enumerate(x.layers)
    )
    mean = float(np.mean(x.s))
    return StepRow(
        run_id=run_id, case_id=case_id, mode=mode, arm=arm, baseline=ref, status=st,
        n_steps=len(x.s), n_blocks=x.n_blocks, n_ranks=x.n_ranks, layers=x.layers,
        tokens_per_rank=float(np.mean(x.tokens_per_rank)), tokens_per_step=tokens,
        mean_us=mean, p50=p50, p90=p90, p99=p99,
        moe_us_per_token=p50.us / tokens if tokens > 0 else _NAN,
        moe_us_per_token_mean=mean / tokens if tokens > 0 else _NAN,
        slowest_rank_sum_us=float(np.median(x.r)), imbalance_tax_us=float(np.median(x.tax)),
        imbalance_tax_pct=tax_pct, graph_step_us=graph, graph_ratio=graph_ratio,
        layer_us=layer_us, non_moe_us=non, tpot_p50_us=p50.us + non, tpot_p99_us=p99.us + non,
        moe_share_p50=share(p50.us), moe_share_p99=share(p99.us),
        decision=change.get("decision", ""), reason=change.get("reason", why if st != "ok" else ""),
        n_paired_steps=change.get("n_paired", 0), change_pct=change.get("change_pct", _NAN),
        ci_low_pct=change.get("ci_low_pct", _NAN), ci_high_pct=change.get("ci_high_pct", _NAN),
        incomplete_blocks=x.incomplete, step_us=tuple(x.s.tolist()), params=x.params,
    )  # fmt: skip


def _mismatch_row(key, x: Series, reason: str, ref: str) -> StepRow:
    run_id, case_id, mode, arm = key
    nan = dict.fromkeys(
        ("tokens_per_rank", "tokens_per_step", "mean_us", "moe_us_per_token",
         "moe_us_per_token_mean", "slowest_rank_sum_us", "imbalance_tax_us", "imbalance_tax_pct",
         "graph_step_us", "graph_ratio", "non_moe_us", "tpot_p50_us", "tpot_p99_us",
         "moe_share_p50", "moe_share_p99", "change_pct", "ci_low_pct", "ci_high_pct"),
        _NAN,
    )  # fmt: skip
    return StepRow(
        run_id=run_id, case_id=case_id, mode=mode, arm=arm, baseline=ref, status="mismatch",
        n_steps=0, n_blocks=0, n_ranks=0, layers=x.layers, p50=None, p90=None, p99=None,
        layer_us=(), decision="", reason=reason, n_paired_steps=0, incomplete_blocks=0,
        params=x.params, **nan,
    )  # fmt: skip


def summarise(p: Prepared, alpha: float, threshold: float, confidence: float) -> StepSummary | None:
    """Every (run, case, mode, arm) of the step regime with its change at the corrected
    ``alpha``, and the goodput of each series; None when no run has the regime."""
    if not p.series:
        return None
    pairs = p.pairs()
    rows = []
    for key in sorted(p.series):
        run_id, case_id, mode, arm = key
        x = p.series[key]
        ref = aa_twin(arm) or p.baseline
        st = p.status.get((run_id, case_id, arm), ("unchecked", "no correctness checks"))
        if st[0] == "mismatch":
            rows.append(_mismatch_row(key, x, st[1], ref))
            continue
        pair = pairs.get(key)
        if arm == ref:
            change = {"decision": "baseline"}
        elif isinstance(pair, dict):
            change = pair
        else:
            change = decide_paired(*pair, alpha, threshold)
        rows.append(_row(key, x, p.setups[run_id], st, change, 1 - confidence, ref))
    slo = {run_id: s.slo_tpot_ms for run_id, s in p.setups.items()}
    return StepSummary(
        setups=tuple(p.setups[r] for r in sorted(p.setups)), rows=tuple(rows),
        goodput=tuple(goodput(rows, slo, p.baseline, 1 - confidence, threshold)),
        confidence=confidence,
    )  # fmt: skip
