"""The step regime in topology.mode distributed: every MoE layer of a tiny model with the real
exchange, on two gloo ranks started by torchrun (``moebench run --nproc 2``, as
tests/run/test_distributed.py launches them), and the scenario rules (docs/DESIGN.md section 14).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import one_line_error, runner, write

from moebench.cli.app import app
from moebench.results.reader import load_run
from moebench.spec.load import parse_scenario

REPO = Path(__file__).resolve().parents[2]
ARMS = ("stock", "prefix_sum", "prefix_sum_masked")

# scenarios/smoke-step-distributed.yaml's model: layers 1 and 2 are MoE, 2 steps of 2 tokens per
# rank over ep = dp = 2 ranks.
STEP = """\
name: tiny-step-dist
model: {id: test/tiny-step, revision: unpinned, hidden: 128, intermediate: 128, experts: 8,
        top_k: 2, layers: 3, dense_layers: [0]}
topology: {ep: 2, dp: 2, mode: distributed}
routing: {family: zipf, seed: 0}
shape: {tokens_per_rank: 2, alignment: 16}
precision: fp8
activation: silu
measure: {regimes: [step], warmup: 0, iterations: 1}
step: {steps: 2, non_moe_us: 100, slo_tpot_ms: 50}
"""


def child_env() -> dict:
    import os

    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "1"  # the ranks run the kernels in the interpreter
    env["OMP_NUM_THREADS"] = "1"  # two ranks share the cores
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="module")
def step_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist-step")
    scenario = write(tmp, STEP)
    cmd = [sys.executable, "-m", "moebench.cli", "run", str(scenario), "--nproc", "2",
           "--results", str(tmp / "results")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp / "results").iterdir()
    return run_dir


@pytest.mark.slow
def test_two_ranks_time_every_layer_and_the_whole_step(step_run):
    run = load_run(step_run)
    m = run.manifest
    assert m["status"] == "complete"
    assert m["distributed"]["world_size"] == 2 and m["distributed"]["backend"] == "gloo"
    assert m["step"]["layers"] == [1, 2] and m["step"]["steps"] == 2
    checks = run.checks.to_pylist()
    assert checks and all(c["status"] in ("pass", "skip") for c in checks), [
        c for c in checks if c["status"] not in ("pass", "skip")
    ]
    gates = {(c["gate"], c["rank"], c["arm"]) for c in checks}
    for rank in (0, 1):
        for arm in ARMS:
            # the first layer's one-layer gates, end to end included, every layer's reference
            # on the received rows, and the check after timing
            for gate in ("reference", "distributed_reference", "post_timing"):
                assert (gate, rank, arm) in gates, (gate, rank, arm)
    samples = run.samples.to_pylist()
    assert {s["regime"] for s in samples} == {"step"}
    assert all(s["time_us"] > 0 and s["device"] == "cpu" for s in samples)
    seen = {(s["stage"], s["layer"], s["rank"], s["step"], s["arm"]) for s in samples}
    want = {(stage, layer, rank, step, arm) for rank in (0, 1) for step in (0, 1)
            for arm in ARMS for stage, layer in (("ffn", 1), ("ffn", 2), ("step", -1))}  # fmt: skip
    assert seen == want
    # 2 ranks x 3 arms x 2 steps x 1 block x 1 iteration x (2 layers + the whole step)
    assert len(samples) == 2 * 3 * 2 * 3
    # Every slot of a layer lands on one rank: the two ranks' live rows add up to 4 tokens x 2.
    for step in (0, 1):
        for layer in (1, 2):
            live = {s["rank"]: s["live_rows"] for s in samples if s["arm"] == "stock"
                    and s["step"] == step and s["layer"] == layer}  # fmt: skip
            assert sum(live.values()) == 2 * 2 * 2, live
    routing = run.routing.to_pylist()
    assert {(r["rank"], r["step"], r["layer"]) for r in routing} == {
        (rank, 0, layer) for rank in (0, 1) for layer in (1, 2)
    }


@pytest.mark.slow
def test_compare_reads_the_distributed_steps(step_run):
    result = runner.invoke(app, ["compare", str(step_run), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["step"]["rows"]
    assert {r["arm"] for r in rows} == set(ARMS)
    for r in rows:
        assert r["p50"]["us"] > 0 and r["n_ranks"] == 2 and r["n_layers"] == 2, r


@pytest.mark.slow
def test_an_arm_that_replays_a_stale_answer_is_caught_after_timing(tmp_path):
    """examples/arms/cheating.py memoises its output by the input tensors' addresses: every
    layer of a step reads the same exchange buffers, and the second step brings new routing, so
    the last step's check after timing holds it to the right answer and it is a mismatch."""
    arm = REPO / "examples" / "arms" / "cheating.py"
    scenario = write(tmp_path, STEP.replace("activation: silu", f"activation: silu\narms: "
                                            f"[stock, '{arm}:ARM']"))  # fmt: skip
    cmd = [sys.executable, "-m", "moebench.cli", "run", str(scenario), "--nproc", "2",
           "--results", str(tmp_path / "results")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "results").iterdir()
    run = load_run(run_dir)
    assert run.manifest["status"] == "mismatch"
    bad = {(c["rank"], c["arm"], c["gate"]) for c in run.checks.to_pylist()
           if c["status"] not in ("pass", "skip")}  # fmt: skip
    assert bad == {(0, "memoised", "post_timing"), (1, "memoised", "post_timing")}


