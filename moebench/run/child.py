"""The child of an isolated case (``moebench run-case JOB``, started by ``run.isolate``).

It parses the scenario text from the job (the file on disk may have changed since), plans its
one case, runs it exactly as an in-process run would, and leaves three Parquet tables and
``result.json`` beside the job, ``result.json`` last: its presence says the tables are complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from moebench.core import faults
from moebench.measure.clock import Clock
from moebench.plan.cases import plan_case, select_device
from moebench.plan.steps import plan_step_case
from moebench.results.schema import TABLES, rows_to_table
from moebench.run.options import Progress, RunOptions
from moebench.run.simulated import case_rows
from moebench.spec.load import parse_scenario
from moebench.spec.sweep import expand


def child_main(job_path: Path) -> int:
    """The child's side: run one case from a job file, leave its tables beside the job.
    Returns 0, or 3 when a device fault stopped the case (its rows are written either way)."""
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    s = parse_scenario(job["scenario_text"], path=job["scenario_path"])
    case = next(c for c in expand(s) if c.case_id == job["case_id"])
    p = plan_step_case(case) if s.step is not None else plan_case(case)
    device = select_device(s)
    stop = faults.Stopper(parent_pid=job["parent_pid"])
    options = RunOptions(allow_mismatch=job["allow_mismatch"], aa=job.get("aa", False))
    with stop.signals():
        stop.check("start")
        clock = Clock(device)
        rows = case_rows(
            p, device, clock, job["run_id"], options, stop, job["case_timeout_s"], Progress()
        )
    out = Path(job["out"])
    for table in TABLES:
        pq.write_table(rows_to_table(table, getattr(rows, table)), out / f"{table}.parquet")
    tmp = out / ".result.json.tmp"
    tmp.write_text(json.dumps({"fault": rows.fault, "warnings": rows.warnings}), encoding="utf-8")
    os.replace(tmp, out / "result.json")  # last: its presence says the tables are complete
    return 3 if rows.fault else 0
