"""Statistics and decisions over stored runs; reads only results (DESIGN sections 6, 7, 9).

What one row says, for a (run, case, regime, stage, arm):

- ``median_us``: the case-level figure. For each block b and rank r, ``m[b, r]`` is the median of
  that rank's iterations in that block; the block's critical path is ``c[b] = max_r m[b, r]``
  (ranks run in parallel, the slowest one sets the time); ``median_us = median_b c[b]``. A block
  where some rank of the arm has no samples is left out (its critical path is unknown).
- ``rank_min_us / rank_median_us / rank_max_us``: spread of the per-rank medians, each the median
  of all that rank's samples, with ``slowest_rank``, ``n_ranks``, ``n_blocks``, ``n_samples``.
- ``change_pct [ci_low_pct, ci_high_pct]``: ``median_b c_arm[b] / median_b c_base[b] - 1`` over
  the blocks both arms have, with a percentile bootstrap that resamples block indices (the same
  indices for both arms: arms interleave inside a block, so blocks pair them).
- ``decision``: the CI excludes 0 -> FASTER / SLOWER, or SAME when ``|change| < threshold``; the CI
  includes 0 -> SAME when the whole CI lies within +-threshold, else AMBIGUOUS; fewer than 2 paired
  blocks -> AMBIGUOUS. The baseline's own rows say ``baseline``; no decision ("") when there is
  nothing honest to compare against, with the reason.

Several runs: rows are keyed by run_id as well, and changes are only computed inside one run.
Pooling runs would break the pairing (block 3 of one run has nothing to do with block 3 of
another) and mix machines; put two runs side by side to compare them. Runs that do not belong in
one table are refused unless ``force``: runs that share no case, and a case id that names
different shapes in two runs (different scenarios reuse ``c000``). Milder differences are warned
about: manifests that differ in ``sources``, ``environment`` or scenario sha256, cases or arms
only some runs have, and runs that did not finish.

Correctness first: an arm with a ``fail`` or ``error`` check for a case is ``mismatch`` and its
row carries no timing figure at all. Undefined figures are NaN (empty when rendered), never 0.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moebench.errors import MoebenchError
from moebench.results import Run

DECISIONS = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS", "baseline", "")
FORMATS = ("table", "markdown", "csv", "json")
_NAN = math.nan
_STAGE_ORDER = {s: i for i, s in enumerate(("scatter", "fc1", "act", "fc2", "combine", "ffn"))}


@dataclass(frozen=True, kw_only=True)
class CompareRow:
    run_id: str
    case_id: str
    regime: str
    stage: str
    arm: str
    status: str  # ok | unchecked (no check rows) | mismatch (a check failed or errored)
    decision: str  # FASTER | SLOWER | SAME | AMBIGUOUS | baseline | "" (no comparison)
    reason: str
    device: str
    median_us: float
    rank_min_us: float
    rank_median_us: float
    rank_max_us: float
    slowest_rank: int | None
    n_ranks: int | None  # None on mismatch rows: they carry no figures at all
    n_blocks: int | None
    n_samples: int | None
    baseline: str
    n_paired_blocks: int
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float


@dataclass(frozen=True, kw_only=True)
class Comparison:
    rows: list[CompareRow]
    warnings: list[str]
    baseline: str
    threshold_pct: float
    confidence: float
    resamples: int
    devices: tuple[str, ...]
    run_ids: tuple[str, ...]

    def regressions(self, pct: float) -> list[CompareRow]:
        """Significantly SLOWER rows whose change exceeds ``pct`` percent."""
        return [r for r in self.rows if r.decision == "SLOWER" and r.change_pct > pct]

    def mismatches(self) -> list[CompareRow]:
        return [r for r in self.rows if r.status == "mismatch"]

    @property
    def title(self) -> str:
        pct = f"{self.confidence * 100:g}%"
        head = (
            f"moebench compare: change vs '{self.baseline}', {pct} CI from {self.resamples} "
            f"block bootstrap resamples, SAME within +-{self.threshold_pct:g}%"
        )
        if "cpu" in self.devices:
            mixed = " mixed with GPU runs," if "cuda" in self.devices else ""
            return f"{head}. CPU timings (Triton interpreter),{mixed} not comparable with GPU"
        if self.devices == ("cuda",):
            return f"{head}. GPU timings (device events)"
        return head


# ---------------------------------------------------------------------------------------------
# Statistics


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """Integer codes and the values they stand for, for one string column."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def _distinct(column: pa.ChunkedArray) -> set:
    return set(pc.unique(column).to_pylist())


