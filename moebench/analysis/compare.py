"""Statistics and decisions over stored runs; reads only results (docs/DESIGN.md sections 6, 7, 9).

What one row says, for a (run, case, regime, stage, mode, arm):

- ``median_us``: the case-level figure. For each block b and rank r, ``m[b, r]`` is the median of
  that rank's iterations in that block; the block's critical path is ``c[b] = max_r m[b, r]``
  (ranks run in parallel, the slowest one sets the time); ``median_us = median_b c[b]``. A block
  where some rank of the arm has no samples is left out (its critical path is unknown).
- ``cv_pct``: the noise of the cell, the coefficient of variation of ``c[b]`` over blocks.
- ``rank_min_us / rank_median_us / rank_max_us``: spread of the per-rank medians, each the median
  of all that rank's samples, with ``slowest_rank``, ``n_ranks``, ``n_blocks``, ``n_samples``.
- ``change_pct [ci_low_pct, ci_high_pct]``: ``median_b (c_arm[b] / c_base[b]) - 1`` over the
  blocks both arms have, with the exact order-statistic interval for that median
  (``stats.paired_change``: distribution-free, its coverage true at the block count). Arms
  interleave inside a block, so blocks pair them: the ratio is taken inside each block, where
  whatever the block shares between arms (clocks, temperature) cancels, and only then summarised.
  It can differ slightly from the ratio of the two ``median_us``.
- ``decision``: the CI excludes 0 -> FASTER / SLOWER, or SAME when ``|change| < threshold``; the CI
  includes 0 -> SAME when the whole CI lies within +-threshold, else AMBIGUOUS; fewer than 2 paired
  blocks -> AMBIGUOUS; fewer blocks than the corrected level needs (``stats.blocks_needed``: 6 at
  95%, 10 for 22 cells) -> ``TOO FEW BLOCKS``, with the point change but no interval. The
  baseline's own rows say ``baseline``; no decision ("") when there is nothing honest to compare
  against, with the reason.

Many cells, one verdict: a sweep asks the same question of every (case, regime, stage, arm), and
at 95% per cell one cell in twenty would be "significant" by chance. By default every interval is
built at ``1 - alpha / m`` for the m comparisons that get one (Bonferroni), so all of them hold
together with probability ``1 - alpha``; this protects the SAME decisions as well as FASTER and
SLOWER, since all three are read off the same interval. ``correction="none"`` turns it off.

The A/A control: an arm ``X~aa`` is a second copy of arm X timed in the same rotation; it is
compared with X (not with the baseline), and the share of those cells not decided SAME is the
false-positive rate of the whole procedure on this machine (``Comparison.aa``).

Samples that carry an optional ``mode`` column (``eager`` / ``graph``) are keyed by it: the two
modes are never pooled and each arm is compared with the baseline in the same mode (samples on
rotated weight copies, ``weights`` cold, are a mode of their own: ``graph-cold``). Several
samples for one (rank, block, iteration) of a stage, as the per-kernel rows of the ``profile``
regime are, are summed first: a stage's time in one replay is the sum of its kernels.

Several runs: rows are keyed by run_id as well, and changes are only computed inside one run.
Pooling runs would break the pairing (block 3 of one run has nothing to do with block 3 of
another) and mix machines; put two runs side by side to compare them. Runs that do not belong in
one table are refused unless ``force``: runs that share no case, and a case id that names
different shapes in two runs (different scenarios reuse ``c000``). Milder differences are warned
about: manifests that differ in ``sources``, ``environment`` or scenario sha256, cases or arms
only some runs have, and runs that did not finish (both in ``moebench/analysis/belonging.py``).

Correctness first: an arm with a ``fail`` or ``error`` check for a case is ``mismatch`` and its
row carries no timing figure at all. Undefined figures are NaN (empty when rendered), never 0.
Rendering lives in ``moebench.report``, figures in ``moebench.report.plots``. Below the rows,
`moebench.analysis.workmodel` adds weight bandwidth against the copy ceiling and, for runs that
sweep tokens_per_rank, the token count at which the baseline overtakes each arm.

The rows and the comparison that holds them are in ``moebench.analysis.rows``; the grouping of
samples into blocks and critical paths is in ``moebench.analysis.blocks``.

The ``step`` regime (a model step over every MoE layer) makes cells of its own, not rows:
``Comparison.step`` (``moebench.analysis.step``: percentiles, imbalance tax, TPOT share and
goodput, each arm paired with its baseline over steps) and, over token sweeps,
``Comparison.policy`` (``moebench.analysis.policy``: where each arm's advantage disappears, for
every arm against the baseline and every pair of other arms). Their comparisons count toward the
correction with the rows'.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from moebench.analysis import (
    critical,
    integrity,
    ledger,
    model,
    model_summary,
    policy,
    stats,
    step,
    workmodel,
)
from moebench.analysis.belonging import belonging, distinct, provenance_warnings
from moebench.analysis.blocks import Group, concat_samples, timing_groups
from moebench.analysis.rows import REGIME_ORDER, CaseInfo, CompareRow, Comparison, RunInfo, Timing
from moebench.core.ceilings import for_environment
from moebench.core.errors import MoebenchError, clip
from moebench.core.families import DEFAULT_BASELINE
from moebench.core.vocabulary import STAGE_ORDER, aa_twin
from moebench.results.reader import Run

CORRECTIONS = ("bonferroni", "none")
_NAN = math.nan
_STAGE_ORDER = {s: i for i, s in enumerate(STAGE_ORDER)}


# ---------------------------------------------------------------------------------------------
# Checks, cases and provenance


def _check_status(checks: pa.Table) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(run, case, arm) -> (ok | mismatch, reason). ``skip`` counts as no objection; ``fail`` or
    ``error`` on any rank makes the arm a mismatch for the whole case. The reason names each
    failed check with its ranks, worst error and first detail."""
    failed: dict[tuple, dict[tuple, list]] = defaultdict(dict)
    seen = set()
    cols = ("run_id", "case_id", "arm", "rank", "gate", "status", "error", "detail")
    for run_id, case_id, arm, rank, check, status, error, detail in zip(
        *(checks[c].to_pylist() for c in cols), strict=True
    ):
        key = (run_id, case_id, arm)
        seen.add(key)
        if status in ("fail", "error"):
            ranks, errors, details = failed[key].setdefault((check, status), [[], [], []])
            ranks.append(rank)
            errors.append(error)
            details.append(detail)
    out = {}
    for key in sorted(seen):
        parts = []
        for (check, status), (ranks, errors, details) in failed[key].items():
            worst = max((e for e in errors if not math.isnan(e)), default=_NAN)
            err = "" if math.isnan(worst) else f", error {worst:.3g}"
            which = ",".join(str(r) for r in sorted(set(ranks)))
            # A detail that leads with its check's name ("timeout: ...") says it once.
            first = next((d for d in details if d), "").removeprefix(f"{check}: ")
            detail = f": {clip(first, 160)}" if first else ""
            parts.append(f"{check} {status} (rank {which}{err}){detail}")
        out[key] = ("mismatch", "; ".join(parts)) if parts else ("ok", "")
    return out


