"""Whether runs belong in one comparison table, and what differs between them.

``belonging`` refuses (unless forced) runs that would mislead side by side: no case in common,
or one case id naming different shapes; it warns for unfinished runs, cases or arms present in
only some runs and runs from different scenarios. ``provenance_warnings`` names the sources and
environment entries (docs/DESIGN.md section 8) in which two runs differ.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from moebench.core.errors import MoebenchError
from moebench.results.reader import Run


def distinct(column: pa.ChunkedArray) -> set:
    """The distinct values of a column."""
    return set(pc.unique(column).to_pylist())


def _short(value: Any) -> str:
    """A provenance value in a few characters: hashes cut to 12, dicts by their hash if any."""
    if isinstance(value, dict):
        return _short(value["hash"]) if "hash" in value else "{...}"
    text = "-" if value is None or value == "" else str(value)
    return (
        text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:40]
    )


def provenance_warnings(runs: list[Run]) -> list[str]:
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


def case_shapes(run: Run) -> dict[str, dict[str, Any]]:
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


def belonging(runs: list[Run], force: bool) -> list[str]:
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
        a_shapes, b_shapes = case_shapes(first), case_shapes(run)
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
    arms = {r.run_id: distinct(r.samples["arm"]) | distinct(r.checks["arm"]) for r in runs}
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
