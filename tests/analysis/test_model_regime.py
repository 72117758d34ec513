"""The model regime's figures (issue 27) on synthetic runs whose answers are known: TPOT
percentiles and their exact intervals, TTFT, an arm against its baseline paired by (block, step),
graph and eager never compared, the floor from the manifest, the measured non-MoE time and MoE
share, goodput and the policy over batch sizes, and a model run's non-MoE time handed on."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from synthetic_runs import ENV, SOURCES, checks

from moebench.analysis import stats
from moebench.analysis.compare import compare_runs
from moebench.analysis.model import floor_bytes
from moebench.analysis.model_summary import measured_non_moe
from moebench.core.ceilings import H200
from moebench.core.errors import MoebenchError
from moebench.core.vocabulary import NO_EXPERTS
from moebench.report.render import render
from moebench.results.reader import Run
from moebench.results.schema import SCHEMAS, rows_to_table

BLOCKS, STEPS = 8, 6
BASE_US = 1000.0
KV = [{"kind": "sliding_attention", "bytes_per_token": 512, "slots": 4},
      {"kind": "full_attention", "bytes_per_token": 512, "slots": None}]  # fmt: skip


def setup(batch: int, slo: float | None = 5.0) -> dict:
    return {"batch": batch, "context": 100, "prompt": 16, "decode_steps": STEPS,
            "check_steps": 2, "stages": ["prefill", "decode"], "layers": 2,
            "model_layers": 24, "moe_layers": [0, 1], "label": "gpt-oss-20b (modified: layers=2)",
            "step_bytes": 10_000_000, "row_bytes": 5760, "kv": KV, "precision": "w4a16",
            "slo_tpot_ms": slo}  # fmt: skip


def rows(run_id, case_id, arm, factor, *, batch, mode="graph", device="cuda", seed=0,
         weight_bytes=1_000_000) -> list[dict]:  # fmt: skip
    """Decode steps at BASE_US * factor * (a (block, step) drift every arm shares) * noise; a
    prefill a block at 10x that."""
    drift = 1 + 0.05 * np.random.default_rng(batch).standard_normal((BLOCKS, STEPS))
    noise = 1 + 0.002 * np.random.default_rng(seed).standard_normal((BLOCKS, STEPS + 1))
    params = json.dumps({"model_run.batch": batch}, sort_keys=True)
    common = dict(run_id=run_id, case_id=case_id, arm=arm, rank=0, regime="model", position=0,
                  iteration=0, device=device, sm_clock_mhz=math.nan, mem_clock_mhz=math.nan,
                  temperature_c=math.nan, power_w=math.nan, weights="warm", weight_copies=1,
                  layer=-1, live_rows=batch * 4, capacity_rows=0, local_experts=32, hidden=2880,
                  intermediate=2880, top_k=4, precision="w4a16", activation="swiglu_oai",
                  routing="router", gemm="triton", params=params,
                  **{"sweep.model_run.batch": batch})  # fmt: skip
    out = []
    for b in range(BLOCKS):
        out.append(common | dict(stage="prefill", mode="eager", block=b, step=-1,
                                 tokens_per_rank=batch * 16, weight_bytes=weight_bytes,
                                 time_us=10 * BASE_US * factor * noise[b, -1]))  # fmt: skip
        for i in range(STEPS):
            out.append(
                common
                | dict(
                    stage="decode",
                    mode=mode,
                    block=b,
                    step=i,
                    tokens_per_rank=batch,
                    weight_bytes=0 if arm == NO_EXPERTS else weight_bytes,
                    time_us=BASE_US * factor * drift[b, i] * noise[b, i],
                )
            )
    return out


def model_run(arms: dict[str, float | dict], *, batches=(4,), run_id="run-m", modes=None,
              device="cuda", slo: float | None = 5.0, failed=(),
              gpu_name: str | None = "NVIDIA H200") -> Run:  # fmt: skip
    """Each arm a factor (or {batch: factor}) in each case; ``modes`` an arm's decode mode;
    ``gpu_name`` the GPU the manifest names (None: none)."""
    sample_rows, check_rows, cases = [], [], {}
    for batch in batches:
        case_id = f"c{batch:03d}"
        cases[case_id] = setup(batch, slo)
        for k, (arm, f) in enumerate(arms.items()):
            factor = f[batch] if isinstance(f, dict) else f
            sample_rows += rows(
                run_id,
                case_id,
                arm,
                factor,
                batch=batch,
                seed=k,
                mode=(modes or {}).get(arm, "graph"),
                device=device,
            )
            status = "fail" if (case_id, arm) in failed else "pass"
            check_rows += checks(run_id, arm, status, case_id=case_id)
    manifest = {
        "run_id": run_id,
        "finished_cases": list(cases),
        "sources": SOURCES,
        "environment": ENV | ({"gpu_name": gpu_name} if gpu_name is not None else {}),
        "scenario": {"name": "synthetic-model"},
        "model": {"cases": cases, "non_moe": NO_EXPERTS, "routing": "router"},
    }
    return Run(run_dir=None, manifest=manifest, samples=rows_to_table("samples", sample_rows),
               checks=rows_to_table("checks", check_rows),
               routing=SCHEMAS["routing"].empty_table())  # fmt: skip


def by_arm(comp, case_id="c004"):
    return {r.arm: r for r in comp.model.rows if r.case_id == case_id}


def test_tpot_percentiles_are_the_order_statistics_of_every_step_with_exact_intervals():
    run = model_run({"dense_decode": 1.0, NO_EXPERTS: 0.4})
    comp = compare_runs([run], baseline="dense_decode")
    r = by_arm(comp)["dense_decode"]
    decode = np.array([x["time_us"] for x in run.samples.to_pylist()
                       if x["arm"] == "dense_decode" and x["stage"] == "decode"])  # fmt: skip
    assert r.n_steps == BLOCKS * STEPS and r.batch == 4
    for q, got in ((0.5, r.tpot_p50), (0.9, r.tpot_p90)):
        assert got.us == pytest.approx(float(np.quantile(decode, q, method="inverted_cdf")))
        low, high, cov = stats.quantile_interval(decode, q, 0.05)
        assert (got.low_us, got.high_us, got.coverage) == (low, high, cov)
    assert math.isnan(r.tpot_p99.low_us) and "below 368" in r.tpot_p99.note  # 48 steps
    assert r.tokens_per_s == pytest.approx(4 * 1e6 / decode.mean())
    assert r.ttft.us == pytest.approx(10 * BASE_US, rel=0.01)


def test_an_arm_against_the_baseline_is_paired_by_block_and_step():
    run = model_run({"dense_decode": 1.0, "sparse_decode": 0.6, "grouped_decode": 1.5,
                     "dense_decode~aa": 1.0, NO_EXPERTS: 0.4})  # fmt: skip
    comp = compare_runs([run], baseline="dense_decode")
    r = by_arm(comp)
    assert r["sparse_decode"].change["decision"] == "FASTER"
    assert r["sparse_decode"].change["change_pct"] == pytest.approx(-40, abs=0.5)
    assert r["sparse_decode"].change["n_paired"] == BLOCKS * STEPS
    assert r["grouped_decode"].change["decision"] == "SLOWER"
    assert r["dense_decode~aa"].change["decision"] == "SAME"  # an A/A copy: against its arm
    assert r["sparse_decode"].ttft_change["decision"] == "FASTER"
    assert r["dense_decode"].change == {"decision": "baseline"}
    assert r[NO_EXPERTS].change == {} and r[NO_EXPERTS].status == "reference"  # never compared
    # every paired cell (TPOT and TTFT of three arms) counts toward the correction
    assert comp.comparisons == 6
    assert not comp.rows  # no one-layer cells


def test_graph_and_eager_are_never_compared():
    run = model_run({"dense_decode": 1.0, "hf:eager": 3.0, NO_EXPERTS: 0.4},
                    modes={"hf:eager": "eager"})  # fmt: skip
    r = by_arm(compare_runs([run], baseline="dense_decode"))["hf:eager"]
    assert r.mode == "eager" and "decision" not in r.change
    assert "ran graph, this arm eager: not compared" in r.change["reason"]
    assert r.tpot_p50.us == pytest.approx(3 * BASE_US, rel=0.05)  # its figures stand


def test_the_floor_is_the_bytes_a_step_must_read_over_the_copy_ceiling():
    s = setup(4)
    # step 0 at context 100: the full layer reads 101 positions, the sliding one its 4 slots
    kv = 4 * (4 + 101) * 512 + 2 * 4 * 512
    want = 1_000_000 + 10_000_000 + 4 * 5760 + kv
    assert floor_bytes(s, 1_000_000, 0) == want
    assert math.isnan(floor_bytes(s, -1, 0))  # weight bytes unknown: no floor
    comp = compare_runs([model_run({"dense_decode": 1.0})], baseline="dense_decode")
    r = by_arm(comp)["dense_decode"]
    floors = [H200.floor_us(floor_bytes(s, 1_000_000, i)) for i in range(STEPS)]
    assert r.floor_us == pytest.approx(float(np.median(floors)))
    assert r.tpot_over_floor == pytest.approx(r.tpot_p50.us / r.floor_us)
    assert r.floor_ceiling == "H200 copy 4.27 TB/s"


@pytest.mark.parametrize(("gpu_name", "device"), [
    ("NVIDIA H100 PCIe", "cuda"), (None, "cuda"), ("NVIDIA H200", "cpu"),
])  # fmt: skip
def test_no_floor_without_the_runs_own_gpus_ceiling(gpu_name, device):
    """A run on a GPU whose ceiling moebench has not measured, one whose manifest names no GPU,
    and a CPU run get their TPOT but no floor: the H200's would give a ratio they do not have."""
    run = model_run({"dense_decode": 1.0}, gpu_name=gpu_name, device=device)
    r = by_arm(compare_runs([run], baseline="dense_decode"))["dense_decode"]
    assert r.tpot_p50 is not None and r.tpot_p50.us > 0
    assert math.isnan(r.floor_us) and math.isnan(r.tpot_over_floor) and r.floor_ceiling == ""
    assert r.as_dict()["floor"]["ceiling"] is None


