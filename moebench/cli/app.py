"""The Typer face of moebench: thin commands over plain functions.

Every user mistake is a MoebenchError: one line on stderr, exit code 2, no traceback.
Exit codes: 0 done, 1 a gate failed (mismatch), an arm or case could not run (error rows) or a
gated regression, 2 bad input, 3 a device fault stopped the run, 130 interrupted (SIGINT),
143 terminated (SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from moebench.cli import info
from moebench.cli.common import DEFAULT_WIDTH, ScenarioArg, err, out
from moebench.cli.common import fail as _fail
from moebench.cli.common import load as _load
from moebench.cli.common import use_interpreter_without_gpu as _use_interpreter_without_gpu
from moebench.cli.trace import trace_app
from moebench.core.errors import DeviceFault, MoebenchError, one_line

app = typer.Typer(
    help="Prove that a Mixture-of-Experts FFN change is faster, where, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # -h beside --help on every command: click hands a group's help names to its subcommands.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from moebench.core.version import __version__

        out.print(f"moebench {__version__}", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print moebench's version and exit.",
            is_eager=True,
            callback=_version,
        ),
    ] = False,
) -> None:
    """Prove that a Mixture-of-Experts FFN change is faster, where, and why."""


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
        typer.Option(
            help="A/A control: also time a second copy of the baseline arm, "
            "'<baseline>~aa', to measure the false-positive rate (measure.aa)."
        ),
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
    nproc: Annotated[
        int | None,
        typer.Option(
            help="topology.mode distributed: start this many ranks under torchrun "
            "(dp x tp of the scenario)."
        ),
    ] = None,
    dist_timeout: Annotated[
        float,
        typer.Option(
            help="topology.mode distributed: seconds a collective may wait for the "
            "other ranks before the run stops as failed."
        ),
    ] = 300.0,
    exit_code_file: Annotated[Path | None, typer.Option(hidden=True)] = None,
    launch_command: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Check, then time, every arm of every case of SCENARIO; write Parquet; print a summary."""
    _use_interpreter_without_gpu()
    from moebench.cli import preflight
    from moebench.comm import world as distributed
    from moebench.run.options import RunOptions
    from moebench.run.start import run as run_scenario

    options = RunOptions(
        results_dir=results,
        resume=resume,
        allow_mismatch=allow_mismatch,
        allow_source_drift=allow_source_drift,
        isolate=isolate,
        case_timeout_s=case_timeout,
        aa=aa,
        dist_timeout_s=dist_timeout,
        command=launch_command or " ".join(sys.argv),
    )
    if nproc is not None:  # distributed: this process only launches the ranks
        try:
            preflight.check_run(_load(scenario), options, baseline, nproc)
        except MoebenchError as exc:
            raise _fail(exc) from None
        raise typer.Exit(_launch(scenario, nproc, options, baseline))
    # Under torchrun only rank 0 talks; every rank exits with the run's code (_end_rank).
    ranked = distributed.env_world()
    leader = ranked is None or ranked[0] == 0
    say = err.print if leader else (lambda *a, **k: None)
    end = lambda code, hard=False: _end_rank(code, ranked, exit_code_file, leader, hard)
    try:
        s = _load(scenario)
        if ranked is not None and s.topology.mode != "distributed":
            raise MoebenchError(
                f"{scenario}: topology.mode is {s.topology.mode!r}; ranks "
                "started by torchrun need topology.mode: distributed"
            )
        preflight.check_run(s, options, baseline)  # every option, before any work
        progress = _run_progress(s, options) if leader else None
        with progress or contextlib.nullcontext():
            summary = run_scenario(s, options, progress)
    except MoebenchError as exc:
        if leader:
            _fail(exc)
        raise end(2, hard=ranked is not None) from None
    except distributed.RankFailure as exc:
        say(f"moebench: error: {exc.message}", markup=False)
        raise end(2 if exc.input_error else 3, hard=True) from None
    except DeviceFault as exc:
        say(f"moebench: error: {exc}", markup=False)
        raise end(3, hard=ranked is not None) from None
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", 2)
        msg = str(exc) if getattr(exc, "signum", None) else "interrupted; finished cases are kept"
        say(f"moebench: {msg}", markup=False)
        raise end(128 + signum, hard=ranked is not None) from None
    if not leader:
        raise end(1 if summary.mismatches or summary.errors else 0)
    out.print(
        f"run {summary.run_id}: {summary.cases_run} cases run, "
        f"{summary.cases_skipped} already done -> {summary.run_dir}",
        soft_wrap=True,  # one line, however long the path
    )
    try:
        _print_comparison([summary.run_dir], baseline or s.measure.baseline, "table", 2.0)
    except MoebenchError as exc:  # the run is kept; only its summary could not be shown
        err.print(f"moebench: error: the summary: {one_line(exc, first=True)}", markup=False)
        raise end(1) from None
    if summary.warnings:
        err.print(f"moebench: warning: {'; '.join(summary.warnings[:3])}", markup=False)
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
        raise end(1)
    raise end(0)


