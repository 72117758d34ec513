"""Writing a run: one folder per run, a manifest and four Parquet tables (docs/DESIGN.md 9).

Layout::

    results/<run_id>/manifest.json
    results/<run_id>/samples/<case_id>.parquet
    results/<run_id>/checks/<case_id>.parquet
    results/<run_id>/routing/<case_id>.parquet
    results/<run_id>/ledger/<case_id>.parquet

Every file is written to a temp file in its own folder (name starting with ``.`` and ending in
``.tmp``), fsynced, then renamed over its final name with ``os.replace``; the folder is fsynced
after the rename. A case is finished only when its four parts exist *and* the manifest, rewritten
after the parts, lists it in ``finished_cases`` (a run written before the ledger table has no
ledger parts: ``OPTIONAL_TABLES``). Readers trust the manifest, never a directory listing, so a
part left by a crash between the parts and the manifest is ignored by ``load_run`` and deleted by
``RunWriter.resume``.

Manifest keys owned here: ``results_format``, ``run_id``, ``status`` (running, complete,
mismatch, errors, failed, interrupted), ``started_at``, ``ended_at``, ``resumed_at`` (list) and
``finished_cases`` (list, in the order written). Everything else (``scenario``, ``sources``,
``environment``, ...) is the caller's and is stored as given.

``run_dir/.scratch/`` is the caller's working space (an isolated case's child writes there); it is
never read by ``load_run`` and is emptied by ``resume``.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from moebench.core.errors import ResultsError, one_line
from moebench.results.files import (
    atomic_write,
    check_room,
    checked_manifest,
    jsonable,
    lock_run,
    now_text,
    write_manifest,
)
from moebench.results.schema import (
    DEFAULT_MIN_FREE_MB,
    FINAL_STATUSES,
    OPTIONAL_TABLES,
    RESERVED_KEYS,
    RESULTS_FORMAT,
    SCRATCH,
    TABLES,
    check_case_id,
    check_run_id,
    rows_to_table,
)


class RunWriter:
    """Writes one run folder. Hold one writer per run: a lock file refuses a second writer."""

    def __init__(self, run_dir: Path, manifest: dict, lock_file) -> None:
        # Use RunWriter.create or RunWriter.resume.
        self.run_dir = run_dir
        self._manifest = manifest
        self._lock_file = lock_file

    @property
    def run_id(self) -> str:
        return self._manifest["run_id"]

    @property
    def manifest(self) -> dict:
        """A copy of the manifest as last written."""
        return copy.deepcopy(self._manifest)

    @property
    def finished_cases(self) -> set[str]:
        return set(self._manifest["finished_cases"])

    @classmethod
    def create(
        cls, root: Path, run_id: str, manifest: dict, *, min_free_mb: int = DEFAULT_MIN_FREE_MB
    ) -> RunWriter:
        """Create ``root/run_id`` with its manifest (status ``running``); ResultsError on any
        problem with the folder: not writable, already there, or less than ``min_free_mb`` free."""
        check_run_id(run_id)
        manifest = jsonable(manifest)
        reserved = (RESERVED_KEYS - {"run_id", "started_at"}) & set(manifest)
        if reserved:
            raise ValueError(f"manifest keys {sorted(reserved)} are written by the result store")
        if manifest.get("run_id", run_id) != run_id:
            raise ValueError(f"manifest run_id {manifest['run_id']!r} is not {run_id!r}")
        root = Path(root)
        check_room(root, min_free_mb)  # before anything is created
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ResultsError(f"cannot create results folder {root}: {one_line(exc)}") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise ResultsError(f"results folder {root} is not writable")
        run_dir = root / run_id
        try:
            run_dir.mkdir()
        except FileExistsError:
            raise ResultsError(f"run folder {run_dir} already exists") from None
        except OSError as exc:
            raise ResultsError(f"cannot create run folder {run_dir}: {one_line(exc)}") from None
        lock_file = lock_run(run_dir)
        for table in TABLES:
            (run_dir / table).mkdir()
        full = {"results_format": RESULTS_FORMAT, "run_id": run_id, "status": "running"}
        full["started_at"] = manifest.get("started_at") or now_text()
        full |= {k: v for k, v in manifest.items() if k not in RESERVED_KEYS}
        full |= {"ended_at": None, "resumed_at": [], "finished_cases": []}
        try:
            write_manifest(run_dir, full)
        except OSError as exc:
            raise ResultsError(f"cannot write manifest in {run_dir}: {one_line(exc)}") from None
        return cls(run_dir, full, lock_file)

    @classmethod
    def resume(cls, run_dir: Path, *, min_free_mb: int = DEFAULT_MIN_FREE_MB) -> RunWriter:
        """Reopen an interrupted run: delete temp files, the scratch folder and parts of
        unfinished cases, check that every finished case has its parts (all four, or the three
        of a run written before the ledger: ``OPTIONAL_TABLES``), set status back to ``running``.
        Nothing changes when the folder is not a run, is locked, or has no room."""
        run_dir = Path(run_dir)
        manifest = checked_manifest(run_dir)
        check_room(run_dir, min_free_mb)
        lock_file = lock_run(run_dir)
        finished = set(manifest["finished_cases"])
        try:
            for stray in run_dir.glob(".*.tmp"):
                stray.unlink()
            shutil.rmtree(run_dir / SCRATCH, ignore_errors=True)
            for table in TABLES:
                folder = run_dir / table
                folder.mkdir(exist_ok=True)
                for path in folder.iterdir():
                    part = path.name.endswith(".parquet") and path.name[: -len(".parquet")]
                    if path.name.endswith(".tmp") or (part and part not in finished):
                        path.unlink()
                missing = [c for c in finished if not (folder / f"{c}.parquet").is_file()]
                if missing and table not in OPTIONAL_TABLES:
                    raise ResultsError(
                        f"run {run_dir} lists case {missing[0]!r} as finished but "
                        f"{table}/{missing[0]}.parquet is missing"
                    )
            manifest["status"] = "running"
            manifest["ended_at"] = None
            manifest.setdefault("resumed_at", []).append(now_text())
            write_manifest(run_dir, manifest)
        except OSError as exc:
            lock_file.close()
            raise ResultsError(f"cannot resume {run_dir}: {one_line(exc)}") from None
        except ResultsError:
            lock_file.close()
            raise
        return cls(run_dir, manifest, lock_file)

    def write_case(
        self,
        case_id: str,
        samples: list[dict],
        checks: list[dict],
        routing: list[dict],
        ledger: list[dict] | tuple = (),
    ) -> None:
        """Write the parts of one case, then list it in the manifest's ``finished_cases``.

        ValueError (a programming error) for a bad case id, a case already finished, rows that do
        not fit the schema, or rows that name another run or case.
        """
        self._check_open()
        check_case_id(case_id)
        if case_id in self._manifest["finished_cases"]:
            raise ValueError(f"case {case_id!r} is already finished in run {self.run_id}")
        tables = {}
        parts = (("samples", samples), ("checks", checks), ("routing", routing),
                 ("ledger", list(ledger)))  # fmt: skip
        for name, rows in parts:
            table = rows_to_table(name, rows)
            for column, want in (("run_id", self.run_id), ("case_id", case_id)):
                got = set(pc.unique(table[column]).to_pylist()) - {want}
                if got:
                    raise ValueError(f"{name}.{column}: {sorted(got)} in a part for {want!r}")
            tables[name] = table
        try:
            for name, table in tables.items():
                path = self.run_dir / name / f"{case_id}.parquet"
                atomic_write(path, lambda f, t=table: pq.write_table(t, f))
            self._manifest["finished_cases"].append(case_id)
            write_manifest(self.run_dir, self._manifest)
        except OSError as exc:
            if self._manifest["finished_cases"][-1:] == [case_id]:
                self._manifest["finished_cases"].pop()  # memory agrees with the disk again
            raise ResultsError(
                f"cannot write case {case_id!r} in {self.run_dir}: {one_line(exc)}"
            ) from None

    def scratch(self, name: str) -> Path:
        """A fresh, empty folder ``run_dir/.scratch/<name>`` (``name`` a case id)."""
        self._check_open()
        check_case_id(name)
        folder = self.run_dir / SCRATCH / name
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise ResultsError(f"cannot create {folder}: {one_line(exc)}") from None
        return folder

    def update_manifest(self, **fields: Any) -> None:
        """Add or replace caller-owned manifest keys and rewrite the manifest atomically."""
        self._check_open()
        reserved = RESERVED_KEYS & set(fields)
        if reserved:
            raise ValueError(f"manifest keys {sorted(reserved)} are written by the result store")
        self._manifest.update(jsonable(fields))
        self._save()

    def finish(self, status: str, **extra: Any) -> None:
        """Record the final status (complete, mismatch, errors, failed, interrupted) and the end
        time, then release the lock. The writer cannot write after this; ``resume`` reopens the
        run."""
        self._check_open()
        if status not in FINAL_STATUSES:
            raise ValueError(f"status {status!r} not in {sorted(FINAL_STATUSES)}")
        reserved = RESERVED_KEYS & set(extra)
        if reserved:
            raise ValueError(f"manifest keys {sorted(reserved)} are written by the result store")
        self._manifest.update(jsonable(extra))
        self._manifest["status"] = status
        self._manifest["ended_at"] = now_text()
        self._save()
        shutil.rmtree(self.run_dir / SCRATCH, ignore_errors=True)
        self.close()

    def close(self) -> None:
        """Release the lock without touching the manifest (what a crash leaves behind)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._lock_file is None:
            raise ValueError(f"run {self.run_id} is closed; resume it to write again")

    def _save(self) -> None:
        try:
            write_manifest(self.run_dir, self._manifest)
        except OSError as exc:
            raise ResultsError(
                f"cannot write manifest in {self.run_dir}: {one_line(exc)}"
            ) from None
