"""The A/A check on the CPU, end to end: the real kernels under the interpreter, the real clock,
an arm against its own gated copy. Interpreter timings on two shared cores are as noisy as timings
get, and the CPU view shows no verdict at all; the statistics under it must still hold there: the
copy is never claimed FASTER or SLOWER with blocks enough for a verdict, and too few blocks give
no verdict (the smoke scenario's 3 blocks judged the copy FASTER -24.1% before the intervals were
exact)."""

import json

import pytest
from cli_support import TINY, write
from typer.testing import CliRunner

from moebench.analysis.compare import compare_runs
from moebench.analysis.stats import TOO_FEW
from moebench.cli import app
from moebench.core.coverage import blocks_needed, cell_alpha
from moebench.results.reader import load_run

runner = CliRunner()

pytestmark = pytest.mark.slow


def _aa_run(tmp_path, blocks: int):
    text = (
        TINY.replace(
            "measure: {regimes: [ffn, kernel], stages: [act], warmup: 0, blocks: 2, iterations: 1}",
            f"measure: {{regimes: [ffn], warmup: 1, blocks: {blocks}, iterations: 3}}",
        )
        + "arms: [stock]\n"
    )
    scenario = write(tmp_path, text)
    result = runner.invoke(app, ["run", str(scenario), "--aa", "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    return run_dir, compare_runs([load_run(run_dir)])


def test_the_aa_copy_on_a_cpu_is_never_claimed_different(tmp_path):
    # One cell (the ffn of stock against its copy): the level needs this many blocks.
    need = blocks_needed(cell_alpha(0.05, 1))
    run_dir, comp = _aa_run(tmp_path, need)
    aa = comp.aa
    assert aa.cells == 1 and aa.too_few == 0, aa
    assert aa.false_positives == 0 and aa.fp_rate == 0.0, aa
    # ... and the CPU's own output claims nothing either way.
    doc = json.loads(runner.invoke(app, ["compare", str(run_dir), "--format", "json"]).stdout)
    assert {r["decision"] for r in doc["rows"]} <= {"baseline", ""}, doc["rows"]


def test_too_few_blocks_on_a_cpu_give_no_verdict(tmp_path):
    _, comp = _aa_run(tmp_path, 3)
    (row,) = [r for r in comp.rows if r.arm == "stock~aa"]
    assert row.decision == TOO_FEW and "need >= " in row.reason, row
    assert comp.aa.cells == 0 and comp.aa.false_positives == 0, comp.aa
