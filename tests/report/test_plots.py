"""Plots and the Markdown report: on a synthetic sweep, then end to end through the CLI with an
A/A control on a tiny CPU run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_support import TINY, runner, write
from synthetic_runs import checks, make_run, samples

from moebench.analysis.compare import compare_runs
from moebench.cli.app import app
from moebench.plan.cases import arm_names
from moebench.report.plots import write_plots
from moebench.report.render import render
from moebench.results.reader import load_run
from moebench.spec.load import parse_scenario

PNG = b"\x89PNG\r\n\x1a\n"
RUN = "20261129-000000-sweep-abcdef"
STAGE_US = {"scatter": 5.0, "fc1": 40.0, "act": 12.0, "fc2": 30.0, "combine": 6.0}
# Per arm: the share of each stage's stock time it takes once the live fraction f is known.
ARMS = {
    "stock": lambda stage, f: 1.0,
    "prefix_sum_masked": lambda stage, f: 1.0 if stage in ("scatter", "combine") else 0.2 + f,
    "stock~aa": lambda stage, f: 1.0,
}


def sweep_run() -> tuple:
    """Three cases whose live share of the buffer grows; two ranks, rank 1 a little slower."""
    rows, check_rows = [], []
    live_share = {"c000": 0.1, "c001": 0.4, "c002": 0.8}
    for c, (case, live) in enumerate(live_share.items()):
        for k, (arm, share) in enumerate(ARMS.items()):
            rng = np.random.default_rng(10 * c + k)
            ranks = np.array([1.0, 1.08])[None, :, None]
            for stage, us in STAGE_US.items():
                t = us * share(stage, live) * ranks * (1 + 0.005 * rng.standard_normal((6, 2, 3)))
                rows += samples(RUN, arm, t, case_id=case, stage=stage, regime="kernel")
            total = sum(us * share(s, live) for s, us in STAGE_US.items()) * 1.1
            t = total * ranks * (1 + 0.005 * rng.standard_normal((6, 2, 3)))
            rows += samples(RUN, arm, t, case_id=case)
            check_rows += checks(RUN, arm, case_id=case)
    for r in rows:
        r["live_rows"] = int(live_share[r["case_id"]] * r["capacity_rows"])
    return make_run(RUN, rows, check_rows, finished_cases=list(live_share),
                    scenario={"name": "synthetic-sweep"})  # fmt: skip


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG, path
    assert len(data) > 20_000, (path, len(data))  # axes, labels and marks, not a blank canvas


def test_plots_of_a_synthetic_sweep(tmp_path: Path):
    comp = compare_runs([sweep_run()])
    paths = write_plots(comp, tmp_path / "plots")
    assert sorted(p.name for p in paths) == [f"{n}-{RUN}-eager.png" for n in ("ranks", "speedup",
                                                                       "stages")]  # fmt: skip
    for p in paths:
        assert_png(p)
    assert not list((tmp_path / "plots").glob(".*"))  # no temp file left behind
    assert comp.cases[(RUN, "c002")].live_fraction == pytest.approx(204 / 256)


def test_markdown_report_is_complete(tmp_path: Path):
    comp = compare_runs([sweep_run()])
    names = [str(p) for p in write_plots(comp, tmp_path)]
    md = render(comp, "markdown", plots=names)
    assert md.startswith("# moebench: synthetic-sweep on CPU (Triton interpreter)")
    for section in ("## Runs", "## Decisions", "## Results", "## Noise", "## A/A control",
                    "## Plots"):  # fmt: skip
        assert f"\n{section}\n" in md, section
    assert "| 2.13.0 | 3.9.0 |" in md  # torch and triton from the manifest
    assert "Bonferroni-corrected for 36 comparisons" in md  # 3 cases x 6 stages x 2 arms
    assert "- `prefix_sum_masked` against `stock` over 18 cell(s): FASTER" in md
    assert "false-positive rate 0 of 18 cell(s) not SAME = 0.0% (every cell SAME)" in md
    for name in names:
        assert f"![{name}]({name})" in md
    doc = json.loads(render(comp, "json", plots=names))
    assert doc["aa"]["cells"] == 18 and doc["aa"]["rate"] == 0 and doc["plots"] == names
    assert doc["correction"] == "bonferroni" and doc["comparisons"] == 36


def test_nothing_to_plot_writes_nothing_and_a_bad_folder_is_one_error(tmp_path: Path):
    run = make_run("run-a", [], checks("run-a", "stock"))
    assert write_plots(compare_runs([run]), tmp_path / "empty") == []
    blocker = tmp_path / "file"
    blocker.write_text("")
    from moebench.core.errors import MoebenchError

    with pytest.raises(MoebenchError, match="--plot: cannot create"):
        write_plots(compare_runs([sweep_run()]), blocker / "plots")


def test_measure_aa_key_adds_the_copy_of_the_baseline():
    s = parse_scenario(TINY.replace("iterations: 1}", "iterations: 1, aa: true}"))
    assert s.measure.aa
    assert arm_names(s) == (*s.arms, "stock~aa")
    plain = parse_scenario(TINY)
    assert arm_names(plain) == plain.arms
    assert arm_names(plain, aa=True)[-1] == "stock~aa"


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def aa_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aa")
    scenario = write(tmp, TINY + "arms: [stock, prefix_sum_masked]\n")
    result = runner.invoke(app, ["run", str(scenario), "--aa", "--results", str(tmp / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp / "r").iterdir()
    return tmp, scenario, run_dir, result


def test_run_aa_times_a_gated_copy_of_the_baseline(aa_run):
    _, _, run_dir, result = aa_run
    run = load_run(run_dir)
    assert run.manifest["aa"] == "stock~aa"
    assert set(run.manifest["sources"]) == {"stock", "prefix_sum_masked"}
    arms = run.samples["arm"].to_pylist()
    assert set(arms) == {"stock", "prefix_sum_masked", "stock~aa"}
    assert arms.count("stock~aa") == arms.count("stock")
    # The copy rotates with the others (ABC, BCA): third in block 0, second in block 1.
    rows = run.samples.to_pylist()
    first = {r["block"]: r["arm"] for r in rows if r["position"] == 0 and r["rank"] == 0}
    assert first == {0: "stock", 1: "prefix_sum_masked"}
    assert {(r["block"], r["position"]) for r in rows if r["arm"] == "stock~aa"} == {(0, 2), (1, 1)}
    copy_checks = [c for c in run.checks.to_pylist() if c["arm"] == "stock~aa"]
    assert {"reference", "cross_arm_output", "post_timing"} <= {c["check"] for c in copy_checks}
    assert all(c["status"] in ("pass", "skip") for c in copy_checks)
    assert "A/A control (stock~aa vs stock)" in " ".join(result.output.split())


def test_compare_plot_and_markdown_report_from_the_cli(aa_run):
    tmp, _, run_dir, _ = aa_run
    plots = tmp / "plots"
    result = runner.invoke(
        app, ["compare", str(run_dir), "--plot", str(plots), "--format", "markdown"]
    )
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in plots.iterdir())
    # A CPU run records its samples as eager: one set of plots, named by the mode.
    assert names == [f"{n}-{run_dir.name}-eager.png" for n in ("ranks", "speedup", "stages")]
    for p in plots.iterdir():
        assert_png(p)
    out = result.output
    assert "# moebench: tiny on CPU (Triton interpreter)" in out
    assert "A/A control (stock~aa vs stock): false-positive rate" in out
    assert f"![{plots / names[0]}]({plots / names[0]})" in out
    assert "3 plot(s) written" in out
    plain = runner.invoke(app, ["compare", str(run_dir), "--no-correction", "--format", "json"])
    assert plain.exit_code == 0, plain.output
    doc = json.loads(plain.output[plain.output.index("{") :])
    assert doc["correction"] == "none" and "uncorrected" in doc["title"]
    assert doc["aa"]["cells"] == 2  # ffn and kernel/act


def test_resume_needs_the_same_aa_setting(aa_run):
    _, scenario, run_dir, _ = aa_run
    result = runner.invoke(app, ["run", str(scenario), "--resume", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert "same A/A setting" in result.output


def test_speedup_plot_of_cases_that_share_a_live_fraction(tmp_path):
    """A gemm sweep gives two cases with the same routing, hence the same live/capacity: the
    speedup plot must order them (it once compared result rows and raised)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: peer\n"
        "model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4,"
        " top_k: 2}\n"
        "topology: {ep: 2}\nrouting: {family: uniform, seed: 3}\n"
        "shape: {tokens_per_rank: 4, alignment: 16}\nprecision: bf16\n"
        "measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}\n"
        "sweep: {gemm: [triton, torch]}\n"
    )
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    result = runner.invoke(app, ["compare", str(run_dir), "--plot", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    speedup = [p for p in (tmp_path / "p").iterdir() if p.name.startswith("speedup-")]
    assert speedup and speedup[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