def test_the_non_moe_time_is_measured_and_gives_the_moe_share():
    comp = compare_runs([model_run({"dense_decode": 1.0, NO_EXPERTS: 0.4})],
                        baseline="dense_decode")  # fmt: skip
    r = by_arm(comp)
    assert r["dense_decode"].non_moe_us == r[NO_EXPERTS].tpot_p50.us
    assert r["dense_decode"].moe_share == pytest.approx(1 - 0.4, abs=0.03)
    assert math.isnan(r[NO_EXPERTS].moe_share)


def test_goodput_is_the_largest_batch_whose_measured_p99_meets_the_slo():
    # TPOT grows with the batch: 1 ms at 1, 2 ms at 4, 4 ms at 16; the SLO of 3 ms is met up to 4
    arms = {"dense_decode": {1: 1.0, 4: 2.0, 16: 4.0}, "sparse_decode": {1: 0.5, 4: 1.0, 16: 2.0},
            NO_EXPERTS: {1: 0.3, 4: 0.3, 16: 0.3}}  # fmt: skip
    comp = compare_runs([model_run(arms, batches=(1, 4, 16), slo=3.0)], baseline="dense_decode")
    g = {x.arm: x for x in comp.model.goodput}
    assert set(g) == {"dense_decode", "sparse_decode"}  # the no-work backend has none
    dense = by_arm(comp, "c004")["dense_decode"]
    assert g["dense_decode"].case_id == "c004"
    assert g["dense_decode"].tokens_per_s == pytest.approx(4 / (dense.tpot_p99.us * 1e-6))
    assert g["sparse_decode"].case_id == "c016"  # it meets the SLO at 16 too
    assert g["sparse_decode"].ratio > 1
    policies = {p["arm"]: p for p in comp.model.policy}
    assert policies["sparse_decode"]["use_when"] == {"batch": {">=": 1, "<=": 16}}
    doc = comp.model.as_dict()
    assert doc["goodput"][0]["measured"] and not doc["goodput"][0]["derived"]


