"""The step regime end to end on the CPU: every MoE layer of a tiny model on both simulated ranks,
steps with their own routing and token counts, every layer gated, the rows the analysis reads,
and the refusals that come before any work (docs/DESIGN.md section 14)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
from cli_support import one_line_error, runner, write

from moebench.cli.app import app
from moebench.results.reader import load_run
from moebench.routing.step_draws import StepRouting, trace_layer_map
from moebench.spec.load import parse_scenario
from moebench.spec.step import token_counts

STEP = """\
name: tiny-step
model: {id: test/tiny-step, revision: unpinned, hidden: 128, intermediate: 128, experts: 4,
        top_k: 2, layers: 3, dense_layers: [0]}
topology: {ep: 2}
routing: {family: zipf, seed: 5}
shape: {tokens_per_rank: 4, alignment: 16}
precision: fp8
arms: [stock, prefix_sum_masked]
measure: {regimes: [step], warmup: 0, iterations: 1}
step: {steps: 3, tokens: [4, 2, 4], non_moe_us: 50, slo_tpot_ms: 20}
"""


@pytest.fixture(scope="module")
def step_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("step")
    result = runner.invoke(app, ["run", str(write(tmp, STEP)), "--results", str(tmp / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp / "r").iterdir()
    return load_run(run_dir)


def test_every_layer_and_the_whole_step_of_every_rank_arm_and_step_is_timed(step_run):
    rows = step_run.samples.to_pylist()
    assert {r["regime"] for r in rows} == {"step"}
    # 2 ranks x 2 arms x 3 steps x 1 block x 1 iteration, each: 2 layers alone + the whole step
    assert len(rows) == 2 * 2 * 3 * (2 + 1)
    per = Counter((r["stage"], r["layer"]) for r in rows)
    assert per == {("ffn", 1): 12, ("ffn", 2): 12, ("step", -1): 12}
    assert {(r["step"], r["tokens_per_rank"]) for r in rows} == {(0, 4), (1, 2), (2, 4)}
    assert {r["weights"] for r in rows} == {"cold"}  # every layer its own weights
    assert all(r["time_us"] > 0 for r in rows)


def test_a_whole_step_reads_the_sum_of_its_layers(step_run):
    rows = step_run.samples.to_pylist()
    for step in range(3):
        for rank in (0, 1):
            key = [r for r in rows if r["step"] == step and r["rank"] == rank
                   and r["arm"] == "stock"]  # fmt: skip
            whole = next(r for r in key if r["stage"] == "step")
            layers = [r for r in key if r["stage"] == "ffn"]
            assert whole["live_rows"] == sum(r["live_rows"] for r in layers)
            assert whole["weight_bytes"] == sum(r["weight_bytes"] for r in layers)


def test_steps_and_layers_have_their_own_routing(step_run):
    rows = step_run.samples.to_pylist()
    live = {(r["step"], r["layer"], r["rank"]): r["live_rows"] for r in rows if r["layer"] >= 0}
    # every rank's rows of one (step, layer) add up to the step's slots: tokens * dp * top_k
    for (step, layer, rank), n in live.items():
        if rank == 0:
            tokens = 4 if step != 1 else 2
            assert n + live[(step, layer, 1)] == tokens * 2 * 2
    # layers differ (their own draws), and so do steps of one token count
    assert (
        len({tuple(live[(0, la, r)] for r in (0, 1)) for la in (1, 2)}) > 1
        or len({tuple(live[(s, 1, r)] for r in (0, 1)) for s in (0, 2)}) > 1
    )


def test_every_layer_is_gated_and_checked_after_timing(step_run):
    checks = step_run.checks.to_pylist()
    bad = [c for c in checks if c["status"] not in ("pass", "skip")]
    assert not bad, bad
    for arm in ("stock", "prefix_sum_masked"):
        for rank in (0, 1):
            gates = {c["gate"] for c in checks if c["arm"] == arm and c["rank"] == rank}
            assert {"reference", "nan_poison", "post_timing"} <= gates
            assert ("graph_replay" in gates) == (rank == 0)  # the arm's code, gated once
    ref = [c for c in checks if c["gate"] == "reference"]
    assert all(c["detail"].startswith("2 layers of step ") for c in ref), ref
    cross = [c for c in checks if c["gate"] == "cross_arm_output"]
    assert cross and all("bitwise equal" in c["detail"] for c in cross)
    post = [c for c in checks if c["gate"] == "post_timing"]
    # each token group's last step: 2 (the 4-token group's step 2, the 2-token group's step 1)
    assert {c["detail"].split(",")[0] for c in post} == {"2 layers of step 1", "2 layers of step 2"}


def test_the_manifest_and_routing_rows_say_what_a_step_was(step_run):
    m = step_run.manifest["step"]
    assert m["layers"] == [1, 2] and m["model_layers"] == 2 and m["subset"] is False
    assert (m["steps"], m["data_ranks"], m["non_moe_us"], m["slo_tpot_ms"]) == (3, 2, 50.0, 20.0)
    assert m["tokens"] == "[4, 2, 4] cycled"
    routing = step_run.routing.to_pylist()
    # one row per (rank, layer) of each token group's gated first step
    assert {(r["step"], r["layer"], r["rank"]) for r in routing} == {
        (s, la, r) for s in (0, 1) for la in (1, 2) for r in (0, 1)
    }


def test_a_step_that_cannot_fit_is_refused_before_anything_is_allocated(tmp_path, monkeypatch):
    monkeypatch.setenv("MOEBENCH_MEMORY_LIMIT_GB", "0.0001")
    result = runner.invoke(app, ["run", str(write(tmp_path, STEP)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    line = one_line_error(result)
    assert "a step of 2 layers needs about" in line and "of expert weights" in line, line
    assert "100.0 kB MOEBENCH_MEMORY_LIMIT_GB=0.0001" in line and "step.layers" in line
    assert not (tmp_path / "r").exists()


def test_a_steps_memory_counts_the_copies_the_arms_builds_make():
    """The grouped decode step (`scenarios/gpt-oss-20b-decode-step-grouped.yaml`): each case's
    estimate holds, for every timed layer, the copies of its expert weights the arms' builds make
    for their kernels (`Arm.layout_bytes`; the grouped arm's tile layouts, the sparse GEMV's
    rotated MXFP4), and nothing of the kind without those arms."""
    from moebench.arm.base import LayoutShapes
    from moebench.plan.cases import run_arms
    from moebench.plan.steps import estimate_memory, plan_step_case
    from moebench.spec.load import load_scenario
    from moebench.spec.sweep import expand

    s = load_scenario("scenarios/gpt-oss-20b-decode-step-grouped.yaml")
    arms = run_arms(s)
    dense = [arms["dense_decode"]]
    held = {}
    for case in expand(s):
        p = plan_step_case(case)
        c = case.scenario
        with_all = estimate_memory(p, list(arms.values()))
        alone = estimate_memory(p, dense)
        tokens = tuple(g.tokens_per_rank for g in p.groups)  # dp 1
        shapes = LayoutShapes(precision=c.precision, tokens=tokens, top_k=c.model.top_k,
                              experts=16, hidden=c.model.hidden,
                              intermediate=c.model.intermediate)  # fmt: skip
        per_layer = sum(arms[a].layout_bytes(shapes) for a in ("sparse_decode", "grouped_decode"))
        assert alone.layouts == 0 and with_all.layouts == per_layer * len(p.layers), case.case_id
        assert with_all.total >= alone.total
        held[case.case_id] = with_all.layouts
    # FP8 at one token reads the problem's own weights; every other case holds copies.
    assert [k for k, v in held.items() if v == 0] == ["c000-precision=w8a16-tokens_per_rank=1"]


@pytest.mark.parametrize(
    "change, field",
    [
        ("regimes: [step]", "measure.regimes: step runs alone"),
        ("routing: {family: zipf, seed: 5}", "routing.layer: the step regime replays"),
        ("shape: {tokens_per_rank: 4, alignment: 16}", "shape.capacity: tight fits one routing"),
        ("step: {steps: 3,", "step.layers[0]: layer 0 of test/tiny-step is dense"),
        ("measure: {regimes: [step]", "step: needs measure.regimes: [step]"),
        ("non_moe_us: 50", "step.non_moe_us: must be >= 0 us"),
    ],
)
def test_a_bad_step_scenario_is_one_line_naming_the_field(tmp_path, change, field):
    bad = {
        "regimes: [step]": ("regimes: [step]", "regimes: [step, ffn]"),
        "routing: {family: zipf, seed: 5}": (
            "routing: {family: zipf, seed: 5}",
            "routing: {source: trace, path: load.json, layer: 2}",
        ),
        "shape: {tokens_per_rank: 4, alignment: 16}": (
            "alignment: 16}",
            "alignment: 16, capacity: tight}",
        ),
        "step: {steps: 3,": ("step: {steps: 3,", "step: {layers: [0, 1], steps: 3,"),
        "measure: {regimes: [step]": ("regimes: [step]", "regimes: [ffn]"),
        "non_moe_us: 50": ("non_moe_us: 50", "non_moe_us: -1"),
    }[change]
    text = STEP.replace(*bad)
    assert text != STEP
    counts = [[0] * 4] * 2 + [[5, 1, 1, 1]] * 3
    (tmp_path / "load.json").write_text(json.dumps({"logical_count": counts}))
    line = one_line_error(runner.invoke(app, ["validate", str(write(tmp_path, text))]))
    assert field in line, line


def test_validate_prints_the_layers_steps_samples_and_memory(tmp_path):
    result = runner.invoke(app, ["validate", str(write(tmp_path, STEP))])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "2 of 2" in out and "36" in out and "fits" in out, result.output


def test_presets_know_their_moe_layers():
    s = parse_scenario(STEP.replace(
        "model: {id: test/tiny-step, revision: unpinned, hidden: 128, intermediate: 128, "
        "experts: 4,\n        top_k: 2, layers: 3, dense_layers: [0]}", "model: deepseek-v3",
    ).replace("topology: {ep: 2}", "topology: {ep: 8}"))  # fmt: skip
    assert s.model.moe_layers == tuple(range(3, 61))
    assert parse_scenario(STEP.replace("experts: 4,", "experts: 4, layers: 5,").replace(
        "layers: 3, ", "")).model.moe_layers == (1, 2, 3, 4)  # fmt: skip


def test_token_counts_cycle_a_list_and_draw_a_histogram_with_a_seed():
    s = parse_scenario(STEP).step
    assert token_counts(s, 4, 0) == (4, 2, 4)
    hist = parse_scenario(STEP.replace("steps: 3, tokens: [4, 2, 4]",
                                       "steps: 400, tokens: {8: 3, 2: 1}")).step  # fmt: skip
    drawn = token_counts(hist, 4, 1)
    assert drawn == token_counts(hist, 4, 1) and drawn != token_counts(hist, 4, 2)
    assert set(drawn) == {2, 8} and 0.65 < drawn.count(8) / 400 < 0.85


def test_a_load_trace_maps_model_layers_onto_its_loaded_layers_and_draws_around_the_shares(
    tmp_path,
):
    counts = np.zeros((5, 8))
    counts[2:] = [[40, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 40], [5] * 8]
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"logical_count": counts.tolist()}))
    # two dense layers recorded as zeros; a model of 4 MoE layers wraps round the 3 loaded ones
    assert trace_layer_map(str(path), (0, 1, 2, 3)) == {0: 2, 1: 3, 2: 4, 3: 2}
    router = StepRouting(family="trace", seed=1, experts=8, top_k=2, ep=2, alignment=16,
                         options={}, trace_path=str(path),
                         layer_map=trace_layer_map(str(path), (0, 1, 2)))  # fmt: skip
    a, b = router.draw(0, 0, 512), router.draw(1, 0, 512)
    assert not torch.equal(a.topk_ids_TK, b.topk_ids_TK)  # steps differ...
    assert torch.equal(a.topk_ids_TK, router.draw(0, 0, 512).topk_ids_TK)  # ...deterministically
    hot = [Counter(router.draw(0, layer, 512).topk_ids_TK.flatten().tolist()).most_common(1)[0][0]
           for layer in (0, 1)]  # fmt: skip
    assert hot == [0, 7]  # each layer keeps its own hot expert
    for d in (a, b):
        ids = d.topk_ids_TK
        assert all(len(set(row)) == 2 for row in ids.tolist())  # distinct experts per token
    assert "each step a draw from the layer's recorded shares" in router.label()
