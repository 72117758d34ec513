"""A deadline or Ctrl-C takes effect within seconds, also inside a sample that runs for minutes
(a large shape under the Triton interpreter): the alarm of ``faults.Stopper``."""

from __future__ import annotations

import os
import signal
import time

import pytest
from cli_support import TINY, runner, write

from moebench.cli.app import app
from moebench.core import faults
from moebench.results.reader import load_run


def spin(seconds: float) -> None:
    """Python work that never reaches a check point (a long interpreted kernel)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_case_deadline_interrupts_a_long_step():
    stop = faults.Stopper()
    with stop.signals():
        stop.start_case(0.2)
        started = time.monotonic()
        with pytest.raises(faults.CaseTimeout, match="inside a step"):
            spin(30)
        took = time.monotonic() - started
        stop.end_case()
    assert took < 0.2 + faults.Stopper.GRACE_S + 1.5, took


def test_the_first_ctrl_c_stops_a_long_step_within_the_grace():
    stop = faults.Stopper()
    with stop.signals():
        stop.start_case(None)
        started = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(faults.Interrupted):
            spin(30)
        took = time.monotonic() - started
        stop.end_case()
    assert took < faults.Stopper.GRACE_S + 1.5, took


def test_between_cases_the_alarm_waits_for_the_check_point():
    stop = faults.Stopper()
    with stop.signals():
        os.kill(os.getpid(), signal.SIGINT)
        spin(faults.Stopper.GRACE_S + 0.5)  # writing a case's parts: never cut short
        with pytest.raises(faults.Interrupted):
            stop.check("between cases")


SLOW_ARM = """\
import time
from arms.prefill.stock import ARM as STOCK
from moebench.arm.base import Arm, Stage

def build(ws):
    stages = STOCK.build(ws)
    slow = Stage(name="act", run=lambda: (time.sleep(60), stages[2].run()))
    return stages[:2] + (slow,) + stages[3:]

ARM = Arm(name="slow", family="prefill", summary="a step of a minute", build=build)
"""


def test_a_case_limit_ends_a_minute_long_step_within_seconds(tmp_path):
    (tmp_path / "slow_arm.py").write_text(SLOW_ARM)
    text = TINY.replace(
        "measure: {", "arms: [stock, 'slow_arm.py:ARM']\nmeasure: {case_timeout_s: 1, "
    )
    scenario = write(tmp_path, text)
    started = time.monotonic()
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")])
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert took < 30, took  # the step alone would take a minute
    (run_dir,) = (tmp_path / "r").iterdir()
    rows = [c for c in load_run(run_dir).checks.to_pylist() if c["gate"] == "timeout"]
    assert rows and all("case time limit of 1 s" in c["detail"] for c in rows)
