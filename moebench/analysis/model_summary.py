"""The model regime summed up (issue 27): its rows (``analysis.model``), the goodput and the policy
over a sweep of batch sizes from the measured TPOT, and the measured TPOT beside what the step
regime derives.

- **Goodput** (``analysis.goodput``'s, with the TPOT measured: no non-MoE time is added): over
  the cases of a run that share every sweep value but ``model_run.batch``, per arm and mode, the
  largest batch whose measured P99 TPOT meets the SLO, and its tokens per second (batch / P99
  TPOT), with the interval the P99 intervals give (Bonferroni over the batches) and the ratio
  over the baseline's with its interval.
- **Policy over the batch**: each arm's TPOT decisions against the baseline along the batch
  sizes (``policy.threshold_of``): where it is FASTER, the boundary between the last batch where it
  is and the first where it is not, valid inside the batches measured.
- **Beside the step regime**: where ``compare`` reads a step run too, each arm's measured TPOT at a
  batch beside the step regime's derived TPOT at as many tokens a step (P50 of the MoE layers +
  its given non-MoE time), and that MoE time plus the non-MoE time measured here.
- ``measured_non_moe``: a model run's non-MoE time (``NO_EXPERTS``'s P50 TPOT) for
  ``compare --non-moe-from``, which gives it to the step regime in place of a guess.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from moebench.analysis import policy
from moebench.analysis.goodput import Goodput, clean_json, goodput
from moebench.analysis.model import (
    BATCH_KEY,
    ModelRow,
    Prepared,
    cells,
    p50_of,
    rows,
    split,
    without_verdicts,
)
from moebench.analysis.step import Quantile
from moebench.core.errors import MoebenchError
from moebench.core.vocabulary import MODEL_DECODE, NO_EXPERTS

MODEL_GOODPUT_DEFINITION = (
    "measured: DistServe's goodput (arXiv 2401.09670) of a whole model's decode, each step timed: "
    "over the batch sizes of a series, the largest batch whose measured P99 TPOT meets the SLO, "
    "and its tokens per second = batch / P99 TPOT"
)
_NAN = math.nan


@dataclass(frozen=True, kw_only=True)
class _Series:
    """A model row as ``analysis.goodput`` reads a series point (its ``StepLike``)."""

    run_id: str
    case_id: str
    mode: str
    arm: str
    status: str
    params: str  # the sweep values but the batch: the series
    n_steps: int
    tokens_per_step: float
    non_moe_us: float
    step_us: tuple[float, ...]
    p99: Quantile | None


def _without_batch(params: str) -> str:
    try:
        d = json.loads(params) if params else {}
    except ValueError:
        return params
    return json.dumps({k: v for k, v in d.items() if k != BATCH_KEY}, sort_keys=True)


def _slo(runs, given: float | None) -> dict[str, float | None]:
    out = {}
    for run in runs:
        section = run.manifest.get("model")
        cases = section.get("cases", {}) if isinstance(section, dict) else {}
        found = [c.get("slo_tpot_ms") for c in cases.values() if isinstance(c, dict)]
        out[run.run_id] = given if given is not None else next((x for x in found if x), None)
    return out


@dataclass(frozen=True, kw_only=True)
class ModelSummary:
    rows: tuple[ModelRow, ...]
    goodput: tuple[Goodput, ...]
    policy: tuple[dict, ...]
    beside_step: tuple[dict, ...]
    confidence: float
    slo_given: bool = False  # compare's --slo-tpot-ms, not the scenario's

    def as_dict(self) -> dict[str, Any]:
        return {
            "confidence": self.confidence,
            "non_moe_backend": NO_EXPERTS,
            "rows": [r.as_dict() for r in self.rows],
            "goodput": [g.as_dict() | {"derived": False, "measured": True} for g in self.goodput],
            "goodput_definition": MODEL_GOODPUT_DEFINITION,
            "slo_given_by": "compare" if self.slo_given else "scenario",
            "policy": list(self.policy),
            "beside_step": list(self.beside_step),
        }

    def without_verdicts(self, reason: str) -> ModelSummary:
        goodput_ = tuple(
            replace(g, verdict="", ratio_low=_NAN, ratio_high=_NAN,
                    note=f"{g.note}; {reason}" if g.note else reason)
            if not math.isnan(g.ratio) else g
            for g in self.goodput
        )  # fmt: skip
        return replace(self, rows=tuple(without_verdicts(list(self.rows), reason)),
                       goodput=goodput_, policy=())  # fmt: skip


def summarise(p: Prepared, alpha: float, threshold: float, confidence: float, *,
              slo_tpot_ms: float | None = None, step=None) -> ModelSummary | None:  # fmt: skip
    """The model regime of a comparison; None when no run has it."""
    if not p.cells:
        return None
    found = rows(p, alpha, threshold, confidence)
    series = [
        _Series(run_id=r.run_id, case_id=r.case_id, mode=r.mode, arm=r.arm, status=r.status,
                params=_without_batch(r.params), n_steps=r.n_steps, tokens_per_step=r.batch,
                non_moe_us=0.0, step_us=r.decode_us, p99=r.tpot_p99)
        for r in found if r.arm != NO_EXPERTS and r.n_steps
    ]  # fmt: skip
    good = goodput(series, _slo(p.runs, slo_tpot_ms), p.baseline, 1 - confidence, threshold)
    return ModelSummary(
        rows=tuple(found), goodput=tuple(good), policy=tuple(_policies(found, p.baseline)),
        beside_step=tuple(_beside_step(found, step)), confidence=confidence,
        slo_given=slo_tpot_ms is not None,
    )  # fmt: skip


def _policies(found: list[ModelRow], baseline: str) -> list[dict]:
    """Per (run, series, mode, arm) over two batch sizes or more: where the arm's TPOT is FASTER
    than the baseline's (``policy.threshold_of``), as a serving engine could read it."""
    groups: dict[tuple, list[ModelRow]] = {}
    for r in found:
        if r.arm in (baseline, NO_EXPERTS) or r.is_aa or r.status == "mismatch" or not r.batch:
            continue
        groups.setdefault((r.run_id, _without_batch(r.params), r.mode, r.arm), []).append(r)
    out = []
    for (run_id, params, mode, arm), rs in sorted(groups.items()):
        rs.sort(key=lambda r: r.batch)
        batches = [r.batch for r in rs]
        if len(set(batches)) != len(batches) or len(batches) < 2:
            continue
        evidence = [policy.Evidence(
            tokens_per_rank=r.batch, case_id=r.case_id,
            change_pct=r.change.get("change_pct", _NAN),
            ci_low_pct=r.change.get("ci_low_pct", _NAN),
            ci_high_pct=r.change.get("ci_high_pct", _NAN), decision=r.change.get("decision", ""),
            live_fraction=_NAN) for r in rs]  # fmt: skip
        use, bounds, note = policy.threshold_of(evidence)
        out.append(clean_json({
            "run_id": run_id, "series": params, "regime": "model", "mode": mode, "arm": arm,
            "against": rs[0].baseline, "stage": MODEL_DECODE,
            "use_when": None if use is None else {"batch": use["tokens_per_rank"]},
            "boundary": bounds[0] if len(bounds) == 1 else None, "boundaries": bounds,
            "measured": [batches[0], batches[-1]], "note": note.replace("tokens", "batch"),
            "evidence": [clean_json({
                "batch": e.tokens_per_rank, "case_id": e.case_id, "change_pct": e.change_pct,
                "ci": None if math.isnan(e.ci_low_pct) else [e.ci_low_pct, e.ci_high_pct],
                "decision": e.decision}) for e in evidence],
        }))  # fmt: skip
    return out


