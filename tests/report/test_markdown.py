"""The Markdown report: the A/A section says its name once, plot links carry no absolute folder
of this machine, and a case past its time limit reads as a timeout, not as a failed gate."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_support import runner
from synthetic_runs import checks, make_run, noisy, samples, two_arm_run

from moebench.analysis.compare import compare_runs
from moebench.cli.app import app
from moebench.report.markdown import plot_link
from moebench.report.render import render

TIMEOUT_DETAIL = "timeout: case time limit of 0.001 s reached after 0.0 s (rank 0, gates of stock)"


def section(md: str, heading: str) -> str:
    """The text under ``## heading`` up to the next heading."""
    start = md.index(f"\n## {heading}\n") + len(heading) + 5
    end = md.find("\n## ", start)
    return md[start : end if end >= 0 else None].strip()


def aa_run():
    rows = samples("run-a", "stock", noisy(1.0, seed=1))
    rows += samples("run-a", "stock~aa", noisy(1.0, seed=2))
    return make_run("run-a", rows, checks("run-a", "stock") + checks("run-a", "stock~aa"))


# --------------------------------------------------------------------------- A/A section


def test_aa_section_does_not_repeat_its_heading():
    md = render(compare_runs([aa_run()]), "markdown")
    body = section(md, "A/A control")
    assert body.startswith("stock~aa vs stock: false-positive rate 0 of 1 cell(s)"), body
    assert md.count("A/A control") == 1  # the heading only


def test_report_without_aa_says_none_under_its_heading():
    md = render(compare_runs([two_arm_run(noisy(0.9, seed=3))]), "markdown")
    assert section(md, "A/A control") == (
        "None in these runs (run --aa measures the false-positive rate)."
    )
    assert md.count("A/A control") == 1


def test_terminal_table_keeps_the_aa_label():
    # The table has no headings: there the line names what it is.
    table = render(compare_runs([aa_run()]), "table", width=200)
    assert "A/A control (stock~aa vs stock): false-positive rate 0 of 1" in table
    plain = render(compare_runs([two_arm_run(noisy(0.9, seed=3))]), "table", width=200)
    assert "A/A control: none in these runs" in plain


# --------------------------------------------------------------------------- plot links


def test_plot_link_is_relative_and_keeps_a_relative_path_as_given(tmp_path: Path):
    assert plot_link(tmp_path / "plots" / "a.png", start=tmp_path) == "plots/a.png"
    assert plot_link(tmp_path / "a.png", start=tmp_path / "report") == "../a.png"
    assert plot_link("figs/a.png", start=tmp_path) == "figs/a.png"
    assert plot_link(Path("..") / "figs" / "a.png") == "../figs/a.png"


def test_report_links_plots_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = [str(tmp_path / "plots" / "speedup-x.png"), "my figs/ranks (run 2).png"]
    md = render(compare_runs([aa_run()]), "markdown", plots=names)
    assert section(md, "Plots").splitlines() == [
        "![plots/speedup-x.png](plots/speedup-x.png)",
        "![my figs/ranks (run 2).png](<my figs/ranks (run 2).png>)",  # spaces and brackets
    ]
    assert str(tmp_path) not in md


# --------------------------------------------------------------------------- timeouts


def timeout_run():
    """Case c000 timed out in its gates (every arm gets a ``timeout`` error row, no samples);
    case c001 is timed as usual."""
    rows = samples("run-a", "stock", noisy(1.0, seed=1), case_id="c001")
    rows += samples("run-a", "fast", noisy(0.8, seed=2), case_id="c001")
    check_rows = checks("run-a", "stock", case_id="c001") + checks("run-a", "fast", case_id="c001")
    for arm in ("stock", "fast"):
        (row,) = checks("run-a", arm, "error", case_id="c000")
        check_rows.append(row | {"gate": "timeout", "error": math.nan, "detail": TIMEOUT_DETAIL})
    return make_run("run-a", rows, check_rows, finished_cases=["c000", "c001"])


def test_timeout_reason_says_timeout_once():
    comp = compare_runs([timeout_run()])
    (row,) = [r for r in comp.rows if r.case_id == "c000" and r.arm == "fast"]
    assert row.status == "mismatch"  # no figure of a case cut short is trusted
    assert row.reason == (
        "timeout error (rank 0): case time limit of 0.001 s reached after 0.0 s "
        "(rank 0, gates of stock)"
    )


def test_report_calls_a_timeout_a_timeout():
    md = render(compare_runs([timeout_run()]), "markdown")
    decisions = section(md, "Decisions")
    assert "- `fast` against `stock` over 2 cell(s): FASTER 1, timeout 1" in decisions
    assert "- `stock` (the baseline) over 1 cell(s): timeout 1" in decisions
    assert "failed a correctness gate (not timed or not trusted): none" in decisions
    assert "passed its time limit (figures not trusted): c000 fast, c000 stock" in decisions
    assert "timeout: timeout" not in md and "timeout error (rank 0): timeout" not in md
    assert "| mismatch |" in section(md, "Results")  # the status stays what compare says


# --------------------------------------------------------------------------- end to end

FAULTS = """\
name: faults
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 1}
routing: {family: uniform, seed: 0}
shape: {tokens_per_rank: 4, alignment: 16}
precision: bf16
arms: [stock, prefix_sum_masked]
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
sweep: {measure.case_timeout_s: [0.001, 600]}
"""


@pytest.fixture(scope="module")
def timed_out_run(tmp_path_factory) -> Path:
    """A real run whose first case may take a millisecond (it cannot) and the second ten
    minutes."""
    tmp = tmp_path_factory.mktemp("timeout")
    (tmp / "s.yaml").write_text(FAULTS)
    result = runner.invoke(app, ["run", str(tmp / "s.yaml"), "--results", str(tmp / "r")])
    assert result.exit_code == 1, result.output  # a case errored
    (run_dir,) = (tmp / "r").iterdir()
    return run_dir


@pytest.mark.parametrize("relative", [False, True], ids=["absolute --plot", "relative --plot"])
def test_compare_markdown_from_the_cli(timed_out_run, tmp_path, monkeypatch, relative):
    monkeypatch.chdir(tmp_path)
    folder = "figs" if relative else str(tmp_path / "figs")
    result = runner.invoke(
        app, ["compare", str(timed_out_run), "--format", "markdown", "--plot", folder, "--timings"]
    )
    assert result.exit_code == 0, result.output
    md = result.stdout
    written = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert written and section(md, "Plots").splitlines() == [
        f"![figs/{name}](figs/{name})" for name in written
    ]
    assert str(tmp_path) not in md  # no folder of this machine
    assert "passed its time limit (figures not trusted): c000-case_timeout_s=0.001" in md
    assert "timeout error (rank 0): case time limit of 0.001 s reached after" in md
    assert "timeout: timeout" not in md and "(rank 0): timeout" not in md
    assert md.count("A/A control") == 1
