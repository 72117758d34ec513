"""The result store's files: atomic writes and their modes, resume after a failed or interrupted
case, and the errors of creating a run (the rest: test_results.py)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from result_rows import RUN, check_row, open_writer, sample_row, write

from moebench.core.errors import ResultsError
from moebench.results import files as results
from moebench.results import writer as writer_module
from moebench.results.reader import load_run
from moebench.results.schema import rows_to_table
from moebench.results.writer import RunWriter


@pytest.fixture
def writer(tmp_path: Path):
    yield from open_writer(tmp_path)


# --------------------------------------------------------------------------- atomic writes


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path):
    target = tmp_path / "manifest.json"
    target.write_text("old")

    def explode(f):
        f.write(b"half of the new cont")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        results.atomic_write(target, explode)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize(
    "mask, mode",
    [
        (0o022, 0o644),  # the usual umask: files others may read, as a plain open() gives
        (0o077, 0o600),  # a private umask: private files
        (0o002, 0o664),  # a group-writable umask
    ],
)
def test_every_run_file_gets_the_mode_of_the_umask(tmp_path: Path, mask: int, mode: int):
    """mkstemp makes 0600 files; a run's parts, manifest and lock follow the umask instead."""
    with umask(mask):
        w = RunWriter.create(tmp_path / "results", RUN, {"sources": {"stock": "ab"}})
        write(w, "c1")
        w.finish("complete")
        results.atomic_write(tmp_path / "plain.json", lambda f: f.write(b"{}"))
    run_dir = w.run_dir
    written = [run_dir / "manifest.json", run_dir / ".lock", tmp_path / "plain.json"]
    written += [run_dir / t / "c1.parquet" for t in ("samples", "checks", "routing")]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {
        p.name: oct(mode) for p in written
    }


def test_atomic_write_without_overwrite_keeps_the_existing_file(tmp_path: Path):
    target = tmp_path / "t.bin"
    target.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        results.atomic_write(target, lambda f: f.write(b"new"), overwrite=False)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.bin"]  # no temp file left
    fresh = tmp_path / "fresh.bin"
    results.atomic_write(fresh, lambda f: f.write(b"new"), overwrite=False)
    assert fresh.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.bin", "t.bin"]


def test_stray_temp_files_are_ignored_then_cleaned_on_resume(writer: RunWriter):
    write(writer, "c1")
    run_dir = writer.run_dir
    stray = [
        run_dir / "samples" / ".c2.parquet.x1y2.tmp",
        run_dir / "checks" / ".c1.parquet.zz.tmp",
        run_dir / ".manifest.json.q.tmp",
    ]
    for path in stray:
        path.write_bytes(b"garbage from a crash")
    writer.close()  # what a crash leaves: the lock is gone, status still "running"
    assert load_run(run_dir).samples.num_rows == 3
    resumed = RunWriter.resume(run_dir)
    assert not any(p.exists() for p in stray)
    assert resumed.finished_cases == {"c1"}
    resumed.close()


def test_unfinished_case_parts_are_ignored_then_removed_on_resume(writer: RunWriter):
    write(writer, "c1")
    run_dir = writer.run_dir
    # A crash after two parts of c2 were renamed into place, before the manifest listed it.
    rows = rows_to_table("samples", [sample_row("c2")])
    pq.write_table(rows, run_dir / "samples" / "c2.parquet")
    pq.write_table(rows_to_table("checks", [check_row("c2")]), run_dir / "checks" / "c2.parquet")
    writer.close()
    assert set(load_run(run_dir).samples["case_id"].to_pylist()) == {"c1"}
    resumed = RunWriter.resume(run_dir)
    assert not (run_dir / "samples" / "c2.parquet").exists()
    assert not (run_dir / "checks" / "c2.parquet").exists()
    assert (run_dir / "samples" / "c1.parquet").exists()
    assert resumed.manifest["status"] == "running" and len(resumed.manifest["resumed_at"]) == 1
    write(resumed, "c2")
    resumed.finish("complete")
    run = load_run(run_dir)
    assert run.manifest["finished_cases"] == ["c1", "c2"]
    assert run.samples.num_rows == 6


def test_disk_error_mid_case_leaves_it_unfinished(writer: RunWriter, monkeypatch):
    real = pq.write_table
    calls = []

    def flaky(table, where, **kw):
        calls.append(1)
        if len(calls) == 2:  # samples part written, checks part fails
            raise OSError(28, "No space left on device")
        return real(table, where, **kw)

    monkeypatch.setattr(writer_module.pq, "write_table", flaky)
    with pytest.raises(ResultsError, match="cannot write case 'c1'.*No space left"):
        write(writer, "c1")
    monkeypatch.undo()
    assert writer.finished_cases == set()
    assert (writer.run_dir / "samples" / "c1.parquet").exists()  # an orphan part...
    assert not list((writer.run_dir / "checks").glob("*"))  # ...and no temp file left
    assert load_run(writer.run_dir).samples.num_rows == 0  # ...that readers ignore
    writer.close()
    RunWriter.resume(writer.run_dir).close()
    assert not (writer.run_dir / "samples" / "c1.parquet").exists()  # ...and resume removes


def test_resume_refuses_a_second_writer(writer: RunWriter):
    with pytest.raises(ResultsError, match="another process"):
        RunWriter.resume(writer.run_dir)


def test_resume_refuses_a_finished_case_without_its_parts(writer: RunWriter):
    write(writer, "c1")
    writer.close()
    (writer.run_dir / "routing" / "c1.parquet").unlink()
    with pytest.raises(ResultsError, match="routing/c1.parquet is missing"):
        RunWriter.resume(writer.run_dir)


# --------------------------------------------------------------------------- create errors


def test_create_refuses_an_existing_run(writer: RunWriter):
    with pytest.raises(ResultsError, match="already exists"):
        RunWriter.create(writer.run_dir.parent, RUN, {})


def test_create_refuses_a_root_that_is_a_file(tmp_path: Path):
    root = tmp_path / "results"
    root.write_text("not a folder")
    with pytest.raises(ResultsError, match="cannot create results folder"):
        RunWriter.create(root, RUN, {})


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_create_refuses_a_read_only_root(tmp_path: Path):
    root = tmp_path / "ro"
    root.mkdir(mode=0o500)
    with pytest.raises(ResultsError, match="not writable"):
        RunWriter.create(root, RUN, {})


def test_create_refuses_when_disk_is_nearly_full(tmp_path: Path):
    with pytest.raises(ResultsError, match="MB free"):
        RunWriter.create(tmp_path, RUN, {}, min_free_mb=10**12)
    assert not (tmp_path / RUN).exists()


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "", ".hidden", "x..y", "/abs"])
def test_create_refuses_unsafe_run_ids(tmp_path: Path, run_id: str):
    with pytest.raises(ResultsError, match="invalid run id"):
        RunWriter.create(tmp_path, run_id, {})
