"""compare's work-model sections on synthetic runs: weight bandwidth against the copy ceiling,
the token-count crossover and the byte ledger beside it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from moebench.analysis.compare import compare_runs
from moebench.report import sections
from moebench.report.render import render
from moebench.results.reader import Run
from moebench.results.schema import SCHEMAS, rows_to_table

RUN = "run-d"
MB = 1_000_000


def rows(case_id: str, tokens: int, arm: str, time_us: float, *, device="cuda", swept=True,
         weight_bytes=(48 * MB, 40 * MB), live=(2, 3), blocks=4) -> list[dict]:  # fmt: skip
    """ffn samples of one arm in one case on two ranks (rank 1 slower by 10%)."""
    params = {"precision": "w8a16"} | ({"shape.tokens_per_rank": tokens} if swept else {})
    out = []
    noise = np.random.default_rng(len(case_id) + len(arm)).normal(1, 0.002, (blocks, 2))
    for b in range(blocks):
        for rank in (0, 1):
            out.append(dict(
                run_id=RUN, case_id=case_id, arm=arm, rank=rank, stage="ffn", regime="ffn",
                block=b, position=0, iteration=0,
                time_us=time_us * (1 + 0.1 * rank) * noise[b, rank],
                device=device, sm_clock_mhz=math.nan, mem_clock_mhz=math.nan,
                temperature_c=math.nan, power_w=math.nan, mode="eager",
                weights="warm", weight_copies=1, step=-1, layer=-1,
                tokens_per_rank=tokens, live_rows=live[rank] * tokens, capacity_rows=0,
                local_experts=16, hidden=2880, intermediate=2880, top_k=4, precision="w8a16",
                activation="swiglu_oai", routing="uniform", gemm="triton",
                params=json.dumps(params, sort_keys=True), weight_bytes=weight_bytes[rank],
            ))  # fmt: skip
    return out


H200_NAME = "NVIDIA H200"  # as the driver names it (torch.cuda.get_device_name)


def run(sample_rows, gpu_name: str | None = H200_NAME) -> Run:
    """A stored run of these samples; its manifest names ``gpu_name`` (None: no GPU named)."""
    cases = sorted({r["case_id"] for r in sample_rows})
    arms = ("dense_decode", "sparse_decode")
    checks = [dict(run_id=RUN, case_id=c, arm=a, rank=0, gate="reference", status="pass",
                   error=1e-6, detail="") for c in cases for a in arms]  # fmt: skip
    env = {} if gpu_name is None else {"environment": {"gpu_name": gpu_name}}
    return Run(
        run_dir=Path("/nonexistent"), manifest={"run_id": RUN, "finished_cases": cases} | env,
        samples=rows_to_table("samples", sample_rows), checks=rows_to_table("checks", checks),
        routing=SCHEMAS["routing"].empty_table(),
    )  # fmt: skip


def sweep(sparse_us: dict[int, float], dense_us: float = 40.0, **kw) -> Run:
    out = []
    for i, (t, s) in enumerate(sorted(sparse_us.items())):
        out += rows(f"c{i:03d}", t, "dense_decode", dense_us, **kw)
        out += rows(f"c{i:03d}", t, "sparse_decode", s, **kw)
    return run(out)


def analyse(r: Run):
    return compare_runs([r], baseline="dense_decode").workmodel


def test_crossover_is_where_dense_stays_faster_and_the_ledger_beside_it():
    # sparse/dense: 0.25, 0.5, 1.0 (a tie is not 'dense faster'), 2.0, 4.0
    wm = analyse(sweep({1: 10.0, 2: 20.0, 4: 40.0, 8: 80.0, 16: 160.0}))
    (c,) = wm.crossover
    assert (c.arm, c.baseline, c.tokens) == ("sparse_decode", "dense_decode", (1, 2, 4, 8, 16))
    assert c.crossover_tokens == 8 and c.note == ""
    assert [round(q, 2) for q in c.ratios] == [0.25, 0.5, 1.0, 2.0, 4.0]
    # busiest rank: 3 slots a token against 16 local experts -> reached at 8 tokens (24 >= 16)
    assert c.ledger_tokens == 8 and c.series == "precision=w8a16"


# (sparse times by tokens, crossover, note fragment); each names its edge.
SERIES = [
    pytest.param({1: 10.0, 64: 20.0}, None, "", id="sparse-faster-throughout"),
    pytest.param({1: 50.0, 2: 60.0}, 1, "", id="dense-faster-from-the-first-count"),
    pytest.param({1: 50.0, 2: 10.0, 4: 60.0}, 4, "not monotone", id="not-monotone"),
]


@pytest.mark.parametrize(("sparse", "crossover", "note"), SERIES)
def test_crossover_edges(sparse, crossover, note):
    (c,) = analyse(sweep(sparse)).crossover
    assert c.crossover_tokens == crossover and note in c.note


def test_no_token_sweep_no_crossover():
    assert analyse(sweep({1: 10.0, 2: 20.0}, swept=False)).crossover == []


def test_bandwidth_uses_the_slowest_rank_and_the_copy_ceiling():
    wm = analyse(sweep({1: 10.0, 2: 20.0}))
    one = {(b.case_id, b.arm): b for b in wm.bandwidth}
    b = one[("c000", "sparse_decode")]
    assert b.rank == 1 and b.weight_bytes == 40 * MB
    # rank 1's median is 11 us: 40 MB / 11 us = 3,636 GB/s, 85% of 4.27 TB/s
    assert b.gbps == pytest.approx(40e6 / 11.0 / 1e3, rel=0.01)
    assert b.copy_ceiling_gbps == 4270.0
    assert b.copy_fraction == pytest.approx(b.gbps / 4270.0)
    cpu = analyse(sweep({1: 10.0, 2: 20.0}, device="cpu")).bandwidth
    assert all(math.isnan(b.copy_fraction) for b in cpu)


@pytest.mark.parametrize("gpu_name", ["NVIDIA H100 PCIe", "", None])
def test_a_gpu_without_a_measured_ceiling_gets_no_fraction(gpu_name):
    """A run on a GPU whose copy ceiling moebench has not measured (an H100 PCIe here), or whose
    manifest names none, gets its GB/s but no fraction: the H200's ceiling would give it one it
    does not have."""
    samples = [*rows("c000", 1, "dense_decode", 10.0), *rows("c000", 1, "sparse_decode", 20.0)]
    bw = analyse(run(samples, gpu_name=gpu_name)).bandwidth
    assert bw and all(b.gbps > 0 for b in bw)
    assert all(math.isnan(b.copy_fraction) and math.isnan(b.copy_ceiling_gbps) for b in bw)


def test_an_h100_sxm_run_gets_its_fraction_of_its_own_ceiling():
    """The H100 SXM's measured copy (2.97 TB/s, core.ceilings), not the H200's 4.27."""
    samples = [*rows("c000", 1, "dense_decode", 10.0), *rows("c000", 1, "sparse_decode", 20.0)]
    bw = analyse(run(samples, gpu_name="NVIDIA H100 80GB HBM3")).bandwidth
    assert bw and all(b.copy_ceiling_gbps == 2970.0 for b in bw)
    assert all(b.copy_fraction == pytest.approx(b.gbps / 2970.0) for b in bw)


def test_unknown_and_zero_bytes_get_no_bandwidth():
    assert analyse(sweep({1: 10.0, 2: 20.0}, weight_bytes=(-1, -1))).bandwidth == []
    assert analyse(sweep({1: 10.0, 2: 20.0}, weight_bytes=(0, 0))).bandwidth == []


def test_sections_are_rendered_in_every_document_format():
    comp = compare_runs([sweep({1: 10.0, 2: 20.0, 4: 80.0})], baseline="dense_decode")
    md = render(comp, "markdown")
    assert "## Weight bandwidth" in md and "## Crossover" in md
    row = "| precision=w8a16 | sparse_decode vs dense_decode | 1: 0.25x, 2: 0.50x, 4: 2.00x |"
    assert f"{row} 4 tokens |" in md
    text = render(comp, "table", width=120)
    assert "Crossover" in text and "4 tokens" in text and "of copy" in text
    narrow = render(comp, "table", width=40)
    assert "4 tokens" in narrow
    doc = json.loads(render(comp, "json"))
    assert doc["workmodel"]["crossover"][0]["crossover_tokens"] == 4
    assert {b["copy_ceiling_gbps"] for b in doc["workmodel"]["bandwidth"]} == {4270.0}
    assert "Crossover" not in render(comp, "csv")  # csv stays the rows only


def test_slow_bandwidth_keeps_its_digits():
    """Interpreter runs reach MB/s: the table must not print them as 0.0 GB/s."""
    assert sections._gbps(0.00345) == "0.00345"
    assert sections._gbps(3.456) == "3.46"
    assert sections._gbps(1909.4) == "1,909.4"
    assert sections._gbps(float("nan")) == ""
