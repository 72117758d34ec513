"""The result store: schemas, rows written and read back, run ids, and the one-line errors of
loading a run (its files, resume and the errors of creating a run: test_results_files.py)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from result_rows import NOW, RUN, check_row, open_writer, sample_row, write

from moebench.core.errors import ResultsError
from moebench.results.reader import load_run
from moebench.results.schema import SCHEMAS, check_run_id, new_run_id, rows_to_table
from moebench.results.writer import RunWriter


@pytest.fixture
def writer(tmp_path: Path):
    yield from open_writer(tmp_path)


# --------------------------------------------------------------------------- writing and reading


def test_roundtrip_keeps_schemas_and_rows(writer: RunWriter):
    write(writer, "case-a", n=3)
    write(writer, "case-b", n=2)
    run = load_run(writer.run_dir)
    assert run.run_id == RUN
    assert run.manifest["finished_cases"] == ["case-a", "case-b"]
    assert run.manifest["sources"] == {"stock": "ab"}
    assert run.manifest["status"] == "running"
    for name in ("samples", "checks", "routing"):
        assert getattr(run, name).schema.equals(SCHEMAS[name])
    assert run.samples.num_rows == 5
    assert run.samples["time_us"].to_pylist()[:3] == [10.0, 11.0, 12.0]
    assert math.isnan(run.samples["sm_clock_mhz"][0].as_py())  # NaN stays NaN, not null
    assert run.samples["sm_clock_mhz"].null_count == 0


def test_empty_parts_have_the_same_columns(writer: RunWriter):
    writer.write_case("case-empty", [], [], [])
    run = load_run(writer.run_dir)
    assert run.samples.num_rows == 0
    for name in ("samples", "checks", "routing"):
        assert getattr(run, name).schema.equals(SCHEMAS[name])


def test_run_without_finished_cases_loads_empty_tables(writer: RunWriter):
    run = load_run(writer.run_dir)
    assert run.samples.num_rows == 0 and run.samples.schema.equals(SCHEMAS["samples"])


def test_finish_records_status_and_end_time(writer: RunWriter):
    write(writer, "c1")
    writer.update_manifest(note="hello")
    writer.finish("complete", mismatches=[])
    manifest = json.loads((writer.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["ended_at"] and manifest["started_at"]
    assert manifest["note"] == "hello" and manifest["mismatches"] == []
    with pytest.raises(ValueError, match="closed"):
        write(writer, "c2")


@pytest.mark.parametrize("status", ["done", "running", ""])
def test_finish_rejects_unknown_status(writer: RunWriter, status: str):
    with pytest.raises(ValueError, match="status"):
        writer.finish(status)


@pytest.mark.parametrize("key", ["finished_cases", "status", "run_id", "ended_at"])
def test_reserved_manifest_keys_are_refused(writer: RunWriter, key: str):
    with pytest.raises(ValueError, match="written by the result store"):
        writer.update_manifest(**{key: "x"})


def test_case_ids_from_the_sweep_are_accepted(writer: RunWriter):
    case_id = "c007-path=_.._traces_x.json-alpha=1.2-stages=fc1_fc2"  # ".." inside is harmless
    write(writer, case_id)
    assert (writer.run_dir / "samples" / f"{case_id}.parquet").is_file()
    assert load_run(writer.run_dir).manifest["finished_cases"] == [case_id]


def test_manifest_values_must_be_json(tmp_path: Path, writer: RunWriter):
    with pytest.raises(ValueError, match="manifest"):
        RunWriter.create(tmp_path, "other-run", {"scenario": object()})
    assert not (tmp_path / "other-run").exists()
    with pytest.raises(ValueError, match=r"manifest\.extra\[1\]: a object"):
        writer.update_manifest(extra=[1, object()])
    assert "extra" not in writer.manifest
    writer.update_manifest(peak=math.nan, where=Path("/x"), ranks=(0, 1))  # undefined -> null
    manifest = json.loads((writer.run_dir / "manifest.json").read_text())
    assert manifest["peak"] is None and manifest["where"] == "/x" and manifest["ranks"] == [0, 1]


def test_case_written_twice_is_refused(writer: RunWriter):
    write(writer, "c1")
    with pytest.raises(ValueError, match="already finished"):
        write(writer, "c1")


@pytest.mark.parametrize("case_id", ["../x", "a/b", ".hidden", "..", "", "é", "a b", "a\\b"])
def test_unsafe_case_ids_are_refused(writer: RunWriter, case_id: str):
    with pytest.raises(ValueError, match="invalid case id"):
        writer.write_case(case_id, [], [], [])


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize(
    "bad_row, message",
    [
        ({k: v for k, v in sample_row("c").items() if k != "time_us"}, "missing keys"),
        (sample_row("c", extra=1), "unexpected keys"),
        (sample_row("c", time_us=None), "None is not allowed"),
        (sample_row("c", rank="zero"), "samples.rank"),
        (sample_row("c", stage="gemm"), "samples.stage"),  # not one of the six stage names
        (sample_row("c", regime="warm"), "samples.regime"),
        (sample_row("c", device="gpu"), "samples.device"),  # the column says cuda
        (sample_row("c", rank=2**40), "samples.rank"),  # int32 overflow
    ],
)
def test_samples_schema_is_enforced(bad_row: dict, message: str):
    with pytest.raises(ValueError, match=message):
        rows_to_table("samples", [sample_row("c"), bad_row])


def test_checks_status_is_enforced():
    with pytest.raises(ValueError, match="checks.status"):
        rows_to_table("checks", [check_row("c", status="ok")])


def test_rows_must_name_this_run_and_case(writer: RunWriter):
    with pytest.raises(ValueError, match="run_id"):
        writer.write_case("c", [sample_row("c", run_id="other")], [], [])
    with pytest.raises(ValueError, match="case_id"):
        writer.write_case("c", [], [check_row("d")], [])
    assert writer.finished_cases == set()
    assert list((writer.run_dir / "samples").iterdir()) == []


# --------------------------------------------------------------------------- run ids


NASTY_NAMES = ["", "../", "/", "..", "../../etc/passwd", "a/../../b", "\x00", "名前", ".", "-"]


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.text(), st.sampled_from(NASTY_NAMES)))
def test_run_ids_are_safe_for_any_name(name: str):
    run_id = new_run_id(name, NOW)
    assert re.fullmatch(r"20261129-130509-[A-Za-z0-9._-]{1,40}-[0-9a-f]{6}", run_id), run_id
    assert ".." not in run_id and "/" not in run_id and not run_id.startswith(".")
    root = Path("/tmp/results-root")
    assert (root / run_id).resolve().parent == root.resolve()
    check_run_id(run_id)  # create() accepts it


def test_run_id_keeps_a_readable_name_and_is_unique():
    a, b = new_run_id("DeepSeek V4 / EP8 (zipf 1.2)", NOW), new_run_id("x", NOW)
    assert a.startswith("20261129-130509-DeepSeek-V4-EP8-zipf-1.2-")
    assert new_run_id("x", NOW) != b
    naive = new_run_id("x", NOW.replace(tzinfo=None))
    assert naive.startswith("20261129-130509-x-")


# --------------------------------------------------------------------------- load errors


def _one_line_error(path: Path, match: str) -> None:
    with pytest.raises(ResultsError) as info:
        load_run(path)
    message = str(info.value)
    assert "\n" not in message
    assert match in message and str(path) in message, message


def test_load_missing_folder(tmp_path: Path):
    _one_line_error(tmp_path / "nope", "not found")


def test_load_folder_without_manifest(tmp_path: Path):
    _one_line_error(tmp_path, "no manifest")


@pytest.mark.parametrize(
    "text, match",
    [
        ("{not json", "corrupt manifest"),
        ("[1, 2]", "not a JSON object"),
        ('{"results_format": 1, "finished_cases": []}', "no run_id"),
        ('{"results_format": 1, "run_id": "r", "finished_cases": "c1"}', "finished_cases"),
        ('{"results_format": 9, "run_id": "r", "finished_cases": []}', "results_format"),
    ],
)
def test_load_corrupt_manifest(tmp_path: Path, text: str, match: str):
    (tmp_path / "manifest.json").write_text(text)
    _one_line_error(tmp_path, match)


def test_load_corrupt_part(writer: RunWriter):
    write(writer, "c1")
    part = writer.run_dir / "checks" / "c1.parquet"
    part.write_bytes(b"PAR1 this is not parquet\n at all")
    _one_line_error(writer.run_dir, "corrupt part")


def test_load_missing_part(writer: RunWriter):
    write(writer, "c1")
    part = writer.run_dir / "samples" / "c1.parquet"
    part.unlink()
    _one_line_error(writer.run_dir, "missing part")


def test_load_part_with_foreign_schema(writer: RunWriter):
    write(writer, "c1")
    pq.write_table(pa.table({"x": [1]}), writer.run_dir / "routing" / "c1.parquet")
    _one_line_error(writer.run_dir, "do not match the routing schema")


def test_load_part_copied_from_another_case(writer: RunWriter):
    write(writer, "c1")
    write(writer, "c2")
    shutil.copy(
        writer.run_dir / "samples" / "c1.parquet", writer.run_dir / "samples" / "c2.parquet"
    )
    _one_line_error(writer.run_dir, "holds case_id")


def test_parts_written_before_the_later_columns_still_load(writer: RunWriter):
    """A samples part without weight_bytes, temperature_c, power_w, mode, weights and
    weight_copies (an older run) reads with -1, NaN, NaN, "", "" and 0 in their place, in the
    schema's column order."""
    write(writer, "c1")
    path = writer.run_dir / "samples" / "c1.parquet"
    later = ["weight_bytes", "temperature_c", "power_w", "mode", "weights", "weight_copies",
             "step", "layer"]  # fmt: skip
    old = pq.read_table(path).drop_columns(later)
    pq.write_table(old, path)
    run = load_run(writer.run_dir)
    assert run.samples.schema.equals(SCHEMAS["samples"])
    assert set(run.samples["mode"].to_pylist()) == {""}
    assert run.samples["weight_bytes"].to_pylist()[0] == -1
    assert math.isnan(run.samples["temperature_c"][0].as_py())
    assert math.isnan(run.samples["power_w"][0].as_py())
    assert run.samples["weights"].to_pylist()[0] == ""
    assert run.samples["weight_copies"].to_pylist()[0] == 0
    assert run.samples["step"].to_pylist()[0] == -1 and run.samples["layer"].to_pylist()[0] == -1


