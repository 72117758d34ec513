"""The step regime in every format (issue 17): the JSON keys, the table within 120 columns with
the layers timed in every section that uses them, the Markdown sections, the CPU view that
shows no timing and no verdict, and the three plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from step_runs import drift, step_run

from moebench.analysis.compare import compare_runs
from moebench.report.plots import write_plots
from moebench.report.render import render

PNG = b"\x89PNG\r\n\x1a\n"
CASES = {"c000": 4, "c001": 16, "c002": 64}


def serving_run(device: str = "cuda", steps: int = 64, **step):
    """Three batch sizes; prefix_sum_masked 0.8 of prefix_sum up to 16 tokens, the same at 64;
    an A/A copy of the baseline; a 0.1 ms SLO and 20 us of non-MoE time."""
    d = drift(steps, spread=0.03)
    arms = ("stock", "prefix_sum", "prefix_sum_masked", "stock~aa")
    scale = {(c, a): t / 16 * (0.9 if a.startswith("prefix") else 1.0)
             for c, t in CASES.items() for a in arms}  # fmt: skip
    for c in ("c000", "c001"):
        scale[(c, "prefix_sum_masked")] *= 0.8
    return step_run(dict.fromkeys(arms, d), cases=CASES, scale=scale, device=device,
                    step={"slo_tpot_ms": 0.1, "non_moe_us": 20.0} | step)  # fmt: skip


@pytest.fixture(scope="module")
def comp():
    return compare_runs([serving_run()])


def test_json_carries_percentiles_goodput_and_policy(comp):
    doc = json.loads(render(comp, "json"))
    step = doc["step"]
    (run,) = step["runs"]
    assert run["layers_text"] == "3 of 3 MoE layers" and run["slo_tpot_ms"] == 0.1
    row = next(r for r in step["rows"] if r["arm"] == "prefix_sum_masked" and
               r["case_id"] == "c000")  # fmt: skip
    for key in ("n_steps", "p50", "p90", "p99", "tokens_per_step", "moe_us_per_token",
                "imbalance_tax_us", "imbalance_tax_pct", "graph_step_us", "layers", "change",
                "tpot_share"):  # fmt: skip
        assert key in row, key
    assert row["p50"]["ci"][0] <= row["p50"]["us"] <= row["p50"]["ci"][1]
    assert row["p99"]["ci"] is None
    assert row["p99"]["note"] == "P99 of n=64 steps: no 95% interval below 368 steps"
    assert row["change"]["decision"] == "FASTER" and row["tpot_share"]["derived"] is True
    assert [x["layer"] for x in row["layers"]] == [3, 4, 5]
    good = next(g for g in step["goodput"] if g["arm"] == "prefix_sum_masked")
    assert good["derived"] is True and good["case_id"] == "c001" and good["ratio"] > 1
    assert good["ci"] is None and "no interval" in good["note"]
    assert "DistServe" in step["goodput_definition"]
    pair = ("prefix_sum_masked", "prefix_sum")
    pol = next(p for p in doc["policy"] if (p["arm"], p["against"]) == pair)
    assert pol["use_when"] == {"tokens_per_rank": {"<=": 16}}
    assert pol["boundary"] == {"between": [16, 64], "faster": "below"}
    assert len(pol["evidence"]) == len(pol["live_fraction"]) == 3


def test_table_fits_120_columns_and_names_the_layers(comp):
    text = render(comp, "table", width=120)
    assert max(len(line) for line in text.splitlines()) <= 120
    for heading in ("Model step (3 of 3 MoE layers)", "Model step per token (3 of 3 MoE layers)",
                    "TPOT share (derived; 3 of 3 MoE layers)",
                    "Goodput (derived; 3 of 3 MoE layers)", "Policy"):  # fmt: skip
        assert heading in text, heading
    assert "No rows outside the step regime" in text and "DistServe" in text


def test_a_subset_of_layers_is_printed_in_every_table_that_uses_it():
    comp = compare_runs([serving_run(layers=[3, 5, 4], model_layers=58, subset=True)])
    subset = "a subset: 3, 5, 4 (3 of 58 MoE layers)"
    md = render(comp, "markdown")
    for heading in ("## Model step (", "## Model step per token (", "## TPOT share (derived; ",
                    "## Goodput (derived; "):  # fmt: skip
        assert f"{heading}{subset})" in md, heading
    assert f"## Policy (model step: {subset})" in md
    text = render(comp, "table", width=120)
    assert text.count(subset) >= 5 and max(len(line) for line in text.splitlines()) <= 120


def test_markdown_has_the_step_sections(comp):
    md = render(comp, "markdown")
    assert "## Goodput (derived; 3 of 3 MoE layers)" in md and "## Policy" in md
    assert "| c000 | prefix_sum_masked | 64 |" in md
    assert (
        "| all cases | step | prefix_sum_masked vs prefix_sum | tokens <= 16 | between 16 and 64 |"
        in md
    )


def test_cpu_run_shows_no_timing_and_no_verdict_but_the_json_keeps_the_figures():
    comp = compare_runs([serving_run(device="cpu")])
    view = render(comp, "table", width=120, view="auto")
    assert "Model step: 64 steps over 3 layers timed (3 of 3 MoE layers); timings are the " \
           "interpreter's: see --timings" in " ".join(view.split())  # fmt: skip
    for word in ("FASTER", "SAME", "P50", "us/token", "HIGHER"):
        assert word not in view, word
    doc = json.loads(render(comp, "json", view="auto"))
    row = next(r for r in doc["step"]["rows"] if r["arm"] == "prefix_sum_masked")
    assert row["p50"]["us"] > 0 and row["imbalance_tax_us"] > 0  # figures kept
    assert row["change"]["decision"] == "" and row["change"]["ci"] is None
    good = next(g for g in doc["step"]["goodput"] if g["arm"] == "prefix_sum_masked")
    assert good["verdict"] == "" and good["ratio"] > 1 and good["tokens_per_s"] > 0
    assert all(p["use_when"] is None for p in doc["policy"])
    assert all(e["decision"] == "" for p in doc["policy"] for e in p["evidence"])
    timed = render(comp, "table", width=120, view="cpu-timings")  # --timings: no verdicts
    assert "Model step (3 of 3 MoE layers)" in timed and "FASTER" not in timed
    assert "Policy" not in timed  # no decision: no policy to show


def test_the_goodput_ratio_verdict_is_blanked_on_the_cpu():
    comp = compare_runs([serving_run(device="cpu", steps=600)])
    good = {g.arm: g for g in comp.step.goodput}
    assert good["prefix_sum_masked"].verdict == "HIGHER"  # the analysis decides ...
    doc = json.loads(render(comp, "json", view="auto"))
    (blank,) = [g for g in doc["step"]["goodput"] if g["arm"] == "prefix_sum_masked"]
    assert blank["verdict"] == "" and blank["ratio_ci"] is None  # ... the CPU view does not


def test_three_step_plots_are_written(comp, tmp_path: Path):
    paths = write_plots(comp, tmp_path)
    names = sorted(p.name for p in paths)
    assert names == [f"{n}-run-s-graph.png" for n in ("goodput", "layers", "step")]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == PNG and len(data) > 20_000, p
    assert np.isfinite([r.p99.us for r in comp.step.rows]).all()
