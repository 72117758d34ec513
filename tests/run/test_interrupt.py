"""Real runs in a child process, stopped the hard way: SIGKILL then --resume, SIGINT/SIGTERM,
and --isolate with a case whose process is killed.

Each test starts `python -m moebench.cli run` on a tiny three-case CPU scenario and waits until
the manifest lists a finished case before it strikes. Run with `pytest -s` to see what happened.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from moebench.results.reader import load_run

REPO = Path(__file__).resolve().parents[2]
THREE_CASES = """\
name: interrupt
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 1}
routing: {family: uniform, seed: 0}
shape: {tokens_per_rank: 4, alignment: 16}
precision: bf16
arms: [stock, prefix_sum_masked]
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
sweep: {routing.seed: [1, 2, 3]}
"""
CASES = ["c000-seed=1", "c001-seed=2", "c002-seed=3"]
SAMPLES_PER_CASE = 2 * 2  # arms x blocks (one rank, one stage, one iteration)


def start(*args: str) -> subprocess.Popen:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "moebench.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen, found, what: str, timeout: float = 90.0):
    """Poll ``found()`` until it returns something; fail if the process ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hit = found()
        if hit:
            return hit
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"no {what} after {timeout} s")


def finished_case(results: Path):
    def found():
        for manifest in results.glob("*/manifest.json"):
            doc = json.loads(manifest.read_text())  # atomic: never half-written
            if doc["finished_cases"]:
                return manifest.parent
        return None

    return found


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "three.yaml"
    path.write_text(THREE_CASES)
    return path


@pytest.mark.slow
def test_sigkill_leaves_whole_parts_and_resume_finishes_with_the_same_run_id(tmp_path, scenario):
    results = tmp_path / "results"
    proc = start("run", str(scenario), "--results", str(results))
    run_dir = wait_for(proc, finished_case(results), "a finished case")
    proc.kill()  # SIGKILL: no handler, no finally, no manifest update
    proc.wait()
    killed = json.loads((run_dir / "manifest.json").read_text())
    done = killed["finished_cases"]
    files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
    print(f"\nSIGKILL after {done}: status {killed['status']!r}, files {files}")
    assert killed["status"] == "running"  # what a kill leaves behind
    assert 1 <= len(done) < 3, "the run finished before the kill; make the cases slower"
    for part in run_dir.glob("*/*.parquet"):  # every part on disk is whole...
        pq.read_table(part)
    run = load_run(run_dir)  # ...and readers see only the finished cases
    assert set(run.samples["case_id"].to_pylist()) == set(done)
    assert run.samples.num_rows == SAMPLES_PER_CASE * len(done)

    resumed = start("run", str(scenario), "--resume", str(run_dir))
    out, err = resumed.communicate(timeout=120)
    print(f"--resume: exit {resumed.returncode}; {out.splitlines()[0]}")
    assert resumed.returncode == 0, err
    run = load_run(run_dir)
    assert run.run_id == killed["run_id"] and run_dir.name == killed["run_id"]
    assert run.manifest["finished_cases"] == CASES  # each case once, in order
    assert run.manifest["status"] == "complete" and len(run.manifest["resumed_at"]) == 1
    assert sorted(set(run.samples["case_id"].to_pylist())) == CASES
    assert run.samples.num_rows == SAMPLES_PER_CASE * 3  # no case written twice
    keys = run.samples.select(["case_id", "arm", "block", "iteration"]).to_pylist()
    assert len({tuple(k.values()) for k in keys}) == len(keys)
    left = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
    assert left == sorted(
        [".lock", "manifest.json"]
        + [
            f"{table}/{case}.parquet"
            for table in ("checks", "ledger", "routing", "samples")
            for case in CASES
        ]
    )  # no temp file, no orphan part, no scratch folder
    print(f"after --resume: run id {run.run_id} unchanged, cases {run.manifest['finished_cases']}")


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_after_the_current_sample(tmp_path, scenario, sig, code):
    results = tmp_path / "results"
    proc = start("run", str(scenario), "--results", str(results))
    run_dir = wait_for(proc, finished_case(results), "a finished case")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    print(f"\n{sig.name}: exit {proc.returncode}; stderr: {err.strip()}")
    assert proc.returncode == code, err
    assert "Traceback" not in err
    progress = re.compile(r"moebench: \d+(/\d+| step\(s\)) ")  # stderr is no terminal: lines
    (line,) = [ln for ln in err.splitlines() if ln.strip() and not progress.match(ln)]
    assert line.startswith(f"moebench: interrupted by {sig.name}: ")
    assert f"--resume {run_dir}" in line
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["interrupted_by"] == sig.name
    assert manifest["resume"].endswith(f"--resume {run_dir}")
    done = manifest["finished_cases"]
    assert 1 <= len(done) <= 3
    run = load_run(run_dir)
    assert run.samples.num_rows == SAMPLES_PER_CASE * len(done)
    unfinished = set(CASES) - set(done)
    assert not any(p.stem in unfinished for p in run_dir.glob("*/*.parquet"))


@pytest.mark.slow
def test_isolate_a_killed_case_costs_only_that_case(tmp_path):
    scenario = tmp_path / "two.yaml"
    scenario.write_text(THREE_CASES.replace("[1, 2, 3]", "[1, 2]"))
    results = tmp_path / "results"
    proc = start("run", str(scenario), "--results", str(results), "--isolate")

    def child_of_first_case():
        for pid in results.glob(f"*/.scratch/{CASES[0]}/child.pid"):
            text = pid.read_text()
            if text:
                return int(text)
        return None

    child = wait_for(proc, child_of_first_case, "the first case's child process")
    os.kill(child, signal.SIGKILL)  # as a segfault or a lost CUDA context would end it
    out, err = proc.communicate(timeout=120)
    print(f"\n--isolate, case 0's child killed: exit {proc.returncode}; {err.strip()}")
    assert proc.returncode == 1, err
    (run_dir,) = results.iterdir()
    run = load_run(run_dir)
    assert run.manifest["finished_cases"] == CASES[:2] and run.manifest["status"] == "errors"
    crashed = [c for c in run.checks.to_pylist() if c["case_id"] == CASES[0]]
    assert {(c["arm"], c["gate"], c["status"]) for c in crashed} == {
        ("stock", "run", "error"),
        ("prefix_sum_masked", "run", "error"),
    }
    assert all("the isolated case died (killed by SIGKILL)" in c["detail"] for c in crashed)
    assert [r["case_id"] for r in run.routing.to_pylist()] == CASES[:2]  # rows for both
    second = {s["arm"] for s in run.samples.to_pylist() if s["case_id"] == CASES[1]}
    assert second == {"stock", "prefix_sum_masked"}  # the next case ran, in its own child
    assert not (run_dir / ".scratch").exists()