def _run_progress(s, options):
    """The leader's progress display, with the warnings that belong before the run starts: a
    regime this device cannot record and, on the CPU, cases estimated past their time limit."""
    from moebench.cli import preflight
    from moebench.cli.progress import CliProgress
    from moebench.plan.cases import plan

    device = preflight.device_of(s)
    notes = preflight.notes(s, device, options.aa)
    if s.model_run is not None:  # the model regime (cli.model_preflight)
        from moebench.cli.model_preflight import model_notes

        notes += model_notes(s, device, options.aa)
    elif s.step is not None:
        from moebench.cli import step_preflight
        from moebench.plan.steps import plan_step_case
        from moebench.spec.sweep import expand

        notes += step_preflight.step_notes(s, device, options.aa)
        if device == "cpu":
            planned = [plan_step_case(c) for c in expand(s)]
            costs = step_preflight.step_costs(planned, device, options.aa)
            slow = preflight.slow_cases(costs)
            notes += [slow] if slow else []
    elif device == "cpu":
        slow = preflight.slow_cases(preflight.case_costs(plan(s), device, options.aa))
        notes += [slow] if slow else []
    return CliProgress(err, notes)


def _launch(scenario: Path, nproc: int, options, baseline: str | None) -> int:
    """``run --nproc N`` (its options checked): start N ranks under torchrun."""
    from moebench.comm import world as distributed

    args = ["run", str(scenario), "--results", str(options.results_dir),
            "--dist-timeout", repr(options.dist_timeout_s)]  # fmt: skip
    if options.resume is not None:
        args += ["--resume", str(options.resume)]
    if baseline is not None:
        args += ["--baseline", baseline]
    args += [flag for flag, on in (("--allow-mismatch", options.allow_mismatch),
                                   ("--allow-source-drift", options.allow_source_drift),
                                   ("--aa", options.aa)) if on]  # fmt: skip
    try:
        return distributed.launch(nproc, args, command=" ".join(sys.argv))
    except KeyboardInterrupt:
        err.print("moebench: interrupted; finished cases are kept (see the manifest to resume)")
        return 130


def _end_rank(code: int, ranked, exit_code_file: Path | None, leader: bool, hard: bool):
    """The exit of ``run``. A rank launched by ``--nproc`` leaves its code to rank 0's file and
    exits 0, so torchrun does not report an ordinary outcome as a crashed worker. ``hard``: a
    distributed rank that stopped on an error leaves at once, skipping the teardown of
    collectives its peers may never have matched (it could block)."""
    if ranked is not None and exit_code_file is not None:
        if leader:
            exit_code_file.write_text(f"{code}\n")
        code = 0
    if hard:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return typer.Exit(code)


@app.command("run-case", hidden=True)
def run_case(job: Annotated[Path, typer.Argument(help="Job file written by run --isolate.")]):
    """Internal: run one case of an isolated run in this process."""
    _use_interpreter_without_gpu()
    from moebench.run.child import child_main

    try:
        code = child_main(job)
    except MoebenchError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt as exc:
        raise typer.Exit(128 + getattr(exc, "signum", 2)) from None
    raise typer.Exit(code)


