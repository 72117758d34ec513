"""Reading a run: the manifest and the parts of its finished cases, checked (docs/DESIGN.md 9).

Readers trust the manifest, never a directory listing: a part left by a crash between the parts
and the manifest is ignored here (and deleted by ``RunWriter.resume``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from moebench.core.errors import ResultsError, one_line
from moebench.results.files import checked_manifest
from moebench.results.schema import (
    LATER,
    OPTIONAL_TABLES,
    SCHEMAS,
    SWEEP_PREFIX,
    TABLES,
)


@dataclass(frozen=True, kw_only=True)
class Run:
    """A run as stored: manifest and the concatenated parts of its finished cases only."""

    run_dir: Path
    manifest: dict
    samples: pa.Table
    checks: pa.Table
    routing: pa.Table
    ledger: pa.Table = field(default_factory=lambda: SCHEMAS["ledger"].empty_table())

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
        raise ResultsError(f"corrupt part {path}: {one_line(exc)}") from None
    if table == "checks" and "check" in part.schema.names:  # written before the column's rename
        part = part.rename_columns(["gate" if n == "check" else n for n in part.schema.names])
    sweep = [n for n in part.schema.names if n.startswith(SWEEP_PREFIX)]
    sweep = sweep if table == "samples" else []
    if sweep:  # each swept key's own column: kept beside the fixed schema
        extra, part = part.select(sweep), part.drop_columns(sweep)
    if table in LATER and set(part.schema.names) < set(schema.names):
        for name, fill in LATER[table].items():  # parts written before these columns
            if name not in part.schema.names:
                field = schema.field(name)
                part = part.append_column(field, pa.array([fill] * part.num_rows, field.type))
        if set(part.schema.names) == set(schema.names):
            part = part.select(schema.names)
    if not part.schema.equals(schema, check_metadata=False):
        raise ResultsError(f"corrupt part {path}: columns do not match the {table} schema")
    if sweep:
        for name in extra.schema.names:
            part = part.append_column(name, extra[name])
    for column, want in (("run_id", run_id), ("case_id", case_id)):
        got = set(pc.unique(part[column]).to_pylist()) - {want}
        if got:
            raise ResultsError(f"corrupt part {path}: holds {column} {sorted(got)}, not {want!r}")
    return part.replace_schema_metadata(None)


def _common_sweep_types(parts: list[pa.Table]) -> list[pa.Table]:
    """Parts that concatenate: a sweep column that parts disagree on the type of (a key swept
    over a word and a number, as ``shape.capacity: [formula, 4096]``) becomes strings, ints and
    floats become floats, and a part without a column (a case that timed out before any sample,
    written without its sweep columns) gets it as nulls, in one order everywhere."""
    types: dict[str, set] = {}
    for part in parts:
        for f in part.schema:
            if f.name.startswith(SWEEP_PREFIX):
                types.setdefault(f.name, set()).add(f.type)
    if not types:
        return parts
    want = {name: _one_type(ts) for name, ts in types.items()}
    out = []
    for part in parts:
        for name, kind in want.items():
            if name not in part.schema.names:
                part = part.append_column(pa.field(name, kind), pa.nulls(part.num_rows, kind))
            elif part.schema.field(name).type != kind:
                i = part.schema.get_field_index(name)
                part = part.set_column(i, pa.field(name, kind), pc.cast(part[name], kind))
        fixed = [n for n in part.schema.names if not n.startswith(SWEEP_PREFIX)]
        out.append(part.select(fixed + sorted(want)))
    return out


def _one_type(types: set) -> pa.DataType:
    types = {t for t in types if not pa.types.is_null(t)}
    if len(types) == 1:
        return types.pop()
    if types and all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in types):
        return pa.float64()
    return pa.string()


def load_run(path: Path | str) -> Run:
    """Load a run folder; ResultsError (one line, naming the path) when anything is wrong."""
    run_dir = Path(path)
    manifest = checked_manifest(run_dir)
    tables = {}
    for table in TABLES:
        paths = [(case, run_dir / table / f"{case}.parquet") for case in manifest["finished_cases"]]
        if table in OPTIONAL_TABLES:  # runs written before this table have no part of it
            paths = [(case, path) for case, path in paths if path.is_file()]
        parts = [_read_part(path, table, manifest["run_id"], case) for case, path in paths]
        parts = _common_sweep_types(parts)
        tables[table] = pa.concat_tables(parts) if parts else SCHEMAS[table].empty_table()
    return Run(run_dir=run_dir, manifest=manifest, **tables)
