"""The arms guide's "Bring your own arm" example (docs/ARMS.md), run as a user would: the file and
the scenario copied out of the guide into a folder of their own, then `moebench run`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_support import runner

from moebench.cli.app import app
from moebench.results.reader import load_run

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "ARMS.md"


def block(start: str) -> str:
    text = GUIDE.read_text()
    m = re.search(r"```\w+\n" + re.escape(start) + r"\n(.*?)```", text, re.S)
    assert m, f"docs/ARMS.md has no code block starting {start!r}"
    return m.group(1)


@pytest.mark.slow
def test_the_readme_arm_runs_with_every_gate(tmp_path):
    (tmp_path / "my_arm.py").write_text(block("# my_arm.py, beside my.yaml"))
    (tmp_path / "my.yaml").write_text(block("# my.yaml"))
    result = runner.invoke(app, ["run", str(tmp_path / "my.yaml"), "--results",
                                 str(tmp_path / "results")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    rows = [c for c in load_run(run_dir).checks.to_pylist() if c["arm"] == "einsum_loop"]
    status = {(c["rank"], c["gate"]): c["status"] for c in rows}
    for check in ("reference", "nan_poison", "post_timing", "fresh_input"):
        assert status[(0, check)] == "pass", check
