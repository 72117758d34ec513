"""A comparison as text: a terminal table, a Markdown report for a pull request, CSV, JSON.

``table`` and ``markdown`` carry the same sections: the rows, then the A/A control (the false-
positive rate of the procedure on this machine), the noise of each regime (coefficient of
variation of block critical paths) and, when the run profiled, the reconciliation of stage sums
with the FFN time. ``markdown`` adds what a reviewer needs to trust the numbers: the runs with
their machine and versions, the decisions per arm, the plots and the warnings.

One module a format: ``table``, ``markdown`` and ``data`` (CSV and JSON); the text the table
and the report share is in ``sections``. ``render`` is the one entry point.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from moebench.analysis import policy
from moebench.analysis.rows import Comparison
from moebench.core.errors import MoebenchError
from moebench.report.cpu_view import render_cpu
from moebench.report.data import render_csv, render_json
from moebench.report.markdown import render_markdown
from moebench.report.table import render_table

FORMATS = ("table", "markdown", "csv", "json")


def render(
    comparison: Comparison,
    fmt: str,
    *,
    width: int | None = None,
    plots: Sequence[str] = (),
    view: str = "timings",
) -> str:
    """Render as ``table`` (plain text via rich), ``markdown``, ``csv`` or ``json``.

    ``table`` is for a terminal: ``width`` defaults to the width rich detects for stdout (cells
    wrap at spaces, nothing is truncated; write the text as is, a second console must not
    re-wrap it) and warnings are left to the caller, who prints
    ``comparison.warnings`` (the CLI, on stderr). ``markdown`` and ``json`` are documents and carry
    the title, the warnings and the names of ``plots`` (written by
    ``moebench.report.plots``); ``csv`` is
    the rows only, NaN as an empty cell.

    ``view``: ``timings`` (the rows, as above), ``cpu`` (gates and work ledger, no timings:
    ``report.cpu_view``), ``auto`` (``cpu`` when every run is a CPU run, else ``timings``) or
    ``cpu-timings`` (the rows of a CPU run without verdicts: interpreter timings decide nothing).
    """
    cpu_only = comparison.devices == ("cpu",)
    if view == "auto":
        view = "cpu" if cpu_only else "timings"
    if view == "cpu" and fmt in ("table", "markdown"):
        return render_cpu(comparison, markdown=fmt == "markdown", plots=plots)
    if view == "cpu-timings" or (view == "cpu" and cpu_only):
        comparison = without_verdicts(comparison)
    if fmt == "table":
        if width is None:
            from rich.console import Console

            width = Console().width  # what a rich console on stdout would use (80 when piped)
        return render_table(comparison, width)
    if fmt == "markdown":
        return render_markdown(comparison, plots)
    if fmt == "csv":
        return render_csv(comparison)
    if fmt == "json":
        return render_json(comparison, plots)
    raise MoebenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def without_verdicts(comp: Comparison) -> Comparison:
    """The comparison with every decision and interval blanked (CPU timings decide nothing):
    the rows', the model step's and the model regime's changes, the goodput ratio's verdict and
    the policy built on them; the figures stay."""
    reason = "CPU timing (Triton interpreter): no verdict"
    rows = [
        r if r.decision == "baseline" or r.status == "mismatch" else dataclasses.replace(
            r, decision="", change_pct=math.nan, ci_low_pct=math.nan, ci_high_pct=math.nan,
            reason=reason)
        for r in comp.rows
    ]  # fmt: skip
    step = comp.step.without_verdicts(reason) if comp.step is not None else None
    model = comp.model.without_verdicts(reason) if comp.model is not None else None
    return dataclasses.replace(comp, rows=rows, step=step, model=model,
                               policy=policy.without_verdicts(comp.policy, reason))  # fmt: skip
