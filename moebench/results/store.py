"""The result store: one folder per run, a manifest and three Parquet tables (DESIGN section 9).

Layout::

    results/<run_id>/manifest.json
    results/<run_id>/samples/<case_id>.parquet
    results/<run_id>/checks/<case_id>.parquet
    results/<run_id>/routing/<case_id>.parquet

Every file is written to a temp file in its own folder (name starting with ``.`` and ending in
``.tmp``), fsynced, then renamed over its final name with ``os.replace``; the folder is fsynced
after the rename. A case is finished only when its three parts exist *and* the manifest, rewritten
after the parts, lists it in ``finished_cases``. Readers trust the manifest, never a directory
listing, so a part left by a crash between the parts and the manifest is ignored by ``load_run``
and deleted by ``RunWriter.resume``.

Manifest keys owned here: ``results_format``, ``run_id``, ``status`` (running, complete,
mismatch, errors, failed, interrupted), ``started_at``, ``ended_at``, ``resumed_at`` (list) and
``finished_cases`` (list, in the order written). Everything else (``scenario``, ``sources``,
``environment``, ...) is the caller's and is stored as given.

``run_dir/.scratch/`` is the caller's working space (an isolated case's child writes there); it is
never read by ``load_run`` and is emptied by ``resume``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import fcntl
import json
import math
import os
import re
import secrets
import shutil
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from moebench.core.errors import ResultsError
from moebench.core.vocabulary import REGIMES as VOCAB_REGIMES
from moebench.core.vocabulary import STAGE_ORDER

RESULTS_FORMAT = 1
MANIFEST = "manifest.json"
LOCK = ".lock"
TABLES = ("samples", "checks", "routing")
RESERVED_KEYS = frozenset(
    {"results_format", "run_id", "status", "started_at", "ended_at", "resumed_at", "finished_cases"}
)
SCRATCH = ".scratch"
# "mismatch": every case ran but some arm failed a correctness gate; "errors": every case ran but
# some arm or case could not (out of memory, compile error, time limit), recorded as `error` rows;
# "failed": the run stopped (a device fault); "interrupted": a signal stopped it. The runner exits
# non-zero for all four.
FINAL_STATUSES = frozenset({"complete", "mismatch", "errors", "failed", "interrupted"})
DEFAULT_MIN_FREE_MB = 100

# Every stage a sample may carry (the families' own, ``ffn``, and the distributed pass around it).
STAGES = frozenset(STAGE_ORDER)
REGIMES = frozenset(VOCAB_REGIMES)
DEVICES = frozenset({"cpu", "cuda"})
CHECK_STATUSES = frozenset({"pass", "fail", "error", "skip"})


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    # Every column is required: a missing value is NaN (floats) or "" (strings), never null.
    return pa.schema([pa.field(name, dtype, nullable=False) for name, dtype in fields])


_str, _i32, _i64, _f64 = pa.string(), pa.int32(), pa.int64(), pa.float64()

SAMPLES_SCHEMA = _schema(
    ("run_id", _str), ("case_id", _str), ("arm", _str), ("rank", _i32), ("stage", _str),
    ("regime", _str), ("block", _i32), ("position", _i32), ("iteration", _i32),
    ("time_us", _f64), ("device", _str), ("sm_clock_mhz", _f64), ("mem_clock_mhz", _f64),
    ("tokens_per_rank", _i64), ("live_rows", _i64), ("capacity_rows", _i64),
    ("local_experts", _i32), ("hidden", _i32), ("intermediate", _i32), ("top_k", _i32),
    ("precision", _str), ("activation", _str), ("routing", _str), ("gemm", _str),
    ("params", _str), ("weight_bytes", _i64), ("temperature_c", _f64), ("power_w", _f64),
    ("mode", _str), ("weights", _str), ("weight_copies", _i32),
)  # fmt: skip
# Samples columns added after the first runs, and what a part written before them reads as:
# weight bytes unknown (-1, never 0), temperature and power NaN, mode and weights "" (compare:
# not said), weight copies 0 (not said).
_LATER_SAMPLES = {
    "weight_bytes": -1, "temperature_c": math.nan, "power_w": math.nan, "mode": "",
    "weights": "", "weight_copies": 0,
}  # fmt: skip
MODES = frozenset({"eager", "graph"})
# warm: the weights as the previous sample left them in L2; cold: rotated copies (moebench/cold.py)
WEIGHTS = frozenset({"warm", "cold"})
CHECKS_SCHEMA = _schema(
    ("run_id", _str), ("case_id", _str), ("arm", _str), ("rank", _i32), ("check", _str),
    ("status", _str), ("error", _f64), ("detail", _str),
)  # fmt: skip
ROUTING_SCHEMA = _schema(
    ("run_id", _str), ("case_id", _str), ("rank", _i32), ("routing", _str),
    ("tokens_per_rank", _i64), ("local_experts", _i32), ("live_rows", _i64),
    ("capacity_rows", _i64), ("live_fraction", _f64), ("empty_experts", _i32),
    ("max_load", _f64), ("mean_load", _f64), ("overload", _f64), ("entropy", _f64),
    ("trace_sha256", _str),
)  # fmt: skip
SCHEMAS: dict[str, pa.Schema] = {
    "samples": SAMPLES_SCHEMA,
    "checks": CHECKS_SCHEMA,
    "routing": ROUTING_SCHEMA,
}
# Columns whose values come from a closed set; a typo here would silently vanish from compare.
_ENUMS: dict[str, dict[str, frozenset[str]]] = {
    "samples": {
        "stage": STAGES,
        "regime": REGIMES,
        "device": DEVICES,
        "mode": MODES,
        "weights": WEIGHTS,
    },
    "checks": {"status": CHECK_STATUSES},
    "routing": {},
}

_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CASE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+,-]{0,199}")
_NAME_MAX = 40


# ---------------------------------------------------------------------------------------------
# Names


def new_run_id(name: str, now: dt.datetime) -> str:
    """``YYYYmmdd-HHMMSS-<name>-<6 hex>``: UTC time, sanitised scenario name, random suffix.

    The result holds only ``[A-Za-z0-9._-]``, never ``..``, never starts with a dot, so it is one
    path component that cannot leave the results folder. A naive ``now`` is taken as UTC.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)
    stamp = now.astimezone(dt.UTC).strftime("%Y%m%d-%H%M%S")
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_name)
    clean = re.sub(r"\.{2,}", ".", clean)
    clean = re.sub(r"-{2,}", "-", clean).strip(".-_")[:_NAME_MAX].strip(".-_")
    run_id = f"{stamp}-{clean or 'run'}-{secrets.token_hex(3)}"
    check_run_id(run_id)
    return run_id


