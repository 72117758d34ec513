"""``moebench trace``: import what serving engines record, and summarise a trace's expert load.

Thin Typer commands over ``importers``, ``traces`` and ``replay``; every user mistake is a
MoebenchError printed on one line with exit code 2. ``import`` never replaces its output unless
``--force``, and warns (stderr, one line) when a preset's model is imported at another revision
than the preset pins.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from moebench.cli.common import err, fail
from moebench.core.errors import MoebenchError, TraceError

trace_app = typer.Typer(
    help="Import routing traces (SGLang, vLLM, count matrices) and print their expert load.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)  # fmt: skip
out = Console(width=None if sys.stdout.isatty() else 200)


@trace_app.command("import")
def import_(
    src: Annotated[Path, typer.Argument(help="File a serving engine wrote.", show_default=False)],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="sglang-stat | sglang-per-pass | sglang-per-token | "
            "vllm-routed-experts | vllm-eplb | counts | olmoe-counts",
            show_default=False,
        ),
    ],
    model: Annotated[str, typer.Option(help="Model id the trace was recorded on.")],
    revision: Annotated[
        str,
        typer.Option(
            help="Model revision (Hugging Face commit). For a preset's model, a revision other "
            "than the preset's pin is kept, with a warning: a scenario replays it by setting "
            "model.revision."
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="moebench trace .parquet.")],
    top_k: Annotated[
        int | None, typer.Option(help="Top-k, where neither the file nor a preset says it.")
    ] = None,
    experts: Annotated[
        int | None, typer.Option(help="Routed experts, where neither the file nor a preset says.")
    ] = None,
    select: Annotated[
        str | None, typer.Option(help="olmoe-counts: the text domain to import.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace OUTPUT if it exists.")] = False,
) -> None:
    """Convert SRC to a moebench trace pinned to MODEL at REVISION."""
    from moebench.routing.importers import import_trace, revision_warning
    from moebench.routing.traces import write_parquet

    try:
        if output.suffix.lower() != ".parquet":
            raise TraceError(f"-o: {output}: a moebench trace is a .parquet file")
        if not force and os.path.lexists(output):
            raise TraceError(f"-o: {output} already exists; pass --force to replace it")
        t = import_trace(
            src, format, model_id=model, revision=revision, top_k=top_k, experts=experts,
            select=select,
        )  # fmt: skip
        write_parquet(t, output, overwrite=force)
    except MoebenchError as exc:
        raise fail(exc) from None
    warning = revision_warning(model, revision)
    if warning:
        err.print(f"moebench: warning: {warning}", markup=False)
    size = f"{t.steps} step(s)" if t.kind == "load" else f"{t.tokens} tokens"
    out.print(
        f"wrote {output}: {t.kind} trace of {t.model_id} at {t.revision}, {size}, "
        f"{len(t.layers)} layers, {t.experts} experts, top-{t.top_k}, sha256 {t.sha256}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@trace_app.command()
def stats(
    trace: Annotated[
        Path, typer.Argument(help="moebench .parquet, SGLang stat .json, .npy/.csv counts.")
    ],
    ep: Annotated[
        int | None, typer.Option(help="Expert-parallel ranks: per-rank rows and overload.")
    ] = None,
    layer: Annotated[int | None, typer.Option(help="Only this layer.")] = None,
    tokens: Annotated[
        int | None,
        typer.Option(help="Replay a step of this many tokens (as a run does) and count that."),
    ] = None,
    top_k: Annotated[
        int | None, typer.Option(help="Top-k of the replay (default: the trace's).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the replay.")] = 0,
) -> None:
    """Per layer: max/mean and min/mean expert load, empty experts, entropy; per rank with --ep."""
    from moebench.routing.raw_files import load_any
    from moebench.routing.trace_stats import layer_stats

    try:
        t = load_any(trace)
        layers = t.layers if layer is None else (t.layers[t.position(layer, str(trace))],)
        if ep is not None and (ep < 1 or t.experts % ep):
            raise TraceError(f"--ep: {ep} does not divide the trace's {t.experts} experts")
        if tokens is not None and tokens < 1:
            raise TraceError(f"--tokens: must be >= 1, got {tokens}")
        if top_k is not None and not 1 <= top_k <= t.experts:
            raise TraceError(f"--top-k: must be in [1, {t.experts}], got {top_k}")
        k = top_k or t.top_k
        if tokens is not None and k is None:
            raise TraceError(f"{trace}: the trace does not say its top-k; pass --top-k")
        rows = []
        for lyr in layers:
            counts = t.layer_counts(lyr, str(trace))
            if tokens is not None and counts.sum() > 0:
                counts = _replayed(t, lyr, tokens, k, seed, str(trace))
            rows.append({"layer": lyr, **layer_stats(counts, ep)})
    except MoebenchError as exc:
        raise fail(exc) from None
    _print(trace, t, rows, ep, tokens, k)


def _replayed(t, layer: int, tokens: int, top_k: int, seed: int, where: str) -> np.ndarray:
    import torch

    from moebench.routing.replay import replay

    g = torch.Generator()
    g.manual_seed(seed)
    ids, _, _, _ = replay(
        t, layer=layer, tokens=tokens, experts=t.experts, top_k=top_k, g=g, where=where
    )
    return np.bincount(ids.numpy().ravel(), minlength=t.experts).astype(np.float64)


def _print(path: Path, t, rows: list[dict], ep: int | None, tokens: int | None, k) -> None:
    from moebench.routing.trace_stats import summary

    pin = f"{t.model_id} at {t.revision}" if t.pinned else "no model metadata (raw file)"
    size = f"{t.steps} step(s)" if t.kind == "load" else f"{t.tokens} tokens"
    what = "recorded rows" if tokens is None else f"a replayed step of {tokens} tokens x top-{k}"
    out.print(
        f"{path.name}: {t.kind} trace, {pin}; {t.experts} experts, "
        f"top-{t.top_k if t.top_k else '? (not recorded)'}, {len(t.layers)} layers, {size}; "
        f"sha256 {t.sha256}; figures over {what}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    table = Table(show_edge=False, pad_edge=False)
    cols = ["layer", "rows", "max/mean", "min/mean", "empty", "entropy bits"]
    if ep is not None:
        cols += [f"EP{ep} overload", "rows per rank"]
    for c in cols:
        table.add_column(c, justify="left" if c == "rows per rank" else "right")
    empty = [r["layer"] for r in rows if r["rows"] == 0]
    for r in rows:
        if r["rows"] == 0:
            continue
        cells = [
            str(r["layer"]), f"{r['rows']:.0f}", f"{r['max_mean']:.2f}", f"{r['min_mean']:.3f}",
            str(r["empty_experts"]), f"{r['entropy']:.3f}",
        ]  # fmt: skip
        if ep is not None:
            cells += [f"{r['overload']:.2f}", " ".join(f"{x:.0f}" for x in r["rank_rows"])]
        table.add_row(*cells)
    out.print(table)
    s = summary(rows)
    if empty:
        out.print(f"empty (dense) layers, not shown: {', '.join(map(str, empty))}", soft_wrap=True)
    if not s:
        return
    text = (
        f"over {s['layers']} layer(s) with load: busiest expert {s['max_mean_avg']:.2f}x the "
        f"mean on average, up to {s['max_mean_max']:.2f}x (layer {s['max_mean_layer']}); "
        f"quietest {s['min_mean_avg']:.3f}x on average "
        f"({s['min_mean_min']:.3f}-{s['min_mean_max']:.3f})"
    )
    if "overload_avg" in s:
        text += (
            f"; EP{ep} overload {s['overload_avg']:.2f} on average, up to {s['overload_max']:.2f}"
        )
    out.print(text, markup=False, highlight=False, soft_wrap=True)
