"""The first run on a CPU: what holds on any device, and no verdict on interpreter timings.

On the CPU the kernels run in the Triton interpreter: their timings say nothing about a GPU, so
a verdict on them (``SLOWER +9.9%``) would mislead. What a CPU run shows truthfully is whether
every arm computed the right thing, and what work each arm's layout makes each stage do. This
view leads with those: the gates per arm (passed, failed, the worst scale-free error against the
float32 reference) and the work ledger per stage and arm (rows computed, MB moved, GFLOP, and the
least time that work takes on an H200), each arm also as a multiple of the baseline's work.
Timings appear only when asked for (``moebench compare --timings``), and then without verdicts.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from moebench.analysis.rows import Comparison
from moebench.core.ceilings import H200
from moebench.report.sections import integrity_lines

TIMINGS_HINT = (
    "CPU run: timings are the Triton interpreter's and say nothing about a GPU, so none is shown "
    "and no verdict is made (moebench compare --timings RUN shows them, without verdicts)."
)


def _table(header: list[str], body: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                *("| " + " | ".join(r) + " |" for r in body)]  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
              for i, h in enumerate(header)]  # fmt: skip
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
    return [line(header).rstrip(), "  ".join("-" * w for w in widths),
            *(line(r).rstrip() for r in body)]  # fmt: skip


def gate_lines(comp: Comparison, markdown: bool = False) -> list[str]:
    multi = len(comp.run_ids) > 1
    header = (["run"] if multi else []) + ["case", "arm", "gates", "worst error", "first failure"]
    body = []
    for g in comp.gates:
        verdict = f"{g.passed} pass, {g.skipped} skip" if g.ok else (
            f"FAIL: {g.failed} failed, {g.passed} pass")  # fmt: skip
        err = "" if math.isnan(g.worst_error) else f"{g.worst_error:.2e}"
        first = g.first_failure if len(g.first_failure) <= 60 else g.first_failure[:57] + "..."
        body.append(([g.run_id] if multi else []) + [g.case_id, g.arm, verdict, err, first])
    ok = all(g.ok for g in comp.gates)
    head = "every arm passed every gate" if ok else "an arm FAILED a gate (see below)"
    return [f"Gates: {head} (scale-free error against the float32 reference)", "",
            *_table(header, body, markdown)]  # fmt: skip


def ledger_lines(comp: Comparison, markdown: bool = False) -> list[str]:
    if not comp.ledger:
        return ["Work ledger: none recorded (runs before the ledger, or arms without a model)"]
    multi = len(comp.run_ids) > 1
    base = {(r.run_id, r.case_id, r.stage): r for r in comp.ledger if r.arm == comp.baseline}
    header = ["run"] if multi else []
    header += ["case", "stage", "arm", "rows", "MB moved", "GFLOP", f"{H200.name} floor us",
               "vs " + comp.baseline]  # fmt: skip
    body = []
    for r in comp.ledger:
        b = base.get((r.run_id, r.case_id, r.stage))
        rel = ""
        if b is not None and r.arm != comp.baseline and b.floor_us > 0:
            rel = f"{r.floor_us / b.floor_us:.2f}x"
        body.append(([r.run_id] if multi else []) + [
            r.case_id, r.stage, r.arm, f"{r.rows:,}", f"{r.bytes_moved / 1e6:,.3f}",
            f"{r.flops / 1e9:,.3f}", f"{r.floor_us:,.3f}", rel])  # fmt: skip
    note = (
        f"Work ledger: what each arm's layout makes each stage do in one step on the slowest "
        f"rank, from the routing (bytes read + written, each once; matrix FLOPs), and the least "
        f"time of that work on an {H200.name} ({H200.copy_tbs} TB/s copy, "
        f"{H200.tflops['fp8']:,.0f} TFLOP/s fp8, {H200.tflops['bf16']:,.0f} bf16): the same "
        "on any device."
    )
    return [note, "", *_table(header, body, markdown)]


def step_lines(comp: Comparison) -> list[str]:
    """The step regime without a timing: what was timed, and where its figures are."""
    if comp.step is None:
        return []
    lines = []
    for s in comp.step.setups:
        rows = [r for r in comp.step.rows if r.run_id == s.run_id]
        steps = max((r.n_steps for r in rows), default=0)
        multi = f"{s.run_id}: " if len(comp.step.setups) > 1 else ""
        lines.append(f"Model step: {multi}{steps} steps over {len(s.layers)} layers timed "
                     f"({s.layers_text}); timings are the interpreter's: see --timings (the "
                     "JSON output carries them, without verdicts).")  # fmt: skip
    return [*lines, ""]


def render_cpu(comp: Comparison, markdown: bool = False, plots: Sequence[str] = ()) -> str:
    title = "# moebench: CPU run (Triton interpreter)" if markdown else (
        "moebench: CPU run (Triton interpreter)")  # fmt: skip
    parts = [title, "", *gate_lines(comp, markdown), "",
             *(["## Integrity", ""] if markdown and comp.integrity else []),
             *integrity_lines(comp, heading=not markdown), *([""] if comp.integrity else []),
             *ledger_lines(comp, markdown), "", *step_lines(comp), TIMINGS_HINT]  # fmt: skip
    if not markdown:  # prose wrapped to 100 columns; table lines as they are
        parts = [line for p in parts for line in (
            textwrap.wrap(p, 100) if len(p) > 100 and "  " not in p else [p])]  # fmt: skip
    if markdown and plots:
        from moebench.report.markdown import plot_link

        parts += ["", "## Plots", "", *(f"![{plot_link(p)}]({plot_link(p)})" for p in plots)]
    if markdown and comp.warnings:
        parts += ["", "## Warnings", "", *(f"- {w}" for w in comp.warnings)]
    return "\n".join(parts) + "\n"
