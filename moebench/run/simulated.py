"""The case loop: plan every case, build inputs, run the gates, time the arms, write a part.

Order of work per case and rank: inputs -> reference -> each arm once on poisoned buffers (gates)
-> cross-arm gates -> warm-up -> blocks of samples with the arms in rotating order -> a last check
that timing replays produced the gated output -> one Parquet part per table for the case.

Failures (see ``faults``): an arm that runs out of memory, fails to compile or raises becomes an
``error`` row and the other arms go on; inputs that cannot be built make every arm of that rank an
``error`` row; a case past its time limit gets a ``timeout`` row per arm and keeps what it measured.
Every case gets its three parts whatever happened to it. A device fault that loses the CUDA
context stops the run after writing the faulting case's rows; ``--isolate`` (``isolate.py``) runs
each case in a child process so that such a fault costs only that case.

The timing of the arms that passed their gates lives in ``timed``; what a case produced, and how
a failure becomes its rows, in ``caserows``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import signal
from dataclasses import dataclass, field
from pathlib import Path

import torch

from moebench.arm import registry
from moebench.arm.base import run_all
from moebench.core import faults
from moebench.core.errors import DeviceFault, MoebenchError, ScenarioError, SourceDriftError
from moebench.core.layout import align_up, capacity_rows
from moebench.core.vocabulary import AA_SUFFIX
from moebench.gates import checks as gates
from moebench.gates import dispatch as dispatch_gate
from moebench.gates import graph as graph_gate
from moebench.gates.families import Family, family_of
from moebench.measure.clock import Clock
from moebench.measure.timed import arm_module, time_rank
from moebench.plan.inputs import make_tokens
from moebench.results.rows import CaseRows, DeviceLost, record_failure
from moebench.results.store import (
    DEFAULT_MIN_FREE_MB,
    RunWriter,
    new_run_id,
    read_manifest,
)
from moebench.routing import synthetic as routing
from moebench.run import isolate, provenance
from moebench.spec.scenario import (
    MAX_TIMEOUT_S,
    Case,
    Scenario,
    expand,
    global_tokens,
    local_experts,
    to_dict,
)

BYTES_PER_SAMPLE = 200  # on disk, generously: the free-space check before a run


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    results_dir: Path = Path("results")
    resume: Path | None = None
    allow_mismatch: bool = False
    allow_source_drift: bool = False
    isolate: bool = False  # each case in a child process
    case_timeout_s: float | None = None  # overrides the scenario's measure.case_timeout_s
    aa: bool = False  # A/A control, as measure.aa
    # topology.mode distributed (moebench.dist_runner): collective timeout, seconds.
    dist_timeout_s: float = 300.0
    command: str = ""


@dataclass(frozen=True, kw_only=True)
class PlannedCase:
    case: Case
    routing: routing.Routing
    capacity_rows: int
    ranks: tuple[int, ...]
    counts_RE: torch.Tensor  # int64 [ep, local experts]: rows each expert of each rank receives


@dataclass(kw_only=True)
class RunSummary:
    run_dir: Path
    run_id: str
    cases_run: int = 0
    cases_skipped: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # per case: clocks that looked throttled
    status: str = "complete"


class Progress:
    """What the runner tells its caller; the CLI renders it with rich. Silent by default."""

    def start(self, total: int) -> None: ...

    def step(self, label: str, advance: int = 1) -> None: ...


# --------------------------------------------------------------------------- planning


def arm_provenance(names: tuple[str, ...]) -> dict[str, dict]:
    out = {}
    for name in names:
        arm = registry.resolve(name)
        files = provenance.source_hashes(arm.SOURCES)
        out[name] = {
            "hash": provenance.combined_hash(files),
            "files": files,
            "kernels": list(arm.KERNELS),
        }
    return out


def arm_names(s: Scenario, options: RunOptions) -> tuple[str, ...]:
    """The arms a run gates and times: the scenario's, then for the A/A control a second copy of
    the baseline, ``<baseline>~aa`` (same code, its own workspace, same inputs)."""
    aa = options.aa or s.measure.aa
    return (*s.arms, s.measure.baseline + AA_SUFFIX) if aa else s.arms


def select_device(s: Scenario) -> torch.device:
    want = s.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda" and not torch.cuda.is_available():
        raise ScenarioError(f"{s.path or s.name}: device: cuda requested but no GPU is visible")
    if want == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise MoebenchError(
            "CPU runs need TRITON_INTERPRET=1 in the environment before start "
            "(the moebench command sets it when no GPU is visible)"
        )
    return torch.device(want)


def plan_case(case: Case) -> PlannedCase:
    """Build the case's routing and capacity on the host; any impossibility is a ScenarioError."""
    s = case.scenario
    where = f"{s.path or s.name}: case {case.case_id}"
    E_loc = local_experts(s)
    ep = s.topology.ep
    r = s.routing
    try:
        rt = routing.synthesize(
            family=r.family,
            tokens=global_tokens(s),
            experts=s.model.experts,
            top_k=s.model.top_k,
            ep=ep,
            seed=r.seed,
            alpha=r.alpha,
            hot_rank=r.hot_rank,
            hot_fraction=r.hot_fraction,
            empty_fraction=r.empty_fraction,
            alignment=s.shape.alignment,
            trace_path=r.path,
            trace_layer=r.layer,
        )
    except ValueError as exc:
        raise ScenarioError(f"{where}: routing.family: {exc}") from None
    A = s.shape.alignment
    # One pass over the routing for every rank (ep can be large).
    counts = torch.bincount(rt.topk_ids_TK.flatten().to(torch.int64), minlength=s.model.experts)
    counts_RE = counts.view(ep, E_loc)
    needed = [routing.rows_needed(counts_RE[rank], A) for rank in range(ep)]
    cap = s.shape.capacity
    if cap == "formula":
        rows = capacity_rows(s.shape.tokens_per_rank, ep, s.model.top_k, E_loc, A)
    elif cap == "tight":
        rows = max(align_up(max(needed), A), A)
    else:
        rows = int(cap)
    worst = max(range(ep), key=lambda k: needed[k])
    if needed[worst] > rows:
        raise ScenarioError(
            f"{where}: shape.capacity: rank {worst} needs {needed[worst]} rows, capacity is {rows}"
        )
    ranks = tuple(s.measure.ranks) if s.measure.ranks is not None else tuple(range(ep))
    return PlannedCase(case=case, routing=rt, capacity_rows=rows, ranks=ranks, counts_RE=counts_RE)


