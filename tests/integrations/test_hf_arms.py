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
from moebench.gates import dispatch
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
GPT_OSS_CLASS = "experts class transformers.models.gpt_oss.modeling_gpt_oss.GptOssExperts"


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
    # hf:eager takes the decode family from the other arms; @gpt_oss names the same class.
    hf = ["hf:eager", "hf:grouped_mm@gpt_oss"]
    r, checks = checked(tmp_path, ["dense_decode", *hf], DECODE)
    for arm in hf:
        for rank in (0, 1):
            for gate in GATES:
                assert checks[(arm, rank, gate)]["status"] == "pass", (arm, rank, gate)
        # The class that ran, in the manifest's provenance of the arm.
        assert GPT_OSS_CLASS in " ".join(r.manifest["sources"][arm]["kernels"]), arm
    assert r.manifest["scenario"]["normalised"]["arms"][1] == (
        "hf:eager?family=decode&activation=swiglu_oai"
    )
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
        w2_EDF=w2, expert_offset=E, experts=2 * E, alignment=16, capacity_rows=64,
        precision="bf16", activation="silu",
    )  # fmt: skip
    y = arm.prepare(p, None).run()
    assert calc_diff(y.float(), inputs.reference_output(p)) < TOLERANCE["bf16"]


BAD = [
    (PREFILL, "stock", "hf:nope", "has no experts backend 'nope' (it has eager, "),
    (PREFILL, "stock", "hf:grouped_mm@llama", "'llama' after '@' is not an experts family"),
    # A class of the prefill layout named in a decode scenario.
    (DECODE, "dense_decode", "hf:grouped_mm@mixtral", "Mixtral's experts take the prefill layout"),
    # The decode family's class computes swiglu_oai only.
    (
        DECODE.replace("swiglu_oai", "silu"),
        "dense_decode",
        "hf:grouped_mm",
        "a decode arm (the family of the scenario's other arms) builds the experts class gpt-oss's "
        "for swiglu_oai only; the scenario's activation is silu",
    ),
    # A reference bound already keeps its binding: here a decode arm beside a prefill one.
    (PREFILL, "stock", "hf:grouped_mm?family=decode", "'hf:grouped_mm' is a decode arm but"),
]


@pytest.mark.parametrize(
    "text, first, ref, message", BAD, ids=["unknown", "family", "decode", "activation", "bound"]
)
def test_a_bad_hf_reference_is_one_line_naming_it(tmp_path, text, first, ref, message):
    line = one_line_error(run(scenario(tmp_path, [first, ref], text), tmp_path))
    assert "s.yaml: arms[1]: " in line and message in line, line
    assert not (tmp_path / "results").exists()


def test_a_precision_the_backend_does_not_run_is_one_line(tmp_path):
    path = scenario(tmp_path, ["stock", "hf:grouped_mm"], precision="fp8")
    line = one_line_error(run(path, tmp_path))
    assert "arms[1]: 'hf:grouped_mm' runs precision bf16 only, not 'fp8': " in line, line
    # and why: the activation moebench's fp8 quantises, the Hub kernels no machine here reaches
    assert "quantises the tokens and the activation" in line and "Hugging Face Hub" in line
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


def test_moebench_arms_shows_the_class_a_scenarios_hf_arm_builds(tmp_path):
    path = scenario(tmp_path, ["dense_decode", "hf:grouped_mm"], DECODE)
    result = runner.invoke(app, ["arms", "--scenario", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    entry = json.loads(result.output)["hf:grouped_mm"]
    assert entry["family"] == "decode" and GPT_OSS_CLASS in " ".join(entry["kernels"])
    assert f"(transformers {transformers.__version__})" in entry["kernels"][1]
    # Without the scenario, the same name is a prefill arm on the default class.
    doc = json.loads(runner.invoke(app, ["arms", "--format", "json"]).output)
    assert doc["hf:grouped_mm"]["family"] == "prefill"
    assert "Qwen3MoeExperts" in doc["hf:grouped_mm"]["kernels"][1]


# Kernel names the H200 profiled (torch 2.11, CUDA 13.0, transformers 5.17) in gpt-oss-20b's
# experts at 8 tokens, the CUTLASS and setup names cut short in their template arguments:
# grouped_mm's torch grouped GEMM, and the cuBLAS GEMMs of batched_mm (which transformers'
# grouped_mm fallback, a loop of plain products, launches too).
GROUPED_MM_RAN = [
    "_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13Gemm"
    "UniversalINS5_17GroupProblemShapeIN4cute5tupleIJiiiEEEEENS5_10collective13CollectiveMmaI"
    "EEEEEEvNT_6ParamsE",
    "void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, cutlass::bfloat16_t, "
    "cutlass::bfloat16_t, float>(cutlass::bfloat16_t*, int const*, int, int, int, long, bool)",
    "void at::cuda::kernelHistogram1D<int, int, long, 1, 2, -1>(int, int, long)",
]
CUBLAS_RAN = ["nvjet_sm90_tst_192x8_64x8_1x1_h_bz_NNT", "nvjet_sm90_tst_192x8_64x8_2x1_v_bz_NNT"]


def test_the_dispatch_gate_holds_grouped_mm_to_torchs_grouped_gemm():
    arm = registry.resolve("hf:grouped_mm")
    expected, forbidden = dispatch.declared(arm, "bf16")
    assert dispatch.judge(expected, forbidden, GROUPED_MM_RAN).status == "pass"
    fell_back = dispatch.judge(expected, forbidden, CUBLAS_RAN)
    assert fell_back.status == "fail", fell_back
    assert "declared but not launched: *prepare_grouped_gemm_data*, *cutlass*Group" in (
        fell_back.detail
    )
    # The decode arm runs the same GEMM at both of its precisions (the weights are bf16).
    bound = registry.bind(
        "hf:grouped_mm", registry.Context(family="decode", activation="swiglu_oai")
    )
    assert registry.resolve(bound).launches == dict.fromkeys(("w8a16", "w4a16"), expected)
    # cuBLAS picks batched_mm's and eager's kernels by shape: they declare none, and are skipped.
    for name in ("hf:batched_mm", "hf:eager"):
        other = registry.resolve(name)
        assert other.launches == {}
        check = dispatch.dispatch(other, (), "bf16", torch.device("cuda"))
        assert check.status == "skip" and "declares no launches" in check.detail