def _segment_medians(key: np.ndarray, values: np.ndarray):
    """Median of ``values`` per distinct int64 ``key``: (sorted keys, medians, counts)."""
    order = np.lexsort((values, key))
    key, values = key[order], values[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(values)])
    medians = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2
    return key[starts], medians, counts


def _combine(codes: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 per tuple of small non-negative codes (mixed radix)."""
    out = np.zeros(len(codes[0]), dtype=np.int64)
    for c, n in zip(codes, sizes, strict=True):
        out = out * n + c
    return out


@dataclass(frozen=True, kw_only=True)
class _Group:
    """Timing of one (run, case, regime, stage, arm)."""

    device: str
    n_samples: int
    rank_medians: dict[int, float]
    critical: dict[int, float]  # block -> critical path over ranks
    incomplete_blocks: int


def _timing_groups(samples: pa.Table, warnings: list[str]) -> dict[tuple, _Group]:
    if samples.num_rows == 0:
        return {}
    time = samples["time_us"].to_numpy()
    bad = ~np.isfinite(time) | (time <= 0)
    if bad.any():
        warnings.append(f"{int(bad.sum())} samples with a non-finite or non-positive time ignored")
        samples = samples.filter(pa.array(~bad))
        time = time[~bad]
    names = ("run_id", "case_id", "regime", "stage", "arm", "device")
    encoded = [_codes(samples[n]) for n in names]
    codes = [c.astype(np.int64) for c, _ in encoded]
    sizes = [len(values) for _, values in encoded]
    # Dense integers: one per (run, case, regime, stage, arm), per rank, per block.
    first, group = np.unique(_combine(codes[:5], sizes[:5]), return_index=True,
                             return_inverse=True)[1:]  # fmt: skip
    ranks, rank = np.unique(samples["rank"].to_numpy(), return_inverse=True)
    blocks, block = np.unique(samples["block"].to_numpy(), return_inverse=True)
    n_groups, n_ranks, n_blocks = len(first), len(ranks), len(blocks)

    label = [tuple(encoded[j][1][codes[j][i]] for j in range(5)) for i in first]
    devices = defaultdict(set)
    for gd in np.unique(_combine([group, codes[5]], [n_groups, sizes[5]])).tolist():
        devices[gd // sizes[5]].add(encoded[5][1][gd % sizes[5]])

    key_r, rank_med, rank_n = _segment_medians(_combine([group, rank], [n_groups, n_ranks]), time)
    key_b, block_med, _ = _segment_medians(
        _combine([group, block, rank], [n_groups, n_blocks, n_ranks]), time
    )
    g_r, r_r = key_r // n_ranks, ranks[key_r % n_ranks]
    g_b, b_b = key_b // (n_blocks * n_ranks), blocks[key_b // n_ranks % n_blocks]
    # Segments come out sorted by group first, so each group's segments are one slice.
    at_r = np.searchsorted(g_r, np.arange(n_groups + 1))
    at_b = np.searchsorted(g_b, np.arange(n_groups + 1))

    out = {}
    for g in range(n_groups):
        sr, sb = slice(at_r[g], at_r[g + 1]), slice(at_b[g], at_b[g + 1])
        rank_medians = dict(zip(r_r[sr].tolist(), rank_med[sr].tolist(), strict=True))
        per_block: dict[int, list[float]] = defaultdict(list)
        for b, m in zip(b_b[sb].tolist(), block_med[sb].tolist(), strict=True):
            per_block[b].append(m)
        # A block is complete when every rank that this arm has anywhere has samples in it.
        complete = {b: max(ms) for b, ms in per_block.items() if len(ms) == len(rank_medians)}
        dev = devices[g]
        out[label[g]] = _Group(
            device=dev.pop() if len(dev) == 1 else "mixed",
            n_samples=int(rank_n[sr].sum()),
            rank_medians=rank_medians,
            critical=complete,
            incomplete_blocks=len(per_block) - len(complete),
        )
    return out


def _bootstrap_ratio(arm: np.ndarray, base: np.ndarray, resamples: int, seed: int, alpha: float):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arm), size=(resamples, len(arm)))
    ratios = np.median(arm[idx], axis=1) / np.median(base[idx], axis=1) - 1
    low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _decide(point: float, low: float, high: float, threshold: float) -> tuple[str, str]:
    if low > 0 or high < 0:
        if abs(point) < threshold:
            return "SAME", f"significant but within +-{threshold:g}%"
        if (point < 0) != (high < 0):
            return "AMBIGUOUS", "point estimate lies outside its own CI"
        return ("FASTER", "") if point < 0 else ("SLOWER", "")
    if -threshold <= low and high <= threshold:
        return "SAME", ""
    return "AMBIGUOUS", f"CI includes 0 and reaches beyond +-{threshold:g}%"


# ---------------------------------------------------------------------------------------------
# Checks


def _check_status(checks: pa.Table) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(run, case, arm) -> (ok | mismatch, reason). ``skip`` counts as no objection; ``fail`` or
    ``error`` on any rank makes the arm a mismatch for the whole case. The reason names each
    failed check with its ranks, worst error and first detail."""
    failed: dict[tuple, dict[tuple, list]] = defaultdict(dict)
    seen = set()
    cols = ("run_id", "case_id", "arm", "rank", "check", "status", "error", "detail")
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
            first = next((d for d in details if d), "")
            detail = f": {first[:160]}" if first else ""
            parts.append(f"{check} {status} (rank {which}{err}){detail}")
        out[key] = ("mismatch", "; ".join(parts)) if parts else ("ok", "")
    return out


# ---------------------------------------------------------------------------------------------
# Comparison


def _short(value: Any) -> str:
    """A provenance value in a few characters: hashes cut to 12, dicts by their hash if any."""
    if isinstance(value, dict):
        return _short(value["hash"]) if "hash" in value else "{...}"
    text = "-" if value is None or value == "" else str(value)
    return (
        text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:40]
    )