def test_the_policy_says_below_which_batch_an_arm_wins():
    arms = {"dense_decode": 1.0, "sparse_decode": {1: 0.5, 4: 0.7, 16: 1.3},
            NO_EXPERTS: 0.3}  # fmt: skip
    comp = compare_runs([model_run(arms, batches=(1, 4, 16))], baseline="dense_decode")
    (p,) = comp.model.policy
    assert p["use_when"] == {"batch": {"<=": 4}}
    assert p["boundary"] == {"between": [4, 16], "faster": "below"}
    assert [e["decision"] for e in p["evidence"]] == ["FASTER", "FASTER", "SLOWER"]


def test_a_failed_arm_has_no_figures_and_no_goodput():
    run = model_run({"dense_decode": 1.0, "sparse_decode": 0.5, NO_EXPERTS: 0.3},
                    failed=(("c004", "sparse_decode"),))  # fmt: skip
    comp = compare_runs([run], baseline="dense_decode")
    r = by_arm(comp)["sparse_decode"]
    assert r.status == "mismatch" and r.tpot_p50 is None and not r.change
    g = {x.arm: x for x in comp.model.goodput}["sparse_decode"]
    assert "failed its checks" in g.note


def test_cpu_timings_carry_figures_without_verdicts():
    run = model_run({"dense_decode": 1.0, "sparse_decode": 0.5, NO_EXPERTS: 0.3}, device="cpu")
    comp = compare_runs([run], baseline="dense_decode")
    doc = json.loads(render(comp, "json", view="cpu"))
    r = {x["arm"]: x for x in doc["model"]["rows"]}
    assert r["sparse_decode"]["change"]["decision"] == ""
    assert "no verdict" in r["sparse_decode"]["change"]["reason"]
    assert r["sparse_decode"]["tpot"]["p50"]["us"] > 0


