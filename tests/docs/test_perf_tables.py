"""docs/PERF.md's current tables are what the stored records under docs/perf/ give.

tools/perf_tables.py writes each table from the records (reports, bench logs, JSON); these tests
run its check in-process and show that it catches a figure copied wrongly by hand, the way the
grouped-GEMM table once gave FC1's floors at 12,288 and 24,576 live rows as 160.3 and 320.6 us
where the run's log says 320.6 and 641.2.
"""

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GROUP_M_LOG = "2026-12-01/bench_kernels-gemm-group_m.log"


@pytest.fixture(scope="module")
def tools():
    """tools/perf_tables.py and its helpers, imported as the script imports them (tools/ first on
    sys.path); the path is restored after the module's tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(REPO / "tools"))
        yield (
            importlib.import_module("perf_tables"),
            importlib.import_module("perf_records"),
            importlib.import_module("perf_cells"),
        )


def test_perf_md_tables_are_the_records(tools):
    perf_tables, _, _ = tools
    assert perf_tables.check() == []


def test_the_log_holds_fc1_floors_of_320_6_and_641_2(tools):
    _, perf_records, _ = tools
    records = perf_records.Records()
    shipped = dict(kernel="fc1_psum", loads="tma", stages=3, per_sm=3, group_m=8)
    floors = [records.kv(GROUP_M_LOG, "floor_us", live=n, **shipped).text for n in (12288, 24576)]
    assert floors == ["320.6", "641.2"]
    # 160.3 is FC2's floor at 12,288 rows, the figure the hand-written table put under FC1.
    fc2 = records.kv(GROUP_M_LOG, "floor_us", kernel="fc2_psum", live=12288, loads="tma", group_m=8)
    assert fc2.text == "160.3"


def test_a_figure_copied_wrongly_is_caught(tools, tmp_path):
    perf_tables, _, _ = tools
    text = perf_tables.PERF_MD.read_text(encoding="utf-8")
    # The generated row of 12,288 live rows: live rows, FC1 psum, FC1 floor, ...
    row = re.search(r"^\| 12,288 \([\d.]+%\) \| \*\*452\.4\*\* \| 320\.6 \|.*$", text, re.MULTILINE)
    assert row is not None
    doctored = tmp_path / "PERF.md"
    doctored.write_text(text.replace(row[0], row[0].replace("| 320.6 |", "| 160.3 |", 1)))
    assert perf_tables.check(doctored) == ["gemm: differs from what the records give"]
    assert perf_tables.main(["--check", "--perf-md", str(doctored)]) == 1
    assert perf_tables.main(["--check", "--perf-md", str(perf_tables.PERF_MD)]) == 0


def test_a_table_missing_from_perf_md_is_caught(tools, tmp_path):
    perf_tables, _, _ = tools
    text = perf_tables.PERF_MD.read_text(encoding="utf-8")
    doctored = tmp_path / "PERF.md"
    doctored.write_text(re.sub(r"<!-- perf_tables: trust -->.*?<!-- /perf_tables -->", "", text,
                               flags=re.DOTALL))  # fmt: skip
    assert perf_tables.check(doctored) == ["trust: no block in PERF.md"]


def test_a_history_reference_defined_twice_is_caught(tools, tmp_path):
    """Markdown takes a reference's first definition, so a second one silently sends a table's
    history links to another section (h-i28w and h-i28x once did)."""
    perf_tables, _, _ = tools
    text = perf_tables.PERF_MD.read_text(encoding="utf-8")
    first = re.search(r"^\[h-i28y\]: perf/HISTORY\.md#\S+$", text, re.MULTILINE)
    assert first is not None
    doctored = tmp_path / "PERF.md"
    doctored.write_text(text + "\n[h-i28y]: perf/HISTORY.md#the-fp8-tiles-e4m3-decode-in-7-"
                        "instructions-a-word-instead-of-11-issue-28\n")  # fmt: skip
    assert perf_tables.check(doctored) == ["[h-i28y] is defined 2 times"]


def test_a_lookup_names_exactly_one_figure(tools):
    _, perf_records, _ = tools
    records = perf_records.Records()
    with pytest.raises(perf_records.RecordError, match="5 matches"):
        # five launches of FC1 at 12,288 rows: the selection must say which
        records.kv(GROUP_M_LOG, "us", kernel="fc1_psum", live=12288)
    with pytest.raises(perf_records.RecordError, match="0 matches"):
        records.kv(GROUP_M_LOG, "us", kernel="fc1_psum", live=12345)
    with pytest.raises(perf_records.RecordError, match="no such record"):
        records.kv("2026-12-01/no-such.log", "us")


def test_an_ncu_metric_is_read_from_its_own_kernels_block(tools):
    _, perf_records, _ = tools
    records = perf_records.Records()
    log = "2026-12-07-h100-ceilings/call4/ncu_grouped-mxfp4-stream.txt"
    # the log profiled fc1 then fc2, both under the same kernel name and grid
    assert records.ncu(log, 0, "Duration").text == "83.58"
    assert records.ncu(log, 1, "Duration").text == "50.11"
    assert records.ncu(log, 1, "smsp__inst_executed.sum").text == "25,317,504"
    with pytest.raises(perf_records.RecordError, match="no kernel 2"):
        records.ncu(log, 2, "Duration")
    with pytest.raises(perf_records.RecordError, match="0 matches"):
        records.ncu(log, 0, "no_such_metric.sum")


def test_a_report_cell_and_a_derived_ratio(tools):
    _, perf_records, _ = tools
    records = perf_records.Records()
    report = "2026-12-01-kernel/seed-act-microbench.md"
    dense = records.result(report, "kernel/act", "prefix_sum")
    masked = records.result(report, "kernel/act", "prefix_sum_masked")
    assert (dense.text, masked.text) == ("72.70", "12.77")
    ratio = perf_records.ratio(dense, masked)
    assert ratio.text == "5.69x"
    assert ratio.sources == (report,)


def test_a_number_of_the_specs_own_is_refused(tools):
    _, perf_records, perf_cells = tools
    table = perf_cells.Table(name="t", caption="", columns=["figure", "value"])
    figure = perf_records.Figure(text="190.1", source=GROUP_M_LOG)
    table.row("FC1 psum", perf_cells.fill("{} us", figure))
    with pytest.raises(perf_records.RecordError, match="not from a record"):
        table.row("FC1 psum at 3,072 live rows", perf_cells.fill("{} us", figure))
    with pytest.raises(perf_records.RecordError, match="not from a record"):
        table.row("FC1 psum", perf_cells.fill("{} us, floor 125.7", figure))