def _provenance_warnings(runs: list[Run]) -> list[str]:
    """Warn when a run records no sources/environment, or when two runs differ in them."""
    warnings = []
    first = runs[0]
    for key in ("sources", "environment"):
        for run in runs:
            if not isinstance(run.manifest.get(key), dict):
                warnings.append(f"run {run.run_id} records no {key}; provenance unknown")
        for run in runs[1:]:
            a, b = first.manifest.get(key), run.manifest.get(key)
            if not isinstance(a, dict) or not isinstance(b, dict):
                continue
            differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            if differ:
                shown = ", ".join(
                    f"{k} {_short(a.get(k))} -> {_short(b.get(k))}" for k in differ[:6]
                )
                more = f" and {len(differ) - 6} more" if differ[6:] else ""
                warnings.append(
                    f"runs {first.run_id} and {run.run_id} differ in {key}: {shown}{more}"
                )
    return warnings


# Case columns that must agree for a case id to mean the same case in two runs.
_CASE_SHAPE = (
    "tokens_per_rank",
    "capacity_rows",
    "local_experts",
    "hidden",
    "intermediate",
    "top_k",
    "precision",
    "activation",
    "routing",
)


def _case_shapes(run: Run) -> dict[str, dict[str, Any]]:
    """case_id -> the shape columns its rows record (from samples, else routing)."""
    out: dict[str, dict[str, Any]] = {}
    for table in (run.samples, run.routing):
        if table.num_rows == 0:
            continue
        cols = ["case_id", *(c for c in _CASE_SHAPE if c in table.column_names)]
        for row in table.select(cols).group_by(cols).aggregate([]).to_pylist():
            shape = out.setdefault(row.pop("case_id"), {})
            for k, v in row.items():
                shape.setdefault(k, v)
    return out