def test_a_model_runs_non_moe_time_is_handed_to_the_step_regime():
    run = model_run({"dense_decode": 1.0, NO_EXPERTS: 0.4}, batches=(1, 4))
    with pytest.raises(MoebenchError, match="batches 1, 4: name one, RUN@BATCH"):
        measured_non_moe(run)
    with pytest.raises(MoebenchError, match="no non-MoE time at batch 8"):
        measured_non_moe(run, 8)
    us, where = measured_non_moe(run, 4)
    none = [
        x["time_us"]
        for x in run.samples.to_pylist()
        if x["arm"] == NO_EXPERTS and x["stage"] == "decode" and x["case_id"] == "c004"
    ]
    assert us == float(np.quantile(none, 0.5, method="inverted_cdf"))
    assert "batch 4" in where and NO_EXPERTS in where
    with pytest.raises(MoebenchError, match="not a model regime run"):
        measured_non_moe(model_run({"dense_decode": 1.0}))


def test_the_measured_tpot_stands_beside_the_step_regimes_derived_one():
    """A step run at 32 tokens a step (16 a rank, 2 data ranks) and a model run at batch 32:
    each arm's measured TPOT beside the step's MoE time plus its given non-MoE time, and plus
    the non-MoE time the model run measured."""
    from step_runs import drift, step_run

    steps = step_run({"dense_decode": drift(64)}, run_id="run-s",
                     step={"non_moe_us": 500.0})  # fmt: skip
    model = model_run({"dense_decode": 1.0, NO_EXPERTS: 0.4}, batches=(32,))
    comp = compare_runs([steps, model], baseline="dense_decode", force=True)
    (b,) = comp.model.beside_step
    s = next(r for r in comp.step.rows if r.arm == "dense_decode")
    m = by_arm(comp, "c032")["dense_decode"]
    assert b["tokens_per_step"] == 32 and b["arm"] == "dense_decode"
    assert b["model"]["tpot_p50_us"] == m.tpot_p50.us
    assert b["step"]["derived_tpot_p50_us"] == pytest.approx(s.p50.us + 500.0)
    assert b["step"]["with_measured_non_moe_us"] == pytest.approx(s.p50.us + m.non_moe_us)


