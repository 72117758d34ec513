"""The Typer face of moebench: thin commands over plain functions.

Every user mistake is a MoebenchError: one line on stderr, exit code 2, no traceback.
Exit codes: 0 done, 1 a gate failed (mismatch), an arm or case could not run (error rows) or a
gated regression, 2 bad input, 3 a device fault stopped the run, 130 interrupted (SIGINT),
143 terminated (SIGTERM).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from moebench.cli_trace import trace_app
from moebench.errors import DeviceFault, MoebenchError

app = typer.Typer(
    help="Prove that a Mixture-of-Experts FFN change is faster, where, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True, highlight=False, soft_wrap=True)

ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.", show_default=False)]


def _use_interpreter_without_gpu() -> None:
    """Without a GPU the Triton kernels run in the interpreter, which must be chosen before
    triton is first imported."""
    import torch

    if not torch.cuda.is_available() and "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")


def _fail(exc: MoebenchError) -> typer.Exit:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    err.print(f"moebench: error: {msg}", markup=False)
    return typer.Exit(2)


def _load(path: Path):
    from moebench.scenario import load_scenario

    return load_scenario(path)


class _RichProgress:
    def __init__(self, progress: Progress):
        self.p = progress
        self.task = None

    def start(self, total: int) -> None:
        self.task = self.p.add_task("cases x ranks x arms", total=total)

    def step(self, label: str, advance: int = 1) -> None:
        self.p.update(self.task, advance=advance, description=label)


@app.command()
def run(
    scenario: ScenarioArg,
    results: Annotated[Path, typer.Option(help="Folder that receives results/<run_id>/.")] = Path(
        "results"
    ),
    resume: Annotated[
        Path | None, typer.Option(help="Finish an interrupted run: its folder.")
    ] = None,
    allow_mismatch: Annotated[
        bool, typer.Option(help="Time arms that failed a gate (their rows say so).")
    ] = False,
    allow_source_drift: Annotated[
        bool, typer.Option(help="Run even when arm sources differ from expect_sources.")
    ] = False,
    baseline: Annotated[str | None, typer.Option(help="Baseline arm of the summary.")] = None,
    aa: Annotated[
        bool,
        typer.Option(help="A/A control: also time a second copy of the baseline arm, "
                     "'<baseline>~aa', to measure the false-positive rate (measure.aa)."),
    ] = False,
    isolate: Annotated[
        bool, typer.Option(help="Run each case in a child process: a crash costs only that case.")
    ] = False,
    case_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a case may take (overrides measure.case_timeout_s).", show_default=False
        ),
    ] = None,
) -> None:
    """Check, then time, every arm of every case of SCENARIO; write Parquet; print a summary."""
    _use_interpreter_without_gpu()
    from moebench.runner import RunOptions
    from moebench.runner import run as run_scenario

    try:
        s = _load(scenario)
        options = RunOptions(
            results_dir=results,
            resume=resume,
            allow_mismatch=allow_mismatch,
            allow_source_drift=allow_source_drift,
            isolate=isolate,
            case_timeout_s=case_timeout,
            command=" ".join(sys.argv),
            aa=aa,
        )
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            summary = run_scenario(s, options, _RichProgress(bar))
    except MoebenchError as exc:
        raise _fail(exc) from None
    except DeviceFault as exc:
        err.print(f"moebench: error: {exc}", markup=False)
        raise typer.Exit(3) from None
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", 2)
        msg = str(exc) if getattr(exc, "signum", None) else "interrupted; finished cases are kept"
        err.print(f"moebench: {msg}", markup=False)
        raise typer.Exit(128 + signum) from None
    out.print(
        f"run {summary.run_id}: {summary.cases_run} cases run, "
        f"{summary.cases_skipped} already done -> {summary.run_dir}",
        soft_wrap=True,  # one line, however long the path
    )
    _print_comparison([summary.run_dir], baseline or s.measure.baseline, "table", 2.0)
    if summary.errors:
        err.print(
            f"moebench: {len(summary.errors)} arm(s) could not run (recorded as error "
            "rows): " + "; ".join(summary.errors[:3]),
            markup=False,
        )
    if summary.mismatches:
        err.print(
            f"moebench: {len(summary.mismatches)} arm(s) failed a correctness gate: "
            + ", ".join(summary.mismatches[:5]),
            markup=False,
        )
    if summary.errors or summary.mismatches:
        raise typer.Exit(1)


@app.command("run-case", hidden=True)
def run_case(job: Annotated[Path, typer.Argument(help="Job file written by run --isolate.")]):
    """Internal: run one case of an isolated run in this process."""
    _use_interpreter_without_gpu()
    from moebench.isolate import child_main

    try:
        code = child_main(job)
    except MoebenchError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt as exc:
        raise typer.Exit(128 + getattr(exc, "signum", 2)) from None
    raise typer.Exit(code)


def _print_comparison(runs: list[Path], baseline: str, fmt: str, threshold: float,
                      correction: str = "bonferroni", plot: Path | None = None,
                      force: bool = False):
    from moebench.compare import compare_runs
    from moebench.report import render
    from moebench.results import load_run

    comparison = compare_runs([load_run(r) for r in runs], baseline=baseline,
                              threshold_pct=threshold, correction=correction, force=force)
    for w in comparison.warnings:
        err.print(f"moebench: warning: {w}", markup=False)
    plots = []
    if plot is not None:
        from moebench.plots import write_plots

        plots = [str(p) for p in write_plots(comparison, plot)]
        err.print(f"moebench: {len(plots)} plot(s) written to {plot}", markup=False)
    # A terminal gets its own width; a pipe or file gets a wide table rather than 80 columns.
    width = out.width if sys.stdout.isatty() else 200
    text = render(comparison, fmt, width=width, plots=plots)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return comparison


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (results/<run_id>).")],
    baseline: Annotated[str, typer.Option(help="Arm the others are compared against.")] = "stock",
    format: Annotated[str, typer.Option(help="table | markdown | csv | json")] = "table",
    threshold: Annotated[
        float, typer.Option(help="Changes smaller than this many percent count as SAME.")
    ] = 2.0,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(help="Exit 1 when a significant slowdown exceeds this many percent."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write PNGs (stage breakdown, per-rank spread, speedup against "
                     "live/capacity) into this folder."),
    ] = None,
    no_correction: Annotated[
        bool,
        typer.Option("--no-correction",
                     help="95% CI per cell instead of Bonferroni over all cells."),
    ] = False,
    force: Annotated[
        bool, typer.Option(help="Put runs side by side even when they share no case.")
    ] = False,
) -> None:
    """Medians, noise, per-rank spread, change against the baseline with a block-bootstrap CI
    corrected for the number of cells, a decision, the A/A false-positive rate; plots."""
    if format not in ("table", "markdown", "csv", "json"):
        raise _fail(
            MoebenchError(f"--format: expected table, markdown, csv or json, got {format!r}")
        )
    try:
        comparison = _print_comparison(runs, baseline, format, threshold,
                                       "none" if no_correction else "bonferroni", plot, force)
    except MoebenchError as exc:
        raise _fail(exc) from None
    if fail_on_regression is not None:
        bad = comparison.regressions(fail_on_regression)
        if bad:
            err.print(
                f"moebench: {len(bad)} significant regression(s) above {fail_on_regression:g}%",
                markup=False,
            )
            raise typer.Exit(1)


@app.command()
def validate(scenario: ScenarioArg) -> None:
    """Validate SCENARIO completely (schema, sweep, routing, capacity) without running it."""
    _use_interpreter_without_gpu()
    from moebench.runner import plan

    try:
        s = _load(scenario)
        planned = plan(s)
    except MoebenchError as exc:
        raise _fail(exc) from None
    t = Table(title=f"{s.name}: {len(planned)} case(s), arms {', '.join(s.arms)}")
    for col in ("case", "routing", "capacity rows", "ranks", "live rows min/max", "empty experts"):
        t.add_column(col)
    for p in planned:
        counts = p.counts_RE[list(p.ranks)]
        live = counts.sum(dim=1).tolist()
        empty = (counts == 0).sum(dim=1).tolist()
        t.add_row(
            p.case.case_id,
            p.routing.label,
            str(p.capacity_rows),
            str(len(p.ranks)),
            f"{min(live)} / {max(live)}",
            f"{min(empty)} / {max(empty)}",
        )
    out.print(t)


@app.command()
def arms() -> None:
    """Each arm: what it does, the kernels it launches, its sources and their hash."""
    _use_interpreter_without_gpu()
    from arms import ARMS
    from moebench.runner import arm_provenance

    prov = arm_provenance(tuple(ARMS))
    t = Table(title="arms")
    for col in ("arm", "kernels", "sources sha256", "files"):
        t.add_column(col, overflow="fold")
    for name, mod in ARMS.items():
        doc = (mod.__doc__ or "").strip().splitlines()[0]
        t.add_row(
            f"{name}\n{doc}",
            "\n".join(mod.KERNELS),
            prov[name]["hash"],
            "\n".join(prov[name]["files"]),
        )
    out.print(t)


@app.command()
def env() -> None:
    """Versions, GPU and git state, as every manifest records them."""
    _use_interpreter_without_gpu()
    from moebench.provenance import environment

    t = Table(title="environment", show_header=False)
    for k, v in environment().items():
        t.add_row(k, str(v))
    out.print(t)


@app.command()
def lock(scenario: ScenarioArg) -> None:
    """Pin the current source hash of each of SCENARIO's arms into its expect_sources."""
    _use_interpreter_without_gpu()
    from moebench.lock import write_pins

    try:
        pins = write_pins(scenario)
    except MoebenchError as exc:
        raise _fail(exc) from None
    for arm, h in pins.items():
        out.print(f"{arm}: {h}")
    out.print(f"pinned {len(pins)} arm(s) in {scenario}")


app.add_typer(trace_app, name="trace")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