def _scenario_sha(run: Run) -> str | None:
    scenario = run.manifest.get("scenario")
    return scenario.get("sha256") if isinstance(scenario, dict) else None


def _belonging(runs: list[Run], force: bool) -> list[str]:
    """Warnings for runs that differ; MoebenchError (unless ``force``) for runs whose table would
    mislead: no case in common, or one case id naming different shapes."""
    warnings = []
    for run in runs:
        status = run.manifest.get("status")
        if status not in (None, "complete", "mismatch", "errors"):
            listed = run.manifest.get("cases")
            of = f" of {len(listed)}" if isinstance(listed, list) else ""
            warnings.append(
                f"run {run.run_id} did not finish (status {status}): "
                f"{len(run.manifest['finished_cases'])}{of} case(s) finished"
            )
    if len(runs) < 2:
        return warnings
    refusals = []
    first = runs[0]
    cases = {r.run_id: set(r.manifest["finished_cases"]) for r in runs}
    shared = set.intersection(*cases.values())
    if not shared:
        refusals.append(
            f"runs {', '.join(cases)} share no case, so no row of one has a counterpart in another"
        )
    for run in runs[1:]:
        only = sorted(cases[first.run_id] ^ cases[run.run_id])
        if only and shared:
            shown = ", ".join(only[:5]) + (" ..." if only[5:] else "")
            warnings.append(
                f"runs {first.run_id} and {run.run_id} do not have the same cases: "
                f"{shown} only in one of them"
            )
        sha = _scenario_sha(first), _scenario_sha(run)
        if sha[0] != sha[1]:
            warnings.append(
                f"runs {first.run_id} and {run.run_id} come from different scenarios "
                f"(sha256 {_short(sha[0])} vs {_short(sha[1])})"
            )
        a_shapes, b_shapes = _case_shapes(first), _case_shapes(run)
        for case in sorted(shared):
            a, b = a_shapes.get(case, {}), b_shapes.get(case, {})
            differ = [k for k in _CASE_SHAPE if k in a and k in b and a[k] != b[k]]
            if differ:
                k = differ[0]
                refusals.append(
                    f"case {case} is not the same case in runs {first.run_id} and "
                    f"{run.run_id} ({k} {a[k]} vs {b[k]})"
                )
                break
    arms = {r.run_id: _distinct(r.samples["arm"]) | _distinct(r.checks["arm"]) for r in runs}
    every = set.intersection(*arms.values())
    for run_id, have in arms.items():
        extra = sorted(have - every)
        if extra:
            warnings.append(f"arm(s) {', '.join(extra)} only in some runs (e.g. {run_id})")
    if refusals and not force:
        raise MoebenchError(
            f"these runs do not belong in one table: {refusals[0]} "
            "(pass --force to put them side by side anyway)"
        )
    return [f"forced: {r}" for r in refusals] + warnings


def _empty_row(**kw: Any) -> CompareRow:
    base = dict(
        decision="", reason="", device="", median_us=_NAN, rank_min_us=_NAN,
        rank_median_us=_NAN, rank_max_us=_NAN, slowest_rank=None, n_ranks=None, n_blocks=None,
        n_samples=None, n_paired_blocks=0, change_pct=_NAN, ci_low_pct=_NAN, ci_high_pct=_NAN,
    )  # fmt: skip
    return CompareRow(**(base | kw))


