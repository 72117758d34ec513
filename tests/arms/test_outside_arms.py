"""Arms from outside moebench (docs/DESIGN.md section 13): named by a file, an import string or an
entry point, run through the same gates, statistics and pins as the built-in arms; a cheating arm
is caught; every bad reference is one line naming the field, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest
import torch
from cli_support import one_line_error, runner

from moebench.arm import registry
from moebench.arm.base import Arm
from moebench.cli.app import app
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.plan.inputs import build_problem, make_tokens, make_weights, reference_output
from moebench.results.reader import load_run
from moebench.run.closure import closure_of, combined_hash

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "arms"

TINY = """\
name: outside
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: fp8
arms: ARMS
measure: {regimes: [ffn, kernel], stages: [act], warmup: 0, blocks: 2, iterations: 1}
"""


def scenario(tmp: Path, arms: list[str], text: str = TINY) -> Path:
    path = tmp / "s.yaml"
    path.write_text(text.replace("ARMS", json.dumps(arms)))
    return path


def run(path: Path, tmp: Path, *extra: str):
    return runner.invoke(app, ["run", str(path), "--results", str(tmp / "results"), *extra])


def example(name: str) -> str:
    return f"{EXAMPLES / name}:ARM"


@pytest.fixture(scope="module")
def outside_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outside")
    arms = ["stock", "prefix_sum_masked", example("torch_grouped.py"),
            example("persistent_masked.py")]  # fmt: skip
    result = run(scenario(tmp, arms), tmp)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp / "results").iterdir()
    return run_dir, result


def test_a_users_arms_get_every_gate_the_statistics_and_pins(outside_run):
    run_dir, result = outside_run
    r = load_run(run_dir)
    checks = {(c["arm"], c["rank"], c["gate"]): c for c in r.checks.to_pylist()}
    for rank in (0, 1):
        for arm in ("torch_grouped", "masked_persistent"):
            for name in ("reference", "nan_poison", "post_timing", "fresh_input"):
                assert checks[(arm, rank, name)]["status"] == "pass", (arm, rank, name)
        # The staged arm writes moebench's workspace: bitwise equal to the built-in arms.
        assert checks[("masked_persistent", rank, "cross_arm_act")]["status"] == "pass"
        assert checks[("masked_persistent", rank, "sentinel_padding")]["status"] == "pass"
        # The whole-FFN arm has its own numerics: no bitwise cross-arm gate.
        assert ("torch_grouped", rank, "cross_arm_output") not in checks
    sources = r.manifest["sources"]
    assert sources["torch_grouped"]["origin"] == "file"
    assert "examples/arms/torch_grouped.py" in sources["torch_grouped"]["files"]
    assert "examples/arms/persistent_masked.py" in sources["masked_persistent"]["files"]
    assert "arms/prefill/prefix_sum_masked.py" in sources["masked_persistent"]["files"]
    assert "torch" in sources["torch_grouped"]["distributions"]  # plain torch: no triton
    assert {"torch", "triton"} <= set(sources["masked_persistent"]["distributions"])
    timed = {(s["arm"], s["stage"]) for s in r.samples.to_pylist()}
    assert ("torch_grouped", "ffn") in timed and ("masked_persistent", "act") in timed
    assert ("torch_grouped", "act") not in timed  # it names no sub-stage
    out = runner.invoke(app, ["compare", str(run_dir), "--format", "json"])
    rows = json.loads(out.output)["rows"]
    arms = {row["arm"] for row in rows if row["stage"] == "ffn"}
    assert arms == {"stock", "prefix_sum_masked", "torch_grouped", "masked_persistent"}


def validated_samples(scenario_path: Path) -> tuple[str, str]:
    """``moebench validate``'s samples cell of the one case, and its caption on one line."""
    result = runner.invoke(app, ["validate", str(scenario_path)])
    assert result.exit_code == 0, result.output
    (row,) = [ln for ln in result.stdout.splitlines() if ln.startswith("│ c000")]
    return row.split("│")[7].strip(), " ".join(result.stdout.split())


def test_validate_counts_the_samples_the_run_writes_for_a_whole_ffn_arm(outside_run):
    """torch_grouped names no sub-stage: it times ffn alone, and validate counts it so, saying
    that a whole-FFN arm may add the sub-stages it names (known when its prepare runs)."""
    run_dir, _ = outside_run
    written = load_run(run_dir).samples.num_rows
    # 2 ranks x 2 blocks x 1 iteration x (ffn and act of the three staged arms, ffn of
    # torch_grouped)
    assert written == 2 * 2 * 1 * (3 * 2 + 1)
    cell, caption = validated_samples(run_dir.parent.parent / "s.yaml")
    assert cell == f"{written}+", cell
    assert ("torch_grouped, whole-FFN, counted with ffn samples only, plus any sub-stages it "
            "names") in caption, caption  # fmt: skip