def plan(s: Scenario) -> list[PlannedCase]:
    known = registry.builtin_names()
    unknown = [a for a in s.arms if a not in known]
    if unknown:
        raise ScenarioError(
            f"{s.path or s.name}: arms: unknown arm {unknown[0]!r}; known: {', '.join(known)}"
        )
    return [plan_case(c) for c in expand(s)]


def _room_mb(planned: list[PlannedCase]) -> float:
    """Free space a run needs: a margin plus a generous estimate of its Parquet parts."""
    rows = 0
    for p in planned:
        m = p.case.scenario.measure
        timed = ("ffn" in m.regimes) + len(m.stages) * ("kernel" in m.regimes)
        rows += len(p.ranks) * len(p.case.scenario.arms) * m.blocks * m.iterations * timed
    return DEFAULT_MIN_FREE_MB + rows * BYTES_PER_SAMPLE / 2**20


def problems(check_rows: list[dict]) -> tuple[list[str], list[str]]:
    """(mismatches, errors) from checks rows: ``case/rankN/arm`` for an arm that failed a gate
    (``.../post_timing`` when its output changed during timing), ``case/rankN/arm: detail`` for an
    arm that could not run."""
    mismatches: list[str] = []
    errors: dict[str, str] = {}
    for c in check_rows:
        where = f"{c['case_id']}/rank{c['rank']}/{c['arm']}"
        if c["status"] == "fail":
            name = f"{where}/post_timing" if c["check"] == "post_timing" else where
            if name not in mismatches:
                mismatches.append(name)
        elif c["status"] == "error":
            errors.setdefault(where, f"{where}: {c['check']}: {c['detail']}")
    return mismatches, list(errors.values())


# --------------------------------------------------------------------------- running


def case_timeout(s: Scenario, options: RunOptions) -> float | None:
    """The time limit of a case (its scenario's ``measure.case_timeout_s``, unless the command
    line gives one for every case)."""
    limit = options.case_timeout_s
    if limit is None:
        return s.measure.case_timeout_s
    if not (isinstance(limit, int | float) and 0 < limit <= MAX_TIMEOUT_S):
        raise MoebenchError(
            f"--case-timeout: must be > 0 and at most {MAX_TIMEOUT_S:g} seconds, got {limit!r}"
        )
    return float(limit)