def compare_runs(
    runs: list[Run],
    *,
    baseline: str = "stock",
    threshold_pct: float = 2.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    force: bool = False,
) -> Comparison:
    """Compare every arm against ``baseline`` inside each run; see the module docstring.
    ``force`` turns the refusal of runs that do not belong together into a warning."""
    if not runs:
        raise MoebenchError("compare needs at least one run")
    if not (threshold_pct >= 0 and 0 < confidence < 1 and resamples >= 100):
        raise MoebenchError(
            f"bad compare settings: threshold {threshold_pct}% (>= 0), confidence {confidence} "
            f"(0..1), resamples {resamples} (>= 100)"
        )
    run_ids = [r.run_id for r in runs]
    dupes = sorted({r for r in run_ids if run_ids.count(r) > 1})
    if dupes:
        raise MoebenchError(f"run {dupes[0]} given more than once")

    warnings = _belonging(runs, force) + _provenance_warnings(runs)
    samples = pa.concat_tables([r.samples for r in runs])
    checks = pa.concat_tables([r.checks for r in runs])
    arms_seen = _distinct(samples["arm"]) | _distinct(checks["arm"])
    if baseline not in arms_seen:
        arms = ", ".join(sorted(arms_seen)) or "none"
        raise MoebenchError(f"baseline arm {baseline!r} is in none of the runs (arms: {arms})")

    groups = _timing_groups(samples, warnings)
    status = _check_status(checks)
    rows = []
    missing_base = []
    unchecked: set[str] = set()
    for key in sorted(groups, key=_sort_key):
        run_id, case_id, regime, stage, arm = key
        g = groups[key]
        st, why = status.get((run_id, case_id, arm), ("unchecked", "no correctness checks"))
        ident = dict(run_id=run_id, case_id=case_id, regime=regime, stage=stage, arm=arm)
        if st == "mismatch":
            rows.append(_empty_row(**ident, status=st, reason=why, baseline=baseline,
                                   device=g.device))  # fmt: skip
            continue
        if st == "unchecked":
            unchecked.add(f"{run_id}/{case_id} arm {arm}")
        ranks = np.array(list(g.rank_medians.values()))
        slowest = max(g.rank_medians, key=g.rank_medians.get)
        crit = np.array(list(g.critical.values()))
        if g.incomplete_blocks:
            warnings.append(
                f"{run_id}/{case_id} {regime}/{stage} arm {arm}: {g.incomplete_blocks} block(s) "
                "miss some rank and are left out of the critical path"
            )
        timing = dict(
            device=g.device, n_samples=g.n_samples, n_ranks=len(ranks), n_blocks=len(crit),
            median_us=float(np.median(crit)) if len(crit) else _NAN,
            rank_min_us=float(ranks.min()), rank_median_us=float(np.median(ranks)),
            rank_max_us=float(ranks.max()), slowest_rank=int(slowest),
        )  # fmt: skip
        change = _change(g, groups.get((run_id, case_id, regime, stage, baseline)), arm, baseline,
                         status.get((run_id, case_id, baseline), ("unchecked", "")),
                         threshold_pct, confidence, resamples, seed)  # fmt: skip
        if change.get("reason", "").startswith("no baseline"):
            missing_base.append(f"{run_id}/{case_id} {regime}/{stage}")
        rows.append(_empty_row(**ident, status=st, baseline=baseline, **timing, **change))

    # Mismatched arms that were never timed still get a row: the failure must be visible.
    timed = {(k[0], k[1], k[4]) for k in groups}
    for (run_id, case_id, arm), (st, why) in sorted(status.items()):
        if st == "mismatch" and (run_id, case_id, arm) not in timed:
            rows.append(_empty_row(run_id=run_id, case_id=case_id, regime="", stage="", arm=arm,
                                   status=st, reason=why, baseline=baseline))  # fmt: skip
    rows.sort(key=lambda r: _sort_key((r.run_id, r.case_id, r.regime, r.stage, r.arm)))
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
    if missing_base:
        shown = ", ".join(missing_base[:5]) + (" ..." if missing_base[5:] else "")
        warnings.append(
            f"baseline arm {baseline!r} has no samples in {len(missing_base)} "
            f"(case, stage) group(s): {shown}"
        )
    devices = tuple(sorted(_distinct(samples["device"])))
    if len(devices) > 1:
        warnings.append("runs mix CPU and GPU timings; never compare figures across devices")
    return Comparison(
        rows=rows, warnings=warnings, baseline=baseline, threshold_pct=threshold_pct,
        confidence=confidence, resamples=resamples, devices=devices, run_ids=tuple(run_ids),
    )  # fmt: skip


