"""The model regime end to end on the CPU (issue 27): scenarios/smoke-model.yaml through ``moebench
run`` and ``compare``, every gate passing, the rows the analysis reads; an arm that computes
nothing caught before timing; a model that cannot fit refused before any allocation; every
mistake in the scenario one line, before any work; a trace's load replayed layer by layer."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from cli_support import REPO, one_line_error, runner, write

from moebench.cli.app import app
from moebench.core.vocabulary import NO_EXPERTS
from moebench.results.reader import load_run

SMOKE = REPO / "scenarios" / "smoke-model.yaml"
TINY = """\
name: tiny-model
description: a tiny gpt-oss
model: {preset: gpt-oss-20b, hidden: 64, intermediate: 64, experts: 4, top_k: 2, layers: 2}
arms: [dense_decode, hf:grouped_mm]
precision: w4a16
activation: swiglu_oai
measure: {regimes: [model], blocks: 1, warmup: 1}
model_run:
  batch: 1
  context: 4
  prompt: 2
  decode_steps: 2
  check_steps: 1
  config: {vocab_size: 64, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16}
"""
ZEROS_ARM = """\
from moebench.arm.base import WHOLE_FFN, Arm

def prepare(problem, y_TD):
    return lambda: y_TD.zero_()  # computes nothing: every token's output is zero

ARM = Arm(name="zeros", family="decode", summary="writes zeros", contract=WHOLE_FFN,
          prepare=prepare)
"""

NUDGE_ARM = """\
from moebench.arm.base import WHOLE_FFN, Arm
from moebench.core import reference

def prepare(problem, y_TD):
    def run():  # the right output, and one weight of the model a little larger every call
        problem.w2_EDF.view(-1)[0].add_(1.0)
        y_TD.copy_(reference.moe_ffn(problem.x_TD, problem.topk_ids_TK, problem.topk_weights_TK,
                                     problem.w13_EFD, problem.w2_EDF,
                                     activation_kind=problem.activation,
                                     expert_offset=problem.expert_offset))
    return run

ARM = Arm(name="nudge", family="prefill", summary="writes a weight", contract=WHOLE_FFN,
          prepare=prepare)
"""
QWEN = """\
name: tiny-qwen
description: a tiny Qwen3-MoE
model: {preset: qwen3-30b-a3b, hidden: 128, intermediate: 128, experts: 4, top_k: 2, layers: 1}
arms: [stock, nudge.py:ARM]
precision: bf16
shape: {alignment: 16}
measure: {regimes: [model], blocks: 1, warmup: 0}
model_run:
  batch: 1
  context: 3
  prompt: 2
  decode_steps: 1
  check_steps: 1
  config: {vocab_size: 64, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 32}