def check_run_id(run_id: str) -> None:
    """ResultsError unless ``run_id`` is a single safe path component (see ``new_run_id``)."""
    if not isinstance(run_id, str) or not _RUN_ID_RE.fullmatch(run_id) or ".." in run_id:
        raise ResultsError(
            f"invalid run id {run_id!r}: use 1-128 characters of [A-Za-z0-9._-], "
            "starting with a letter or digit, without '..'"
        )


def check_case_id(case_id: str) -> None:
    """ValueError unless ``case_id`` can name a part file (the runner builds case ids)."""
    # One file-name component: no separator, and the first character rules out "." and "..".
    if not isinstance(case_id, str) or not _CASE_ID_RE.fullmatch(case_id):
        raise ValueError(
            f"invalid case id {case_id!r}: use 1-200 characters of [A-Za-z0-9._=+,-], "
            "starting with a letter or digit"
        )


# ---------------------------------------------------------------------------------------------
# Atomic files


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, write) -> None:
    """Call ``write(binary_file)`` on a temp file beside ``path``, fsync, rename over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _jsonable(value: Any, where: str = "manifest") -> Any:
    """A plain JSON tree of ``value``: NaN and inf become null (an undefined figure, never 0),
    paths and datetimes become strings, tuples and sets lists. ValueError names the bad key."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        return [_jsonable(v, where) for v in sorted(value, key=str)]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # numpy scalar
        return _jsonable(value.item(), where)
    raise ValueError(f"{where}: a {type(value).__name__} cannot be stored in the manifest")


def _write_manifest(run_dir: Path, manifest: dict) -> None:
    text = json.dumps(manifest, indent=2, allow_nan=False)
    _atomic_write(run_dir / MANIFEST, lambda f: f.write(text.encode() + b"\n"))


def read_manifest(run_dir: Path | str) -> dict:
    """The manifest of a run folder, checked; ResultsError (one line) when it is not a run."""
    return _read_manifest(Path(run_dir))


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


