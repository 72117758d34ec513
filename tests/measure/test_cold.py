"""Cold weights (moebench/measure/cold.py): how many copies, that the timed stages really read each
copy, and a CPU run that rotates them, records them, and keeps its output bit for bit."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import torch
from cli_support import TINY, one_line_error, runner, write

from moebench.analysis.blocks import _with_mode
from moebench.arm import decode, prefill, registry
from moebench.arm.base import run_all
from moebench.cli.app import app
from moebench.gates.families import FAMILIES
from moebench.measure import cold
from moebench.results.schema import SAMPLES_SCHEMA

ARMS = {name: registry.resolve(name) for name in registry.builtin_names()}

MB = 1 << 20
L2 = 60 * MB


# --------------------------------------------------------------------------- how many copies


def test_copies_stream_four_l2_sizes_between_two_uses_of_one():
    # 75 MB a sample: the other copies must stream 240 MB, so 1 + ceil(240 / 75) = 5 copies.
    plan = cold.plan_copies(
        touched_bytes=75 * MB, weight_bytes=400 * MB, l2_bytes=L2, free_bytes=None, asked=None
    )
    assert plan.copies == 5 and plan.note == ""
    # The copies stream (copies - 1) x touched >= 4 x L2; one fewer would not.
    assert (plan.copies - 1) * 75 >= 4 * 60 > (plan.copies - 2) * 75


def test_weights_that_already_stream_four_l2_sizes_need_no_copy():
    plan = cold.plan_copies(
        touched_bytes=805 * MB, weight_bytes=805 * MB, l2_bytes=L2, free_bytes=None, asked=None
    )
    assert plan.copies == 1


def test_asked_copies_win_and_memory_caps_them_with_a_note():
    plan = cold.plan_copies(
        touched_bytes=MB, weight_bytes=MB, l2_bytes=L2, free_bytes=None, asked=3
    )
    assert plan.copies == 3
    # 1 GB free, 400 MB a copy: half the free memory holds one more copy beside the original.
    plan = cold.plan_copies(
        touched_bytes=10 * MB, weight_bytes=400 * MB, l2_bytes=L2, free_bytes=1000 * MB,
        asked=None,
    )  # fmt: skip
    assert plan.copies == 2
    assert "memory allows 2" in plan.note and "may hit L2" in plan.note


def test_copies_never_pass_the_schema_limit():
    plan = cold.plan_copies(
        touched_bytes=1, weight_bytes=1, l2_bytes=L2, free_bytes=None, asked=None
    )
    assert plan.copies == 64


def test_rotation_calls_each_copy_in_turn():
    seen = []
    rot = cold.Rotation([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        rot()
    assert seen == [0, 1, 2, 0, 1, 2, 0]


# --------------------------------------------------------------------------- the copies are read


def _prefill_problem():
    """Rank 0's problem of the CLI tests' tiny fp8 prefill scenario, as the runner builds it."""
    from moebench.measure.clock import Clock
    from moebench.plan.cases import plan
    from moebench.run.simulated_ranks import SimulatedRanks
    from moebench.spec.load import parse_scenario

    (p,) = plan(parse_scenario(TINY))
    cpu = torch.device("cpu")
    problem, _ = SimulatedRanks(cpu, Clock(cpu)).layer_inputs(p, 0)
    return FAMILIES["prefill"], problem


@pytest.mark.parametrize("arm_name", ["stock", "prefix_sum_masked"])
def test_stages_on_a_copy_read_the_copy_and_write_the_shared_buffers(arm_name):
    """A copy's stages must read the copy's weights (else rotating proves nothing) and write the
    workspace's own buffers (else post_timing would compare a buffer nobody wrote)."""
    family, problem = _prefill_problem()
    arm = ARMS[arm_name]
    ws = family.workspace(arm, problem)
    run_all(arm.build(ws))
    gated = ws.y_TD.clone()
    same, changed = cold.weight_copies(problem, family.weight_fields, 3)[1:]
    for f in family.weight_fields:
        assert getattr(same, f).data_ptr() != getattr(problem, f).data_ptr()
        assert torch.equal(
            getattr(same, f).view(torch.uint8), getattr(problem, f).view(torch.uint8)
        )
    ws.y_TD.fill_(float("nan"))
    run_all(cold.stages_on(arm.build, ws, same)[1])
    assert torch.equal(ws.y_TD.view(torch.int16), gated.view(torch.int16))
    changed.w2_scale.mul_(2.0)  # a power of two: every live output doubles exactly
    run_all(cold.stages_on(arm.build, ws, changed)[1])
    assert torch.equal(ws.y_TD.float(), 2 * gated.float())
    assert ws.problem is problem  # the workspace itself still points at the gated weights


