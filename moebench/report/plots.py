"""Figures of a comparison, as PNG files: what people would rather look at than read.

- ``stages-<run>.png``: per case, one stacked bar per arm of the kernel-regime stage medians
  (scatter, fc1, act, fc2, combine), with the arm's whole-FFN median marked beside it: where the
  time goes, and how much of it the standalone stages explain.
- ``ranks-<run>.png``: per case and arm, every rank's median of the FFN as a point, its spread as
  a bar and the critical path (the slowest rank per block, the figure decisions use) as a tick.
- ``speedup-<run>.png``: speedup of each arm over the baseline (baseline time / arm time, with
  the interval of the decision) across the cases of a sweep. Prefill: against the share of the
  capacity buffer that is live. Decode (a decode precision, w8a16 or w4a16): against the tokens
  per rank, since decode arms read no capacity buffer. One line per arm and swept series (the
  sweep values other than those that set x: precision, gemm, model, ...), with a legend.
  Percent ticks carry the decimals their step needs (0.25% apart: two), never two alike.
- The step regime (``moebench.analysis.step``), drawn by `moebench.report.step_plots`:
  ``step-<run>.png``, per case the distribution of the model step time per arm (ECDF over
  steps); ``layers-<run>.png``, per case and arm each layer's critical path stacked (median over
  steps); ``goodput-<run>.png``, per series P99 TPOT (derived) against the tokens per step per
  arm, with the SLO as a line and each arm's goodput batch marked.

Figures are drawn with matplotlib's object API on the Agg canvas (`moebench.report.canvas`: the
helpers both figure modules share): no display, no pyplot state.
A run in eager and graph mode gets one set per mode (``-<mode>`` in the name).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from moebench.analysis.rows import CaseInfo, CompareRow, Comparison
from moebench.core.errors import MoebenchError
from moebench.core.vocabulary import PREFILL_STAGES, WHOLE_FFN, Regime, aa_twin
from moebench.report.canvas import (
    MAX_PANELS,
    SERIES_MARKERS,
    arm_colors,
    case_title,
    figure,
    file_label,
    grid,
    is_decode,
    params_of,
    save,
    title,
    unit_of,
)
from moebench.report.step_plots import goodput_figure, layer_figures, step_figures, step_rows

# Decode's stages (fc1, fc2, combine) are among prefill's and keep their colours.
_STAGE_COLORS = dict(zip(PREFILL_STAGES, ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"),
                         strict=True))  # fmt: skip


def write_plots(comp: Comparison, folder: Path | str) -> list[Path]:
    """Write every figure the comparison has data for into ``folder``; return their paths.

    A figure without data is skipped: no stage breakdown without the kernel regime, no rank or
    speedup figure without the ffn regime (one case still gets its speedup points).
    MoebenchError when the folder cannot be created or written.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MoebenchError(f"--plot: cannot create {folder}: {exc.strerror or exc}") from None
    written = []
    for run_id in comp.run_ids:
        modes = sorted({r.mode for r in comp.rows if r.run_id == run_id and r.regime}
                       | {r.mode for r in step_rows(comp, run_id, None)})  # fmt: skip
        for mode in modes or [""]:
            rows = [r for r in comp.rows if r.run_id == run_id and r.mode == mode]
            suffix = f"{file_label(run_id)}{f'-{mode}' if mode else ''}"
            for name, draw in _FIGURES:
                for page, fig in enumerate(draw(comp, rows, run_id, mode)):
                    more = f"-p{page + 1}" if page else ""
                    written.append(save(fig, folder / f"{name}-{suffix}{more}.png"))
    return written


def _timed(rows: list[CompareRow]) -> list[CompareRow]:
    return [r for r in rows if not math.isnan(r.median_us)]


# ---------------------------------------------------------------------------------------------
# Stage breakdown