def _print_comparison(
    runs: list[Path],
    baseline: str | None,
    fmt: str,
    threshold: float,
    correction: str = "bonferroni",
    plot: Path | None = None,
    force: bool = False,
    timings: bool = False,
    width: int | None = None,
    slo_tpot_ms: float | None = None,
    non_moe_us: float | None = None,
    non_moe_from: str | None = None,
):
    from moebench.analysis.compare import compare_runs
    from moebench.core.families import DEFAULT_BASELINE
    from moebench.report.render import render
    from moebench.results.reader import load_run

    loaded = [load_run(r) for r in runs]
    note, source = None, ""
    if non_moe_from is not None:  # the step regime's non-MoE time, measured by a model run
        from moebench.analysis.model_summary import measured_non_moe

        if non_moe_us is not None:
            raise MoebenchError("give --non-moe-us or --non-moe-from, not both")
        where, at, batch = non_moe_from.rpartition("@")
        if not (at and batch.isdigit()):
            where, batch = non_moe_from, ""
        non_moe_us, source = measured_non_moe(load_run(Path(where)), int(batch) if batch else None)
        note = f"step regime: non-MoE time {non_moe_us:,.1f} us, {source} (--non-moe-from)"
    if baseline is None:
        scenario = loaded[0].manifest.get("scenario") or {}
        measure = (scenario.get("normalised") or {}).get("measure") or {}
        baseline = measure.get("baseline") or DEFAULT_BASELINE
    comparison = compare_runs(
        loaded, baseline=baseline, threshold_pct=threshold, correction=correction, force=force,
        slo_tpot_ms=slo_tpot_ms, non_moe_us=non_moe_us, non_moe_source=source,
    )  # fmt: skip
    if note is not None:
        comparison.warnings.append(note)
    for w in comparison.warnings:
        err.print(f"moebench: warning: {w}", markup=False)
    plots = []
    if plot is not None:
        from moebench.report.plots import write_plots

        plots = [str(p) for p in write_plots(comparison, plot)]
        err.print(f"moebench: {len(plots)} plot(s) written to {plot}", markup=False)
    # At most 120 columns unless asked (--width): a terminal's own width when narrower, 120 for
    # a pipe or a file.
    if width is None:
        width = min(out.width, DEFAULT_WIDTH) if sys.stdout.isatty() else DEFAULT_WIDTH
    view = ("cpu-timings" if timings else "auto") if comparison.devices == ("cpu",) else "timings"
    text = render(comparison, fmt, width=width, plots=plots, view=view)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return comparison


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (results/<run_id>).")],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Arm the others are compared against (default: the scenario's "
            "measure.baseline, recorded in the run's manifest)."
        ),
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option(
            help="Before/after: compare every cell of RUNS with the same case, stage and arm "
            "of this baseline run (unpaired; refuses another environment or shape unless "
            "--force)."
        ),
    ] = None,
    format: Annotated[str, typer.Option(help="table | markdown | csv | json")] = "table",
    threshold: Annotated[
        float, typer.Option(help="Changes smaller than this many percent count as SAME.")
    ] = 2.0,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(
            help="With --against: exit 1 when a cell is significantly slower than in the "
            "baseline run by more than this many percent (arms are never regressions of "
            "each other)."
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="Write PNGs (stage breakdown, per-rank spread, speedup against "
            "live/capacity) into this folder."
        ),
    ] = None,
    no_correction: Annotated[
        bool,
        typer.Option(
            "--no-correction", help="95% CI per cell instead of Bonferroni over all cells."
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            help="Compare runs that would be refused (no shared case, another "
            "environment or shape)."
        ),  # fmt: skip
    ] = False,
    timings: Annotated[
        bool,
        typer.Option(
            help="CPU runs: show the interpreter's timings too (never with verdicts; "
            "by default a CPU run shows its gates and work ledger)."
        ),  # fmt: skip
    ] = False,
    width: Annotated[
        int | None,
        typer.Option(
            help="Columns of the table (default: the terminal's, at most 120).", show_default=False
        ),  # fmt: skip
    ] = None,
    slo_tpot_ms: Annotated[
        float | None,
        typer.Option(
            help="Step and model regimes: the SLO on P99 TPOT in ms for the goodput, instead of "
            "the scenario's step.slo_tpot_ms or model_run.slo_tpot_ms (an assumption, so no new "
            "run is needed).",
            show_default=False,
        ),
    ] = None,
    non_moe_us: Annotated[
        float | None,
        typer.Option(
            help="Step regime: the non-MoE time of a step in us, instead of the scenario's "
            "step.non_moe_us.",
            show_default=False,
        ),
    ] = None,
    non_moe_from: Annotated[
        str | None,
        typer.Option(
            help="Step regime: the non-MoE time measured by a model regime run (RUN_DIR, or "
            "RUN_DIR@BATCH when it ran several batches): its moebench:none decode step P50.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Medians, noise, per-rank spread, change against the baseline arm with an exact interval
    corrected for the number of cells, a decision, the A/A false-positive rate; plots. With
    --against BASE: each cell against the same cell of the baseline run."""
    if format not in ("table", "markdown", "csv", "json"):
        raise _fail(
            MoebenchError(f"--format: expected table, markdown, csv or json, got {format!r}")
        )
    correction = "none" if no_correction else "bonferroni"
    if fail_on_regression is not None and against is None:
        raise _fail(MoebenchError(
            "--fail-on-regression gates a run against a baseline run: give --against BASE "
            "(a difference between arms is what the arms measure, not a regression)"
        ))  # fmt: skip
    if against is not None:
        try:
            result = _print_against(runs, against, format, threshold, correction, force)
        except MoebenchError as exc:
            raise _fail(exc) from None
        if fail_on_regression is not None:
            bad = result.regressions(fail_on_regression)
            if bad:
                worst = max(bad, key=lambda r: r.change_pct)
                err.print(
                    f"moebench: {len(bad)} significant regression(s) above "
                    f"{fail_on_regression:g}% against {result.base_run} (worst: {worst.case_id} "
                    f"{worst.stage} {worst.arm} {worst.change_pct:+.1f}%)",
                    markup=False,
                )
                raise typer.Exit(1)
        return
    try:
        _print_comparison(runs, baseline, format, threshold, correction, plot, force, timings,
                          width, slo_tpot_ms, non_moe_us, non_moe_from)  # fmt: skip
    except MoebenchError as exc:
        raise _fail(exc) from None


def _print_against(runs, against, fmt, threshold, correction, force):
    from moebench.analysis.against import compare_against
    from moebench.report.against import render_against
    from moebench.results.reader import load_run

    base = load_run(against)
    loaded = [load_run(r) for r in runs]
    result = compare_against(loaded, base, threshold_pct=threshold, correction=correction,
                             force=force)  # fmt: skip
    for w in result.warnings:
        err.print(f"moebench: warning: {w}", markup=False)
    sys.stdout.write(render_against(result, fmt))
    return result


for command in (info.validate, info.arms, info.env, info.lock):
    app.command()(command)
app.add_typer(trace_app, name="trace")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