def _beside_step(found: list[ModelRow], step) -> list[dict]:
    """Each arm's measured TPOT beside the step regime's derived one at as many tokens a step."""
    if step is None:
        return []
    out = []
    for m in found:
        if m.arm == NO_EXPERTS or m.tpot_p50 is None:
            continue
        for s in step.rows:
            if s.arm != m.arm or s.p50 is None or not math.isclose(s.tokens_per_step, m.batch):
                continue
            if not _same_setting(m.params, s.params):
                continue
            out.append(clean_json({
                "arm": m.arm, "tokens_per_step": m.batch,
                "model": {"run_id": m.run_id, "case_id": m.case_id, "mode": m.mode,
                          "tpot_p50_us": m.tpot_p50.us, "non_moe_us": m.non_moe_us},
                "step": {"run_id": s.run_id, "case_id": s.case_id, "mode": s.mode,
                         "moe_p50_us": s.p50.us, "non_moe_us": s.non_moe_us,
                         "derived_tpot_p50_us": s.tpot_p50_us,
                         "with_measured_non_moe_us": s.p50.us + m.non_moe_us},
            }))  # fmt: skip
    return out


def _same_setting(model_params: str, step_params: str) -> bool:
    """Whether a model case and a step case were swept to the same setting where both runs swept
    the same parameter (their precision: an FP8 step beside an MXFP4 model is no pair); the
    batch and the tokens a rank are matched as tokens a step instead."""
    a, b = (json.loads(x) if x else {} for x in (model_params, step_params))
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def measured_non_moe(run, batch: int | None = None) -> tuple[float, str]:
    """The non-MoE time a model run measured (``NO_EXPERTS``'s P50 TPOT), at ``batch`` when the
    run has several; (us, where it comes from). A MoebenchError when it has none or must be
    told which batch."""
    _, samples = split(run.samples)
    found = {k: c for k, c in cells(samples, [run], []).items() if k[3] == NO_EXPERTS and c.decode}
    section = run.manifest.get("model") if isinstance(run.manifest.get("model"), dict) else {}
    cases = section.get("cases", {})
    by_batch: dict[int, list] = {}
    for (_, case_id, mode, _), c in found.items():
        b = cases.get(case_id, {}).get("batch")
        by_batch.setdefault(b, []).append((case_id, mode, c))
    if not by_batch:
        raise MoebenchError(f"{run.run_id}: no non-MoE time ({NO_EXPERTS} decode samples): not "
                            "a model regime run")  # fmt: skip
    if batch is None and len(by_batch) > 1:
        raise MoebenchError(
            f"{run.run_id} measured the non-MoE time at batches "
            f"{', '.join(map(str, sorted(by_batch)))}: name one, RUN@BATCH"
        )
    b = batch if batch is not None else next(iter(by_batch))
    if b not in by_batch:
        raise MoebenchError(f"{run.run_id} has no non-MoE time at batch {b} (it has "
                            f"{', '.join(map(str, sorted(by_batch)))})")  # fmt: skip
    case_id, mode, c = sorted(by_batch[b], key=lambda x: x[1] != "graph")[0]
    us = p50_of(list(c.decode.values()))
    return us, (f"measured by model run {run.run_id} ({case_id}, batch {b}, {mode}: P50 of "
                f"{len(c.decode)} {NO_EXPERTS} decode steps)")  # fmt: skip
