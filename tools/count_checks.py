"""A run's gate checks counted by status, every failed check printed whole: the newest run under
RESULTS (a results folder, e.g. where `tools/gpu_run.sh`'s tarball unpacks one), for a GPU call's
record, so that a call's script need not carry its own reader.

Usage: python tools/count_checks.py RESULTS
Prints one line a failed check ("FAIL {column: value, ...}"), then "checks of run RUN by status:
{status: count, ...}". Exit 0 when no check failed, 1 when one did, 2 (one line, nothing else)
when RESULTS holds no run or a run's checks cannot be read.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def count(results: Path) -> tuple[str, dict[str, int], list[dict]]:
    """(run name, checks by status, failed checks as rows) of the newest run under ``results``
    (runs are folders whose names sort by time, as moebench names them)."""
    runs = sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    if not runs:
        raise ValueError(f"{results}: no run folder")
    run = runs[-1]
    files = sorted((run / "checks").glob("*.parquet"))
    if not files:
        raise ValueError(f"{run / 'checks'}: no checks parquet")
    by_status: collections.Counter[str] = collections.Counter()
    failed = []
    for f in files:
        try:
            table = pq.read_table(f).to_pydict()
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{f}: not a readable parquet file ({exc})") from None
        if "status" not in table:
            raise ValueError(f"{f}: no status column")
        for i, status in enumerate(table["status"]):
            by_status[status] += 1
            if status == "fail":
                failed.append({k: v[i] for k, v in table.items()})
    return run.name, dict(by_status), failed


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/count_checks.py RESULTS", file=sys.stderr)
        return 2
    try:
        run, by_status, failed = count(Path(argv[0]))
    except ValueError as exc:
        print(f"count_checks: {exc}", file=sys.stderr)
        return 2
    for row in failed:
        print("FAIL", row)
    print("checks of run", run, "by status:", by_status)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