def resume_command(s: Scenario, options: RunOptions, run_dir: Path) -> str:
    parts = ["moebench", "run", s.path or "SCENARIO", "--resume", str(run_dir)]
    if options.isolate:
        parts.append("--isolate")
    if options.case_timeout_s is not None:
        parts += ["--case-timeout", f"{options.case_timeout_s:g}"]
    if options.allow_mismatch:
        parts.append("--allow-mismatch")
    if options.allow_source_drift:
        parts.append("--allow-source-drift")
    return shlex.join(parts)


def _reopen(
    s: Scenario, options: RunOptions, sources: dict, device: torch.device, room_mb: float
) -> RunWriter:
    """Resume a run folder after checking, before anything is changed, that it is a run of this
    scenario, with the same arm sources, on the same kind of device."""
    where = options.resume
    manifest = read_manifest(where)
    scenario = manifest.get("scenario") if isinstance(manifest.get("scenario"), dict) else {}
    if scenario.get("sha256") != s.sha256:
        was = str(scenario.get("sha256") or "none")[:12]
        raise MoebenchError(
            f"{where}: --resume needs the scenario the run started with (sha256 {was}...); "
            f"{s.path or s.name} has sha256 {s.sha256[:12]}..."
        )
    names = arm_names(s, options)
    aa_arm = names[-1] if len(names) > len(s.arms) else None
    if manifest.get("aa") != aa_arm:
        raise MoebenchError(
            f"{where}: --resume needs the same A/A setting as the run "
            f"(it was started {'with' if manifest.get('aa') else 'without'} --aa)"
        )
    recorded = manifest.get("sources") if isinstance(manifest.get("sources"), dict) else {}
    drift = []
    for arm in s.arms:
        was = recorded.get(arm, {}).get("hash") if isinstance(recorded.get(arm), dict) else None
        now = sources[arm]["hash"]
        if was != now:
            drift.append(
                f"arm {arm!r}: sources {str(was)[:16]}... when the run started, {now[:16]}... now"
            )
    if drift and not options.allow_source_drift:
        raise SourceDriftError(
            f"{where}: {drift[0]}; resuming would mix code in one run "
            "(pass --allow-source-drift to resume anyway)"
        )
    if manifest.get("device", device.type) != device.type:
        raise MoebenchError(
            f"{where}: the run started on {manifest['device']}, this resume would "
            f"run on {device.type}; timings of the two cannot share a run"
        )
    writer = RunWriter.resume(where, min_free_mb=room_mb)
    env = provenance.environment()
    before = manifest.get("environment") if isinstance(manifest.get("environment"), dict) else {}
    changed = sorted(k for k in env.keys() | before.keys() if env.get(k) != before.get(k))
    history = manifest.get("resumes") if isinstance(manifest.get("resumes"), list) else []
    writer.update_manifest(
        resumes=history
        + [
            {
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "command": options.command,
                "source_drift": drift,
                "environment_changes": {k: [before.get(k), env.get(k)] for k in changed},
            }
        ]
    )
    return writer