def _read_manifest(run_dir: Path) -> dict:
    path = run_dir / MANIFEST
    if not run_dir.is_dir():
        raise ResultsError(f"results folder not found: {run_dir}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"no manifest in {run_dir} (not a moebench run?)") from None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"corrupt manifest {path}: {_one_line(exc)}") from None
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


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------------
# Rows -> tables


def rows_to_table(table: str, rows: list[dict]) -> pa.Table:
    """Build one table from row dicts with the fixed schema; ValueError names the bad row/column.

    Every row must have exactly the schema's keys. Floats may be NaN; nothing may be None.
    """
    schema = SCHEMAS[table]
    names = schema.names
    expected = set(names)
    for i, row in enumerate(rows):
        keys = set(row)
        if keys != expected:
            missing, extra = sorted(expected - keys), sorted(keys - expected)
            raise ValueError(f"{table} row {i}: missing keys {missing}, unexpected keys {extra}")
    columns = []
    for field in schema:
        values = [row[field.name] for row in rows]
        try:
            array = pa.array(values, type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise ValueError(f"{table}.{field.name}: {_one_line(exc)}") from None
        if array.null_count:
            raise ValueError(f"{table}.{field.name}: None is not allowed (use NaN or '')")
        columns.append(array)
    result = pa.Table.from_arrays(columns, schema=schema)
    for column, allowed in _ENUMS[table].items():
        bad = set(pc.unique(result[column]).to_pylist()) - allowed
        if bad:
            raise ValueError(f"{table}.{column}: {sorted(bad)} not in {sorted(allowed)}")
    return result


# ---------------------------------------------------------------------------------------------
# Writing


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
        manifest = _jsonable(manifest)
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
            raise ResultsError(f"cannot create results folder {root}: {_one_line(exc)}") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise ResultsError(f"results folder {root} is not writable")
        run_dir = root / run_id
        try:
            run_dir.mkdir()
        except FileExistsError:
            raise ResultsError(f"run folder {run_dir} already exists") from None
        except OSError as exc:
            raise ResultsError(f"cannot create run folder {run_dir}: {_one_line(exc)}") from None
        lock_file = _lock(run_dir)
        for table in TABLES:
            (run_dir / table).mkdir()
        full = {"results_format": RESULTS_FORMAT, "run_id": run_id, "status": "running"}
        full["started_at"] = manifest.get("started_at") or _now()
        full |= {k: v for k, v in manifest.items() if k not in RESERVED_KEYS}
        full |= {"ended_at": None, "resumed_at": [], "finished_cases": []}
        try:
            _write_manifest(run_dir, full)
        except OSError as exc:
            raise ResultsError(f"cannot write manifest in {run_dir}: {_one_line(exc)}") from None
        return cls(run_dir, full, lock_file)

    @classmethod
    def resume(cls, run_dir: Path, *, min_free_mb: int = DEFAULT_MIN_FREE_MB) -> RunWriter:
        """Reopen an interrupted run: delete temp files, the scratch folder and parts of
        unfinished cases, check that every finished case has its three parts, set status back to
        ``running``. Nothing changes when the folder is not a run, is locked, or has no room."""
        run_dir = Path(run_dir)
        manifest = _read_manifest(run_dir)
        check_room(run_dir, min_free_mb)
        lock_file = _lock(run_dir)
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
                if missing:
                    raise ResultsError(
                        f"run {run_dir} lists case {missing[0]!r} as finished but "
                        f"{table}/{missing[0]}.parquet is missing"
                    )
            manifest["status"] = "running"
            manifest["ended_at"] = None
            manifest.setdefault("resumed_at", []).append(_now())
            _write_manifest(run_dir, manifest)
        except OSError as exc:
            lock_file.close()
            raise ResultsError(f"cannot resume {run_dir}: {_one_line(exc)}") from None
        except ResultsError:
            lock_file.close()
            raise
        return cls(run_dir, manifest, lock_file)

    def write_case(
        self, case_id: str, samples: list[dict], checks: list[dict], routing: list[dict]
    ) -> None:
        """Write the three parts of one case, then list it in the manifest's ``finished_cases``.

        ValueError (a programming error) for a bad case id, a case already finished, rows that do
        not fit the schema, or rows that name another run or case.
        """
        self._check_open()
        check_case_id(case_id)
        if case_id in self._manifest["finished_cases"]:
            raise ValueError(f"case {case_id!r} is already finished in run {self.run_id}")
        tables = {}
        for name, rows in (("samples", samples), ("checks", checks), ("routing", routing)):
            table = rows_to_table(name, rows)
            for column, want in (("run_id", self.run_id), ("case_id", case_id)):
                got = set(pc.unique(table[column]).to_pylist()) - {want}
                if got:
                    raise ValueError(f"{name}.{column}: {sorted(got)} in a part for {want!r}")
            tables[name] = table
        try:
            for name, table in tables.items():
                path = self.run_dir / name / f"{case_id}.parquet"
                _atomic_write(path, lambda f, t=table: pq.write_table(t, f))
            self._manifest["finished_cases"].append(case_id)
            _write_manifest(self.run_dir, self._manifest)
        except OSError as exc:
            if self._manifest["finished_cases"][-1:] == [case_id]:
                self._manifest["finished_cases"].pop()  # memory agrees with the disk again
            raise ResultsError(
                f"cannot write case {case_id!r} in {self.run_dir}: {_one_line(exc)}"
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
            raise ResultsError(f"cannot create {folder}: {_one_line(exc)}") from None
        return folder

    def update_manifest(self, **fields: Any) -> None:
        """Add or replace caller-owned manifest keys and rewrite the manifest atomically."""
        self._check_open()
        reserved = RESERVED_KEYS & set(fields)
        if reserved:
            raise ValueError(f"manifest keys {sorted(reserved)} are written by the result store")
        self._manifest.update(_jsonable(fields))
        self._save()

    def finish(self, status: str, **extra: Any) -> None:
        """Record the final status (complete, mismatch, failed, interrupted) and the end time,
        then release the lock. The writer cannot write after this; ``resume`` reopens the run."""
        self._check_open()
        if status not in FINAL_STATUSES:
            raise ValueError(f"status {status!r} not in {sorted(FINAL_STATUSES)}")
        reserved = RESERVED_KEYS & set(extra)
        if reserved:
            raise ValueError(f"manifest keys {sorted(reserved)} are written by the result store")
        self._manifest.update(_jsonable(extra))
        self._manifest["status"] = status
        self._manifest["ended_at"] = _now()
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
            _write_manifest(self.run_dir, self._manifest)
        except OSError as exc:
            raise ResultsError(
                f"cannot write manifest in {self.run_dir}: {_one_line(exc)}"
            ) from None


def _lock(run_dir: Path):
    """An exclusive, non-blocking lock on ``run_dir/.lock``, held while the file stays open."""
    try:
        lock_file = open(run_dir / LOCK, "a+b")  # held for the writer's life
    except OSError as exc:
        raise ResultsError(f"cannot lock {run_dir}: {_one_line(exc)}") from None
    try:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock_file.close()
        raise ResultsError(f"run {run_dir} is being written by another process") from None
    return lock_file


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True, kw_only=True)
class Run:
    """A run as stored: manifest and the concatenated parts of its finished cases only."""

    run_dir: Path
    manifest: dict
    samples: pa.Table
    checks: pa.Table
    routing: pa.Table

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]


def _read_part(path: Path, table: str, run_id: str, case_id: str) -> pa.Table:
    schema = SCHEMAS[table]
    try:
        part = pq.read_table(path)
    except FileNotFoundError:
        raise ResultsError(f"missing part {path} of finished case {case_id!r}") from None
    except (OSError, pa.ArrowException) as exc:
        raise ResultsError(f"corrupt part {path}: {_one_line(exc)}") from None
    if table == "samples" and set(part.schema.names) < set(schema.names):
        for name, fill in _LATER_SAMPLES.items():  # parts written before these columns
            if name not in part.schema.names:
                field = SAMPLES_SCHEMA.field(name)
                part = part.append_column(field, pa.array([fill] * part.num_rows, field.type))
        if set(part.schema.names) == set(schema.names):
            part = part.select(schema.names)
    if not part.schema.equals(schema, check_metadata=False):
        raise ResultsError(f"corrupt part {path}: columns do not match the {table} schema")
    for column, want in (("run_id", run_id), ("case_id", case_id)):
        got = set(pc.unique(part[column]).to_pylist()) - {want}
        if got:
            raise ResultsError(f"corrupt part {path}: holds {column} {sorted(got)}, not {want!r}")
    return part.replace_schema_metadata(None)


def load_run(path: Path | str) -> Run:
    """Load a run folder; ResultsError (one line, naming the path) when anything is wrong."""
    run_dir = Path(path)
    manifest = _read_manifest(run_dir)
    tables = {}
    for table in TABLES:
        parts = [
            _read_part(run_dir / table / f"{case}.parquet", table, manifest["run_id"], case)
            for case in manifest["finished_cases"]
        ]
        tables[table] = pa.concat_tables(parts) if parts else SCHEMAS[table].empty_table()
    return Run(run_dir=run_dir, manifest=manifest, **tables)
