"""A comparison as text: a terminal table, a Markdown report for a pull request, CSV, JSON.

``table`` and ``markdown`` carry the same sections: the rows, then the A/A control (the false-
positive rate of the procedure on this machine), the noise of each regime (coefficient of
variation of block critical paths) and, when the run profiled, the reconciliation of stage sums
with the FFN time. ``markdown`` adds what a reviewer needs to trust the numbers: the runs with
their machine and versions, the decisions per arm, the plots and the warnings.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from moebench.analysis import critical, workmodel
from moebench.analysis.compare import CompareRow, Comparison
from moebench.core.errors import MoebenchError

FORMATS = ("table", "markdown", "csv", "json")


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


def fmt_pct(x: float, digits: int = 2) -> str:
    return "" if math.isnan(x) else f"{x:.{digits}f}%"


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
    ("cv %", True), ("rank min / med / max us", True), ("slowest rank", True),
    ("ranks / blocks / samples", True), ("change [CI]", True), ("note", False),
)  # fmt: skip
_FOLDABLE = {"run", "case", "stage", "mode", "arm", "note", "series", "arm vs baseline"}
_FOLD_MIN = 8


def _result(r: CompareRow) -> str:
    if r.status == "ok":
        return r.decision
    return f"{r.decision} ({r.status})" if r.decision else r.status


def _display_rows(comp: Comparison) -> tuple[list[tuple[str, bool]], list[list[str]]]:
    columns = list(_COLUMNS)
    multi = len(comp.run_ids) > 1
    modes = any(r.mode for r in comp.rows)
    if modes:
        columns.insert(2, ("mode", False))
    if multi:
        columns.insert(0, ("run", False))
    body = []
    for r in comp.rows:
        stage = r.stage if r.regime in ("ffn", "") else f"{r.regime}/{r.stage}"
        counts = " / ".join(_count(n) for n in (r.n_ranks, r.n_blocks, r.n_samples))
        cells = [r.case_id, stage, r.arm, _result(r), fmt_us(r.median_us),
                 "" if math.isnan(r.cv_pct) else f"{r.cv_pct:.2f}", _spread(r),
                 _count(r.slowest_rank), "" if r.n_ranks is None else counts, fmt_change(r),
                 r.reason]  # fmt: skip
        if modes:
            cells.insert(2, r.mode)
        body.append(([r.run_id] if multi else []) + cells)
    return columns, body


def render(
    comparison: Comparison, fmt: str, *, width: int | None = None, plots: Sequence[str] = ()
) -> str:
    """Render as ``table`` (plain text via rich), ``markdown``, ``csv`` or ``json``.

    ``table`` is for a terminal: ``width`` defaults to the width rich detects for stdout (cells
    wrap at spaces, nothing is truncated; write the text as is, a second console must not
    re-wrap it) and warnings are left to the caller, who prints
    ``comparison.warnings`` (the CLI, on stderr). ``markdown`` and ``json`` are documents and carry
    the title, the warnings and the names of ``plots`` (written by ``moebench.plots``); ``csv`` is
    the rows only, NaN as an empty cell.
    """
    if fmt == "table":
        if width is None:
            from rich.console import Console

            width = Console().width  # what a rich console on stdout would use (80 when piped)
        return _render_table(comparison, width)
    if fmt == "markdown":
        return _render_markdown(comparison, plots)
    if fmt == "csv":
        return _render_csv(comparison)
    if fmt == "json":
        return _render_json(comparison, plots)
    raise MoebenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


CRITICAL_PATH_NOTE = (
    "median us: median over blocks of the critical path (per block, the slowest rank's median). "
    "cv %: coefficient of variation of those block values (the cell's noise). "
    "rank min / med / max: spread of the per-rank medians."
)


# ---------------------------------------------------------------------------------------------
# Sections shared by the table and the report


def aa_lines(comp: Comparison) -> list[str]:
    aa = comp.aa
    if aa is None:
        return ["A/A control: none in these runs (run --aa measures the false-positive rate)"]
    pairs = sorted({f"{r.arm} vs {r.baseline}" for r in aa.rows})
    verdict = (
        "every cell SAME"
        if not aa.not_same
        else (f"{aa.false_positives} FASTER/SLOWER, {aa.ambiguous} AMBIGUOUS")
    )
    return [
        f"A/A control ({', '.join(pairs)}): false-positive rate {aa.not_same} of {aa.cells} "
        f"cell(s) not SAME = {aa.rate * 100:.1f}% ({verdict}); largest |change| "
        f"{aa.max_abs_change_pct:.2f}%, widest CI +-{aa.max_half_width_pct:.2f}%"
    ]


def noise_lines(comp: Comparison) -> list[str]:
    lines = []
    multi = len(comp.run_ids) > 1
    for n in comp.noise():
        where = (f"{n.run_id} " if multi else "") + n.regime + (f" [{n.mode}]" if n.mode else "")
        goal = ""
        if not math.isnan(n.goal_pct):
            met = "met" if not n.over_goal else f"{n.over_goal} cell(s) over"
            goal = f"; goal under {n.goal_pct:g}%: {met}"
        lines.append(
            f"noise {where}: cv of block critical paths median {n.median_cv_pct:.2f}%, max "
            f"{n.max_cv_pct:.2f}% ({n.worst}) over {n.cells} cell(s){goal}"
        )
    return lines


def _per_rank(values: list[float]) -> str:
    return " / ".join(fmt_us(v) or "-" for v in values)


def pass_lines(comp: Comparison) -> list[str]:
    """Distributed runs: per (case, arm) the critical path per pass, the straggler and each
    rank's stages (moebench/critical.py)."""
    multi = len(comp.run_ids) > 1
    return [
        f"distributed {f'{p.run_id} ' if multi else ''}{p.case_id}"
        f"{f' [{p.mode}]' if p.mode else ''} {p.arm}: critical path per pass (max over "
        f"{p.ranks} ranks of layer) median {fmt_us(p.critical_median_us)} us, min "
        f"{fmt_us(p.critical_min_us)}, max {fmt_us(p.critical_max_us)} over {p.passes} passes; "
        f"straggler rank {p.straggler_rank} ({p.straggler_passes} of {p.passes} passes); "
        f"per rank ({' / '.join(str(r) for r in range(p.ranks))}) median us: "
        + ", ".join(f"{stage} {_per_rank(v)}" for stage, v in p.rank_medians.items())
        for p in comp.passes
    ]


