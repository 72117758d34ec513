"""What a whole-FFN arm is given and what it must hand back (issue 25, item 5): the global expert
count in its problem on every rank and family, a one-line error naming the arm when its callable
returns a tensor that is not its output, and a failing ``prepare`` recorded under gate
``prepare``, charged to that arm alone."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from cli_support import TINY, runner, write

from moebench.arm import assemble
from moebench.arm.base import Arm
from moebench.cli.app import app
from moebench.gates.families import FAMILIES
from moebench.plan.cases import plan
from moebench.plan.inputs import build_decode_problem, build_problem, make_tokens, make_weights
from moebench.results.reader import load_run
from moebench.spec.load import parse_scenario
from moebench.spec.schema import global_tokens

CPU = torch.device("cpu")
T, K, E, D, F = 6, 2, 4, 128, 128


def prefill_problem(precision: str = "bf16"):
    g = torch.Generator().manual_seed(5)
    ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).to(torch.int32)
    w13, w2 = make_weights(experts=range(E), hidden=D, intermediate=F, seed=5, device=CPU)
    return build_problem(
        x_TD=make_tokens(tokens=T, hidden=D, seed=5, device=CPU), topk_ids_TK=ids,
        topk_weights_TK=torch.softmax(torch.randn(T, K, generator=g), 1), w13_EFD=w13, w2_EDF=w2,
        expert_offset=0, experts=E, alignment=16, capacity_rows=128, precision=precision,
        activation="silu",
    )  # fmt: skip


def whole(name: str, make_run) -> Arm:
    return Arm(name=name, family="prefill", contract="whole_ffn", summary="s",
               prepare=lambda p, y: make_run(p, y))  # fmt: skip


# --------------------------------------------------------------------------- the output

WRONG_OUTPUTS = [
    # (arm, precision, what its callable returns, what the line says it returned)
    ("wide", "bf16", lambda p, y: torch.zeros(T, 2 * D, dtype=torch.bfloat16), "bf16 [6, 256]"),
    ("narrow", "bf16", lambda p, y: torch.zeros(T - 1, D, dtype=torch.bfloat16), "bf16 [5, 128]"),
    ("float32", "bf16", lambda p, y: torch.zeros(T, D), "float32 [6, 128]"),  # right shape
    ("its_tokens", "fp8", lambda p, y: p.x_TD, "float8_e4m3fn [6, 128]"),  # writes nothing
    ("its_routing", "bf16", lambda p, y: p.topk_ids_TK, "int32 [6, 2]"),  # writes nothing
]


@pytest.mark.parametrize("name, precision, returns, said", WRONG_OUTPUTS,
                         ids=[w[0] for w in WRONG_OUTPUTS])  # fmt: skip
def test_a_returned_tensor_that_is_not_the_output_is_one_line_naming_the_arm(
    name, precision, returns, said
):
    p = prefill_problem(precision)
    arm = whole(name, lambda p, y: lambda: returns(p, y))
    ws = assemble.WholeFfnWorkspace(p)
    (ffn,) = assemble.build(arm, ws)
    with pytest.raises(ValueError) as raised:
        ffn.run()
    assert str(raised.value) == (
        f"arm {name!r}: its callable returned {said}; the output is bf16 [T, D] = [6, 128] "
        "(write y_TD, or return a tensor of that shape and dtype)"
    )


def test_a_returned_output_of_the_right_shape_and_dtype_is_copied():
    p = prefill_problem()
    out = torch.randn(T, D).to(torch.bfloat16)
    ws = assemble.WholeFfnWorkspace(p)
    (ffn,) = assemble.build(whole("returns", lambda p, y: lambda: out), ws)
    ws.poison()
    ffn.run()
    assert torch.equal(ws.y_TD, out)


def test_a_sub_stage_named_twice_is_refused():
    from moebench.arm.base import Prepared, Stage

    def prepare(p, y):
        st = Stage(name="act", run=lambda: None)
        return Prepared(run=lambda: None, stages=(st, st))

    with pytest.raises(ValueError, match="arm 'twice': sub-stage 'act' is named twice"):
        assemble.build(whole("twice", prepare), assemble.WholeFfnWorkspace(prefill_problem()))


# --------------------------------------------------------------------------- the global experts


@pytest.mark.parametrize(
    "family, arms, precision",
    [("prefill", "[stock]", "bf16"), ("decode", "[dense_decode, sparse_decode]", "w8a16")],
)
def test_every_ranks_problem_carries_the_models_global_expert_count(family, arms, precision):
    text = TINY.replace("experts: 4", "experts: 8").replace(
        "topology: {ep: 2}", "topology: {ep: 4}"
    )
    text = text.replace("precision: fp8", f"precision: {precision}\narms: {arms}")
    text = text.replace("regimes: [ffn, kernel], stages: [act]", "regimes: [ffn]")
    s = parse_scenario(text)
    (p,) = plan(s)
    x = make_tokens(tokens=global_tokens(s), hidden=128, seed=3, device=CPU)
    for rank in range(4):
        problem = FAMILIES[family].problem(s, p.routing, p.capacity_rows, x, rank, CPU)
        assert (problem.experts, problem.expert_offset, problem.local_experts) == (8, 2 * rank, 2)


def test_a_global_count_that_cannot_hold_the_ranks_experts_is_refused():
    w13, w2 = make_weights(experts=range(4, 8), hidden=D, intermediate=F, seed=1, device=CPU)
    ids = torch.zeros(T, K, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"must hold this rank's experts \[4, 8\); got 4"):
        build_problem(x_TD=torch.randn(T, D), topk_ids_TK=ids, topk_weights_TK=torch.ones(T, K),
                      w13_EFD=w13, w2_EDF=w2, expert_offset=4, experts=4, alignment=16,
                      capacity_rows=128, precision="bf16", activation="silu")  # fmt: skip
    b13, b2 = torch.zeros(4, 2 * F), torch.zeros(4, D)
    with pytest.raises(ValueError, match=r"\[4, 8\); got 7"):
        build_decode_problem(x_TD=torch.randn(T, D), topk_ids_TK=ids,
                             topk_weights_TK=torch.ones(T, K), w13_E2FD=w13, b13_E2F=b13,
                             w2_EDF=w2, b2_ED=b2, expert_offset=4, experts=7, precision="w8a16",
                             activation="silu")  # fmt: skip


# --------------------------------------------------------------------------- through a run

USERS_ARMS = textwrap.dedent("""\
    import torch
    from moebench.arm.base import Arm
    from moebench.plan.inputs import reference_output

    def counts_experts(p, y_TD):
        # vLLM's expert map needs the global count: [E] of [experts], this rank's from its offset
        expert_map = torch.full((p.experts,), -1, dtype=torch.int32)
        expert_map[p.expert_offset : p.expert_offset + p.local_experts] = torch.arange(
            p.local_experts, dtype=torch.int32)
        if p.experts != 4:
            raise ValueError(f"told {p.experts} experts")

        def run():
            y_TD.copy_(reference_output(p).to(torch.bfloat16))

        return run

    def no_engine(p, y_TD):
        raise RuntimeError("the engine is not installed here")

    def wide(p, y_TD):
        return lambda: torch.zeros(y_TD.shape[0], 2 * y_TD.shape[1], dtype=torch.bfloat16)

    MAPPED = Arm(name="mapped", family="prefill", contract="whole_ffn", summary="s",
                 prepare=counts_experts)
    NO_ENGINE = Arm(name="no_engine", family="prefill", contract="whole_ffn", summary="s",
                    prepare=no_engine)
    WIDE = Arm(name="wide", family="prefill", contract="whole_ffn", summary="s", prepare=wide)