def _stage_figures(comp: Comparison, rows: list[CompareRow], run_id: str, mode: str):
    kernel = defaultdict(dict)  # case -> arm -> stage -> median
    ffn = defaultdict(dict)  # case -> arm -> median
    for r in _timed(rows):
        if r.regime == Regime.KERNEL and r.stage in PREFILL_STAGES:
            kernel[r.case_id].setdefault(r.arm, {})[r.stage] = r.median_us
        elif r.regime == Regime.FFN and r.stage == WHOLE_FFN:
            ffn[r.case_id][r.arm] = r.median_us
    cases = sorted(kernel)
    for start in range(0, len(cases), MAX_PANELS):
        page = cases[start : start + MAX_PANELS]
        nrows, ncols = grid(len(page))
        fig = figure(4.2 * ncols + 0.6, 3.6 * nrows + 1.3)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, case in zip(axes, page, strict=False):
            arms = sorted(kernel[case] | ffn[case], key=lambda a: (a != comp.baseline, a))
            scale, unit = unit_of([*ffn[case].values(),
                                 *(sum(st.values()) for st in kernel[case].values())])  # fmt: skip
            bottoms = [0.0] * len(arms)
            for stage in PREFILL_STAGES:
                heights = [kernel[case].get(a, {}).get(stage, 0.0) / scale for a in arms]
                if not any(heights):
                    continue
                ax.bar(range(len(arms)), heights, bottom=bottoms, width=0.6,
                       color=_STAGE_COLORS[stage], label=stage)  # fmt: skip
                bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
            xs = [i for i, a in enumerate(arms) if a in ffn[case]]
            ax.scatter(xs, [ffn[case][arms[i]] / scale for i in xs], marker="D", s=46,
                       color="black", zorder=3, label=FFN_LABEL)  # fmt: skip
            ax.set_xticks(range(len(arms)), arms, rotation=20, ha="right", fontsize=8)
            ax.set_title(case_title(comp, run_id, case), fontsize=9)
            ax.set_ylabel(f"median time ({unit})")
            ax.set_ylim(bottom=0)
            ax.grid(axis="y", alpha=0.3)
        for ax in axes[len(page) :]:
            ax.set_visible(False)
        # The legend reads like the stack: the FFN marker, then the top stage down.
        seen = {}
        for ax in axes[: len(page)]:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
        labels = [x for x in (FFN_LABEL, *reversed(PREFILL_STAGES)) if x in seen]
        fig.legend([seen[x] for x in labels], labels, loc="outside lower center",
                   ncols=len(labels), fontsize=8,
                   title="stacked: stage medians, kernel regime (each stage alone)")  # fmt: skip
        fig.suptitle(title(comp, "Stage breakdown per arm", run_id, mode), fontsize=10)
        yield fig


FFN_LABEL = "ffn: whole pipeline, median"


# ---------------------------------------------------------------------------------------------
# Per-rank spread


def _rank_figure(comp: Comparison, rows: list[CompareRow], run_id: str, mode: str):
    cells = [r for r in _timed(rows) if r.regime == Regime.FFN and r.stage == WHOLE_FFN]
    cases = sorted({r.case_id for r in cells})
    colors = arm_colors(comp, {r.arm for r in cells})
    for start in range(0, len(cases), MAX_PANELS):
        page = cases[start : start + MAX_PANELS]
        nrows, ncols = grid(len(page))
        fig = figure(4.2 * ncols + 1.0, 3.6 * nrows + 1.2)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, case in zip(axes, page, strict=False):
            here = sorted((r for r in cells if r.case_id == case),
                          key=lambda r: (r.arm != comp.baseline, r.arm))  # fmt: skip
            scale, unit = unit_of([r.rank_max_us for r in here])
            for x, row in enumerate(here):
                timing = comp.timings[(run_id, case, "ffn", "ffn", mode, row.arm)]
                ranks = sorted(timing.rank_medians)
                values = [timing.rank_medians[k] / scale for k in ranks]
                color = colors[row.arm]
                ax.vlines(x, min(values), max(values), color=color, alpha=0.3, linewidth=10)
                # Ranks side by side across the bar, in rank order.
                half = 0.22 if len(values) > 1 else 0.0
                spread = [x - half + 2 * half * i / max(len(values) - 1, 1)
                          for i in range(len(values))]  # fmt: skip
                ax.scatter(spread, values, s=18, color=color, zorder=3)
                ax.hlines(row.median_us / scale, x - 0.3, x + 0.3, color="black", linewidth=1.5,
                          zorder=4)  # fmt: skip
                worst = max(ranks, key=timing.rank_medians.get)
                ax.annotate(f"slowest: rank {worst}", (x, max(*values, row.median_us / scale)),
                            textcoords="offset points", xytext=(0, 6), ha="center",
                            fontsize=7)  # fmt: skip
            ax.set_xticks(range(len(here)), [r.arm for r in here], rotation=20, ha="right",
                          fontsize=8)  # fmt: skip
            ax.set_xlim(-0.6, len(here) - 0.4)
            ax.margins(y=0.15)
            ax.set_title(case_title(comp, run_id, case), fontsize=9)
            ax.set_ylabel(f"per-rank median FFN time ({unit})")
            ax.grid(axis="y", alpha=0.3)
        for ax in axes[len(page) :]:
            ax.set_visible(False)
        fig.legend(handles=_rank_legend(), loc="outside lower center", ncols=3, fontsize=8)
        fig.suptitle(title(comp, "Per-rank spread of the FFN", run_id, mode), fontsize=10)
        yield fig