def _case_infos(runs: list[Run], samples: pa.Table) -> dict[tuple[str, str], CaseInfo]:
    """Live rows and capacity per case and rank: from the routing table where a run has one,
    else from the samples (which carry the same columns)."""
    per_rank: dict[tuple[str, str], dict[int, tuple]] = defaultdict(dict)
    meta: dict[tuple[str, str], tuple] = {}
    precision: dict[tuple[str, str], str] = {}
    agg = [("live_rows", "max"), ("capacity_rows", "max"), ("tokens_per_rank", "max"),
           ("routing", "min"), ("params", "min"), ("precision", "min")]  # fmt: skip
    if samples.num_rows:
        table = samples.group_by(["run_id", "case_id", "rank"], use_threads=False).aggregate(agg)
        for row in table.to_pylist():
            key = (row["run_id"], row["case_id"])
            per_rank[key][row["rank"]] = (row["live_rows_max"], row["capacity_rows_max"])
            meta[key] = (row["routing_min"], row["tokens_per_rank_max"], row["params_min"])
            precision[key] = row["precision_min"]
    for run in runs:
        cols = ("case_id", "rank", "live_rows", "capacity_rows", "routing", "tokens_per_rank")
        if run.routing.num_rows == 0:
            continue
        routed: dict[tuple[str, str], dict[int, tuple]] = defaultdict(dict)
        for case_id, rank, live, cap, label, tokens in zip(
            *(run.routing[c].to_pylist() for c in cols), strict=True
        ):
            key = (run.run_id, case_id)
            routed[key][rank] = (live, cap)
            params = meta.get(key, ("", 0, "{}"))[2]
            meta[key] = (label, tokens, params)
        per_rank.update(routed)
    out = {}
    for key, ranks in per_rank.items():
        live = tuple(ranks[r][0] for r in sorted(ranks))
        caps = [ranks[r][1] for r in sorted(ranks)]
        label, tokens, params = meta[key]
        fraction = (
            float(np.mean([v / c for v, c in zip(live, caps, strict=True)]))
            if all(c > 0 for c in caps)
            else _NAN
        )
        out[key] = CaseInfo(
            run_id=key[0], case_id=key[1], routing=label, tokens_per_rank=int(tokens),
            capacity_rows=int(max(caps)), live_rows=live, live_fraction=fraction, params=params,
            precision=precision.get(key, ""),
        )  # fmt: skip
    return out