""")


@pytest.fixture(scope="module")
def users_run(tmp_path_factory) -> tuple[dict, dict]:
    """One two-rank run of stock beside three whole-FFN arms: one that builds an expert map from
    the global count, one whose prepare raises, one that returns a tensor twice too wide."""
    tmp = tmp_path_factory.mktemp("whole")
    (tmp / "users.py").write_text(USERS_ARMS)
    text = TINY.replace("precision: fp8", "precision: bf16").replace("regimes: [ffn, kernel]",
                                                                   "regimes: [ffn]")  # fmt: skip
    arms = ["stock", "users.py:MAPPED", "users.py:NO_ENGINE", "users.py:WIDE"]
    scenario = write(tmp, text + f"arms: {json.dumps(arms)}\n")
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp / "r")])
    assert result.exit_code == 1, result.output  # two arms fail
    (run_dir,) = (tmp / "r").iterdir()
    r = load_run(Path(run_dir))
    checks = {(c["arm"], c["rank"], c["gate"]): c for c in r.checks.to_pylist()}
    timed = {s["arm"] for s in r.samples.to_pylist()}
    return checks, {"timed": timed}


def test_a_whole_ffn_arm_is_told_the_global_expert_count_on_every_rank(users_run):
    checks, run = users_run
    for rank in (0, 1):
        assert checks[("mapped", rank, "reference")]["status"] == "pass"
    assert "mapped" in run["timed"]


def test_a_failing_prepare_is_its_prepare_error_and_blames_no_other_arm(users_run):
    checks, run = users_run
    for rank in (0, 1):
        row = checks[("no_engine", rank, "prepare")]
        assert row["status"] == "error", row
        assert "RuntimeError: the engine is not installed here" in row["detail"], row
        assert ("no_engine", rank, "run") not in checks
        for arm in ("stock", "mapped"):
            assert checks[(arm, rank, "reference")]["status"] == "pass", (arm, rank)
    assert "no_engine" not in run["timed"] and {"stock", "mapped"} <= run["timed"]


def test_a_wrong_output_in_a_run_is_one_line_naming_the_arm(users_run):
    checks, run = users_run
    for rank in (0, 1):
        row = checks[("wide", rank, "run")]
        assert row["status"] == "error", row
        assert "arm 'wide': its callable returned bf16 [8, 256]; the output is bf16 [T, D] = " \
               "[8, 128]" in row["detail"], row  # fmt: skip
        assert "\n" not in row["detail"]
    assert "wide" not in run["timed"]
