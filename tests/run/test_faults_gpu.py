"""On a GPU only: a real illegal memory access is recognised as fatal, and a run that hits one
stops with exit 3, keeps its finished cases and resumes.

Each fault happens in a child process (with the Triton interpreter off), so the test process's
own CUDA context stays usable. Skipped without a GPU. Where pytest is not installed:
``PYTHONPATH=$PWD python3 tests/run/test_faults_gpu.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from moebench.results.reader import load_run

try:
    import pytest

    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
except ImportError:  # run as a script (see the docstring)
    pytest = None
REPO = Path(__file__).resolve().parents[2]

POKE = """
import triton
import triton.language as tl

@triton.jit
def poke(p):
    tl.store(p + (1 << 40), 1.0)  # 4 TB past a one-element tensor
"""

CLASSIFY = (
    POKE
    + """
import torch
from moebench.core import faults
x = torch.zeros(1, device="cuda")
try:
    poke[(1,)](x)
    torch.cuda.synchronize()
except Exception as exc:
    print(faults.classify(exc), faults.device_healthy(torch.device("cuda")))
    print(faults.describe(exc))
else:
    print("no fault")
"""
)

FAULTY_RUN = (
    POKE
    + """
import dataclasses
import sys
import arms.prefill.prefix_sum_masked as masked
from moebench.arm.base import Stage

real = masked.ARM.build

def build(ws):  # the masked arm's activation writes far outside its buffer
    stages = real(ws)
    return stages[:2] + (Stage(name="act", run=lambda: poke[(1,)](ws.y_TD)),) + stages[3:]

masked.ARM = dataclasses.replace(masked.ARM, build=build)
from moebench.cli.app import main
sys.argv = ["moebench", "run", sys.argv[1], "--results", sys.argv[2]]
main()
"""
)

SCENARIO = """\
name: gpu-fault
model: {id: test/tiny, revision: unpinned, hidden: 256, intermediate: 256, experts: 8, top_k: 2}
topology: {ep: 1}
routing: {family: uniform, seed: 0}
shape: {tokens_per_rank: 64, alignment: 64}
precision: fp8
measure: {regimes: [ffn], warmup: 1, blocks: 3, iterations: 3}
device: cuda
sweep: {routing.seed: [1, 2]}
"""


def python(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO)
    if args[0] == "-c":  # Triton compiles @jit functions from a source file, not from `python -c`
        import tempfile

        script = Path(tempfile.mkdtemp()) / "child.py"
        script.write_text(args[1])
        args = (str(script), *args[2:])
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_illegal_memory_access_is_fatal():
    out = python("-c", CLASSIFY)
    lines = out.stdout.splitlines()
    assert lines, f"the child printed nothing (exit {out.returncode}): {out.stderr[-2000:]}"
    first, *rest = lines
    assert first == "fatal False", out.stdout + out.stderr
    print(rest[0])


def test_a_run_that_loses_the_device_stops_with_exit_3_and_resumes(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    results = tmp_path / "results"
    out = python("-c", FAULTY_RUN, str(scenario), str(results))
    print(out.stderr.strip()[-500:])
    assert out.returncode == 3, out.stderr
    (run_dir,) = results.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["fault_case"] == "c000-seed=1"
    assert manifest["finished_cases"] == ["c000-seed=1"]
    again = python("-m", "moebench.cli", "run", str(scenario), "--resume", str(run_dir))
    assert again.returncode == 1, again.stderr  # case 0 keeps its error rows
    run = load_run(run_dir)
    assert run.manifest["finished_cases"] == ["c000-seed=1", "c001-seed=2"]
    timed = {s["arm"] for s in run.samples.to_pylist() if s["case_id"] == "c001-seed=2"}
    assert timed == {"stock", "prefix_sum", "prefix_sum_masked"}


if __name__ == "__main__":
    import tempfile

    test_illegal_memory_access_is_fatal()
    test_a_run_that_loses_the_device_stops_with_exit_3_and_resumes(Path(tempfile.mkdtemp()))
    print("GPU fault checks passed")