def test_decode_copies_cover_every_weight_tensor():
    fields = FAMILIES["decode"].weight_fields
    assert set(fields) == {"w13", "w13_scale", "b13_E2F", "w2", "w2_scale", "b2_ED"}
    assert set(FAMILIES["prefill"].weight_fields) == {"w13_EFD", "w13_scale", "w2_EDF", "w2_scale"}
    # every tensor field of the problems that is not an input or the routing is a weight
    for cls, family in ((decode.Problem, "decode"), (prefill.Problem, "prefill")):
        names = {f for f in cls.__dataclass_fields__ if f.startswith(("w", "b"))}
        assert names <= set(FAMILIES[family].weight_fields) | {"b13", "b2"}, names


# --------------------------------------------------------------------------- a run


@pytest.mark.slow
def test_cold_run_rotates_records_and_keeps_the_output(tmp_path):
    text = TINY.replace(
        "warmup: 0, blocks: 2, iterations: 1}",
        "warmup: 0, blocks: 2, iterations: 3, cold_weights: true, weight_copies: 3,"
        " flush_l2: false}",
    )
    scenario = write(tmp_path, text)
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "complete"
    samples = pq.read_table(run_dir / "samples" / "c000.parquet").to_pylist()
    assert {s["weights"] for s in samples} == {"cold"}
    assert {s["weight_copies"] for s in samples} == {3}
    checks = pq.read_table(run_dir / "checks" / "c000.parquet").to_pylist()
    post = [c for c in checks if c["gate"] == "post_timing"]
    assert len(post) == 6 and all(c["status"] == "pass" for c in post), post
    timed = runner.invoke(app, ["compare", str(run_dir), "--timings", "--width", "200"])
    assert "eager-cold" in timed.output  # compare keeps cold samples in a mode of their own


@pytest.mark.slow  # a whole CLI run under the interpreter: 13-23 s on two cores
def test_warm_samples_say_so(tmp_path):
    scenario = write(tmp_path, TINY)
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    samples = pq.read_table(run_dir / "samples" / "c000.parquet").to_pylist()
    assert {(s["weights"], s["weight_copies"]) for s in samples} == {("warm", 1)}


def test_compare_never_pools_cold_and_warm_samples():
    import pyarrow as pa

    rows = {name: [] for name in ("mode", "weights")}
    for mode, weights in (("graph", "cold"), ("graph", "warm"), ("eager", ""), ("", "cold")):
        rows["mode"].append(mode)
        rows["weights"].append(weights)
    table = _with_mode(pa.table(rows))
    assert table["mode"].to_pylist() == ["graph-cold", "graph", "eager", "-cold"]
    assert "weights" in SAMPLES_SCHEMA.names and "weight_copies" in SAMPLES_SCHEMA.names


# --------------------------------------------------------------------------- bad scenarios


@pytest.mark.parametrize(
    ("measure", "field", "words"),
    [
        ("weight_copies: 3", "measure.weight_copies", "needs measure.cold_weights: true"),
        ("cold_weights: true, weight_copies: 1", "measure.weight_copies", "between 2 and 64"),
        ("cold_weights: true, weight_copies: 65", "measure.weight_copies", "between 2 and 64"),
        ("cold_weights: yes please", "measure.cold_weights", ""),
        ("flush_l2: 0", "measure.flush_l2", ""),
    ],
)
def test_bad_cold_weight_settings_are_one_line_errors(tmp_path, measure, field, words):
    text = TINY.replace("iterations: 1}", f"iterations: 1, {measure}}}")
    line = one_line_error(runner.invoke(app, ["validate", str(write(tmp_path, text))]))
    assert field in line and words in line, line


def test_cold_weights_are_refused_in_distributed_mode(tmp_path):
    text = TINY.replace("topology: {ep: 2}", "topology: {ep: 2, mode: distributed}").replace(
        "iterations: 1}", "iterations: 1, cold_weights: true}"
    )
    line = one_line_error(runner.invoke(app, ["validate", str(write(tmp_path, text))]))
    assert "measure.cold_weights" in line and "simulated" in line