def _run_info(run: Run) -> RunInfo:
    m = run.manifest
    scenario = m.get("scenario")
    env = m.get("environment")
    return RunInfo(
        run_id=run.run_id,
        scenario=str(scenario.get("name", "")) if isinstance(scenario, dict) else "",
        status=str(m.get("status") or ""),
        device=str(m.get("device") or ""),
        environment=env if isinstance(env, dict) else {},
        started_at=str(m.get("started_at") or ""),
        ended_at=str(m.get("ended_at") or ""),
        command=str(m.get("command") or ""),
    )


# ---------------------------------------------------------------------------------------------
# Comparison


def _empty_row(**kw: Any) -> CompareRow:
    base = dict(
        mode="", decision="", reason="", device="", median_us=_NAN, cv_pct=_NAN,
        rank_min_us=_NAN, rank_median_us=_NAN, rank_max_us=_NAN, slowest_rank=None,
        n_ranks=None, n_blocks=None, n_samples=None, n_paired_blocks=0, change_pct=_NAN,
        ci_low_pct=_NAN, ci_high_pct=_NAN,
    )  # fmt: skip
    return CompareRow(**(base | kw))


@dataclass(frozen=True)
class _Paired:
    """A cell waiting for its interval: the paired critical paths and a note on the pairing."""

    arm: np.ndarray
    base: np.ndarray
    note: str