"""


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("model")
    result = runner.invoke(app, ["run", str(SMOKE), "--results", str(tmp / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp / "r").iterdir()
    return run_dir, load_run(run_dir)


def test_every_backends_prefill_and_decode_steps_are_timed(smoke):
    _, run = smoke
    rows = run.samples.to_pylist()
    assert {r["regime"] for r in rows} == {"model"}
    arms = ("dense_decode", "hf:grouped_mm", NO_EXPERTS)
    # 2 batch sizes x 3 backends x 2 blocks x (the prefill and 3 decode steps)
    per = Counter((r["case_id"], r["arm"], r["stage"]) for r in rows)
    assert per == {(c, a, s): n for c in ("c000-batch=1", "c001-batch=2") for a in arms
                   for s, n in (("prefill", 2), ("decode", 6))}  # fmt: skip
    for r in rows:
        batch = 1 if r["case_id"].startswith("c000") else 2
        if r["stage"] == "decode":
            assert r["step"] in (0, 1, 2) and r["tokens_per_rank"] == batch
        else:
            assert r["step"] == -1 and r["tokens_per_rank"] == batch * 4 and r["mode"] == "eager"
        assert r["time_us"] > 0 and r["layer"] == -1
        # the expert weights the call read: none for the no-work backend, MXFP4 or bf16 else
        assert (r["weight_bytes"] == 0) == (r["arm"] == NO_EXPERTS)
    assert {r["mode"] for r in rows if r["stage"] == "decode"} == {"eager"}  # no graph on a CPU


def test_every_gate_passes_before_timing_and_on_fresh_tokens_after(smoke):
    _, run = smoke
    checks = Counter((c["arm"], c["gate"], c["status"]) for c in run.checks.to_pylist())
    for arm in ("dense_decode", "hf:grouped_mm"):
        for gate in ("model_experts", "model_prefill", "model_decode", "fresh_experts",
                     "fresh_prefill", "fresh_decode"):  # fmt: skip
            assert checks[(arm, gate, "pass")] == 2, (arm, gate)
        assert not checks[(arm, "model_graph", "pass")]  # no capture on a CPU: nothing to hold
    assert checks[(NO_EXPERTS, "power", "pass")] == 2  # the check can tell an arm from none
    assert not [c for c in run.checks.to_pylist() if c["status"] in ("fail", "error")]
    routing = run.routing.to_pylist()
    assert {(r["case_id"], r["layer"]) for r in routing} == {
        (c, la) for c in ("c000-batch=1", "c001-batch=2") for la in (0, 1)}  # fmt: skip


def test_the_manifest_says_what_was_built(smoke):
    _, run = smoke
    m = run.manifest["model"]
    assert m["non_moe"] == NO_EXPERTS and m["routing"] == "router"
    case = m["cases"]["c001-batch=2"]
    assert (case["batch"], case["context"], case["prompt"], case["decode_steps"]) == (2, 8, 4, 3)
    assert (case["layers"], case["model_layers"]) == (2, 24)  # the first 2 of 24 layers kept
    assert [k["kind"] for k in case["kv"]] == ["sliding_attention", "full_attention"]
    assert case["kv"][0]["slots"] == 4  # the sliding window
    assert case["step_bytes"] > 0 and case["memory"]["parameters"] > 0


def test_compare_json_carries_ttft_tpot_non_moe_time_and_goodput(smoke):
    run_dir, _ = smoke
    result = runner.invoke(app, ["compare", str(run_dir), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    m = doc["model"]
    rows = {(r["case_id"], r["arm"]): r for r in m["rows"]}
    assert len(rows) == 6
    for (case_id, arm), r in rows.items():
        assert r["ttft"]["us"] > 0
        for q in ("p50", "p90", "p99"):
            assert r["tpot"][q]["us"] > 0
        assert r["tpot"]["p50"]["ci"] is not None  # P50 of 6 steps has its interval
        assert r["tpot"]["p99"]["ci"] is None and "below 368" in r["tpot"]["p99"]["note"]
        # a CPU run: no GPU's floor (the floor is its own GPU's, analysis/model.py)
        assert r["floor"]["us"] is None and r["floor"]["ceiling"] is None
        assert r["non_moe"]["us"] == rows[(case_id, NO_EXPERTS)]["tpot"]["p50"]["us"]
        if arm == NO_EXPERTS:
            assert r["status"] == "reference" and r["non_moe"]["moe_share"] is None
        else:
            assert r["status"] == "ok" and r["non_moe"]["moe_share"] is not None
        assert not r["change"]["decision"] or r["change"]["decision"] == "baseline"  # a CPU
    goodput = {g["arm"]: g for g in m["goodput"]}
    assert set(goodput) == {"dense_decode", "hf:grouped_mm"}  # never the no-work backend
    for g in goodput.values():
        assert g["measured"] and g["slo_tpot_ms"] == 60000 and g["tokens_per_s"] > 0
        assert [p["tokens_per_step"] for p in g["points"]] == [1, 2]
    assert goodput["hf:grouped_mm"]["ratio"] is not None
    assert not [r for r in doc["rows"]]  # the model regime's samples make no one-layer cells


def test_compare_table_shows_the_model_sections(smoke):
    run_dir, _ = smoke
    result = runner.invoke(app, ["compare", str(run_dir), "--timings", "--width", "200"])
    assert result.exit_code == 0, result.output
    for heading in ("Model decode: TPOT", "Model prefill: TTFT", "MoE share, measured",
                    "Goodput, measured", "(2 of 24 layers)"):  # fmt: skip
        assert heading in result.stdout


def test_an_arm_that_computes_nothing_is_caught_before_timing(tmp_path):
    (tmp_path / "zeros.py").write_text(ZEROS_ARM)
    text = TINY.replace("arms: [dense_decode, hf:grouped_mm]", "arms: [dense_decode, zeros.py:ARM]")
    result = runner.invoke(app, ["run", str(write(tmp_path, text)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    assert result.exit_code == 1, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    run = load_run(run_dir)
    failed = {c["gate"] for c in run.checks.to_pylist()
              if c["arm"] == "zeros" and c["status"] == "fail"}  # fmt: skip
    assert failed == {"model_experts", "model_prefill", "model_decode"}
    assert "zeros" not in set(run.samples["arm"].to_pylist())  # never timed
    assert {"dense_decode", NO_EXPERTS} <= set(run.samples["arm"].to_pylist())


def test_a_model_that_cannot_fit_is_refused_before_any_allocation(tmp_path, monkeypatch):
    monkeypatch.setenv("MOEBENCH_MEMORY_LIMIT_GB", "0.0001")
    result = runner.invoke(app, ["run", str(write(tmp_path, TINY)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    line = one_line_error(result)
    assert "needs about" in line and "parameters" in line and "kv cache" in line
    assert "MOEBENCH_MEMORY_LIMIT_GB=0.0001" in line and "model.layers" in line
    assert not (tmp_path / "r").exists()  # nothing written


@pytest.mark.parametrize(
    "old, new, path",
    [
        ("regimes: [model]", "regimes: [model, ffn]", "measure.regimes"),  # model runs alone
        ("measure: {", "topology: {ep: 2}\nmeasure: {", "topology"),  # one device
        ("layers: 2}", "layers: 30}", "model.layers"),  # gpt-oss-20b has 24
        ("  check_steps: 1", "  check_steps: 1\n  routing: trace", "model_run.routing"),  # no file
        ("warmup: 1}", "warmup: 1, iterations: 3}", "measure.iterations"),  # steps are samples
        ("head_dim: 16}", "head_dim: 16, num_expert: 2}", "model_run.config.num_expert"),  # typo
        ("regimes: [model], ", "", "measure.regimes"),  # model_run needs the regime
        ("  check_steps: 1", "  check_steps: 3", "model_run.check_steps"),  # > decode_steps
        ("  check_steps: 1", "  check_steps: 1\n  prefill_graph: maybe", "model_run.prefill_graph"),
        ("measure: {", "shape: {tokens_per_rank: 8}\nmeasure: {", "shape.tokens_per_rank"),
        ("preset: gpt-oss-20b,", "id: x, revision: y,", "model.preset"),  # a preset's model
        ("preset: gpt-oss-20b", "preset: deepseek-v4-flash", "model.preset"),  # not recorded
    ],
)
def test_a_mistake_is_one_line_before_any_work(tmp_path, old, new, path):
    assert old in TINY
    result = runner.invoke(app, ["validate", str(write(tmp_path, TINY.replace(old, new)))])
    line = one_line_error(result)
    assert f": {path}: " in line, line


def test_validate_prints_each_case_with_its_memory(tmp_path, monkeypatch):
    from moebench.cli import common

    # The console's width is fixed when moebench.cli.common is first imported (COLUMNS then, 80
    # under a test runner's pipe): widen it here so the case ids are not cut, whatever ran first.
    monkeypatch.setattr(common.out, "width", 200)
    result = runner.invoke(app, ["validate", str(SMOKE)])
    assert result.exit_code == 0, result.output
    assert "model regime" in result.stdout and "fits" in result.stdout
    assert "c001-batch=2" in result.stdout and "(2 of 24 layers, modified)" in result.stdout


TRACE = """\
name: tiny-deepseek-trace
description: a tiny DeepSeek-V3-shaped model, its MoE layer routed by the recorded load
model: {preset: deepseek-v3, hidden: 128, intermediate: 128, layers: 4}
routing: {source: trace, path: PATH}
arms: [hf:grouped_mm, hf:batched_mm]
precision: bf16
measure: {regimes: [model], blocks: 1, baseline: hf:grouped_mm}
model_run:
  batch: 2
  context: 3
  prompt: 2
  decode_steps: 2
  check_steps: 1
  routing: trace
  config: {vocab_size: 64, num_attention_heads: 2, num_key_value_heads: 2, q_lora_rank: 32,
           kv_lora_rank: 16, qk_rope_head_dim: 8, qk_nope_head_dim: 16, v_head_dim: 16,
           intermediate_size: 128}
