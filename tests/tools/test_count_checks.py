"""tools/count_checks.py on the CPU: the newest run's checks counted by status, every failed check
printed whole, exit 1 when one failed; a folder with no run, no checks or an unreadable file gets
one line and exit 2."""

import pyarrow as pa
import pyarrow.parquet as pq
from tool_modules import tool


def _checks(run, name, statuses):
    (run / "checks").mkdir(parents=True, exist_ok=True)
    table = pa.table({"status": statuses, "check": [f"c{i}" for i in range(len(statuses))]})
    pq.write_table(table, run / "checks" / f"{name}.parquet")


def test_the_newest_runs_checks_are_counted_and_failures_printed(tmp_path, capsys):
    counter = tool("count_checks")
    _checks(tmp_path / "20261207-1", "a", ["fail", "fail"])  # older: not read
    _checks(tmp_path / "20261207-2", "a", ["pass", "skip", "pass"])
    _checks(tmp_path / "20261207-2", "b", ["pass", "fail"])
    assert counter.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    counts = "{'pass': 3, 'skip': 1, 'fail': 1}"
    assert out == ["FAIL {'status': 'fail', 'check': 'c1'}",
                   f"checks of run 20261207-2 by status: {counts}"]  # fmt: skip
    _checks(tmp_path / "20261207-3", "a", ["pass", "skip"])
    assert counter.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.endswith("{'pass': 1, 'skip': 1}\n")


def test_bad_results_get_one_line_and_exit_2(tmp_path, capsys):
    counter = tool("count_checks")
    assert counter.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"count_checks: {tmp_path / 'missing'}: no run folder\n"
    (tmp_path / "run1").mkdir()
    assert counter.main([str(tmp_path)]) == 2
    assert "no checks parquet" in capsys.readouterr().err
    (tmp_path / "run1" / "checks").mkdir()
    (tmp_path / "run1" / "checks" / "x.parquet").write_bytes(b"not parquet")
    assert counter.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("count_checks: ") and "not a readable parquet file" in err
    assert err.count("\n") == 1
    assert counter.main([]) == 2