def compare_runs(
    runs: list[Run],
    *,
    baseline: str = DEFAULT_BASELINE,
    threshold_pct: float = 2.0,
    confidence: float = 0.95,
    correction: str = "bonferroni",
    force: bool = False,
    slo_tpot_ms: float | None = None,
    non_moe_us: float | None = None,
    non_moe_source: str = "",
) -> Comparison:
    """Compare every arm against ``baseline`` (an A/A copy against the arm it copies) inside
    each run; see the module docstring. ``force`` turns the refusal of runs that do not belong
    together into a warning. ``slo_tpot_ms`` and ``non_moe_us`` replace the step regime's SLO and
    non-MoE time of every run (given values; ``non_moe_source`` says where a non-MoE time was
    measured when it comes from a model run)."""
    if not runs:
        raise MoebenchError("compare needs at least one run")
    if not (threshold_pct >= 0 and 0 < confidence < 1):
        raise MoebenchError(
            f"bad compare settings: threshold {threshold_pct}% (>= 0), confidence {confidence} "
            "(0..1)"
        )
    if slo_tpot_ms is not None and not slo_tpot_ms > 0:
        raise MoebenchError(f"--slo-tpot-ms must be > 0, got {slo_tpot_ms:g}")
    if non_moe_us is not None and not non_moe_us >= 0:
        raise MoebenchError(f"--non-moe-us must be >= 0, got {non_moe_us:g}")
    if correction not in CORRECTIONS:
        raise MoebenchError(f"unknown correction {correction!r}; choose {' or '.join(CORRECTIONS)}")
    run_ids = [r.run_id for r in runs]
    dupes = sorted({r for r in run_ids if run_ids.count(r) > 1})
    if dupes:
        raise MoebenchError(f"run {dupes[0]} given more than once")

    warnings = belonging(runs, force) + provenance_warnings(runs)
    every = concat_samples(runs)
    samples, step_samples = step.split(every)  # the step regime's rows make cells of their own
    samples, model_samples = model.split(samples)  # and the model regime's
    checks = pa.concat_tables([r.checks for r in runs])
    arms_seen = distinct(every["arm"]) | distinct(checks["arm"])
    if baseline not in arms_seen:
        arms = ", ".join(sorted(arms_seen)) or "none"
        raise MoebenchError(f"baseline arm {baseline!r} is in none of the runs (arms: {arms})")

    groups = timing_groups(samples, warnings)
    status = _check_status(checks)
    floor_only = integrity.impossible(checks)
    cells: list[tuple[dict, dict, _Paired | None]] = []  # (identity and timing, change, pairing)
    missing_ref = []
    unchecked: set[str] = set()
    for key in sorted(groups, key=_sort_key):
        run_id, case_id, regime, stage, mode, arm = key
        g = groups[key]
        ref = aa_twin(arm) or baseline
        st, why = status.get((run_id, case_id, arm), ("unchecked", "no correctness checks"))
        ident = dict(run_id=run_id, case_id=case_id, regime=regime, stage=stage, mode=mode,
                     arm=arm, status=st, baseline=ref, device=g.device)  # fmt: skip
        if st == "mismatch":
            verdict = "IMPOSSIBLE" if (run_id, case_id, arm) in floor_only else ""
            cells.append((ident | {"reason": why, "decision": verdict}, {}, None))
            continue
        if st == "unchecked":
            unchecked.add(f"{run_id}/{case_id} arm {arm}")
        if g.incomplete_blocks:
            warnings.append(
                f"{run_id}/{case_id} {regime}/{stage} arm {arm}: {g.incomplete_blocks} block(s) "
                "miss some rank and are left out of the critical path"
            )
        ranks = np.array(list(g.rank_medians.values()))
        crit = np.array(list(g.critical.values()))
        timing = dict(
            n_samples=g.n_samples, n_ranks=len(ranks), n_blocks=len(crit),
            median_us=float(np.median(crit)) if len(crit) else _NAN, cv_pct=stats.cv_pct(crit),
            rank_min_us=float(ranks.min()), rank_median_us=float(np.median(ranks)),
            rank_max_us=float(ranks.max()),
            slowest_rank=int(max(g.rank_medians, key=g.rank_medians.get)),
        )  # fmt: skip
        change, paired = _pair(g, groups.get((*key[:5], ref)), arm, ref,
                               status.get((run_id, case_id, ref), ("unchecked", "")))  # fmt: skip
        if change.get("reason", "").startswith("no baseline"):
            missing_ref.append(f"{run_id}/{case_id} {regime}/{stage}{f' {mode}' if mode else ''}")
        cells.append((ident | timing, change, paired))

    stepped = step.prepare(step_samples, runs, status, baseline, warnings,
                           slo_tpot_ms=slo_tpot_ms, non_moe_us=non_moe_us,
                           non_moe_source=non_moe_source)  # fmt: skip
    cases = _case_infos(runs, step.without_whole_steps(every))
    extra = policy.pairs(groups, stepped.series, cases, baseline, status)
    modelled = model.prepare(model_samples, runs, status, baseline, warnings)
    m = sum(paired is not None for _, _, paired in cells) + stepped.comparisons + len(extra)
    m += modelled.comparisons
    alpha = stats.cell_alpha(1 - confidence, m, correction)
    needed = stats.blocks_needed(alpha)
    rows = []
    for ident, change, paired in cells:
        if paired is not None:
            change = _interval(paired, alpha, needed, threshold_pct)
        rows.append(_empty_row(**ident, **change))

    # Mismatched arms that were never timed still get a row: the failure must be visible.
    timed = {(k[0], k[1], k[5]) for k in groups}
    for (run_id, case_id, arm), (st, why) in sorted(status.items()):
        if st == "mismatch" and (run_id, case_id, arm) not in timed:
            ref = aa_twin(arm) or baseline
            rows.append(_empty_row(run_id=run_id, case_id=case_id, regime="", stage="", arm=arm,
                                   status=st, reason=why, baseline=ref))  # fmt: skip
    rows.sort(key=lambda r: _sort_key((r.run_id, r.case_id, r.regime, r.stage, r.mode, r.arm)))
    for (run_id, case_id, arm), (st, why) in sorted(status.items()):
        if arm == baseline and st == "mismatch":
            warnings.append(
                f"{run_id}/{case_id}: baseline {baseline!r} failed its checks ({why}); "
                "no change computed for this case"
            )
    if unchecked:
        shown = ", ".join(sorted(unchecked)[:5]) + (" ..." if len(unchecked) > 5 else "")
        warnings.append(
            f"{len(unchecked)} arm(s) have no correctness checks, timings unverified: {shown}"
        )
    if missing_ref:
        shown = ", ".join(missing_ref[:5]) + (" ..." if missing_ref[5:] else "")
        warnings.append(
            f"baseline arm {baseline!r} (or an A/A copy's arm) has no samples in "
            f"{len(missing_ref)} (case, stage) group(s): {shown}"
        )
    devices = tuple(sorted(distinct(every["device"])))
    summary = step.summarise(stepped, alpha, threshold_pct, confidence)
    served = model_summary.summarise(modelled, alpha, threshold_pct, confidence,
                                     slo_tpot_ms=slo_tpot_ms, step=summary)  # fmt: skip
    if len(devices) > 1:
        warnings.append("runs mix CPU and GPU timings; never compare figures across devices")
    comparison = Comparison(
        rows=rows, warnings=warnings, baseline=baseline, threshold_pct=threshold_pct,
        confidence=confidence, correction=correction, comparisons=m, cell_confidence=1 - alpha,
        blocks_needed=needed, devices=devices, run_ids=tuple(run_ids),
        timings={k: Timing(rank_medians=g.rank_medians, critical=g.critical)
                 for k, g in groups.items()},
        cases=cases, runs=tuple(_run_info(r) for r in runs),
        workmodel=workmodel.analyse(rows, samples, baseline,
                                    {r.run_id: for_environment(r.manifest.get("environment"))
                                     for r in runs}),
        passes=tuple(critical.pass_paths(
            samples, {k for k, (st, _) in status.items() if st == "mismatch"}
        )),
        gates=tuple(ledger.gate_rows(runs)), ledger=tuple(ledger.ledger_rows(runs)),
        integrity=tuple(integrity.integrity_lines(checks)),
        step=summary, model=served, policy=policy.build(rows, summary.rows if summary else (),
                                          policy.decide(extra, alpha, threshold_pct), cases,
                                          baseline),
    )  # fmt: skip
    aa = comparison.aa
    if aa is not None and aa.not_same:
        warnings.append(
            f"A/A control: {aa.not_same} of {aa.cells} cell(s) not SAME ({aa.false_positives} "
            f"FASTER/SLOWER, {aa.ambiguous} AMBIGUOUS): this measurement cannot resolve changes "
            f"of about +-{aa.max_half_width_pct:.1f}%; read the other decisions with that in mind"
        )
    return comparison


