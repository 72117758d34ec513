"""``--isolate``: each case in a child process, so that a crash or a lost CUDA context costs only
that case.

The parent (this module) writes a job file into ``run_dir/.scratch/<case_id>/`` and starts
``python -m moebench.cli run-case JOB``, whose side is ``run.child``. The child parses the
scenario text from the job (the file on disk may have changed since), plans its one case, runs it
exactly as an in-process run would, and leaves three Parquet tables and ``result.json`` beside the
job; the parent, which alone holds the run's lock, reads them back and writes the case's parts.

When no result comes back (the child was killed, segfaulted, or passed its time limit plus a
grace period and was killed), the parent records the case itself: its routing rows, which it
computes on the host, and an ``error`` row for every rank and arm saying how the child ended and
the last line it printed. SIGINT or SIGTERM to the parent is forwarded to the child, which stops
after its current sample; the case is then not finished. The child runs in its own session, so a
Ctrl-C in the terminal reaches it only through the parent; a child whose parent disappears stops
at its next check point.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from moebench.core import faults
from moebench.core.errors import clip
from moebench.plan.cases import arm_names, routing_rows
from moebench.results.rows import CaseRows, Check
from moebench.results.schema import TABLES
from moebench.results.writer import RunWriter
from moebench.run.provenance import REPO_ROOT

GRACE_S = 30.0  # past the case time limit before the child is killed (the child checks first)
_POLL_S = 0.05


def run_case_in_child(p, writer: RunWriter, options, stop: faults.Stopper, limit_s: float | None):
    """Run planned case ``p`` in a child process; returns the case's ``CaseRows``."""
    s = p.case.scenario
    job_dir = writer.scratch(p.case.case_id)
    job = {
        "scenario_text": s.text,
        "scenario_path": s.path,
        "case_id": p.case.case_id,
        "run_id": writer.run_id,
        "allow_mismatch": options.allow_mismatch,
        "aa": options.aa,
        "case_timeout_s": limit_s,
        "parent_pid": os.getpid(),
        "out": str(job_dir),
    }
    (job_dir / "job.json").write_text(json.dumps(job), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO_ROOT), env.get("PYTHONPATH")) if x)
    cmd = [sys.executable, "-m", "moebench.cli", "run-case", str(job_dir / "job.json")]
    hard = None if limit_s is None else limit_s + GRACE_S
    overtime = forwarded = False
    with open(job_dir / "child.log", "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO_ROOT,
            start_new_session=True,  # a terminal's Ctrl-C reaches the parent, which forwards it
        )
        (job_dir / "child.pid").write_text(str(proc.pid))
        started = time.monotonic()
        try:
            while True:
                try:
                    rc = proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if stop.interrupted() and not forwarded:
                    proc.send_signal(signal.SIGINT)  # the child stops after its current sample
                    forwarded = True
                if hard is not None and not overtime and time.monotonic() - started > hard:
                    proc.kill()
                    overtime = True
        except BaseException:  # a second Ctrl-C, or anything else: never leave the child behind
            proc.kill()
            proc.wait()
            raise
    if stop.interrupted():
        raise faults.Interrupted(stop.signal)
    result = job_dir / "result.json"
    if result.is_file() and not overtime:
        rows = CaseRows(**{t: pq.read_table(job_dir / f"{t}.parquet").to_pylist() for t in TABLES})
        rows.warnings = list(json.loads(result.read_text(encoding="utf-8")).get("warnings", []))
    else:
        rows = CaseRows(routing=routing_rows(p, writer.run_id))
        if overtime:
            check = "timeout"
            detail = (
                f"timeout: the isolated case passed its limit of {limit_s:g} s and the "
                f"{GRACE_S:g} s grace, and was killed"
            )
        else:
            check = "run"
            how = f"killed by {_signame(-rc)}" if rc < 0 else f"exit code {rc}"
            last = _last_line(job_dir / "child.log")
            detail = f"crash: the isolated case died ({how})" + (
                f"; last output: {last}" if last else ""
            )
        for rank in p.ranks:
            rank_cols = {"run_id": writer.run_id, "case_id": p.case.case_id, "rank": rank}
            for arm in arm_names(s, options.aa):
                rows.add(rank_cols, arm, Check(name=check, status="error", detail=detail[:300]))
    shutil.rmtree(job_dir, ignore_errors=True)
    return rows


def _signame(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _last_line(log: Path) -> str:
    try:
        lines = log.read_bytes()[-4096:].decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    lines = [ln.strip() for ln in lines if ln.strip()]
    return clip(lines[-1], 200) if lines else ""