# A whole-FFN arm right everywhere but on rank 1's second MoE layer (its third workspace there:
# the first layer's full gates, then one per layer), where it returns zeros.
WRONG_ON_ONE_LAYER = """\
import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output

built = []


def prepare(p, y_TD):
    built.append(p.expert_offset)
    wrong = p.expert_offset > 0 and built.count(p.expert_offset) == 3

    def run():
        y_TD.copy_(torch.zeros_like(y_TD) if wrong else reference_output(p).to(torch.bfloat16))

    return run


ARM = Arm(name="wrong_on_one_layer", family="prefill", contract="whole_ffn",
          summary="wrong on rank 1's second layer", prepare=prepare)
"""


@pytest.mark.slow
def test_an_arm_failing_one_layer_on_one_rank_is_timed_on_no_rank(tmp_path):
    arm = write(tmp_path, WRONG_ON_ONE_LAYER, "wrong_arm.py")
    scenario = write(tmp_path, STEP.replace("activation: silu", f"activation: silu\narms: "
                                            f"[stock, '{arm}:ARM']"))  # fmt: skip
    cmd = [sys.executable, "-m", "moebench.cli", "run", str(scenario), "--nproc", "2",
           "--results", str(tmp_path / "results")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "results").iterdir()
    run = load_run(run_dir)
    assert run.manifest["status"] == "mismatch"
    bad = [c for c in run.checks.to_pylist() if c["status"] not in ("pass", "skip")]
    assert {(c["rank"], c["arm"], c["gate"]) for c in bad} == {
        (1, "wrong_on_one_layer", "reference")
    }
    assert "layers 2" in bad[0]["detail"], bad[0]["detail"]
    assert {s["arm"] for s in run.samples.to_pylist()} == {"stock"}


# --------------------------------------------------------------------------- the rules


def test_a_distributed_step_validates(tmp_path):
    s = parse_scenario(STEP)
    assert s.topology.mode == "distributed" and s.step is not None
    result = runner.invoke(app, ["validate", str(write(tmp_path, STEP))])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "2 of 2" in out and "36" in out and "fits" in out, result.output


def _shipped(path: Path):
    s = parse_scenario(path.read_text(), path=path)
    assert s.topology.mode == "distributed" and s.step is not None, path.name
    return s


def test_the_shipped_smoke_scenario_validates():
    _shipped(REPO / "scenarios" / "smoke-step-distributed.yaml")


def test_the_shipped_v4_flash_scenario_validates(tmp_path, shared_traces):
    """Its trace is ../../shared/traces from scenarios/: lay the checkout out as CI does (the
    repository beside shared/), whatever folder this one sits in."""
    (tmp_path / "repo").mkdir()
    shutil.copytree(REPO / "scenarios", tmp_path / "repo" / "scenarios")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "traces").symlink_to(shared_traces)
    s = _shipped(tmp_path / "repo" / "scenarios" / "v4-flash-prefill-step-distributed.yaml")
    assert s.model.preset == "deepseek-v4-flash" and s.topology.ep == 8


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("regimes: [step]", "regimes: [step, ffn]", "measure.regimes: step runs alone"),
        ("alignment: 16}", "alignment: 16, capacity: tight}", "shape.capacity: tight fits one"),
    ],
    ids=["with-ffn", "tight-capacity"],
)
def test_a_bad_distributed_step_is_one_line(tmp_path, old, new, message):
    text = STEP.replace(old, new)
    assert text != STEP
    line = one_line_error(runner.invoke(app, ["validate", str(write(tmp_path, text))]))
    assert message in line, line


def test_a_distributed_step_on_the_wrong_world_is_one_line(tmp_path):
    result = runner.invoke(app, ["run", str(write(tmp_path, STEP)), "--nproc", "3",
                                 "--results", str(tmp_path / "r")])  # fmt: skip
    assert "the world has 3 rank(s) but the scenario needs dp x tp = 2 x 1" in one_line_error(
        result
    )
    assert not (tmp_path / "r").exists()