def _rank_legend():
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], marker="o", linestyle="", color="#555555", label="one rank's median"),
        Line2D([], [], color="#555555", alpha=0.3, linewidth=8, label="min to max over ranks"),
        Line2D([], [], color="black", linewidth=1.5,
               label="critical path: median over blocks of the slowest rank"),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Speedup against live / capacity (prefill) or tokens per rank (decode)

# Sweep keys that move a prefill case along the live/capacity axis: the routing and the shape.
# Every other swept key (precision, gemm, activation, model, topology) makes a series of its own.
_LIVE_KEYS = ("routing.", "shape.")
_TOKENS_KEY = "shape.tokens_per_rank"
_SERIES_STYLES = ("-", "-.", ":", (0, (5, 1, 1, 1)))


def series_label(info: CaseInfo, decode: bool) -> str:
    """The sweep values that make a case's line, those that set its x left out: tokens per rank
    for decode, the routing and shape for prefill. "" when nothing else is swept."""
    keep = (lambda k: k != _TOKENS_KEY) if decode else (lambda k: not k.startswith(_LIVE_KEYS))
    return ", ".join(
        f"{k.rsplit('.', 1)[-1]}={v}" for k, v in sorted(params_of(info).items()) if keep(k)
    )


def _speedup_figure(comp: Comparison, rows: list[CompareRow], run_id: str, mode: str):
    cells = [
        r for r in rows
        if r.regime == Regime.FFN and r.stage == WHOLE_FFN and not math.isnan(r.change_pct)
        and (run_id, r.case_id) in comp.cases
    ]  # fmt: skip
    if not cells:
        return
    decode = is_decode(comp, run_id)
    lines: dict[tuple[str, str], list] = defaultdict(list)  # (arm, series) -> [(x, row)]
    for r in cells:
        info = comp.cases[(run_id, r.case_id)]
        x = info.tokens_per_rank if decode else info.live_fraction
        lines[(r.arm, series_label(info, decode))].append((x, r))
    series = sorted({key[1] for key in lines})
    colors = arm_colors(comp, {arm for arm, _ in lines})
    xs_all = [x for points in lines.values() for x, _ in points]
    fig = figure(7.5, 4.8)
    ax = fig.subplots()
    log = decode and min(xs_all) > 0 and max(xs_all) >= 4 * min(xs_all)
    right = min(1.02, max(xs_all) * 1.15 + 0.02)
    keys = sorted(lines, key=lambda key: (key[0] != comp.baseline, aa_twin(key[0]) or "", key))
    for k, (arm, label) in enumerate(keys):
        # Cases can share an x (a gemm sweep, say): order by case id then.
        points = sorted(lines[(arm, label)], key=lambda point: (point[0], point[1].case_id))
        # Lines of one case share an x; shift each a little so that their intervals stay apart.
        offset = k - (len(keys) - 1) / 2
        if log:
            xs = [x * 2 ** (offset * 0.03) for x, _ in points]
        elif decode:
            span = max(xs_all) - min(xs_all) or 1.0
            xs = [x + offset * span * 0.008 for x, _ in points]
        else:
            xs = [x + offset * right * 0.008 for x, _ in points]
        ys = [1 / (1 + r.change_pct / 100) for _, r in points]
        # The interval of the change maps to speedups the other way round.
        low = [y - 1 / (1 + r.ci_high_pct / 100) for y, (_, r) in zip(ys, points, strict=True)]
        high = [1 / (1 + r.ci_low_pct / 100) - y for y, (_, r) in zip(ys, points, strict=True)]
        twin = aa_twin(arm)
        name = f"{arm} (A/A control, against {twin})" if twin else arm
        i = series.index(label)
        ax.errorbar(xs, ys, yerr=[low, high], marker=SERIES_MARKERS[i % len(SERIES_MARKERS)],
                    capsize=3, color=colors[arm],
                    linestyle="--" if twin else _SERIES_STYLES[i % len(_SERIES_STYLES)],
                    label=f"{name}, {label}" if label else name)  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel(f"speedup over {comp.baseline} = {comp.baseline} time / arm time (x)")
    if decode:
        _tokens_axis(ax, sorted(set(xs_all)), log)
        ax.set_xlabel("tokens per rank (decode step; lines of a count shifted apart)")
        what = "FFN speedup against the tokens per rank"
    else:
        ax.set_xlabel("live rows / capacity rows (mean over ranks; lines of a case shifted apart)")
        ax.set_xlim(0, right)
        ax.xaxis.set_major_formatter(_percent())
        what = "FFN speedup against the live share of the buffer"
    ax.grid(alpha=0.3)
    ax.legend(title=f"{'arm, series' if any(series) else 'arm'} (FFN regime; bars: "
                    f"{_ci_text(comp)})", fontsize=8)  # fmt: skip
    fig.suptitle(title(comp, what, run_id, mode), fontsize=10)
    yield fig


