"""A run's life, shared by both case loops: pins, opening (or resuming) the folder, the tally of
each finished case, and the manifest's last word (docs/DESIGN.md sections 8 and 9).

Opening a run records the scenario, the arm sources, the environment, the device and the cases;
resuming one first checks, before anything changes, that the folder is a run of this scenario,
with the same A/A setting, the same arm sources (unless ``--allow-source-drift``, which records
the drift) and the same kind of device, and then appends what changed to the manifest's
``resumes``. The simulated loop (``simulated``) and the distributed one (``distributed``) both go
through here, so a distributed run is resumed under exactly the same rules.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from moebench.core.errors import MoebenchError, SourceDriftError
from moebench.plan.cases import PlannedCase, arm_names, run_arms
from moebench.results.files import read_manifest
from moebench.results.rows import CaseRows
from moebench.results.schema import DEFAULT_MIN_FREE_MB, new_run_id
from moebench.results.writer import RunWriter
from moebench.run import provenance
from moebench.run.lock import read_lock
from moebench.run.options import RunOptions, RunSummary
from moebench.spec.build import timed_samples
from moebench.spec.schema import Scenario, to_dict
from moebench.spec.step import step_layers

BYTES_PER_SAMPLE = 200  # on disk, generously: the free-space check before a run


def sources_and_pins(s: Scenario, options: RunOptions) -> tuple[dict, list[str]]:
    """The arms' sources as they are now, and the drift from the scenario's pins (raises
    SourceDriftError on drift unless ``--allow-source-drift``; the lock file beside the scenario,
    when there is one, lets the error name the file or distribution that changed)."""
    arms = run_arms(s)
    sources = provenance.arm_provenance(arms)
    drift = provenance.check_pins(
        s.sources, sources, allow_drift=options.allow_source_drift, lock=read_lock(s)
    )
    return sources, drift


def room_mb(planned: list[PlannedCase]) -> float:
    """Free space a run needs: a margin plus a generous estimate of its Parquet parts."""
    rows = 0
    for p in planned:
        s = p.case.scenario
        layers = len(step_layers(s.step, s.model)) if s.step is not None else 0
        rows += timed_samples(s.measure, len(p.ranks), len(s.arms), s.step, layers)
    return DEFAULT_MIN_FREE_MB + rows * BYTES_PER_SAMPLE / 2**20


def open_run(
    s: Scenario,
    options: RunOptions,
    planned: list[PlannedCase],
    sources: dict,
    drift: list[str],
    device_type: str,
    extra: dict | None = None,
) -> RunWriter:
    """A new run folder with its manifest (``extra``: more manifest keys, e.g. the distributed
    world), or, with ``options.resume``, the run reopened after every resume check."""
    names = arm_names(s, options.aa)
    aa_arm = names[-1] if len(names) > len(s.arms) else None
    room = room_mb(planned)
    if options.resume is not None:
        return _reopen(s, options, sources, device_type, aa_arm, room)
    now = dt.datetime.now(dt.UTC)
    run_id = new_run_id(s.name, now)
    manifest = {
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
        "device": device_type,
        "cases": [p.case.case_id for p in planned],
        "aa": aa_arm,
        **(extra or {}),
    }
    return RunWriter.create(options.results_dir, run_id, manifest, min_free_mb=room)


def _reopen(
    s: Scenario, options: RunOptions, sources: dict, device_type: str, aa_arm, room: float
) -> RunWriter:
    """Resume a run folder after checking, before anything is changed, that it is a run of this
    scenario, with the same A/A setting and arm sources, on the same kind of device."""
    where = options.resume
    manifest = read_manifest(where)
    scenario = manifest.get("scenario") if isinstance(manifest.get("scenario"), dict) else {}
    if scenario.get("sha256") != s.sha256:
        was = str(scenario.get("sha256") or "none")[:12]
        raise MoebenchError(
            f"{where}: --resume needs the scenario the run started with (sha256 {was}...); "
            f"{s.path or s.name} has sha256 {s.sha256[:12]}..."
        )
    if manifest.get("aa") != aa_arm:
        raise MoebenchError(
            f"{where}: --resume needs the same A/A setting as the run "
            f"(it was started {'with' if manifest.get('aa') else 'without'} --aa)"
        )
    recorded = manifest.get("sources") if isinstance(manifest.get("sources"), dict) else {}
    drift = []
    for arm in s.arms:
        before = recorded.get(arm) if isinstance(recorded.get(arm), dict) else {}
        was, now = before.get("hash"), sources[arm]["hash"]
        if was != now:
            what = provenance.differences(before, sources[arm])
            why = f": {'; '.join(what[:3])}" if what else ""
            drift.append(
                f"arm {arm!r}: sources {str(was)[:16]}... when the run started, {now[:16]}... "
                f"now{why}"
            )
    if drift and not options.allow_source_drift:
        raise SourceDriftError(
            f"{where}: {drift[0]}; resuming would mix code in one run "
            "(pass --allow-source-drift to resume anyway)"
        )
    if manifest.get("device", device_type) != device_type:
        raise MoebenchError(
            f"{where}: the run started on {manifest['device']}, this resume would "
            f"run on {device_type}; timings of the two cannot share a run"
        )
    writer = RunWriter.resume(where, min_free_mb=room)
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


def new_summary(writer: RunWriter, planned: list[PlannedCase]) -> RunSummary:
    """The summary of a run just opened: on resume, what earlier sessions recorded still counts."""
    summary = RunSummary(run_dir=Path(writer.run_dir), run_id=writer.run_id)
    for key in ("mismatches", "errors"):
        earlier = writer.manifest.get(key)
        if isinstance(earlier, list):
            getattr(summary, key).extend(str(x) for x in earlier)
    done = writer.finished_cases
    summary.cases_skipped = sum(p.case.case_id in done for p in planned)
    return summary


def problems(check_rows: list[dict]) -> tuple[list[str], list[str]]:
    """(mismatches, errors) from checks rows: ``case/rankN/arm`` for an arm that failed a gate
    (``.../post_timing`` when its output changed during timing), ``case/rankN/arm: detail`` for an
    arm that could not run."""
    mismatches: list[str] = []
    errors: dict[str, str] = {}
    for c in check_rows:
        where = f"{c['case_id']}/rank{c['rank']}/{c['arm']}"
        if c["status"] == "fail":
            name = f"{where}/{c['gate']}" if c["gate"].endswith("post_timing") else where
            if name not in mismatches:
                mismatches.append(name)
        elif c["status"] == "error":
            errors.setdefault(where, f"{where}: {c['gate']}: {c['detail']}")
    return mismatches, list(errors.values())


def tally(summary: RunSummary, case_id: str, rows: CaseRows) -> None:
    """Count a finished case into the summary: its gate failures, errors and warnings."""
    summary.cases_run += 1
    mismatches, errors = problems(rows.checks)
    summary.mismatches += mismatches
    summary.errors += errors
    summary.warnings += [f"{case_id}: {w}" for w in rows.warnings]


def finish(writer: RunWriter | None, summary: RunSummary) -> None:
    """The last word of a run that went through every case: ``errors`` when an arm or case could
    not run, ``mismatch`` when an arm failed a gate, else ``complete``. ``writer`` None: a rank
    that does not write."""
    summary.status = (
        "errors" if summary.errors else "mismatch" if summary.mismatches else "complete"
    )
    if writer is not None:
        writer.finish(
            summary.status,
            mismatches=summary.mismatches,
            errors=summary.errors,
            warnings=summary.warnings,
        )


def finish_stopped(writer: RunWriter | None, summary: RunSummary, status: str, **extra) -> None:
    """The manifest of a run stopped early (``interrupted`` or ``failed``), with what it had
    recorded so far and ``extra`` (the error, the resume command, ...)."""
    summary.status = status
    if writer is not None:
        writer.finish(status, mismatches=summary.mismatches, errors=summary.errors, **extra)
