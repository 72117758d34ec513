"""Plots and the Markdown report: on a synthetic sweep, then end to end through the CLI with an
A/A control on a tiny CPU run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from cli_support import TINY, runner, write
from synthetic_runs import checks, make_run, samples

from moebench.analysis.compare import compare_runs
from moebench.cli.app import app
from moebench.plan.cases import arm_names
from moebench.report import plots
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


BLOCKS = 12  # 36 comparisons: an exact interval at the corrected level needs 11 paired blocks


def sweep_run() -> tuple:
    """Three cases whose live share of the buffer grows; two ranks, rank 1 a little slower."""
    rows, check_rows = [], []
    live_share = {"c000": 0.1, "c001": 0.4, "c002": 0.8}
    for c, (case, live) in enumerate(live_share.items()):
        for k, (arm, share) in enumerate(ARMS.items()):
            rng = np.random.default_rng(10 * c + k)
            ranks = np.array([1.0, 1.08])[None, :, None]
            for stage, us in STAGE_US.items():
                noise = 1 + 0.005 * rng.standard_normal((BLOCKS, 2, 3))
                t = us * share(stage, live) * ranks * noise
                rows += samples(RUN, arm, t, case_id=case, stage=stage, regime="kernel")
            total = sum(us * share(s, live) for s, us in STAGE_US.items()) * 1.1
            t = total * ranks * (1 + 0.005 * rng.standard_normal((BLOCKS, 2, 3)))
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
    assert "0 of 18 cell(s) not SAME = 0.0% (every cell SAME)" in md
    for name in names:  # linked from the current directory, not by this machine's folders
        link = os.path.relpath(name)
        assert f"![{link}]({link})" in md
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
    assert {"reference", "cross_arm_output", "post_timing"} <= {c["gate"] for c in copy_checks}
    assert all(c["status"] in ("pass", "skip") for c in copy_checks)
    assert "Gates: every arm passed every gate" in result.output  # the CPU view of the run
    # The A/A copy is compared with the arm it copies (on the CPU the table shows no verdict).
    comp = compare_runs([load_run(run_dir)])
    assert {r.baseline for r in comp.rows if r.arm == "stock~aa"} == {"stock"}


def test_compare_plot_and_markdown_report_from_the_cli(aa_run):
    tmp, _, run_dir, _ = aa_run
    plots = tmp / "plots"
    result = runner.invoke(
        app, ["compare", str(run_dir), "--plot", str(plots), "--format", "markdown", "--timings"]
    )
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in plots.iterdir())
    # A CPU run records its samples as eager: one set of plots, named by the mode.
    assert names == [f"{n}-{run_dir.name}-eager.png" for n in ("ranks", "speedup", "stages")]
    for p in plots.iterdir():
        assert_png(p)
    out = result.output
    assert "# moebench: tiny on CPU (Triton interpreter)" in out
    assert "\n## A/A control\n\n" in out  # a CPU run: no verdict, the section says so
    link = os.path.relpath(plots / names[0])
    assert f"![{link}]({link})" in out
    assert "3 plot(s) written" in out
    plain = runner.invoke(app, ["compare", str(run_dir), "--no-correction", "--format", "json"])
    assert plain.exit_code == 0, plain.output
    doc = json.loads(plain.output[plain.output.index("{") :])
    assert doc["correction"] == "none" and "uncorrected" in doc["title"]
    # ffn and kernel/act, both with 2 blocks: too few for an exact interval, so no verdict
    # A CPU run: its JSON carries the timings but no verdict, so no A/A judgement either.
    assert doc["aa"] is None and not any(r["decision"] not in ("", "baseline") for r in doc["rows"])


def test_resume_needs_the_same_aa_setting(aa_run):
    _, scenario, run_dir, _ = aa_run
    result = runner.invoke(app, ["run", str(scenario), "--resume", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert "same A/A setting" in result.output


@pytest.mark.slow
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


# --------------------------------------------------------------------------- speedup axes

DECODE_RUN = "20261201-000000-decode-abcdef"
DECODE_TOKENS = (1, 4, 16, 64)


def decode_run() -> tuple:
    """A decode sweep, precision x tokens per rank: sparse beats dense at few tokens and loses at
    many, faster still on w4a16 (fewer weight bytes). Stages fc1, fc2, combine only."""
    rows, check_rows = [], []
    case = 0
    for precision, gain in (("w8a16", 1.0), ("w4a16", 0.8)):
        for tokens in DECODE_TOKENS:
            case_id = f"c{case:03d}-precision={precision}-tokens_per_rank={tokens}"
            case += 1
            for k, arm in enumerate(("dense_decode", "sparse_decode")):
                share = 1.0 if arm == "dense_decode" else gain * (0.2 + tokens / 32)
                rng = np.random.default_rng(100 * case + k)
                for stage, us in (("fc1", 40.0), ("fc2", 30.0), ("combine", 5.0)):
                    t = us * share * (1 + 0.005 * rng.standard_normal((6, 1, 3)))
                    rows += samples(DECODE_RUN, arm, t, case_id=case_id, stage=stage,
                                    regime="kernel")  # fmt: skip
                t = 80.0 * share * (1 + 0.005 * rng.standard_normal((6, 1, 3)))
                rows += samples(DECODE_RUN, arm, t, case_id=case_id)
                check_rows += checks(DECODE_RUN, arm, case_id=case_id)
            for r in rows[-(6 * 3 * 4 * 2) :]:
                params = {"precision": precision, "shape.tokens_per_rank": tokens}
                r.update(tokens_per_rank=tokens, precision=precision, params=json.dumps(params))
    return make_run(DECODE_RUN, rows, check_rows, scenario={"name": "synthetic-decode"},
                    finished_cases=sorted({r["case_id"] for r in rows}))  # fmt: skip


def speedup_axes(comp, run_id: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    rows = [r for r in comp.rows if r.run_id == run_id and r.mode == "eager"]
    (fig,) = plots._speedup_figure(comp, rows, run_id, "eager")
    FigureCanvasAgg(fig).draw()
    return fig.axes[0]


def legend_texts(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_decode_speedup_is_against_tokens_one_line_per_precision():
    comp = compare_runs([decode_run()], baseline="dense_decode")
    assert plots.is_decode(comp, DECODE_RUN)
    ax = speedup_axes(comp, DECODE_RUN)
    assert ax.get_xlabel().startswith("tokens per rank")
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(t) for t in DECODE_TOKENS]
    assert legend_texts(ax) == ["sparse_decode, precision=w4a16", "sparse_decode, precision=w8a16"]
    drawn = {c.get_label(): c.lines[0] for c in ax.containers}  # one errorbar line a series
    assert len(drawn) == 2  # one line a precision, not one line through both
    for line in drawn.values():
        # Each line walks the token counts once, in order (shifted apart by a small factor).
        assert np.allclose(line.get_xdata(), DECODE_TOKENS, rtol=0.05)
    w8 = drawn["sparse_decode, precision=w8a16"].get_ydata()
    w4 = drawn["sparse_decode, precision=w4a16"].get_ydata()
    assert (np.asarray(w4) > np.asarray(w8)).all()
    # The panels of the other figures name the token count and precision, not a live share.
    case = "c001-precision=w8a16-tokens_per_rank=4"
    assert plots.case_title(comp, DECODE_RUN, case) == f"{case}\nuniform, 4 tokens/rank, w8a16"


def test_prefill_speedup_keeps_live_over_capacity():
    comp = compare_runs([sweep_run()])
    assert not plots.is_decode(comp, RUN)
    ax = speedup_axes(comp, RUN)
    assert ax.get_xlabel().startswith("live rows / capacity rows")
    assert ax.get_xscale() == "linear"
    assert legend_texts(ax) == ["prefix_sum_masked", "stock~aa (A/A control, against stock)"]


@pytest.mark.parametrize(
    ("locs", "labels"),
    [
        ([0, 0.0025, 0.005, 0.0075, 0.01], ["0.00%", "0.25%", "0.50%", "0.75%", "1.00%"]),
        ([0.025, 0.05, 0.075, 0.1], ["2.5%", "5.0%", "7.5%", "10.0%"]),
        ([0, 0.2, 0.4, 0.6], ["0%", "20%", "40%", "60%"]),
        # A locator's arithmetic leaves float dust (0.0075000000000000006) and a negative zero.
        ([i * 0.0025 - 1e-19 for i in range(4)], ["0.00%", "0.25%", "0.50%", "0.75%"]),
    ],
)
def test_percent_labels_carry_the_decimals_of_the_step(locs, labels):
    assert [plots.percent_label(x, locs) for x in locs] == labels


@pytest.mark.parametrize("right", [0.012, 0.03, 0.1, 0.27, 1.02])
def test_percent_ticks_of_the_speedup_plot_show_their_values(right):
    ax = speedup_axes(compare_runs([sweep_run()]), RUN)
    ax.set_xlim(0, right)
    ax.figure.canvas.draw()
    locs = [x for x in ax.get_xticks() if 0 <= x <= right]
    labels = [t.get_text() for t, x in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
              if 0 <= x <= right]  # fmt: skip
    assert len(set(labels)) == len(labels) >= 3, labels
    for x, label in zip(locs, labels, strict=True):
        assert float(label.rstrip("%")) == pytest.approx(x * 100, abs=1e-9), (x, label)