def reconciliation_lines(comp: Comparison) -> list[str]:
    return [
        f"profile {r.case_id}{f' [{r.mode}]' if r.mode else ''} {r.arm}: stage sum "
        f"{fmt_us(r.stage_sum_us)} us / ffn {fmt_us(r.ffn_us)} us = {r.ratio:.3f}"
        for r in comp.reconciliation()
    ]


# ---------------------------------------------------------------------------------------------
# Terminal table


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
        while movable and sum(widths) > available:
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
    say("")
    for line in aa_lines(comp) + noise_lines(comp) + reconciliation_lines(comp) + pass_lines(comp):
        say(line)
    for title, note, header, cells in _workmodel_sections(comp):
        say("")
        say(f"{title}: {note}")
        _print_cells(console, [(h, False) for h in header], cells, width)
    return console.file.getvalue()


def _workmodel_sections(comp: Comparison) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of the work-model sections that have rows."""
    wm = comp.workmodel
    if not wm:
        return []
    multi = len(comp.run_ids) > 1
    lead = ["run"] if multi else []
    sections = []
    if wm.bandwidth:
        sections.append(("Weight bandwidth", workmodel.BANDWIDTH_NOTE,
                         lead + list(workmodel.BANDWIDTH_HEADER),
                         workmodel.bandwidth_cells(wm, multi)))  # fmt: skip
    if wm.crossover:
        sections.append(("Crossover", workmodel.CROSSOVER_NOTE,
                         lead + list(workmodel.CROSSOVER_HEADER),
                         workmodel.crossover_cells(wm, multi)))  # fmt: skip
    return sections


def _print_cells(console, columns: list[tuple[str, bool]], body: list[list[str]], width: int):
    """A plain table that wraps only at spaces, or name: value blocks when even that is too wide."""
    from rich import box
    from rich.table import Table

    widths = _fit_widths(columns, body, width - 2 * len(columns))
    if widths is None:
        key_width = max(len(name) for name, _ in columns)
        for cells in body:
            console.print("", markup=False)
            for (name, _), cell in zip(columns, cells, strict=True):
                if cell:
                    console.print(f"{name:>{key_width}}: {cell}", markup=False, highlight=False,
                                  overflow="fold")  # fmt: skip
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for (name, right), w in zip(columns, widths, strict=True):
        table.add_column(name, justify="right" if right else "left", width=w, overflow="fold")
    for cells in body:
        table.add_row(*cells)
    console.print(table)


# ---------------------------------------------------------------------------------------------
# Markdown report


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], body: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(_md_cell(c) for c in cells) + " |" for cells in body]


def _machine(env: dict, device: str) -> str:
    if device == "cuda" or env.get("gpu_name"):
        count = env.get("gpu_count") or 1
        return f"GPU: {env.get('gpu_name') or 'unknown'} x{count}"
    return "CPU (Triton interpreter)"


def _decision_lines(comp: Comparison) -> list[str]:
    per_arm: dict[str, Counter] = {}
    for r in comp.rows:
        if r.is_aa or r.decision == "baseline":
            continue
        label = r.decision or (r.status if r.status == "mismatch" else "no comparison")
        per_arm.setdefault(r.arm, Counter())[label] += 1
    order = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS", "mismatch", "no comparison")
    lines = []
    for arm, counts in sorted(per_arm.items()):
        total = sum(counts.values())
        parts = ", ".join(f"{k} {counts[k]}" for k in order if counts[k])
        lines.append(f"- `{arm}` against `{comp.baseline}` over {total} cell(s): {parts}")
    regressions = comp.regressions(0)
    lines.append(
        "- significant regressions: "
        + (
            ", ".join(f"{r.case_id} {r.stage} {r.arm} {fmt_change(r)}" for r in regressions)
            or "none"
        )  # fmt: skip
    )
    mismatches = comp.mismatches()
    lines.append(
        "- arms that failed a correctness gate (not timed or not trusted): "
        + (", ".join(sorted({f"{r.case_id} {r.arm}" for r in mismatches})) or "none")
    )
    return lines


def _render_markdown(comp: Comparison, plots: Sequence[str]) -> str:
    scenarios = ", ".join(sorted({r.scenario for r in comp.runs if r.scenario})) or "runs"
    machines = sorted({_machine(r.environment, r.device) for r in comp.runs})
    lines = [f"# moebench: {scenarios} on {', '.join(machines) or 'unknown machine'}", ""]
    lines += [f"**{_md_cell(comp.title)}**", ""]

    lines += ["## Runs", ""]
    env_keys = ("torch", "triton", "cuda", "driver", "python", "moebench")
    header = ["run", "scenario", "status", "machine", *env_keys, "commit"]
    body = []
    for r in comp.runs:
        env = r.environment
        commit = str(env.get("commit") or "")[:12] + (" (dirty)" if env.get("dirty") else "")
        body.append([r.run_id, r.scenario, r.status, _machine(env, r.device),
                     *(env.get(k) or "" for k in env_keys), commit])  # fmt: skip
    lines += [*_md_table(header, body), ""]

    lines += ["## Decisions", "", *_decision_lines(comp), ""]

    columns, rows = _display_rows(comp)
    lines += ["## Results", "", _md_cell(CRITICAL_PATH_NOTE), ""]
    lines += [*_md_table([name for name, _ in columns], rows), ""]

    lines += ["## Noise", ""]
    lines.append(
        "Coefficient of variation of the block critical paths, per regime: how much one block "
        "differs from the next. The goal for the `ffn` regime is under 1%."
    )
    lines.append("")
    noise = comp.noise()
    multi = len(comp.run_ids) > 1
    modes = any(n.mode for n in noise)
    header = [*(["run"] if multi else []), "regime", *(["mode"] if modes else []), "cells",
              "median cv", "max cv", "noisiest cell", "goal"]  # fmt: skip
    body = [
        [*([n.run_id] if multi else []), n.regime, *([n.mode] if modes else []), n.cells,
         fmt_pct(n.median_cv_pct),
         fmt_pct(n.max_cv_pct), n.worst,
         "" if math.isnan(n.goal_pct)
         else f"under {n.goal_pct:g}%: " + ("met" if not n.over_goal else f"{n.over_goal} over")]
        for n in noise
    ]  # fmt: skip
    lines += [*(_md_table(header, body) if noise else ["No cell has two blocks."]), ""]

    lines += ["## A/A control", "", *aa_lines(comp), ""]
    aa = comp.aa
    if aa is not None:
        cv = {(r.run_id, r.case_id, r.regime, r.stage, r.mode, r.arm): r.cv_pct for r in comp.rows}
        header = [*(["run"] if multi else []), "case", "stage", "arm", "change [CI]", "cv arm",
                  "cv copy", "decision"]  # fmt: skip
        body = []
        for r in aa.rows:
            stage = r.stage if r.regime == "ffn" else f"{r.regime}/{r.stage}"
            twin = cv.get((r.run_id, r.case_id, r.regime, r.stage, r.mode, r.baseline), math.nan)
            body.append([*([r.run_id] if multi else []), r.case_id,
                         stage + (f" [{r.mode}]" if r.mode else ""), r.arm, fmt_change(r),
                         fmt_pct(twin), fmt_pct(r.cv_pct), r.decision])  # fmt: skip
        lines += [*_md_table(header, body), ""]

    for title, note, header, cells in _workmodel_sections(comp):
        lines += [f"## {title}", "", _md_cell(note), "", *_md_table(header, cells), ""]
    if comp.passes:
        lines += ["## Distributed: critical path per pass", ""]
        lines.append(
            "Per pass of the layer (the same block and iteration on every rank): the critical path "
            "is the slowest rank's `layer` time; the straggler is the rank that waited least at "
            "the meeting point before combine (`sync_wait`). Per-rank figures are medians over "
            "passes, ranks in order."
        )
        lines.append("")
        header = [*(["run"] if multi else []), "case", "arm", "passes x ranks",
                  "critical path median [min, max] us", "straggler",
                  *(f"{stage} per rank us" for stage in critical.PASS_STAGES)]  # fmt: skip
        body = [
            [*([p.run_id] if multi else []), p.case_id + (f" [{p.mode}]" if p.mode else ""), p.arm,
             f"{p.passes} x {p.ranks}",
             f"{fmt_us(p.critical_median_us)} [{fmt_us(p.critical_min_us)}, "
             f"{fmt_us(p.critical_max_us)}]",
             f"rank {p.straggler_rank} ({p.straggler_passes} of {p.passes})",
             *(_per_rank(p.rank_medians[stage]) for stage in critical.PASS_STAGES)]
            for p in comp.passes
        ]  # fmt: skip
        lines += [*_md_table(header, body), ""]

    recon = comp.reconciliation()
    if recon:
        lines += ["## Profile reconciliation", ""]
        header = ["case", "mode", "arm", "stages", "stage sum us", "ffn us", "ratio"]
        body = [[r.case_id, r.mode, r.arm, " + ".join(r.stages), fmt_us(r.stage_sum_us),
                 fmt_us(r.ffn_us), f"{r.ratio:.3f}"] for r in recon]  # fmt: skip
        lines += [*_md_table(header, body), ""]

    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{name}]({name})" for name in plots]
        lines.append("")
    if comp.warnings:
        lines += ["## Warnings", "", *(f"- {_md_cell(w)}" for w in comp.warnings), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# CSV and JSON


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


def _render_csv(comp: Comparison) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[f.name for f in fields(CompareRow)])
    writer.writeheader()
    for row in comp.rows:
        writer.writerow({k: "" if v is None else v for k, v in _plain(row).items()})
    return buf.getvalue()


def _render_json(comp: Comparison, plots: Sequence[str]) -> str:
    aa = comp.aa
    doc = {
        "title": comp.title,
        "baseline": comp.baseline,
        "threshold_pct": comp.threshold_pct,
        "confidence": comp.confidence,
        "correction": comp.correction,
        "comparisons": comp.comparisons,
        "cell_confidence": comp.cell_confidence,
        "resamples": comp.resamples,
        "devices": list(comp.devices),
        "run_ids": list(comp.run_ids),
        "runs": _plain(list(comp.runs)),
        "warnings": comp.warnings,
        "aa": None if aa is None else {
            k: v for k, v in _plain(aa).items() if k != "rows"
        } | {"rate": _plain(aa.rate), "cells_not_same": [
            f"{r.run_id}/{r.case_id} {r.regime}/{r.stage} {r.arm}" for r in aa.rows
            if r.decision != "SAME"
        ]},
        "noise": _plain(comp.noise()),
        "reconciliation": [_plain(r) | {"ratio": r.ratio} for r in comp.reconciliation()],
        "distributed": _plain(list(comp.passes)),
        "plots": list(plots),
        "workmodel": workmodel.to_json(comp.workmodel) if comp.workmodel is not None else None,
        "rows": [_plain(r) for r in comp.rows],
    }  # fmt: skip
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