def _sort_key(key: tuple) -> tuple:
    run_id, case_id, regime, stage, arm = key
    return (run_id, case_id, regime != "ffn", _STAGE_ORDER.get(stage, 99), stage, arm)


def _change(
    g: _Group,
    base: _Group | None,
    arm: str,
    baseline: str,
    base_status: tuple[str, str],
    threshold: float,
    confidence: float,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    if arm == baseline:
        return {"decision": "baseline"}
    if base_status[0] == "mismatch":
        return {"reason": f"baseline {baseline!r} failed its checks: {base_status[1]}"}
    if base is None:
        return {"reason": f"no baseline {baseline!r} samples for this case and stage"}
    blocks = sorted(g.critical.keys() & base.critical.keys())
    n = len(blocks)
    if n < 2:
        return {
            "decision": "AMBIGUOUS",
            "n_paired_blocks": n,
            "reason": f"{n} block(s) paired with the baseline; need at least 2",
        }
    c_arm = np.array([g.critical[b] for b in blocks])
    c_base = np.array([base.critical[b] for b in blocks])
    point = (np.median(c_arm) / np.median(c_base) - 1) * 100
    low, high = _bootstrap_ratio(c_arm, c_base, resamples, seed, 1 - confidence)
    low, high = low * 100, high * 100
    decision, reason = _decide(point, low, high, threshold)
    if n < max(len(g.critical), len(base.critical)):
        paired = f"paired on {n} of {max(len(g.critical), len(base.critical))} blocks"
        reason = f"{reason}; {paired}" if reason else paired
    return {
        "decision": decision,
        "reason": reason,
        "n_paired_blocks": n,
        "change_pct": float(point),
        "ci_low_pct": low,
        "ci_high_pct": high,
    }


# ---------------------------------------------------------------------------------------------
# Rendering


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
    return f"{row.change_pct:+.1f}% [{row.ci_low_pct:+.1f}, {row.ci_high_pct:+.1f}]"


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
    ("rank min / med / max us", True), ("slowest rank", True), ("ranks / blocks / samples", True),
    ("change [CI]", True), ("note", False),
)  # fmt: skip
_FOLDABLE = {"run", "case", "stage", "arm", "note"}
_FOLD_MIN = 8


def _result(r: CompareRow) -> str:
    if r.status == "ok":
        return r.decision
    return f"{r.decision} ({r.status})" if r.decision else r.status


def _display_rows(comp: Comparison) -> tuple[list[tuple[str, bool]], list[list[str]]]:
    columns = list(_COLUMNS)
    multi = len(comp.run_ids) > 1
    if multi:
        columns.insert(0, ("run", False))
    body = []
    for r in comp.rows:
        stage = r.stage if r.regime in ("ffn", "") else f"{r.regime}/{r.stage}"
        counts = " / ".join(_count(n) for n in (r.n_ranks, r.n_blocks, r.n_samples))
        cells = [r.case_id, stage, r.arm, _result(r), fmt_us(r.median_us), _spread(r),
                 _count(r.slowest_rank), "" if r.n_ranks is None else counts, fmt_change(r),
                 r.reason]  # fmt: skip
        body.append(([r.run_id] if multi else []) + cells)
    return columns, body


def render(comparison: Comparison, fmt: str, *, width: int | None = None) -> str:
    """Render as ``table`` (plain text via rich), ``markdown``, ``csv`` or ``json``.

    ``table`` is for a terminal: ``width`` defaults to the width rich detects for stdout (cells
    wrap at spaces, nothing is truncated; write the text as is, a second console must not
    re-wrap it) and warnings are left to the caller, who prints
    ``comparison.warnings`` (the CLI, on stderr). ``markdown`` and ``json`` are documents and carry
    the title and the warnings; ``csv`` is the rows only, NaN as an empty cell.
    """
    if fmt == "table":
        if width is None:
            from rich.console import Console

            width = Console().width  # what a rich console on stdout would use (80 when piped)
        return _render_table(comparison, width)
    if fmt == "markdown":
        return _render_markdown(comparison)
    if fmt == "csv":
        return _render_csv(comparison)
    if fmt == "json":
        return _render_json(comparison)
    raise MoebenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


