"""A family is its records (docs/DESIGN.md, "Adding a family"): the facts every layer below the
gates asks (``core.families``), the gates' record (``gates.families``), and its arms.

Three things are held here: every family has both records and they agree; no module of moebench
outside the records names a family (a module that must is listed with its reason); and a toy
family, added by its two records alone, runs end to end through ``moebench run`` and
``moebench compare`` with an arm of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from cli_support import REPO, runner, write

from moebench.cli.app import app
from moebench.core import families as core_families
from moebench.core.families import FACTS, FamilyFacts
from moebench.core.vocabulary import Family
from moebench.gates import families as gate_families
from moebench.gates.families import FAMILIES, FamilyRecord
from moebench.results.reader import load_run

# The modules that hold the records, and the words themselves.
RECORDS = {"moebench/core/families.py", "moebench/gates/families.py", "moebench/core/vocabulary.py"}
# Modules that must name a family, and why.
ALLOWED = {
    # run_arm's signature is the prefill problem's tensors (w13_EFD, w2_EDF): it refuses another
    # family's arm by name and says how to run one.
    "moebench/api.py",
    # the transformers bridge maps transformers' experts families (their parameter layouts) onto
    # moebench's: a gpt-oss layout is moebench's decode problem, the others its prefill problem.
    "moebench/integrations/transformers/families.py",
    "moebench/integrations/transformers/register.py",
    "moebench/integrations/transformers/hf_arms.py",
    "moebench/cli/info.py",
}
NAMES = {f.value for f in Family}
NAME_ATTRS = {f.name for f in Family}


def test_every_family_has_both_records_and_they_agree():
    assert set(FACTS) == set(FAMILIES) == NAMES
    for name in NAMES:
        f = FACTS[name]
        assert f.name == name and FAMILIES[name].facts is f
        assert f.baseline in f.default_arms and f.precisions and f.stages
        assert FAMILIES[name].stages == f.stages


def _mentions(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in NAMES:
            out.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in NAME_ATTRS:
            out.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in NAME_ATTRS:
            out.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name in NAME_ATTRS:
            out.append(f"imports {node.name}")
    return out


def test_no_module_outside_the_records_names_a_family():
    found = {}
    for path in sorted((REPO / "moebench").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in RECORDS or rel in ALLOWED:
            continue
        hits = _mentions(path)
        if hits:
            found[rel] = hits
    assert not found, f"family named outside its records (ask core.families.facts): {found}"
    stale = [m for m in sorted(ALLOWED) if not _mentions(REPO / m)]
    assert not stale, f"allowed to name a family but does not (drop them from ALLOWED): {stale}"


def test_the_scan_sees_a_mention(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('if arm.family == "decode":\n    pass\nfrom x import PREFILL\n')
    assert set(_mentions(p)) == {"1: 'decode'", "imports PREFILL"}


# --------------------------------------------------------------------------- a toy family

TOY_ARM = '''
import torch

from moebench.arm.base import Arm
from moebench.core import reference


def prepare(p, y_TD):
    """The float32 reference itself, in bf16: the toy family's one arm."""

    def run():
        ref = reference.moe_ffn(
            p.x_TD, p.topk_ids_TK, p.topk_weights_TK, p.w13_EFD, p.w2_EDF,
            expert_offset=p.expert_offset, activation_kind=p.activation,
        )
        y_TD.copy_(ref.to(torch.bfloat16))

    return run


ARM = Arm(name="toy_torch", family="toy", summary="the toy family's reference arm",
          contract="whole_ffn", prepare=prepare, graph=False)
'''

TOY_SCENARIO = """\
name: toy
model: {id: test/toy, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
arms: [toy.py:ARM]
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1}
"""


def _unsupported(*_args):
    raise NotImplementedError("the toy family has whole-FFN arms only")


@pytest.fixture
def toy_family(monkeypatch):
    prefill = FAMILIES["prefill"]
    facts = FamilyFacts(
        name="toy", stages=("fc1", "fc2"), precisions=("bf16",), width=128,
        width_why="the toy arm's tile", baseline="toy_torch", default_arms=("toy_torch",),
        capacity_buffer=False,
        expert_bytes=lambda D, F, E, precision: 3 * D * F * E * 2,
        workspace_bytes=lambda T, K, D, F, E, M: T * D * 2,
        cpu_seconds=lambda D, F, E, M, S, layout: 0.01,
    )  # fmt: skip
    record = FamilyRecord(
        facts=facts, problem=prefill.problem, staged_workspace=_unsupported,
        reference=prefill.reference, staged_capture=_unsupported, staged_checks=_unsupported,
        cross_arm=_unsupported, weight_fields=prefill.weight_fields,
    )  # fmt: skip
    monkeypatch.setitem(core_families.FACTS, "toy", facts)
    monkeypatch.setitem(gate_families.FAMILIES, "toy", record)
    return record


def test_a_toy_family_runs_end_to_end_through_its_records_alone(tmp_path, toy_family):
    (tmp_path / "toy.py").write_text(TOY_ARM)
    scenario = write(tmp_path, TOY_SCENARIO)
    results = tmp_path / "r"
    ran = runner.invoke(app, ["run", str(scenario), "--results", str(results)])
    assert ran.exit_code == 0, ran.output
    (run_dir,) = results.iterdir()
    run = load_run(run_dir)
    checks = run.checks.to_pylist()
    assert {c["gate"] for c in checks} >= {"reference", "post_timing", "fresh_input"}
    assert all(c["status"] in ("pass", "skip") for c in checks), checks
    samples = run.samples.to_pylist()
    assert {(s["arm"], s["stage"], s["regime"]) for s in samples} == {("toy_torch", "ffn", "ffn")}
    assert {s["rank"] for s in samples} == {0, 1}
    compared = runner.invoke(app, ["compare", str(run_dir), "--format", "json"])
    assert compared.exit_code == 0, compared.output
    assert "toy_torch" in compared.output


def test_the_toy_familys_facts_reach_the_scenario(tmp_path, toy_family):
    (tmp_path / "toy.py").write_text(TOY_ARM)
    bad = write(tmp_path, TOY_SCENARIO + "precision: fp8\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "is not a precision of the toy arms" in result.output
    assert "they take bf16" in result.output


def test_an_unknown_family_is_refused_when_the_arm_is_defined():
    from moebench.arm.base import Arm

    with pytest.raises(ValueError, match="family must be one of prefill, decode"):
        Arm(name="x", family="nope", summary="", contract="whole_ffn", prepare=lambda p, y: None)
