"""Hostile input: every failure is one MoebenchError line naming the file; nothing is executed,
unpickled or written outside the results folder. tools/fuzz_scenarios.py runs the same
properties over 10,000 documents and 10,000 trace files (counts in docs/ROBUSTNESS.md)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hostile import ATTACKS, Unpickled, check_scenario, check_trace, scenario_documents, trace_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from moebench.cli.app import app
from moebench.core.errors import ScenarioError, TraceError
from moebench.results.schema import check_case_id
from moebench.routing.synthetic import load_trace_counts
from moebench.spec.load import load_scenario, parse_scenario
from moebench.spec.sweep import expand

cli = CliRunner()
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(scenario_documents)
def test_scenario_documents_load_or_fail_in_one_line(document):
    with tempfile.TemporaryDirectory() as folder:
        check_scenario(document, Path(folder))


@FUZZ
@given(trace_files())
def test_trace_files_load_or_fail_in_one_line(trace):
    with tempfile.TemporaryDirectory() as folder:
        check_trace(*trace, Path(folder))


@pytest.mark.parametrize("attack", ATTACKS, ids=range(len(ATTACKS)))
def test_each_yaml_attack_is_rejected_quickly_and_builds_nothing(tmp_path, attack):
    marker = Path("/tmp/moebench-pwned")
    marker.unlink(missing_ok=True)
    started = time.monotonic()
    assert check_scenario(attack, tmp_path).startswith("rejected")
    assert time.monotonic() - started < 5  # an alias bomb is never expanded
    assert not marker.exists()


def test_tags_that_build_objects_are_named_in_the_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: !!python/object/apply:builtins.open ['/tmp/moebench-pwned', 'w']\n")
    with pytest.raises(ScenarioError, match="tags that build objects are never allowed"):
        load_scenario(path)


def test_pickled_trace_is_refused_unloaded(tmp_path):
    Unpickled.marker.unlink(missing_ok=True)
    path = tmp_path / "evil.npy"
    np.save(path, np.array([[Unpickled(), 1.0]], dtype=object), allow_pickle=True)
    with pytest.raises(TraceError, match="expected integer or float counts, got dtype"):
        load_trace_counts(path, None)
    assert not Unpickled.marker.exists()


def test_forged_npy_shape_allocates_nothing(tmp_path):
    path = tmp_path / "huge.npy"
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1048576), }"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    path.write_bytes(
        b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64
    )
    with pytest.raises(TraceError, match="truncated or padded"):
        load_trace_counts(path, None)


@pytest.mark.parametrize("where", ["/dev/zero", "folder"])
def test_special_files_are_refused_without_reading(tmp_path, where):
    path = Path(where) if where.startswith("/") else tmp_path
    if not path.exists():
        pytest.skip(f"{path} missing")
    with pytest.raises(ScenarioError, match="not a regular file|cannot read"):
        load_scenario(path)
    with pytest.raises(TraceError, match="not a regular file|cannot read"):
        load_trace_counts(path, None)


def test_deep_nesting_is_one_line(tmp_path):
    for text in ("[" * 100_000, "a: " + "[" * 900 + "]" * 900 + "\n"):
        path = tmp_path / "deep.yaml"
        path.write_text(text)
        with pytest.raises(ScenarioError) as info:
            load_scenario(path)
        assert "\n" not in str(info.value)
    path = tmp_path / "deep.json"
    path.write_text('{"logical_count": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceError, match="malformed"):
        load_trace_counts(path, None)


def test_huge_runs_are_refused_before_planning():
    base = "name: big\nmodel: deepseek-v4-flash\ntopology: {ep: 8}\n"
    with pytest.raises(ScenarioError, match="random numbers on the host"):
        parse_scenario(base + "shape: {tokens_per_rank: 1048576}\n")
    with pytest.raises(ScenarioError, match="measure.iterations: a case would record"):
        parse_scenario(
            base + "shape: {tokens_per_rank: 8}\nmeasure: {blocks: 10000, iterations: 100000}\n"
        )


PRINTABLE = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Cf", "Zl", "Zp", "Co", "Cn")),
    min_size=1,
    max_size=40,
).filter(lambda t: t.strip() and t.isprintable())


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(PRINTABLE, min_size=1, max_size=4, unique=True))
def test_case_ids_from_any_sweep_value_are_safe_file_names(ids):
    doc = {
        "name": "x",
        "model": {"id": "a/b", "hidden": 128, "intermediate": 128, "experts": 4, "top_k": 2},
        "shape": {"tokens_per_rank": 2, "alignment": 16},
        "sweep": {"model.id": ids},
    }
    cases = expand(parse_scenario(yaml.safe_dump(doc, allow_unicode=True)))
    assert len({c.case_id for c in cases}) == len(ids)
    for c in cases:
        check_case_id(c.case_id)
        assert "/" not in c.case_id and not c.case_id.startswith(".")


def test_names_from_a_scenario_cannot_leave_the_results_folder(tmp_path):
    traces = tmp_path / "t"
    traces.mkdir()
    (traces / "a.json").write_text(json.dumps({"logical_count": [[1, 2, 3, 4]]}))
    (traces / "b.json").write_text(json.dumps({"logical_count": [[4, 3, 2, 1]]}))
    scenario = tmp_path / "evil.yaml"
    scenario.write_text(
        "name: '../../../escape/..'\n"
        "model: {id: ../../x, revision: unpinned, hidden: 128, intermediate: 128, experts: 4,"
        " top_k: 2}\n"
        "routing: {family: trace}\n"
        "shape: {tokens_per_rank: 2, alignment: 16}\nprecision: bf16\narms: [stock]\n"
        "measure: {regimes: [ffn], warmup: 0, blocks: 1, iterations: 1}\n"
        "sweep: {routing.path: [t/../t/a.json, ./t/b.json]}\n"
    )
    results = tmp_path / "results"
    before = {p for p in tmp_path.rglob("*")}
    result = cli.invoke(app, ["run", str(scenario), "--results", str(results)])
    assert result.exit_code == 0, result.output
    new = {p for p in tmp_path.rglob("*")} - before
    (run_dir,) = results.iterdir()
    assert "-escape-" in run_dir.name and ".." not in run_dir.name
    for p in new:
        assert p == results or run_dir in (p, *p.parents), p
    parts = sorted(p.name for p in (run_dir / "samples").iterdir())
    assert parts == ["c000-path=t_.._t_a.json.parquet", "c001-path=._t_b.json.parquet"]
    assert os.path.commonpath([results, *new]) == str(results)
