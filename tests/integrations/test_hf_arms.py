"""transformers' experts backends as arms (``hf:<backend>``, issue 26): through every gate of a
prefill and a decode scenario, with transformers in their provenance; a moebench arm round-trips
through transformers' interface; every bad ``hf:`` reference is one line, exit 2, nothing
written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from cli_support import one_line_error, runner

from moebench.arm import registry
from moebench.cli.app import app
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.integrations.transformers import backends
from moebench.plan import inputs
from moebench.results.reader import load_run

PREFILL = """\
name: hf
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: PRECISION
arms: ARMS
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
"""
DECODE = """\
name: hf-decode
model: {id: test/tiny, revision: unpinned, hidden: 64, intermediate: 64, experts: 4, top_k: 2}
topology: {ep: 2, dp: 1, tp: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 2}
precision: w4a16
activation: swiglu_oai
arms: ARMS
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
"""
GATES = ("reference", "nan_poison", "post_timing", "fresh_input")


def scenario(tmp: Path, arms: list[str], text: str = PREFILL, precision: str = "bf16") -> Path:
    path = tmp / "s.yaml"
    path.write_text(text.replace("ARMS", json.dumps(arms)).replace("PRECISION", precision))
    return path


def run(path: Path, tmp: Path):
    return runner.invoke(app, ["run", str(path), "--results", str(tmp / "results")])


def checked(tmp: Path, arms: list[str], text: str):
    result = run(scenario(tmp, arms, text), tmp)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp / "results").iterdir()
    r = load_run(run_dir)
    return r, {(c["arm"], c["rank"], c["gate"]): c for c in r.checks.to_pylist()}


@pytest.mark.slow
def test_transformers_backends_pass_every_gate_beside_stock_with_transformers_pinned(tmp_path):
    hf = ["hf:eager", "hf:grouped_mm", "hf:batched_mm"]
    r, checks = checked(tmp_path, ["stock", *hf], PREFILL)
    for arm in hf:
        for rank in (0, 1):
            for gate in GATES:
                assert checks[(arm, rank, gate)]["status"] == "pass", (arm, rank, gate)
            # Whole-FFN numerics are its own: held to the reference, never bitwise to stock.
            assert (arm, rank, "cross_arm_output") not in checks
        src = r.manifest["sources"][arm]
        assert src["origin"] == "transformers"
        assert src["distributions"]["transformers"]["version"] == transformers.__version__
        assert "moebench/integrations/transformers/families.py" in src["files"]
    assert checks[("hf:eager", 0, "graph_replay")]["status"] == "skip"  # eager: graph=False
    timed = {s["arm"] for s in r.samples.to_pylist()}
    assert timed == {"stock", *hf}


def test_gpt_oss_experts_pass_every_gate_of_a_decode_scenario(tmp_path):
    hf = ["hf:eager@gpt_oss", "hf:grouped_mm@gpt_oss"]
    r, checks = checked(tmp_path, ["dense_decode", *hf], DECODE)
    for arm in hf:
        for rank in (0, 1):
            for gate in GATES:
                assert checks[(arm, rank, gate)]["status"] == "pass", (arm, rank, gate)
    # 5.24's eager gpt-oss forward takes no sentinel: the clamp form, exact, passed the gates.
    assert backends.non_local_mode("eager", "gpt_oss") == backends.CLAMP


def test_a_moebench_arm_round_trips_through_transformers_interface():
    arm = registry.resolve("hf:moebench:prefix_sum_masked")
    assert arm.family == "prefill" and arm.origin == "transformers"
    T, E, D, F = 6, 4, 128, 128
    cpu = torch.device("cpu")
    w13, w2 = inputs.make_weights(experts=range(E, 2 * E), hidden=D, intermediate=F, seed=2,
                                  device=cpu)  # fmt: skip
    g = torch.Generator().manual_seed(2)
    ids = torch.stack([torch.randperm(2 * E, generator=g)[:2] for _ in range(T)])
    p = inputs.build_problem(
        x_TD=inputs.make_tokens(tokens=T, hidden=D, seed=2, device=cpu), topk_ids_TK=ids,
        topk_weights_TK=torch.softmax(torch.randn(T, 2, generator=g), 1), w13_EFD=w13,
        w2_EDF=w2, expert_offset=E, alignment=16, capacity_rows=64, precision="bf16",
        activation="silu",
    )  # fmt: skip
    y = arm.prepare(p, None).run()
    assert calc_diff(y.float(), inputs.reference_output(p)) < TOLERANCE["bf16"]


BAD = [
    (PREFILL, "stock", "hf:nope", "has no experts backend 'nope' (it has eager, "),
    (PREFILL, "stock", "hf:grouped_mm@llama", "'llama' after '@' is not an experts family"),
    # hf:<backend> is a prefill arm; a decode scenario names hf:<backend>@gpt_oss.
    (DECODE, "dense_decode", "hf:grouped_mm", "'hf:grouped_mm' is a prefill arm but"),
]


@pytest.mark.parametrize("text, first, ref, message", BAD, ids=["unknown", "family", "decode"])
def test_a_bad_hf_reference_is_one_line_naming_it(tmp_path, text, first, ref, message):
    line = one_line_error(run(scenario(tmp_path, [first, ref], text), tmp_path))
    assert "s.yaml: arms[1]: " in line and message in line, line
    assert not (tmp_path / "results").exists()


def test_a_precision_the_backend_does_not_run_is_one_line(tmp_path):
    path = scenario(tmp_path, ["stock", "hf:grouped_mm"], precision="fp8")
    line = one_line_error(run(path, tmp_path))
    assert "arms[1]: 'hf:grouped_mm' runs precision bf16 only, not 'fp8'" in line, line
    assert not (tmp_path / "results").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA-only backend runs on this machine")
@pytest.mark.parametrize("backend", ["deepgemm", "sonicmoe"])
def test_a_cuda_only_backend_on_a_cpu_is_one_line(tmp_path, backend):
    if backend not in backends.names():
        pytest.skip(f"transformers {transformers.__version__} has no {backend}")
    line = one_line_error(run(scenario(tmp_path, ["stock", f"hf:{backend}"]), tmp_path))
    assert f"'hf:{backend}': the transformers" in line and "cannot run on this machine" in line
    assert "(no CUDA device)" in line
    assert not (tmp_path / "results").exists()


def test_without_transformers_an_hf_reference_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "installed", lambda: False)
    line = one_line_error(run(scenario(tmp_path, ["stock", "hf:grouped_mm"]), tmp_path))
    assert "transformers is not installed (pip install 'moebench[transformers]')" in line


def test_moebench_arms_lists_every_backend_with_its_origin():
    result = runner.invoke(app, ["arms", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    for name in backends.names():
        entry = doc[f"hf:{name}"]
        assert entry["origin"] == "transformers" and entry["contract"] == "whole_ffn"
        assert backends.origin(name) in entry["kernels"]
    assert (
        "transformers.integrations.moe.grouped_mm_experts_forward"
        in (doc["hf:grouped_mm"]["kernels"][0])
    )
    assert "transformers" in doc["hf:grouped_mm"]["distributions"]
