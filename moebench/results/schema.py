"""The result store's schema: the four tables, their closed value sets, run and case ids.

Manifest keys owned by the store: ``results_format``, ``run_id``, ``status`` (running, complete,
mismatch, errors, failed, interrupted), ``started_at``, ``ended_at``, ``resumed_at`` (list) and
``finished_cases`` (list, in the order written). Everything else (``scenario``, ``sources``,
``environment``, ...) is the caller's and is stored as given.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import secrets
import unicodedata

import pyarrow as pa
import pyarrow.compute as pc

from moebench.core.errors import ResultsError
from moebench.core.vocabulary import REGIMES as VOCAB_REGIMES
from moebench.core.vocabulary import STAGE_ORDER

RESULTS_FORMAT = 1
MANIFEST = "manifest.json"
LOCK = ".lock"
TABLES = ("samples", "checks", "routing", "ledger")
# Samples carry, beside the fixed columns, one column per swept key
# (``sweep.shape.tokens_per_rank``), so that a query can filter on it without parsing ``params``.
SWEEP_PREFIX = "sweep."
# Tables a run written before them does not have: a finished case may lack their part, which then
# reads as no rows.
OPTIONAL_TABLES = frozenset({"ledger"})
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
# "info": a fact recorded beside the gates, never a failure (is an arm bitwise deterministic).
CHECK_STATUSES = frozenset({"pass", "fail", "error", "skip", "info"})


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
    ("mode", _str), ("weights", _str), ("weight_copies", _i32), ("step", _i32), ("layer", _i32),
)  # fmt: skip
# Samples columns added after the first runs, and what a part written before them reads as:
# weight bytes unknown (-1, never 0), temperature and power NaN, mode and weights "" (compare:
# not said), weight copies 0 (not said), step and layer -1 (not a model step).
LATER_SAMPLES = {
    "weight_bytes": -1, "temperature_c": math.nan, "power_w": math.nan, "mode": "",
    "weights": "", "weight_copies": 0, "step": -1, "layer": -1,
}  # fmt: skip
# The ``step`` regime (a model step over every MoE layer): ``step`` is the step's index (its own
# routing draw and token count; -1 in every other regime) and ``layer`` the model layer a
# ``ffn`` sample timed, WHOLE_STEP_LAYER for a rank's whole step (stage ``step``) and for every
# other regime.
WHOLE_STEP_LAYER = -1
MODES = frozenset({"eager", "graph"})
# warm: the weights as the previous sample left them in L2; cold: rotated copies
# (moebench/measure/cold.py)
WEIGHTS = frozenset({"warm", "cold"})
CHECKS_SCHEMA = _schema(
    ("run_id", _str), ("case_id", _str), ("arm", _str), ("rank", _i32), ("gate", _str),
    ("status", _str), ("error", _f64), ("detail", _str),
)  # fmt: skip
ROUTING_SCHEMA = _schema(
    ("run_id", _str), ("case_id", _str), ("rank", _i32), ("routing", _str),
    ("tokens_per_rank", _i64), ("local_experts", _i32), ("live_rows", _i64),
    ("capacity_rows", _i64), ("live_fraction", _f64), ("empty_experts", _i32),
    ("max_load", _f64), ("mean_load", _f64), ("overload", _f64), ("entropy", _f64),
    ("trace_sha256", _str), ("step", _i32), ("layer", _i32),
)  # fmt: skip
# Routing columns added later: a step regime case has a row per (step, layer, rank) it gated;
# every other case one per rank, with -1 in both (what parts written before them read as).
LATER_ROUTING = {"step": -1, "layer": -1}
# Every table's later columns and their fills.
LATER = {"samples": LATER_SAMPLES, "routing": LATER_ROUTING}
# The work ledger: per case, rank, arm and stage, the work the arm's model says one step does
# (rows computed, bytes read and written, matrix FLOPs), from the case's routing, before timing.
LEDGER_SCHEMA = _schema(
    ("run_id", _str), ("case_id", _str), ("rank", _i32), ("arm", _str), ("stage", _str),
    ("rows", _i64), ("bytes_read", _i64), ("bytes_written", _i64), ("flops", _i64),
)  # fmt: skip
SCHEMAS: dict[str, pa.Schema] = {
    "samples": SAMPLES_SCHEMA,
    "checks": CHECKS_SCHEMA,
    "routing": ROUTING_SCHEMA,
    "ledger": LEDGER_SCHEMA,
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
    "ledger": {"stage": STAGES},
}

_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CASE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+,-]{0,199}")
_NAME_MAX = 40


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


def rows_to_table(table: str, rows: list[dict]) -> pa.Table:
    """Build one table from row dicts with the fixed schema; ValueError names the bad row/column.

    Every row must have exactly the schema's keys. Floats may be NaN; nothing may be None.
    """
    schema = SCHEMAS[table]
    names = schema.names
    expected = set(names)
    sweep = sorted(k for k in (rows[0] if rows else {}) if k.startswith(SWEEP_PREFIX))
    if sweep and table != "samples":
        raise ValueError(f"{table}: only samples carry sweep columns, got {sweep}")
    expected |= set(sweep)
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
            raise ValueError(
                f"{table}.{field.name}: {' '.join(str(exc).split()) or type(exc).__name__}"
            ) from None
        if array.null_count:
            raise ValueError(f"{table}.{field.name}: None is not allowed (use NaN or '')")
        columns.append(array)
    result = pa.Table.from_arrays(columns, schema=schema)
    for name in sweep:  # a swept key's own column: float64 for numbers, else string
        values = [row[name] for row in rows]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        array = pa.array([float(v) for v in values] if numeric else [str(v) for v in values],
                         type=_f64 if numeric else _str)  # fmt: skip
        result = result.append_column(pa.field(name, array.type, nullable=False), array)
    for column, allowed in _ENUMS[table].items():
        bad = set(pc.unique(result[column]).to_pylist()) - allowed
        if bad:
            raise ValueError(f"{table}.{column}: {sorted(bad)} not in {sorted(allowed)}")
    return result