def _sort_key(key: tuple) -> tuple:
    run_id, case_id, regime, stage, mode, arm = key
    return (run_id, case_id, REGIME_ORDER.get(regime, 9), regime, _STAGE_ORDER.get(stage, 99),
            stage, mode, arm)  # fmt: skip


def _pair(
    g: Group, base: Group | None, arm: str, ref: str, ref_status: tuple[str, str]
) -> tuple[dict[str, Any], _Paired | None]:
    """The change fields decided without an interval, or the paired blocks that need one."""
    if arm == ref:
        return {"decision": "baseline"}, None
    if ref_status[0] == "mismatch":
        return {"reason": f"baseline {ref!r} failed its checks: {ref_status[1]}"}, None
    if base is None:
        return {"reason": f"no baseline {ref!r} samples for this case, stage and mode"}, None
    blocks = sorted(g.critical.keys() & base.critical.keys())
    n = len(blocks)
    if n < 2:
        return {
            "decision": "AMBIGUOUS",
            "n_paired_blocks": n,
            "reason": f"{n} block(s) paired with {ref!r}; need at least 2",
        }, None
    most = max(len(g.critical), len(base.critical))
    return {}, _Paired(
        arm=np.array([g.critical[b] for b in blocks]),
        base=np.array([base.critical[b] for b in blocks]),
        note=f"paired on {n} of {most} blocks" if n < most else "",
    )


def _interval(p: _Paired, alpha: float, needed: int, threshold: float) -> dict:
    found = stats.paired_change(p.arm, p.base, alpha)
    n = len(p.arm)
    if found is None:  # the blocks cannot reach the corrected level: no verdict, say so
        point = float(np.median(p.arm / p.base) - 1) * 100
        reason = (f"n={n} paired blocks, need >= {needed} for {_pct(1 - alpha)} per cell "
                  "(measure.blocks)")  # fmt: skip
        if p.note:
            reason = f"{reason}; {p.note}"
        return {"decision": stats.TOO_FEW, "reason": reason, "n_paired_blocks": n,
                "change_pct": point}  # fmt: skip
    point, low, high, _ = (x * 100 for x in found)
    decision, reason = stats.decide(point, low, high, threshold)
    if p.note:
        reason = f"{reason}; {p.note}" if reason else p.note
    return {
        "decision": decision,
        "reason": reason,
        "n_paired_blocks": len(p.arm),
        "change_pct": float(point),
        "ci_low_pct": low,
        "ci_high_pct": high,
    }


def _pct(level: float) -> str:
    """A confidence level as a percent with the digits it needs (99.77%, not 100%)."""
    digits = max(0, math.ceil(-math.log10(max(1 - level, 1e-12))))
    return f"{level * 100:.{digits}f}".rstrip("0").rstrip(".") + "%"