def run(s: Scenario, options: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Run every case of the scenario; raises MoebenchError before any work for bad input.

    Raises ``faults.Interrupted`` (a KeyboardInterrupt) after SIGINT/SIGTERM, once the manifest
    says ``interrupted``, and ``DeviceFault`` once a lost CUDA context stopped the run."""
    progress = progress or Progress()
    if s.topology.mode == "distributed":  # real ranks: their own loop (moebench/dist_runner.py)
        from moebench.run import distributed as dist_runner

        return dist_runner.run(s, options, progress)
    case_timeout(s, options)  # a bad --case-timeout is a user error before any work
    sources = arm_provenance(s.arms)
    drift = provenance.check_pins(
        s.sources,
        {a: v["hash"] for a, v in sources.items()},
        allow_drift=options.allow_source_drift,
    )
    planned = plan(s)
    device = select_device(s)
    names = arm_names(s, options)
    aa_arm = names[-1] if len(names) > len(s.arms) else None
    clock = None if options.isolate else Clock(device)
    room_mb = _room_mb(planned)
    now = dt.datetime.now(dt.UTC)
    if options.resume is not None:
        writer = _reopen(s, options, sources, device, room_mb)
    else:
        run_id = new_run_id(s.name, now)
        writer = RunWriter.create(
            options.results_dir,
            run_id,
            {
                "run_id": run_id,
                "scenario": {
                    "name": s.name,
                    "path": s.path,
                    "sha256": s.sha256,
                    "text": s.text,
                    "normalised": to_dict(s),
                },
                "sources": sources,
                "source_drift": drift,
                "environment": provenance.environment(),
                "command": options.command,
                "options": {
                    "isolate": options.isolate,
                    "case_timeout_s": options.case_timeout_s,
                    "allow_mismatch": options.allow_mismatch,
                    "allow_source_drift": options.allow_source_drift,
                },
                "started": now.isoformat(),
                "device": device.type,
                "cases": [p.case.case_id for p in planned],
                "aa": aa_arm,
            },
            min_free_mb=room_mb,
        )
    summary = RunSummary(run_dir=writer.run_dir, run_id=writer.run_id)
    if options.resume is not None:  # what earlier sessions of this run recorded still counts
        for key in ("mismatches", "errors"):
            earlier = writer.manifest.get(key)
            if isinstance(earlier, list):
                getattr(summary, key).extend(str(x) for x in earlier)
    resume = resume_command(s, options, writer.run_dir)
    done = writer.finished_cases
    todo = [p for p in planned if p.case.case_id not in done]
    summary.cases_skipped = len(planned) - len(todo)
    progress.start(sum(len(p.ranks) * len(names) for p in todo))
    stop = faults.Stopper()
    fault = None
    with stop.signals():
        try:
            for p in todo:
                stop.check("between cases")
                limit = case_timeout(p.case.scenario, options)
                if options.isolate:
                    rows = isolate.run_case_in_child(p, writer, options, stop, limit)
                    progress.step(f"{p.case.case_id} (isolated)", len(p.ranks) * len(names))
                else:
                    rows = run_case(p, device, clock, writer.run_id, options, stop, limit, progress)
                writer.write_case(p.case.case_id, rows.samples, rows.checks, rows.routing)
                summary.cases_run += 1
                mismatches, errors = problems(rows.checks)
                summary.mismatches += mismatches
                summary.errors += errors
                summary.warnings += [f"{p.case.case_id}: {w}" for w in rows.warnings]
                if rows.fault:
                    fault = (p.case.case_id, rows.fault)
                    break
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", None) or stop.signal or signal.SIGINT
            summary.status = "interrupted"
            stopped = faults.Interrupted(signum)
            writer.finish(
                "interrupted",
                interrupted_by=stopped.signame,
                resume=resume,
                mismatches=summary.mismatches,
                errors=summary.errors,
            )
            raise faults.Interrupted(
                signum,
                f"interrupted by {stopped.signame}: {len(writer.finished_cases)} "
                f"finished case(s) kept in {writer.run_dir}; resume with: {resume}",
            ) from None
        except BaseException as exc:
            summary.status = "failed"
            writer.finish(
                "failed",
                error=faults.describe(exc),
                resume=resume,
                mismatches=summary.mismatches,
                errors=summary.errors,
            )
            raise
    if fault is not None:
        case_id, text = fault
        summary.status = "failed"
        writer.finish(
            "failed",
            error=text,
            fault_case=case_id,
            resume=resume,
            hint="resume runs the remaining cases in a fresh process; --isolate runs "
            "each case in its own process so that a device fault costs only that case",
            mismatches=summary.mismatches,
            errors=summary.errors,
        )
        raise DeviceFault(
            f"device fault in case {case_id} ({text}); the CUDA context is lost, so the run "
            f"stopped with {len(writer.finished_cases)} finished case(s) kept, this one's rows "
            f"included. Resume with: {resume}"
            + ("" if options.isolate else " (add --isolate so that a fault costs only its case)")
        )
    summary.status = (
        "errors" if summary.errors else "mismatch" if summary.mismatches else "complete"
    )
    writer.finish(
        summary.status,
        mismatches=summary.mismatches,
        errors=summary.errors,
        warnings=summary.warnings,
    )
    return summary


def _case_columns(p: PlannedCase, run_id: str) -> dict:
    s = p.case.scenario
    return {
        "run_id": run_id,
        "case_id": p.case.case_id,
        "tokens_per_rank": s.shape.tokens_per_rank,
        "capacity_rows": p.capacity_rows,
        "local_experts": local_experts(s),
        "hidden": s.model.hidden,
        "intermediate": s.model.intermediate,
        "top_k": s.model.top_k,
        "precision": s.precision,
        "activation": s.activation,
        "routing": p.routing.label,
        "gemm": s.gemm,
        "params": json.dumps(dict(p.case.params), sort_keys=True, default=str),
    }


def routing_rows(p: PlannedCase, run_id: str) -> list[dict]:
    """The case's `routing` rows (host statistics, one per rank); written whatever else fails."""
    s = p.case.scenario
    rows = []
    for rank in p.ranks:
        stats = routing.rank_statistics(
            p.routing.topk_ids_TK,
            rank=rank,
            ep=s.topology.ep,
            local_experts=local_experts(s),
            capacity_rows=p.capacity_rows,
        )
        rows.append(
            {
                "run_id": run_id,
                "case_id": p.case.case_id,
                "routing": p.routing.label,
                "tokens_per_rank": s.shape.tokens_per_rank,
                "trace_sha256": p.routing.trace_sha256,
                **stats,
            }
        )
    return rows


def _rank_inputs(p: PlannedCase, x_TD: torch.Tensor, rank: int, device: torch.device):
    """One rank's Problem (built by the arms' family) and its float32 reference output."""
    family = family_of(p.case.scenario)
    problem = family.problem(p.case.scenario, p.routing, p.capacity_rows, x_TD, rank, device)
    return problem, family.reference(problem)


def run_case(
    p: PlannedCase,
    device: torch.device,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    stop: faults.Stopper,
    limit_s: float | None = None,
    progress: Progress | None = None,
) -> CaseRows:
    """One case, every rank and arm; failures become rows (module docstring). Raises only
    ``faults.Interrupted`` (the case is then not finished)."""
    progress = progress or Progress()
    s = p.case.scenario
    family = family_of(s)
    names = arm_names(s, options)
    out = CaseRows(routing=routing_rows(p, run_id))
    live = {r["rank"]: r["live_rows"] for r in out.routing}
    cols = _case_columns(p, run_id)
    rank_cols = {**cols, "rank": p.ranks[0], "live_rows": live[p.ranks[0]]}
    x = None
    stop.start_case(limit_s)
    try:
        for rank in p.ranks:
            rank_cols = {**cols, "rank": rank, "live_rows": live[rank]}
            stop.check(f"rank {rank}, inputs")
            try:
                if x is None:
                    x = make_tokens(
                        tokens=global_tokens(s),
                        hidden=s.model.hidden,
                        seed=s.routing.seed,
                        device=device,
                    )
                problem, ref = _rank_inputs(p, x, rank, device)
            except Exception as exc:  # out of memory while building inputs: every arm's row
                record_failure(out, rank_cols, names, "inputs", exc, device)
                problem = ref = None
            if problem is None:
                faults.release(device)
                progress.step(f"{p.case.case_id} rank {rank} (inputs failed)", len(names))
                continue
            stage_sets, captures, timed = gate_rank(
                problem, ref, s, options, device, stop, out, rank_cols, family
            )
            weight_bytes = {a: family.weight_bytes(arm_module(a), problem) for a in timed}
            done = time_rank(
                timed, stage_sets, s, clock, rank_cols, stop, device, out, weight_bytes,
                family.weight_fields,
            )  # fmt: skip
            for arm in done:
                try:
                    same = gates.bitwise_compare(stage_sets[arm][0].y_TD, captures[arm].y_TD)
                except Exception as exc:
                    record_failure(out, rank_cols, [arm], "post_timing", exc, device)
                    continue
                out.add(
                    rank_cols,
                    arm,
                    gates.Check(
                        name="post_timing",
                        status="pass" if same.equal else "fail",
                        detail=f"output after timing vs gated run: {same.describe()}",
                    ),
                )
            for arm in names:
                note = "" if arm in done else " (not timed)"
                progress.step(f"{p.case.case_id} rank {rank} {arm}{note}")
            del stage_sets, captures, problem, ref
            faults.release(device)
    except faults.CaseTimeout as timeout:
        for arm in names:
            out.add(
                rank_cols,
                arm,
                gates.Check(name="timeout", status="error", detail=f"timeout: {timeout}"),
            )
    except DeviceLost as lost:
        out.fault = str(lost)
        hit = {
            c["arm"]
            for c in out.checks
            if c["rank"] == rank_cols["rank"] and c["status"] == "error"
        }
        for arm in names:
            if arm not in hit:
                out.add(
                    rank_cols,
                    arm,
                    gates.Check(name="aborted", status="error", detail=f"not finished: {lost}"),
                )
    finally:
        stop.end_case()
        out.warnings += clock.warnings() if clock is not None else []
    return out


def gate_rank(
    problem,
    ref,
    s: Scenario,
    options: RunOptions,
    device: torch.device,
    stop: faults.Stopper,
    out: CaseRows,
    rank_cols: dict,
    family: Family,
):
    """Gates 1-4 for every arm on this rank, rows into ``out``. Returns the workspaces and stages
    of the arms that ran, their captures, and the arms to time."""
    stage_sets = {}
    captures = {}
    bad: set[str] = set()
    names = arm_names(s, options)
    for name in names:
        stop.check(f"rank {rank_cols['rank']}, gates of {name}")
        arm = arm_module(name)
        try:
            before = 0
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats(device)
                before = torch.cuda.memory_allocated(device)
            ws = family.workspace(arm, problem)
            stages = arm.build(ws)
            ws.poison()
            run_all(stages)
            if problem.x_TD.is_cuda:
                torch.cuda.synchronize()
            memory = _memory_row(ws, device, before)
            cap = family.capture(ws)
            rows = family.checks(arm, ws, cap, ref, problem) + [memory]
        except Exception as exc:  # a kernel that cannot run this case: a row, not a crash
            record_failure(out, rank_cols, [name], "run", exc, device)
            bad.add(name)
            ws = stages = cap = None
        if name in bad:
            faults.release(device)
            continue
        captures[name] = cap
        stage_sets[name] = (ws, stages)
        more, raised = _device_gates(arm, name, problem, stages, family, device, out, rank_cols)
        rows += more
        if raised:
            bad.add(name)
        for c in rows:
            out.add(rank_cols, name, c)
        if any(c.failed for c in rows):
            bad.add(name)
    if captures:
        base = next(iter(captures))
        try:
            cross = family.cross_arm(base, captures, problem)
        except Exception as exc:
            record_failure(out, rank_cols, list(captures), "cross_arm", exc, device)
            bad |= set(captures)
            cross = {}
        for name, rows in cross.items():
            for c in rows:
                out.add(rank_cols, name, c)
            if any(c.failed for c in rows):
                bad.add(name)
    timed = [n for n in names if n in stage_sets and (options.allow_mismatch or n not in bad)]
    return stage_sets, captures, timed


def _memory_row(ws, device: torch.device, before: int) -> gates.Check:
    """Peak device memory of the arm's gate run (its workspace built and one eager run) above
    what was allocated before it (``before``: the rank's inputs and earlier arms' workspaces), the
    process's peak, and the bytes of its workspace: a ``memory`` row, figures in ``detail``."""
    ws_mib = graph_gate.workspace_bytes(ws) / 2**20
    if device.type != "cuda":
        return gates.Check(name="memory", status="skip",
                           detail=f"workspace {ws_mib:.3f} MiB; peak device memory: CPU run, "
                           "not measured")  # fmt: skip
    peak = torch.cuda.max_memory_allocated(device)
    return gates.Check(name="memory", status="pass",
                       detail=f"workspace {ws_mib:.3f} MiB; peak device memory of the arm's gate "
                       f"run {(peak - before) / 2**20:.3f} MiB above the {before / 2**20:.3f} MiB "
                       f"allocated before it (process peak {peak / 2**20:.3f} MiB)")  # fmt: skip


def _device_gates(
    arm, name, problem, stages, family, device, out, rank_cols
) -> tuple[list[gates.Check], bool]:
    """Gates 5 and 6 (graph replay, dispatch) for one arm that ran: their rows, and whether one
    raised (then it is an ``error`` row of that gate, already in ``out``; ``DeviceLost`` when it
    took the CUDA context)."""
    rows, raised = [], False
    for gate, fn in (
        ("graph_replay", lambda: graph_gate.graph_replay(
            arm, problem, lambda: family.workspace(arm, problem))),
        ("dispatch", lambda: [dispatch_gate.dispatch(arm, stages, problem.precision, device,
                                                     getattr(problem, "gemm", "triton"))]),
    ):  # fmt: skip
        try:
            rows += fn()
        except Exception as exc:
            record_failure(out, rank_cols, [name], gate, exc, device)
            raised = True
    if device.type == "cuda":
        faults.release(device)  # the replay gate's two workspaces and graph
    return rows, raised
