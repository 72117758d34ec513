"""What the figures of `moebench.report.plots` and `moebench.report.step_plots` share: the
figure and its atomic save, titles, panel grids, units, the case titles and one colour per arm.
matplotlib's object API on the Agg canvas: no display, no pyplot state."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from moebench.analysis.rows import CaseInfo, Comparison
from moebench.core.errors import MoebenchError
from moebench.core.families import FACTS
from moebench.core.vocabulary import aa_twin

MAX_PANELS = 12  # cases in one figure of panels; more are split into pages (-p2, -p3, ...)
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P")


def file_label(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in run_id)


def save(fig, path: Path) -> Path:
    """Write a figure atomically: a temp file beside it, then a rename."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
        os.chmod(tmp, 0o644)  # a figure to share, not a secret (mkstemp makes it 0600)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise MoebenchError(f"--plot: cannot write {path}: {exc.strerror or exc}") from None
    return path


def figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def device_note(comp: Comparison) -> str:
    if "cpu" in comp.devices:
        return "CPU timings (Triton interpreter), not comparable with GPU"
    return "GPU, device events"


def title(comp: Comparison, what: str, run_id: str, mode: str) -> str:
    mode_text = f", {mode} mode" if mode else ""
    scenario = next((r.scenario for r in comp.runs if r.run_id == run_id), "")
    return f"{what}: {scenario or run_id}{mode_text}\n{run_id}; {device_note(comp)}"


def grid(n: int) -> tuple[int, int]:
    cols = min(n, 3)
    return math.ceil(n / cols), cols


def unit_of(values_us) -> tuple[float, str]:
    """A divisor and unit that keep tick labels short: us, ms or s."""
    top = max(values_us, default=0.0)
    if top >= 1e6:
        return 1e6, "s"
    if top >= 1e4:
        return 1e3, "ms"
    return 1.0, "us"


def case_title(comp: Comparison, run_id: str, case: str) -> str:
    info = comp.cases.get((run_id, case))
    if info is None:
        return case
    if is_decode(comp, run_id):  # decode arms read no capacity buffer: no live share to show
        return f"{case}\n{info.routing}, {info.tokens_per_rank} tokens/rank, {info.precision}"
    return (f"{case}\n{info.routing}, {info.tokens_per_rank} tokens/rank, "
            f"live {info.live_fraction:.1%} of {info.capacity_rows} rows")  # fmt: skip


def arm_colors(comp: Comparison, arms: set[str]) -> dict[str, str]:
    """One colour per arm, the same in every figure: the baseline first, A/A copies grey."""
    palette = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")
    steps = comp.step.rows if comp.step is not None else ()
    every = sorted({r.arm for r in [*comp.rows, *steps] if not aa_twin(r.arm)},
                   key=lambda a: (a != comp.baseline, a))  # fmt: skip
    index = {a: i for i, a in enumerate(every)}
    return {a: "#7f7f7f" if aa_twin(a) else palette[index.get(a, 0) % len(palette)]
            for a in arms}  # fmt: skip


def is_decode(comp: Comparison, run_id: str) -> bool:
    """Whether a run's cases are decode steps: their precision is one of a family's without a
    capacity buffer (``FamilyFacts.capacity_buffer``; w8a16, w4a16), so live/capacity means
    nothing there; the question is the token count."""
    unbuffered = {p for f in FACTS.values() if not f.capacity_buffer for p in f.precisions}
    return any(
        info.precision in unbuffered or params_of(info).get("precision") in unbuffered
        for (rid, _), info in comp.cases.items()
        if rid == run_id
    )  # fmt: skip


def params_of(info: CaseInfo) -> dict:
    try:
        params = json.loads(info.params) if info.params else {}
    except ValueError:
        return {}
    return params if isinstance(params, dict) else {}