def _tokens_axis(ax, tokens: list[int], log: bool) -> None:
    """Token counts as ticks: each count of the sweep where they are few, whole numbers always;
    a base-2 log axis when the counts span a factor of four or more (1, 2, 4, ... 128)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    if log:
        ax.set_xscale("log", base=2)
        ax.set_xlim(tokens[0] / 2**0.4, tokens[-1] * 2**0.4)
    else:
        pad = max((tokens[-1] - tokens[0]) * 0.08, 0.5)
        ax.set_xlim(tokens[0] - pad, tokens[-1] + pad)
    if len(tokens) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(tokens))
    elif not log:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))


def percent_decimals(locs) -> int:
    """The fewest decimals (of a percent) that print every tick at its own value: ticks 0.25%
    apart need two, 2.5% apart one, 20% apart none. So no two ticks ever share a label."""
    values = sorted(float(v) * 100 for v in locs)
    steps = [b - a for a, b in zip(values, values[1:], strict=False) if b > a]
    tol = min(steps, default=1.0) * 1e-6
    for decimals in range(7):
        labels = [round(v, decimals) for v in values]
        exact = all(abs(t - v) <= tol for t, v in zip(labels, values, strict=True))
        if exact and len(set(labels)) == len(set(values)):
            return decimals
    return 6


def percent_label(x: float, locs) -> str:
    """A fraction as a percent with the decimals that the ticks ``locs`` need."""
    decimals = percent_decimals(locs) if len(locs) else 0
    return f"{round(x * 100, decimals) + 0.0:.{decimals}f}%"  # + 0.0: never "-0%"


def _percent():
    """Percent ticks whose decimals follow the locator's step: the axis hands the formatter
    every tick (``set_locs``) before it asks for one label."""
    from matplotlib.ticker import Formatter

    class StepPercent(Formatter):
        ticks: tuple[float, ...] = ()

        def set_locs(self, locs) -> None:
            self.ticks = tuple(locs)

        def __call__(self, x, pos=None) -> str:
            return percent_label(x, self.ticks)

    return StepPercent()


def _ci_text(comp: Comparison) -> str:
    if comp.correction == "none":
        return f"{comp.confidence * 100:g}% CI"
    return f"{comp.confidence * 100:g}% family-wise CI"


# Every figure, in the order written: (file name prefix, drawing function).
_FIGURES = (
    ("stages", _stage_figures), ("ranks", _rank_figure), ("speedup", _speedup_figure),
    ("step", step_figures), ("layers", layer_figures), ("goodput", goodput_figure),
)  # fmt: skip
