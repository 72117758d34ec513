"""A comparison as a Markdown report for a pull request.

The same sections as the terminal table (``moebench.report.sections``), and what a reviewer needs
to trust the numbers: the runs with their machine and versions, the decisions per arm, the plots
and the warnings.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moebench.analysis.rows import CompareRow, Comparison
from moebench.analysis.stats import TOO_FEW
from moebench.core.vocabulary import PASS_STAGES, Regime
from moebench.report.model_sections import model_sections
from moebench.report.sections import (
    CRITICAL_PATH_NOTE,
    STEP_ONLY,
    aa_lines,
    display_rows,
    fmt_change,
    fmt_pct,
    fmt_us,
    integrity_lines,
    per_rank,
    step_sections,
    title,
    workmodel_sections,
)


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


def _timed_out(r: CompareRow) -> bool:
    """A row whose case passed its time limit: its status is ``mismatch`` (no figure of it can be
    trusted) but no gate failed, and the report says which it was."""
    return r.status == "mismatch" and any(
        part.startswith("timeout ") for part in r.reason.split("; ")
    )


def _decision_lines(comp: Comparison) -> list[str]:
    per_arm: dict[str, Counter] = {}
    for r in comp.rows:
        if r.is_aa or r.decision == "baseline":
            continue
        label = r.decision or (r.status if r.status == "mismatch" else "no comparison")
        if _timed_out(r):
            label = "timeout"
        per_arm.setdefault(r.arm, Counter())[label] += 1
    order = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS", TOO_FEW, "mismatch", "timeout",
             "no comparison")  # fmt: skip
    lines = []
    for arm, counts in sorted(per_arm.items()):
        total = sum(counts.values())
        parts = ", ".join(f"{k} {counts[k]}" for k in order if counts[k])
        against = "(the baseline)" if arm == comp.baseline else f"against `{comp.baseline}`"
        lines.append(f"- `{arm}` {against} over {total} cell(s): {parts}")
    regressions = comp.regressions(0)
    lines.append(
        "- significant regressions: "
        + (
            ", ".join(f"{r.case_id} {r.stage} {r.arm} {fmt_change(r)}" for r in regressions)
            or "none"
        )  # fmt: skip
    )
    mismatches = [r for r in comp.mismatches() if not _timed_out(r)]
    lines.append(
        "- arms that failed a correctness gate (not timed or not trusted): "
        + (", ".join(sorted({f"{r.case_id} {r.arm}" for r in mismatches})) or "none")
    )
    timeouts = sorted({f"{r.case_id} {r.arm}" for r in comp.rows if _timed_out(r)})
    if timeouts:
        lines.append(
            "- arms whose case passed its time limit (figures not trusted): " + ", ".join(timeouts)
        )
    return lines


def plot_link(path: str | os.PathLike, start: str | os.PathLike | None = None) -> str:
    """Where the report links a plot: a relative path as given, an absolute one relative to
    ``start`` (the current directory by default). The report goes to stdout and people redirect
    it beside the plots, so a link must not carry this machine's absolute folders."""
    path = Path(path)
    if path.is_absolute():
        try:
            path = Path(os.path.relpath(path, Path.cwd() if start is None else start))
        except ValueError:  # another drive (Windows): no relative path exists
            pass
    return path.as_posix()


def _md_image(link: str) -> str:
    """An image whose path may hold spaces or brackets: the target goes in <...>."""
    alt = link.replace("[", "\\[").replace("]", "\\]")
    target = f"<{link}>" if any(c in link for c in " ()<>") else link
    return f"![{alt}]({target})"


def render_markdown(comp: Comparison, plots: Sequence[str]) -> str:
    scenarios = ", ".join(sorted({r.scenario for r in comp.runs if r.scenario})) or "runs"
    machines = sorted({_machine(r.environment, r.device) for r in comp.runs})
    lines = [f"# moebench: {scenarios} on {', '.join(machines) or 'unknown machine'}", ""]
    lines += [f"**{_md_cell(title(comp))}**", ""]

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

    columns, rows = display_rows(comp)
    lines += ["## Results", "", _md_cell(CRITICAL_PATH_NOTE), ""]
    if rows or (comp.step is None and comp.model is None):
        lines += [*_md_table([name for name, _ in columns], rows), ""]
    else:
        lines += [STEP_ONLY, ""]

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

    if comp.integrity:
        lines += ["## Integrity", "", *integrity_lines(comp, heading=False), ""]
    lines += ["## A/A control", "", *aa_lines(comp, heading=False), ""]
    aa = comp.aa
    if aa is not None and aa.rows:
        cv = {(r.run_id, r.case_id, r.regime, r.stage, r.mode, r.arm): r.cv_pct for r in comp.rows}
        header = [*(["run"] if multi else []), "case", "stage", "arm", "change [CI]", "cv arm",
                  "cv copy", "decision"]  # fmt: skip
        body = []
        for r in aa.rows:
            stage = r.stage if r.regime == Regime.FFN else f"{r.regime}/{r.stage}"
            twin = cv.get((r.run_id, r.case_id, r.regime, r.stage, r.mode, r.baseline), math.nan)
            body.append([*([r.run_id] if multi else []), r.case_id,
                         stage + (f" [{r.mode}]" if r.mode else ""), r.arm, fmt_change(r),
                         fmt_pct(twin), fmt_pct(r.cv_pct), r.decision])  # fmt: skip
        lines += [*_md_table(header, body), ""]

    for heading, note, header, cells in (
        workmodel_sections(comp) + step_sections(comp) + model_sections(comp)
    ):
        lines += [f"## {heading}", "", _md_cell(note), "", *_md_table(header, cells), ""]
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
                  *(f"{stage} per rank us" for stage in PASS_STAGES)]  # fmt: skip
        body = [
            [*([p.run_id] if multi else []), p.case_id + (f" [{p.mode}]" if p.mode else ""), p.arm,
             f"{p.passes} x {p.ranks}",
             f"{fmt_us(p.critical_median_us)} [{fmt_us(p.critical_min_us)}, "
             f"{fmt_us(p.critical_max_us)}]",
             f"rank {p.straggler_rank} ({p.straggler_passes} of {p.passes})",
             *(per_rank(p.rank_medians[stage]) for stage in PASS_STAGES)]
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
        lines += [_md_image(plot_link(name)) for name in plots]
        lines.append("")
    if comp.warnings:
        lines += ["## Warnings", "", *(f"- {_md_cell(w)}" for w in comp.warnings), ""]
    return "\n".join(lines)