def test_moebench_arms_lists_a_scenarios_arms_with_origin_and_hash(tmp_path):
    path = scenario(tmp_path, ["stock", example("torch_grouped.py")])
    result = runner.invoke(app, ["arms", "--scenario", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert (
        doc["torch_grouped"]["origin"] == "file" and doc["torch_grouped"]["contract"] == "whole_ffn"
    )
    assert doc["stock"]["origin"] == "builtin" and len(doc["stock"]["hash"]) == 64


def test_the_cheating_arm_fails_the_fresh_input_gate_and_is_not_faster(tmp_path):
    path = scenario(tmp_path, ["stock", example("cheating.py")])
    result = run(path, tmp_path)
    assert result.exit_code == 1, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    r = load_run(run_dir)
    assert r.manifest["status"] == "mismatch"
    rows = [c for c in r.checks.to_pylist() if c["arm"] == "memoised"]
    before = {c["gate"]: c["status"] for c in rows}
    assert before["reference"] == "pass" and before["post_timing"] == "pass"  # same inputs
    fresh = [c for c in rows if c["gate"] == "fresh_input"]
    assert len(fresh) == 2 and all(c["status"] == "fail" for c in fresh)
    out = json.loads(runner.invoke(app, ["compare", str(run_dir), "--format", "json"]).output)
    (row,) = [x for x in out["rows"] if x["arm"] == "memoised"]
    assert row["status"] == "mismatch" and row["median_us"] is None and not row["decision"]


BAD_ARM = """\
from moebench.arm.base import Arm
NOT_AN_ARM = 42
CLASH = Arm(name="stock", family="prefill", summary="s", build=lambda ws: ())
DECODE = Arm(name="d", family="decode", summary="s", build=lambda ws: (), layout="TKD")
"""


@pytest.mark.parametrize(
    "ref, message",
    [
        ("missing.py:ARM", "arms[1]: 'missing.py:ARM': no such file"),
        ("bad.py:NOPE", "has no attribute 'NOPE'"),
        ("bad.py:NOT_AN_ARM", "is a int, not a moebench.arm.base.Arm"),
        ("bad.py:CLASH", "the name of a built-in arm"),
        ("bad.py:DECODE", "'d' is a decode arm but 'stock' is a prefill arm"),
        ("raises.py:ARM", "loading"),
        ("no_such_pkg.mod:ARM", "cannot import 'no_such_pkg.mod'"),
        ("nonsense", "unknown arm 'nonsense': not a built-in arm"),
        ("grouped-decod", "unknown arm 'grouped-decod': did you mean 'grouped_decode'?"),
        ("stock", "listed twice"),
        ("bad.py:1x", "is not a Python name"),
    ],
    ids=[
        "missing-file",
        "no-attribute",
        "not-an-arm",
        "builtin-clash",
        "other-family",
        "import-raises",
        "no-module",
        "unknown-name",
        "near-miss",
        "twice",
        "bad-attribute",
    ],  # fmt: skip
)
def test_a_bad_arm_reference_is_one_line_naming_the_field(tmp_path, ref, message):
    (tmp_path / "bad.py").write_text(BAD_ARM)
    (tmp_path / "raises.py").write_text("raise RuntimeError('broken at import')\n")
    path = scenario(tmp_path, ["stock", ref])
    line = one_line_error(run(path, tmp_path))
    assert "s.yaml: arms[1]: " in line and message in line, line
    assert not (tmp_path / "results").exists()
    line = one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert message in line


def test_an_import_string_finds_a_package_beside_the_scenario_and_an_entry_point(
    tmp_path, monkeypatch
):
    pkg = tmp_path / "myengine"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "moe.py").write_text(
        "from examples_torch import prepare\nfrom moebench.arm.base import Arm\n"
        "ARM = Arm(name='engine_moe', family='prefill', contract='whole_ffn', summary='s',"
        " prepare=prepare)\n"
    )
    shutil.copy(EXAMPLES / "torch_grouped.py", tmp_path / "examples_torch.py")
    arm = registry.resolve("myengine.moe:ARM", tmp_path)
    assert arm.name == "engine_moe" and arm.origin == "import" and arm.module == "myengine.moe"
    # An installed package registers the arm under the entry-point group moebench.arms.
    dist = tmp_path / "myengine-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myengine\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[moebench.arms]\nengine_moe = myengine.moe:ARM\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    arm = registry.resolve("engine_moe")
    assert arm.origin == "entry point" and arm.name == "engine_moe"
    assert "engine_moe" in registry.entry_points()


def _tree_copy(tmp: Path) -> Path:
    root = tmp / "tree"
    for name in ("moebench", "arms"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_pin_covers_every_file_the_arm_reaches_and_nothing_else(tmp_path):
    root = _tree_copy(tmp_path)

    def pin() -> str:
        c = closure_of("arms.prefill.prefix_sum_masked", roots=[root])
        return combined_hash(c, lambda p: str(p.relative_to(root)))

    base = pin()
    (root / "moebench" / "report" / "table.py").write_text(
        (root / "moebench" / "report" / "table.py").read_text() + "\n# a comment\n"
    )
    assert pin() == base  # a module no arm imports
    for rel in ("moebench/core/layout.py", "moebench/routing/synthetic.py"):  # local_counts
        f = root / rel
        f.write_text(f.read_text() + "\n# a comment\n")
        changed = pin()
        assert changed != base, rel
        base = changed
    c = closure_of("arms.prefill.prefix_sum_masked", roots=[root])
    files = {str(p.relative_to(root)) for p in c.files}
    assert {"moebench/core/layout.py", "moebench/kernels/act_quant.py"} <= files
    assert "moebench/api.py" not in files and "moebench/report/table.py" not in files


def test_a_pin_drift_names_the_file_that_changed(tmp_path):
    arm_file = tmp_path / "my_arm.py"
    shutil.copy(EXAMPLES / "torch_grouped.py", arm_file)
    path = scenario(tmp_path, ["stock", "my_arm.py:ARM"])
    assert runner.invoke(app, ["lock", str(path)]).exit_code == 0
    assert (tmp_path / "s.lock.json").is_file()
    assert runner.invoke(app, ["lock", str(path)]).exit_code == 0  # twice: one comment, one block
    text = path.read_text()
    assert text.count("# Written by `moebench lock`") == 1 and text.count("expect_sources:") == 1
    arm_file.write_text(arm_file.read_text() + "\n# changed\n")
    line = one_line_error(run(path, tmp_path))
    assert "arm 'torch_grouped': sources hash" in line and "my_arm.py changed" in line, line
    assert not (tmp_path / "results").exists()


TUNED_ARM = textwrap.dedent("""\
    import json
    from pathlib import Path

    from moebench.arm.base import Arm
    from torch_grouped import prepare as torch_prepare

    CONFIG = Path(__file__).parent / "configs" / "tuned.json"

    def prepare(p, y_TD):
        json.loads(CONFIG.read_text())  # the tiles a tuner chose, read as an engine reads them
        return torch_prepare(p, y_TD)

    ARM = Arm(name="tuned", family="prefill", contract="whole_ffn", summary="s",
              prepare=prepare, data_files=("configs/tuned.json",))
""")


def users_folder(folder: Path) -> Path:
    """A user's arm folder: the arm, a helper it imports, the config it reads, a scenario."""
    (folder / "configs").mkdir(parents=True)
    (folder / "my_arm.py").write_text(TUNED_ARM)
    shutil.copy(EXAMPLES / "torch_grouped.py", folder / "torch_grouped.py")
    (folder / "configs" / "tuned.json").write_text('{"block_m": 64}\n')
    return scenario(folder, ["stock", "my_arm.py:ARM"])


def test_an_identical_copy_of_a_users_arm_elsewhere_keeps_its_pin(tmp_path):
    path = users_folder(tmp_path / "mine")
    assert runner.invoke(app, ["lock", str(path)]).exit_code == 0
    lock = json.loads((tmp_path / "mine" / "s.lock.json").read_text())["arms"]["tuned"]
    assert set(lock["files"]) >= {"my_arm.py", "torch_grouped.py"}  # relative to its folder
    assert lock["data"] == {"configs/tuned.json": hashlib.sha256(b'{"block_m": 64}\n').hexdigest()}
    copy = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(tmp_path / "mine", copy)
    result = runner.invoke(app, ["validate", str(copy / "s.yaml")])
    assert result.exit_code == 0, result.output  # the same bytes: the same pin
    arms = runner.invoke(app, ["arms", "--scenario", str(copy / "s.yaml"), "--format", "json"])
    assert json.loads(arms.output)["tuned"]["hash"] in path.read_text()
    # One byte changed in the copy: drift, naming the file by its place in the arm's folder.
    (copy / "torch_grouped.py").write_text((copy / "torch_grouped.py").read_text() + "#")
    line = one_line_error(runner.invoke(app, ["validate", str(copy / "s.yaml")]))
    assert "arm 'tuned': sources hash" in line and ": torch_grouped.py changed" in line, line
    assert str(tmp_path) not in line


def test_a_data_file_an_arm_declares_is_pinned_and_a_change_is_named(tmp_path):
    path = users_folder(tmp_path)
    assert runner.invoke(app, ["lock", str(path)]).exit_code == 0
    config = tmp_path / "configs" / "tuned.json"
    config.write_text('{"block_m": 128}\n')
    line = one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert "arm 'tuned': sources hash" in line and "data file configs/tuned.json changed" in line
    assert one_line_error(run(path, tmp_path)) == line  # run refuses it with the same line
    config.unlink()
    line = one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert "arm 'tuned': data_files: 'configs/tuned.json' is not a file" in line, line
    with pytest.raises(ValueError, match="data_files must be a tuple of paths, got 'x.json'"):
        Arm(name="x", family="prefill", summary="s", build=lambda ws: (), data_files="x.json")


def test_run_arm_takes_an_arm_object_and_refuses_ids_out_of_range():
    import moebench

    arm = registry.resolve(example("torch_grouped.py"))
    assert isinstance(arm, Arm)
    T, K, E, D, F = 12, 2, 4, 128, 128
    x = make_tokens(tokens=T, hidden=D, seed=1, device=torch.device("cpu"))
    ids = torch.stack([torch.randperm(E)[:K] for _ in range(T)]).to(torch.int32)
    w = torch.softmax(torch.randn(T, K), dim=1)
    w13, w2 = make_weights(experts=range(E), hidden=D, intermediate=F, seed=1,
                           device=torch.device("cpu"))  # fmt: skip
    y = moebench.run_arm(arm, x, ids, w, w13, w2, precision="fp8", alignment=16)
    p = build_problem(x_TD=x, topk_ids_TK=ids, topk_weights_TK=w, w13_EFD=w13, w2_EDF=w2,
                      expert_offset=0, experts=E, alignment=16, capacity_rows=64,
                      precision="fp8", activation="silu")  # fmt: skip
    assert calc_diff(y.float(), reference_output(p)) < TOLERANCE["fp8"]
    bad = ids.clone()
    bad[3, 1] = 7
    with pytest.raises(ValueError, match="expert id 7; the experts are"):
        moebench.run_arm("stock", x, bad, w, w13, w2)


WHOLE_WITH_STAGES = textwrap.dedent("""\
    from moebench.arm.base import Arm, Prepared, Stage
    from torch_grouped import prepare as torch_prepare

    def prepare(p, y):
        run = torch_prepare(p, y)
        return Prepared(run=run, stages=(Stage(name=STAGE, run=run),))

    ARM = Arm(name="with_stages", family="prefill", contract="whole_ffn", summary="s",
              prepare=prepare)
""")


@pytest.mark.slow  # a whole CLI run under the interpreter: 13-23 s on two cores
def test_named_sub_stages_feed_the_kernel_regime_and_a_wrong_name_is_an_error_row(tmp_path):
    shutil.copy(EXAMPLES / "torch_grouped.py", tmp_path / "torch_grouped.py")
    (tmp_path / "good.py").write_text(WHOLE_WITH_STAGES.replace("STAGE", '"act"'))
    path = scenario(tmp_path, ["stock", "good.py:ARM"])
    result = run(path, tmp_path)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    stages = {
        s["stage"] for s in load_run(run_dir).samples.to_pylist() if s["arm"] == "with_stages"
    }
    assert stages == {"ffn", "act"}
    # validate counts its ffn samples; the run adds the act samples its prepare named
    cell, _ = validated_samples(path)
    written = load_run(run_dir).samples.num_rows
    assert cell == f"{written - 2 * 2 * 1}+", (cell, written)  # ranks x blocks x iterations
    (tmp_path / "bad.py").write_text(WHOLE_WITH_STAGES.replace("STAGE", '"fused"'))
    path = scenario(tmp_path, ["stock", "bad.py:ARM"])
    shutil.rmtree(tmp_path / "results")
    assert run(path, tmp_path).exit_code == 1
    (run_dir,) = (tmp_path / "results").iterdir()
    rows = [c for c in load_run(run_dir).checks.to_pylist() if c["arm"] == "with_stages"]
    assert rows and all(c["status"] == "error" and "is not a prefill stage" in c["detail"]
                        for c in rows)  # fmt: skip


def test_an_isolated_child_resolves_the_same_file_arm(tmp_path):
    path = scenario(tmp_path, ["stock", example("torch_grouped.py")])
    result = run(path, tmp_path, "--isolate")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    arms = {s["arm"] for s in load_run(run_dir).samples.to_pylist()}
    assert arms == {"stock", "torch_grouped"}