def test_a_prefill_only_run_prints_its_ttft_and_no_empty_decode_tables():
    """Qwen3-30B-A3B's TTFT scenario on the H200 (2026-12-02) printed a TPOT table and a MoE-share
    table of empty rows beside its TTFT: with no decode step timed there is nothing to show."""
    run = model_run({"stock": 1.0, "prefix_sum": 0.8, NO_EXPERTS: 0.4})
    prefill = run.samples.filter(pc.equal(run.samples["stage"], "prefill"))
    run = Run(
        run_dir=None, manifest=run.manifest, samples=prefill, checks=run.checks, routing=run.routing
    )
    comp = compare_runs([run], baseline="stock")
    assert all(r.tpot_p50 is None and r.ttft is not None for r in comp.model.rows)
    text = render(comp, "markdown")
    assert "Model prefill: TTFT" in text and "prefix_sum | eager | 4 x 16" in text
    assert "Model decode: TPOT" not in text and "MoE share" not in text


def test_a_step_case_stands_beside_a_model_case_only_at_the_same_precision():
    """On the H200 (2026-12-02) an FP8 step run's rows stood beside an MXFP4 model case of as
    many tokens a step: cases pair only where the parameters both runs swept agree."""
    from step_runs import drift, step_run

    def swept(run, column: str, **extra) -> Run:
        params = [json.dumps(json.loads(p) | extra, sort_keys=True)
                  for p in run.samples[column].to_pylist()]  # fmt: skip
        i = run.samples.schema.get_field_index(column)
        samples = run.samples.set_column(i, column, pa.array(params, pa.string()))
        return Run(run_dir=None, manifest=run.manifest, samples=samples, checks=run.checks,
                   routing=run.routing)  # fmt: skip

    steps = swept(step_run({"dense_decode": drift(64)}, run_id="run-s",
                           step={"non_moe_us": 500.0}), "params", precision="w8a16")  # fmt: skip
    model = model_run({"dense_decode": 1.0, NO_EXPERTS: 0.4}, batches=(32,))
    for precision, pairs in (("w4a16", 0), ("w8a16", 1)):
        m = swept(model, "params", precision=precision)
        comp = compare_runs([steps, m], baseline="dense_decode", force=True)
        assert len(comp.model.beside_step) == pairs, precision
    text = render(comp, "markdown")
    assert "| c032 | c000 | dense_decode | 32 |" in text


def test_a_measured_non_moe_time_is_said_to_be_measured_not_given():
    """compare --non-moe-from said the non-MoE time was a given of the scenario or of compare's
    --non-moe-us; it says which model run measured it, and whose the SLO is."""
    from step_runs import drift, step_run

    steps = step_run({"dense_decode": drift(64)}, run_id="run-s", step={"non_moe_us": 500.0})
    source = "measured by model run run-m (c004, batch 4)"
    for slo, whose in ((None, "the scenario's"), (7.0, "compare's (--slo-tpot-ms)")):
        comp = compare_runs([steps], baseline="dense_decode", non_moe_us=4000.0,
                            non_moe_source=source, slo_tpot_ms=slo)  # fmt: skip
        assert all(r.non_moe_us == 4000.0 for r in comp.step.rows)
        text = render(comp, "markdown")
        assert f"measured, not given: {source} (--non-moe-from); the SLO is {whose}." in text
        assert "were given to compare" not in text
    given = render(compare_runs([steps], baseline="dense_decode", non_moe_us=4000.0), "markdown")
    assert "were given to compare (--slo-tpot-ms, --non-moe-us)" in given
