"""Figures of the step regime (`moebench.analysis.step`): the step-time distribution per arm
(``step-<run>.png``, ECDF over steps), each layer's critical path stacked (``layers-<run>.png``)
and P99 TPOT against tokens per step with the SLO (``goodput-<run>.png``, derived)."""

from __future__ import annotations

import math
from collections import defaultdict

from moebench.analysis.rows import Comparison
from moebench.core.vocabulary import aa_twin
from moebench.report.canvas import (
    MAX_PANELS,
    SERIES_MARKERS,
    arm_colors,
    case_title,
    figure,
    grid,
    title,
    unit_of,
)


def step_rows(comp: Comparison, run_id: str, mode: str | None) -> list:
    if comp.step is None:
        return []
    return [r for r in comp.step.rows if r.run_id == run_id and (mode is None or r.mode == mode)
            and r.status != "mismatch" and r.step_us]  # fmt: skip


def _step_pages(comp: Comparison, run_id: str, mode: str, what: str, draw):
    """Panels of one case each, paged as the other figures are; ``draw(ax, rows, scale,
    unit)`` fills one."""
    rows = step_rows(comp, run_id, mode)
    cases = sorted({r.case_id for r in rows})
    setup = comp.step.setup(run_id) if comp.step else None
    layers = f" ({setup.layers_text})" if setup else ""
    for start in range(0, len(cases), MAX_PANELS):
        page = cases[start : start + MAX_PANELS]
        nrows, ncols = grid(len(page))
        fig = figure(4.4 * ncols + 0.8, 3.6 * nrows + 1.3)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, case in zip(axes, page, strict=False):
            here = sorted((r for r in rows if r.case_id == case),
                          key=lambda r: (r.arm != comp.baseline, r.arm))  # fmt: skip
            scale, unit = unit_of([max(r.step_us) for r in here])
            draw(ax, here, scale, unit)
            ax.set_title(case_title(comp, run_id, case), fontsize=9)
            ax.grid(alpha=0.3)
        for ax in axes[len(page) :]:
            ax.set_visible(False)
        fig.suptitle(title(comp, what + layers, run_id, mode), fontsize=10)
        yield fig


def step_figures(comp: Comparison, rows, run_id: str, mode: str):
    colors = arm_colors(comp, {r.arm for r in step_rows(comp, run_id, mode)})

    def draw(ax, here, scale, unit):
        for r in here:
            x = sorted(v / scale for v in r.step_us)
            tail = f"P50 {r.p50.us / scale:.3g}, P99 {r.p99.us / scale:.3g}"
            ax.step(x, [(i + 1) / len(x) for i in range(len(x))], where="post",
                    color=colors[r.arm], linestyle="--" if r.is_aa else "-",
                    label=f"{r.arm} ({tail})")  # fmt: skip
        ax.set_xlabel(f"model step time ({unit}): sum over layers of the slowest rank")
        ax.set_ylabel("fraction of steps at or below")
        ax.legend(fontsize=7)

    yield from _step_pages(comp, run_id, mode, "Model step time per arm (ECDF over steps)", draw)


def layer_figures(comp: Comparison, rows, run_id: str, mode: str):
    from matplotlib import colormaps

    def draw(ax, here, scale, unit):
        layers = sorted({lid for r in here for lid, _ in r.layer_us})
        cmap = colormaps["viridis"]
        for x, r in enumerate(here):
            bottom = 0.0
            for lid, us in r.layer_us:
                if math.isnan(us):
                    continue
                shade = layers.index(lid) / max(len(layers) - 1, 1)
                ax.bar(x, us / scale, bottom=bottom, width=0.6, color=cmap(shade),
                       edgecolor="white", linewidth=0.3)  # fmt: skip
                bottom += us / scale
        ax.set_xticks(range(len(here)), [r.arm for r in here], rotation=20, ha="right",
                      fontsize=8)  # fmt: skip
        ax.set_ylabel(f"median over steps per layer ({unit}), stacked")
        if layers:
            ax.set_xlabel(f"model layers {layers[0]} (dark, bottom) to {layers[-1]} (light, top)",
                          fontsize=8)  # fmt: skip

    yield from _step_pages(comp, run_id, mode, "Per-layer critical path, stacked", draw)


def goodput_figure(comp: Comparison, rows, run_id: str, mode: str):
    """Derived: P99 TPOT against tokens per step, one line per arm and series."""
    from moebench.analysis.goodput import series_label

    found = step_rows(comp, run_id, mode)
    setup = comp.step.setup(run_id) if comp.step else None
    if not found or setup is None:
        return
    lines: dict[tuple[str, str], list] = defaultdict(list)
    for r in found:
        lines[(r.arm, series_label(r.params))].append(r)
    best = {(g.arm, g.series): g.case_id for g in comp.step.goodput
            if g.run_id == run_id and g.mode == mode and g.case_id}  # fmt: skip
    colors = arm_colors(comp, {arm for arm, _ in lines})
    series = sorted({label for _, label in lines})
    slo_us = None if setup.slo_tpot_ms is None else setup.slo_tpot_ms * 1e3
    scale, unit = unit_of([r.tpot_p99_us for r in found] + ([slo_us] if slo_us else []))
    fig = figure(7.5, 4.8)
    ax = fig.subplots()
    for (arm, label), points in sorted(lines.items()):
        points.sort(key=lambda r: r.tokens_per_step)
        xs = [r.tokens_per_step for r in points]
        ys = [r.tpot_p99_us / scale for r in points]
        low = [0 if math.isnan(r.p99.low_us) else (r.p99.us - r.p99.low_us) / scale for r in points]
        high = [0 if math.isnan(r.p99.high_us) else (r.p99.high_us - r.p99.us) / scale
                for r in points]  # fmt: skip
        i = series.index(label)
        ax.errorbar(xs, ys, yerr=[low, high], marker=SERIES_MARKERS[i % len(SERIES_MARKERS)],
                    capsize=3, color=colors[arm], linestyle="--" if aa_twin(arm) else "-",
                    label=f"{arm}, {label}" if len(series) > 1 else arm)  # fmt: skip
        chosen = [r for r in points if r.case_id == best.get((arm, label))]
        ax.scatter([r.tokens_per_step for r in chosen], [r.tpot_p99_us / scale for r in chosen],
                   marker="*", s=160, color=colors[arm], zorder=4, edgecolor="black")  # fmt: skip
    if slo_us is not None:
        ax.axhline(slo_us / scale, color="black", linewidth=1, linestyle=":",
                   label=f"SLO on P99 TPOT: {setup.slo_tpot_ms:g} ms")  # fmt: skip
    xs_all = sorted({r.tokens_per_step for r in found})
    if xs_all[0] > 0 and xs_all[-1] >= 4 * xs_all[0]:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(f"tokens per step (tokens per rank x {setup.data_ranks} data ranks)")
    ax.set_ylabel(f"P99 TPOT ({unit}) = P99 model step + {setup.non_moe_us:g} us non-MoE "
                  "(derived)")  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="star: goodput batch (largest meeting the SLO); bars: 95% CI")
    what = f"Goodput against the SLO, derived ({setup.layers_text})"
    fig.suptitle(title(comp, what, run_id, mode), fontsize=10)
    yield fig