CRITICAL_PATH_NOTE = (
    "median us: median over blocks of the critical path (per block, the slowest rank's median). "
    "rank min / med / max: spread of the per-rank medians."
)


def _fit_widths(columns: list, body: list[list[str]], available: int) -> list[int] | None:
    """Column widths that fit ``available``: start from each column's natural width and narrow
    the one with the most slack. A figure column never gets narrower than its longest word, a
    text column than 8 characters (or its natural width). None when nothing fits."""
    texts = [[name, *(cells[i] for cells in body)] for i, (name, _) in enumerate(columns)]
    widths = [max(len(t) for t in col) for col in texts]
    floor = [
        min(w, _FOLD_MIN) if name in _FOLDABLE else max(len(x) for t in col for x in t.split())
        for (name, _), col, w in zip(columns, texts, widths, strict=True)
    ]
    # Wrap figures at their spaces first; fold identifiers only when that is not enough.
    for phase in (False, True):
        movable = [i for i, (name, _) in enumerate(columns) if (name in _FOLDABLE) == phase]
        while sum(widths) > available:
            slack, i = max((widths[i] - floor[i], i) for i in movable)
            if slack <= 0:
                break
            widths[i] -= 1
    return widths if sum(widths) <= available else None


def _render_table(comp: Comparison, width: int) -> str:
    """Title and legend as wrapped text, then the table; notes become numbered footnotes.

    Each column is at least as wide as its longest word, so cells wrap only at spaces: no number
    is ever split or cut to an ellipsis. When even that does not fit ``width``, each row is
    printed as a block of ``name: value`` lines instead of a table.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    columns, body = _display_rows(comp)
    notes: dict[str, int] = {}
    for cells in body:
        note = cells[-1]
        cells[-1] = f"[{notes.setdefault(note, len(notes) + 1)}]" if note else ""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    say = lambda text: console.print(text, markup=False, highlight=False, overflow="fold")
    say(comp.title)
    say(CRITICAL_PATH_NOTE)
    widths = _fit_widths(columns, body, width - 2 * len(columns))  # 2: padding per column
    if widths is not None:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for (name, right), w in zip(columns, widths, strict=True):
            table.add_column(name, justify="right" if right else "left", width=w, overflow="fold")
        for cells in body:
            table.add_row(*cells)
        console.print(table)
    else:
        key_width = max(len(name) for name, _ in columns)
        for cells in body:
            say("")
            for (name, _), cell in zip(columns, cells, strict=True):
                if cell:
                    say(f"{name:>{key_width}}: {cell}")
    if notes:
        say("")
    for note, n in notes.items():
        say(f"[{n}] {note}")
    return console.file.getvalue()


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _render_markdown(comp: Comparison) -> str:
    columns, body = _display_rows(comp)
    header = [name for name, _ in columns]
    lines = [f"**{_md_cell(comp.title)}**", "", _md_cell(CRITICAL_PATH_NOTE), ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in cells) + " |" for cells in body]
    if comp.warnings:
        lines += ["", *(f"- warning: {_md_cell(w)}" for w in comp.warnings)]
    return "\n".join(lines) + "\n"


def _plain(row: CompareRow) -> dict[str, Any]:
    """Row as a dict with NaN and None as None (JSON null, empty CSV cell)."""
    out = asdict(row)
    for k, v in out.items():
        if isinstance(v, float) and math.isnan(v):
            out[k] = None
    return out


def _render_csv(comp: Comparison) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[f.name for f in fields(CompareRow)])
    writer.writeheader()
    for row in comp.rows:
        writer.writerow({k: "" if v is None else v for k, v in _plain(row).items()})
    return buf.getvalue()


def _render_json(comp: Comparison) -> str:
    doc = {
        "title": comp.title,
        "baseline": comp.baseline,
        "threshold_pct": comp.threshold_pct,
        "confidence": comp.confidence,
        "resamples": comp.resamples,
        "devices": list(comp.devices),
        "run_ids": list(comp.run_ids),
        "warnings": comp.warnings,
        "rows": [_plain(r) for r in comp.rows],
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
