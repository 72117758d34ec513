"""Rendering a before/after comparison (``analysis.against``) as a table, markdown, csv or json."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math

from moebench.analysis.against import Against, AgainstRow
from moebench.report.sections import fmt_us

HEADER = ("case", "stage", "mode", "arm", "base us", "new us", "change [CI]", "result", "blocks")


def title(a: Against) -> str:
    corrected = (
        f"Bonferroni-corrected for {a.comparisons} cells (each {a.cell_confidence * 100:.4g}%)"
        if a.comparisons > 1
        else "one cell"
    )
    need = f"; >= {a.blocks_needed} blocks per run needed" if a.blocks_needed else ""
    return (
        f"moebench compare against baseline run {a.base_run}: {a.confidence * 100:g}% CIs "
        f"{corrected}, unpaired (the runs were not interleaved: whatever drifted between them "
        f"stays in the interval){need}; SAME within +-{a.threshold_pct:g}%"
    )


def _change(r: AgainstRow) -> str:
    if math.isnan(r.change_pct):
        return ""
    if math.isnan(r.ci_low_pct):
        return f"{r.change_pct:+.1f}%"
    return f"{r.change_pct:+.1f}% [{r.ci_low_pct:+.1f}, {r.ci_high_pct:+.1f}]"


def _cells(r: AgainstRow, multi: bool) -> list[str]:
    stage = r.stage if r.regime == r.stage else f"{r.regime}/{r.stage}"
    case = f"{r.run_id} {r.case_id}" if multi else r.case_id
    return [case, stage, r.mode, r.arm, fmt_us(r.base_us), fmt_us(r.new_us), _change(r),
            r.decision, f"{r.n_new} vs {r.n_base}"]  # fmt: skip


def render_against(a: Against, fmt: str) -> str:
    multi = len({r.run_id for r in a.rows}) > 1
    body = [_cells(r, multi) for r in a.rows]
    reasons = [r.reason for r in a.rows]
    if fmt == "json":
        doc = {"title": title(a), **{k: v for k, v in dataclasses.asdict(a).items() if k != "rows"},
               "rows": [_plain(dataclasses.asdict(r)) for r in a.rows]}  # fmt: skip
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        w = csv.writer(out)
        fields = [f.name for f in dataclasses.fields(AgainstRow)]
        w.writerow(fields)
        for r in a.rows:
            w.writerow(["" if isinstance(v, float) and math.isnan(v) else v
                        for v in (getattr(r, f) for f in fields)])  # fmt: skip
        return out.getvalue()
    lines = [title(a), ""]
    if fmt == "markdown":
        lines = [f"# {title(a)}", ""]
        lines.append("| " + " | ".join((*HEADER, "note")) + " |")
        lines.append("|" + "---|" * (len(HEADER) + 1))
        for row, why in zip(body, reasons, strict=True):
            lines.append("| " + " | ".join((*row, why)) + " |")
    else:
        widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(HEADER)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True)))
        for row, why in zip(body, reasons, strict=True):
            text = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
            lines.append(f"{text}  {why}".rstrip())
    for w in a.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"


def _plain(d: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
