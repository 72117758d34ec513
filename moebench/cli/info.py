"""The commands that look without running: ``validate`` (a scenario as run would check it),
``arms`` (every arm with its provenance), ``env`` (the machine as manifests record it) and
``lock`` (pin a scenario's arm sources). Registered on the app by `moebench.cli.app`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from moebench.cli.common import ScenarioArg, err, out
from moebench.cli.common import fail as _fail
from moebench.cli.common import load as _load
from moebench.cli.common import use_interpreter_without_gpu as _use_interpreter_without_gpu
from moebench.core.errors import MoebenchError


def validate(scenario: ScenarioArg) -> None:
    """Validate SCENARIO as fully as run would before any work (schema, sweep, routing, capacity,
    the expect_sources pins against the code now); per case, the samples it records and on the
    CPU an estimate of its time; warnings for what this device cannot record or finish."""
    _use_interpreter_without_gpu()
    from moebench.cli import preflight
    from moebench.plan.cases import arm_names, plan
    from moebench.run.lifecycle import sources_and_pins
    from moebench.run.options import RunOptions

    try:
        s = _load(scenario)
        if s.model_run is not None:  # the model regime: its own table (cli.model_preflight)
            from moebench.cli.model_preflight import validate_model

            sources_and_pins(s, RunOptions(allow_source_drift=False))
            return validate_model(s, out, err)
        if s.step is not None:
            from moebench.plan.steps import plan_step_case
            from moebench.spec.sweep import expand

            planned = [plan_step_case(c) for c in expand(s)]
        else:
            planned = plan(s)
        sources_and_pins(s, RunOptions(allow_source_drift=False))  # the pins, as run checks them
    except MoebenchError as exc:
        raise _fail(exc) from None
    if s.step is not None:
        return _validate_steps(s, planned)
    device = preflight.device_of(s)
    warnings = _machine_warnings(s) + preflight.notes(s, device)
    costs = preflight.case_costs(planned, device)
    slow = preflight.slow_cases(costs)
    warnings += [slow] if slow else []
    t = Table(title=f"{s.name}: {len(planned)} case(s), arms {', '.join(arm_names(s))}")
    cols = ("case", "routing", "capacity rows", "ranks", "live rows min/max", "empty experts",
            "samples", "est. time")  # fmt: skip
    for col in cols:
        t.add_column(col, overflow="fold")  # a case id is read whole, never cut short
    for p, cost in zip(planned, costs, strict=True):
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
            preflight.samples_cell(cost),
            "-" if cost.seconds is None else f"~{preflight.duration(cost.seconds)}",
        )
    t.caption = (
        preflight.samples_note(costs) + "; time: "
        + ("an estimate for this CPU under the Triton interpreter (gates, warm-up and samples)"
           if device == "cpu" else "estimated for CPU runs only")
    )  # fmt: skip
    out.print(t)
    cells = preflight.verdict_cells(s)
    if cells:
        from moebench.core.coverage import blocks_needed, cell_alpha

        need = blocks_needed(cell_alpha(0.05, cells))
        enough = "enough" if s.measure.blocks >= need else "TOO FEW on a GPU (CPU runs make none)"
        out.print(f"verdicts: {cells} cell(s) at 95% corrected need >= {need} paired blocks; "
                  f"measure.blocks is {s.measure.blocks}: {enough}", soft_wrap=True)  # fmt: skip
    for w in warnings:
        err.print(f"moebench: warning: {w}", markup=False)


def _machine_warnings(s) -> list[str]:
    """What ``validate`` says of this machine, not the scenario: a warning, since the scenario may
    be run elsewhere."""
    from moebench.plan.cases import select_device

    try:
        select_device(s)
    except MoebenchError as exc:
        return [f"{exc}; run refuses it on this machine"]
    return []


def _validate_steps(s, planned) -> None:
    """``validate`` of a step regime scenario: per case its layers, steps, samples and memory."""
    from moebench.cli import preflight, step_preflight
    from moebench.plan.cases import arm_names

    device = preflight.device_of(s)
    warnings = _machine_warnings(s) + step_preflight.step_notes(s, device)
    costs = step_preflight.step_costs(planned, device)
    slow = preflight.slow_cases(costs)
    warnings += [slow] if slow else []
    rows, where = step_preflight.step_rows(planned, costs, device)
    t = Table(title=f"{s.name}: {len(planned)} case(s) of the step regime, arms "
                    f"{', '.join(arm_names(s))}")  # fmt: skip
    for col in ("case", "MoE layers", "steps: tokens/rank x steps", "ranks", "samples", "memory",
                "est. time"):  # fmt: skip
        t.add_column(col, overflow="fold")
    for case_id, layers, steps, ranks, samples, memory, seconds in rows:
        t.add_row(case_id, layers, steps, ranks, samples, memory,
                  "-" if seconds is None else f"~{preflight.duration(seconds)}")  # fmt: skip
    t.caption = (f"samples: ranks x arms x steps x blocks x iterations x (layers + the whole "
                 f"step); memory: the estimate against {where}")  # fmt: skip
    out.print(t)
    for w in warnings:
        err.print(f"moebench: warning: {w}", markup=False)


def arms(
    scenario: Annotated[
        Path | None,
        typer.Option(help="Also list this scenario's arms (import strings, files beside it)."),
    ] = None,
    format: Annotated[str, typer.Option(help="table | json")] = "table",
) -> None:
    """Every arm (built-in, installed entry points, every experts backend of the installed
    transformers as hf:<backend>, a scenario's): origin, sources hash, files."""
    _use_interpreter_without_gpu()
    from moebench.arm import registry
    from moebench.plan.cases import run_arms
    from moebench.run.provenance import arm_provenance

    if format not in ("table", "json"):
        raise _fail(MoebenchError(f"--format: expected table or json, got {format!r}"))
    try:
        found = {name: registry.resolve(name) for name in registry.builtin_names()}
        for name in sorted(registry.entry_points()):
            found.setdefault(name, registry.resolve(name))
        hf_caption, cannot = _transformers_arms(found)
        if scenario is not None:
            found.update(run_arms(_load(scenario)))
        prov = arm_provenance(found)
    except MoebenchError as exc:
        raise _fail(exc) from None
    if format == "json":
        doc = {name: {"family": a.family, "contract": a.contract, "summary": a.summary,
                      **prov[name]} for name, a in found.items()}  # fmt: skip
        for ref, (family, where, why) in cannot.items():
            doc[ref] = {"family": family, "contract": "whole_ffn", "origin": "transformers",
                        "summary": why, "kernels": [where], "runs_here": False}  # fmt: skip
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        return
    t = Table(title="arms (moebench arms --format json: every file and distribution)",
              caption=hf_caption)  # fmt: skip
    t.add_column("arm", no_wrap=True)
    t.add_column("what it does", overflow="fold")
    t.add_column("sources", no_wrap=True)
    for name, a in found.items():
        p = prov[name]
        dists = ", ".join(f"{d} {v['version']}" for d, v in p["distributions"].items())
        t.add_row(*(escape(cell) for cell in (
            f"{name}\n{a.family}, {a.contract}\n{a.origin}",
            f"{a.summary}\nkernels: {', '.join(a.kernels) or '-'}\n{dists}",
            f"{p['hash'][:16]}\n{len(p['files'])} files",
        )))  # fmt: skip
    for ref, (family, where, why) in cannot.items():
        t.add_row(escape(f"{ref}\n{family}, whole_ffn\ntransformers"),
                  escape(f"{why}\nkernels: {where}"), "-")  # fmt: skip
    out.print(t)


def _transformers_arms(found: dict) -> tuple[str, dict[str, tuple[str, str, str]]]:
    """Every experts backend of the installed transformers as its ``hf:`` arm, into ``found``
    (each resolved as a scenario would, provenance and all); returns the table's caption and,
    for those that cannot run here, {ref: (family, where it is defined, the one-line error)}."""
    from moebench.arm import registry
    from moebench.integrations.transformers import backends

    if not backends.installed():
        return (
            "hf:<backend>: transformers is not installed (pip install 'moebench[transformers]')",
            {},
        )
    cannot = {}
    for name in backends.names():
        ref = registry.HF_PREFIX + name
        try:
            found[ref] = registry.resolve(ref)
        except registry.ArmError as exc:
            cannot[ref] = ("prefill", backends.origin(name), str(exc))
    version = backends.families.transformers_version()
    return (f"hf:<backend>: the experts backends of transformers {version}, as a prefill arm on "
            "Qwen3-MoE's experts class; in a scenario, its family and its model's class "
            "(--scenario shows them; docs/TRANSFORMERS.md)"), cannot  # fmt: skip


def env(
    format: Annotated[str, typer.Option(help="table | json")] = "table",
) -> None:
    """Versions, GPU and git state, as every manifest records them."""
    if format not in ("table", "json"):
        raise _fail(MoebenchError(f"--format: expected table or json, got {format!r}"))
    _use_interpreter_without_gpu()
    from moebench.run.provenance import environment

    found = environment()
    if format == "json":  # the manifest's "environment", key for key
        sys.stdout.write(json.dumps(found, indent=1, default=str) + "\n")
        return
    t = Table(title="environment", show_header=False)
    for k, v in found.items():
        t.add_row(k, escape(str(v)))
    out.print(t)


def lock(scenario: ScenarioArg) -> None:
    """Pin the current source hash of each of SCENARIO's arms into its expect_sources."""
    _use_interpreter_without_gpu()
    from moebench.run.lock import lock_path, write_pins

    try:
        pins = write_pins(scenario)
    except MoebenchError as exc:
        raise _fail(exc) from None
    # Plain lines, never wrapped at the terminal's width: a pin is copied and grepped whole.
    for arm, h in pins.items():
        sys.stdout.write(f"{arm}: {h}\n")
    sys.stdout.write(
        f"pinned {len(pins)} arm(s) in {scenario}; what each hash covers: {lock_path(scenario)}\n"
    )