"""


def test_a_trace_routes_the_layer_by_its_recorded_load(tmp_path, shared_traces):
    trace = shared_traces / "sglang-deepseek-v3-expert-load" / "decode_in2000out100.json"
    text = TRACE.replace("PATH", str(trace))
    result = runner.invoke(app, ["run", str(write(tmp_path, text)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    run = load_run(run_dir)
    routing = run.routing.to_pylist()
    assert [r["layer"] for r in routing] == [3]  # layers 0-2 dense, 3 the MoE layer kept
    assert routing[0]["trace_sha256"] and "trace(decode_in2000out100.json" in routing[0]["routing"]
    assert {r["routing"] for r in run.samples.to_pylist()} == {routing[0]["routing"]}
    assert not [c for c in run.checks.to_pylist() if c["status"] in ("fail", "error")]


def test_compare_takes_the_step_regimes_non_moe_time_from_a_model_run(smoke):
    run_dir, _ = smoke
    result = runner.invoke(app, ["compare", str(run_dir), "--format", "json",
                                 "--non-moe-from", f"{run_dir}@2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    (note,) = [w for w in json.loads(result.stdout)["warnings"] if "--non-moe-from" in w]
    assert "measured by model run" in note and "batch 2" in note and NO_EXPERTS in note
    result = runner.invoke(app, ["compare", str(run_dir), "--non-moe-from", str(run_dir)])
    line = one_line_error(result)
    assert "batches 1, 2: name one, RUN@BATCH" in line


def test_an_arm_that_writes_the_models_weights_is_named(tmp_path):
    """A bf16 prefill arm reads the model's own expert weights; one that writes them (here a
    single weight, its logits still within the tolerance) is caught by the weights' fingerprint
    after its gates, and never timed; the baseline is timed and passes."""
    (tmp_path / "nudge.py").write_text(NUDGE_ARM)
    result = runner.invoke(app, ["run", str(write(tmp_path, QWEN)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    assert result.exit_code == 1, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    run = load_run(run_dir)
    got = {(c["arm"], c["gate"]): c for c in run.checks.to_pylist()}
    assert got[("nudge", "model_prefill")]["status"] == "pass"  # its logits pass
    bad = got[("nudge", "weights_unchanged")]
    assert bad["status"] == "fail" and "in its gates" in bad["detail"]
    assert got[("stock", "weights_unchanged")]["status"] == "pass"
    assert set(run.samples["arm"].to_pylist()) == {"stock", NO_EXPERTS}


def test_the_prefill_is_captured_by_default_and_can_run_eagerly(tmp_path):
    """``model_run.prefill_graph`` (default true: the prefill one CUDA graph on a GPU where the
    decode step is one); false keeps the eager prefill, host launches included. On the CPU
    nothing is captured: the prefill samples say eager either way."""
    from moebench.spec.load import load_scenario

    assert load_scenario(write(tmp_path, TINY)).model_run.prefill_graph is True
    eager = TINY.replace("  check_steps: 1", "  check_steps: 1\n  prefill_graph: false")
    assert load_scenario(write(tmp_path, eager)).model_run.prefill_graph is False


class ReplayClock:
    """A CPU stand-in for the GPU clock: ``cuda`` true, so that the regime captures its calls,
    and ``capture`` returns a call of the function ("replay" runs it again): the graph path's
    bookkeeping (modes, the captured-against-eager gate, the samples' mode) without a GPU."""

    def __new__(cls, device):
        from moebench.measure.clock import Clock

        clock = Clock(device)
        clock.cuda = True
        clock.capture = lambda fn: lambda: fn()
        clock.synchronize = lambda: None
        cpu = Clock(device)
        clock.sample_us = lambda fn, flush_l2=False: cpu.sample_us(fn)
        return clock


def test_on_a_gpu_the_step_and_the_prefill_are_captured_and_held_to_their_eager_calls(
    tmp_path, monkeypatch
):
    monkeypatch.setattr("moebench.run.simulated.Clock", ReplayClock)
    result = runner.invoke(app, ["run", str(write(tmp_path, TINY)), "--results",
                                 str(tmp_path / "r")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    run = load_run(run_dir)
    checks = {(c["arm"], c["gate"]): c for c in run.checks.to_pylist()}
    for arm in ("dense_decode", "hf:grouped_mm", NO_EXPERTS):
        assert checks[(arm, "capture")]["status"] == "pass"
        assert "one the prefill" in checks[(arm, "capture")]["detail"]
    for arm in ("dense_decode", "hf:grouped_mm"):
        for gate in ("model_graph", "fresh_graph"):
            assert checks[(arm, gate)]["status"] == "pass" and checks[(arm, gate)]["error"] == 0
    modes = {(r["stage"], r["mode"]) for r in run.samples.to_pylist()}
    assert modes == {("prefill", "graph"), ("decode", "graph")}
    shown = runner.invoke(app, ["compare", str(run_dir), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["model"]["rows"]
    assert {r["ttft_mode"] for r in rows} == {"graph"} and {r["mode"] for r in rows} == {"graph"}
    eager = TINY.replace("  check_steps: 1", "  check_steps: 1\n  prefill_graph: false")
    result = runner.invoke(app, ["run", str(write(tmp_path, eager, "e.yaml")), "--results",
                                 str(tmp_path / "e")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "e").iterdir()
    modes = {(r["stage"], r["mode"]) for r in load_run(run_dir).samples.to_pylist()}
    assert modes == {("prefill", "eager"), ("decode", "graph")}
