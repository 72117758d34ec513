"""A comparison as data: CSV (the rows only) and JSON (the rows and every summary).

Undefined figures (NaN) become JSON null and empty CSV cells; the JSON document also carries the
title, the warnings, the names of the plots, the work model, the step regime's summary (``step``:
percentiles, imbalance tax, TPOT share and goodput, derived figures marked ``derived``), the
model regime's (``model``: measured TTFT, TPOT percentiles, floor, non-MoE time, goodput, the
policy over batch sizes) and the ``policy``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from moebench.analysis.rows import CompareRow, Comparison
from moebench.analysis.workmodel import WorkModel
from moebench.report.sections import title


def _plain(value: Any) -> Any:
    """A dataclass as a JSON tree with NaN as None (JSON null, empty CSV cell)."""
    out = asdict(value) if hasattr(value, "__dataclass_fields__") else value
    if isinstance(out, dict):
        return {k: _plain(v) for k, v in out.items()}
    if isinstance(out, list | tuple):
        return [_plain(v) for v in out]
    if isinstance(out, float) and math.isnan(out):
        return None
    return out


def render_csv(comp: Comparison) -> str:
    """The rows, one a cell, with each swept key of the case in a column of its own."""
    swept: dict[tuple[str, str], dict] = {}
    for key, info in comp.cases.items():
        try:
            swept[key] = {f"sweep.{k}": v for k, v in json.loads(info.params or "{}").items()}
        except ValueError:
            swept[key] = {}
    sweep_cols = sorted({k for values in swept.values() for k in values})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[f.name for f in fields(CompareRow)] + sweep_cols)
    writer.writeheader()
    for row in comp.rows:
        values = {k: "" if v is None else v for k, v in _plain(row).items()}
        values |= {k: "" for k in sweep_cols} | swept.get((row.run_id, row.case_id), {})
        writer.writerow(values)
    return buf.getvalue()


def render_json(comp: Comparison, plots: Sequence[str]) -> str:
    aa = comp.aa
    doc = {
        "title": title(comp),
        "baseline": comp.baseline,
        "threshold_pct": comp.threshold_pct,
        "confidence": comp.confidence,
        "correction": comp.correction,
        "comparisons": comp.comparisons,
        "cell_confidence": comp.cell_confidence,
        "blocks_needed": comp.blocks_needed,
        "devices": list(comp.devices),
        "run_ids": list(comp.run_ids),
        "runs": _plain(list(comp.runs)),
        "warnings": comp.warnings,
        "aa": None if aa is None else {
            k: v for k, v in _plain(aa).items() if k != "rows"
        } | {"rate": _plain(aa.rate), "fp_rate": _plain(aa.fp_rate), "cells_not_same": [
            f"{r.run_id}/{r.case_id} {r.regime}/{r.stage} {r.arm}" for r in aa.rows
            if r.decision != "SAME"
        ]},
        "integrity": list(comp.integrity),
        "noise": _plain(comp.noise()),
        "reconciliation": [_plain(r) | {"ratio": r.ratio} for r in comp.reconciliation()],
        "distributed": _plain(list(comp.passes)),
        "plots": list(plots),
        "workmodel": _workmodel_json(comp.workmodel) if comp.workmodel is not None else None,
        "step": comp.step.as_dict() if comp.step is not None else None,
        "model": comp.model.as_dict() if comp.model is not None else None,
        "policy": [p.as_dict() for p in comp.policy],
        "rows": [_plain(r) for r in comp.rows],
    }  # fmt: skip
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _workmodel_json(wm: WorkModel) -> dict:
    return {
        # each bandwidth row carries the ceiling its fraction is of (its run's GPU's; null: none)
        "bandwidth": _plain(wm.bandwidth),
        "crossover": _plain(wm.crossover),
    }
