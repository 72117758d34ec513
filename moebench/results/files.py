"""The run folder's files: atomic writes, the manifest, the lock and the free-space check.

Every file is written to a temp file in its own folder (name starting with ``.`` and ending in
``.tmp``), fsynced, then renamed over its final name with ``os.replace``; the folder is fsynced
after the rename, so only whole files are ever visible (docs/DESIGN.md section 9). The write is
``moebench.core.atomic.atomic_write`` (re-exported here), which gives every file the mode a plain
``open()`` would under the umask; so does the lock file, which holds nothing secret.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from moebench.core.atomic import atomic_write
from moebench.core.errors import ResultsError, one_line
from moebench.results.schema import DEFAULT_MIN_FREE_MB, LOCK, MANIFEST, RESULTS_FORMAT


def jsonable(value: Any, where: str = "manifest") -> Any:
    """A plain JSON tree of ``value``: NaN and inf become null (an undefined figure, never 0),
    paths and datetimes become strings, tuples and sets lists. ValueError names the bad key."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        return [jsonable(v, where) for v in sorted(value, key=str)]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # numpy scalar
        return jsonable(value.item(), where)
    raise ValueError(f"{where}: a {type(value).__name__} cannot be stored in the manifest")


def write_manifest(run_dir: Path, manifest: dict) -> None:
    text = json.dumps(manifest, indent=2, allow_nan=False)
    atomic_write(run_dir / MANIFEST, lambda f: f.write(text.encode() + b"\n"))


def read_manifest(run_dir: Path | str) -> dict:
    """The manifest of a run folder, checked; ResultsError (one line) when it is not a run."""
    return checked_manifest(Path(run_dir))


def check_room(root: Path, min_free_mb: float = DEFAULT_MIN_FREE_MB) -> None:
    """ResultsError unless ``root`` (or, when it does not exist yet, its nearest existing parent)
    is a writable folder with at least ``min_free_mb`` free. Creates nothing."""
    root = Path(root)
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ResultsError(f"cannot create results folder {root}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ResultsError(f"results folder {probe} is not writable")
    free_mb = shutil.disk_usage(probe).free / 2**20
    if free_mb < min_free_mb:
        raise ResultsError(
            f"only {free_mb:.0f} MB free under {probe}; need at least {min_free_mb:.0f} MB"
        )


def checked_manifest(run_dir: Path) -> dict:
    path = run_dir / MANIFEST
    if not run_dir.is_dir():
        raise ResultsError(f"results folder not found: {run_dir}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"no manifest in {run_dir} (not a moebench run?)") from None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"corrupt manifest {path}: {one_line(exc)}") from None
    problem = None
    if not isinstance(manifest, dict):
        problem = "not a JSON object"
    elif not isinstance(manifest.get("run_id"), str):
        problem = "no run_id"
    elif not isinstance(manifest.get("finished_cases"), list) or not all(
        isinstance(c, str) for c in manifest["finished_cases"]
    ):
        problem = "finished_cases is not a list of case ids"
    elif manifest.get("results_format") != RESULTS_FORMAT:
        problem = f"results_format {manifest.get('results_format')!r}, expected {RESULTS_FORMAT}"
    if problem:
        raise ResultsError(f"corrupt manifest {path}: {problem}")
    return manifest


def now_text() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def lock_run(run_dir: Path):
    """An exclusive, non-blocking lock on ``run_dir/.lock``, held while the file stays open."""
    try:
        lock_file = open(run_dir / LOCK, "a+b")  # held for the writer's life
    except OSError as exc:
        raise ResultsError(f"cannot lock {run_dir}: {one_line(exc)}") from None
    try:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock_file.close()
        raise ResultsError(f"run {run_dir} is being written by another process") from None
    return lock_file