def test_samples_mode_is_eager_or_graph():
    with pytest.raises(ValueError, match="mode"):
        rows_to_table("samples", [sample_row("c", mode="replay")])
    table = rows_to_table("samples", [sample_row("c", mode="graph", temperature_c=41.0,
                                                 power_w=312.5)])  # fmt: skip
    assert table["power_w"].to_pylist() == [312.5]


def test_a_part_written_before_the_gate_column_reads_with_it(writer: RunWriter, tmp_path):
    write(writer, "case-a", n=1)
    part = writer.run_dir / "checks" / "case-a.parquet"
    old = pq.read_table(part)
    old = old.rename_columns(["check" if n == "gate" else n for n in old.schema.names])
    pq.write_table(old, part)
    run = load_run(writer.run_dir)
    assert "gate" in run.checks.schema.names and run.checks["gate"].to_pylist() == ["reference"]


def test_each_swept_key_is_a_column_of_its_own_and_mixed_types_become_strings(writer: RunWriter):
    rows_a = [sample_row("case-a") | {"sweep.shape.capacity": 4096, "sweep.routing.family": "zipf"}]
    rows_b = [sample_row("case-b") | {"sweep.shape.capacity": "formula",
                                      "sweep.routing.family": "uniform"}]  # fmt: skip
    writer.write_case("case-a", rows_a, [check_row("case-a")], [])
    writer.write_case("case-b", rows_b, [check_row("case-b")], [])
    run = load_run(writer.run_dir)
    assert run.samples["sweep.routing.family"].to_pylist() == ["zipf", "uniform"]
    assert run.samples["sweep.shape.capacity"].to_pylist() == ["4096", "formula"]
    with pytest.raises(ValueError, match="only samples carry sweep columns"):
        rows_to_table("checks", [check_row("x") | {"sweep.a": 1}])
