"""tools/sparse_ab.py, the sparse decode step A/B that sessions time launch variants with on the
GPU, on the CPU: every kind's step is built, checked against the reference and compared bit for
bit with the arm's, and a kind that writes other bits is reported so (and would not be timed)."""

import functools

import pytest
from tool_modules import tiny_decode, tool

SCENARIO = tiny_decode(2, "dense_decode, sparse_decode")


@pytest.fixture(scope="module")
def sparse_ab():
    return tool("sparse_ab")


def test_kinds_are_checked_and_compared_with_the_arm(sparse_ab, tmp_path):
    from moebench.kernels.sparse_gemv import sparse_gemv

    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    args = sparse_ab.parser("2", "0", "w4a16", "").parse_args(
        ["--scenario", str(path), "--rank", "1"]
    )
    same = functools.partial(sparse_gemv, token_load="quads")

    def other_bits(x, ids, w, s, b, out, **kw):  # the bias of the wrong expert: other bits
        sparse_gemv(x, ids, w, s, b.roll(1, 0), out, **kw)

    builds = [("quads", functools.partial(sparse_ab.steps_with, gemv=same)),
              ("other", functools.partial(sparse_ab.steps_with, gemv=other_bits))]  # fmt: skip
    ((head, rows),) = sparse_ab.main(args, builds)
    assert head.startswith("w4a16 T=2 seed=0 rank=1")
    assert rows["arm"]["ok"] and rows["arm"]["bitwise"]
    assert rows["quads"]["ok"] and rows["quads"]["bitwise"]
    assert not rows["other"]["bitwise"]


def test_the_grouped_arm_is_compared_with_its_own_launches(sparse_ab, tmp_path):
    """``arm_name``: the A/B's baseline is the grouped arm's step, against its stages with other
    launches (here the MXFP4 launches reading rotated weights: the same bits)."""
    import dataclasses

    from arms.decode import grouped_decode

    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("sparse_decode]", "grouped_decode]"))
    args = sparse_ab.parser("2", "0", "w4a16", "").parse_args(
        ["--scenario", str(path), "--rank", "1"]
    )

    def rotated(ws):
        fc1, fc2 = (dataclasses.replace(f, mx_rotated=True)
                    for f in grouped_decode.launches(ws.problem))  # fmt: skip
        return grouped_decode.build_stages(ws, fc1=fc1, fc2=fc2)

    ((head, rows),) = sparse_ab.main(args, [("rot", rotated)], arm_name="grouped_decode")
    assert head.startswith("w4a16 T=2 seed=0 rank=1")
    assert rows["arm"]["ok"] and rows["rot"]["ok"] and rows["rot"]["bitwise"]


@pytest.mark.parametrize("precision", ["w8a16", "w4a16"])
@pytest.mark.parametrize("tokens", [1, 2])
def test_steps_with_calls_the_gemv_with_the_arms_arguments(
    sparse_ab, monkeypatch, precision, tokens
):
    """``steps_with``'s GEMV gets exactly the arm's calls: the same tensors (MXFP4's rotated
    weight copy, not the natural weights) and the same options (the rotated layout, the token
    load, the dependent launch), so a kind differs from the arm only by what its GEMV does. (Its
    own calls had drifted from the arm's defaults once: MXFP4's natural weights and the broadcast
    token load, timed as if they were the arm's.)"""
    from arms.decode import pipeline
    from moebench.arm import registry
    from moebench.arm.decode import Workspace
    from moebench.gates.families import family_of
    from moebench.plan.cases import plan
    from moebench.plan.inputs import make_tokens
    from moebench.spec.load import parse_scenario

    text = SCENARIO.replace("w4a16", precision).replace("tokens_per_rank: 2",
                                                         f"tokens_per_rank: {tokens}")  # fmt: skip
    (pl,) = plan(parse_scenario(text))
    cs = pl.case.scenario
    x = make_tokens(tokens=tokens, hidden=cs.model.hidden, seed=0, device="cpu")
    prob = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, x, 0, "cpu")

    def recorder(calls):
        def gemv(*args, **kw):
            calls.append(([(a.data_ptr(), tuple(a.shape)) for a in args], kw))

        return gemv

    ws = Workspace(prob, layout="TKD")
    arm_calls, kind_calls = [], []
    monkeypatch.setattr(pipeline, "sparse_gemv", recorder(arm_calls))  # the arm as registered
    for stage in registry.resolve("sparse_decode").build(ws):
        if stage.name != "combine":
            stage.run()
    monkeypatch.undo()
    for stage in sparse_ab.steps_with(ws, gemv=recorder(kind_calls)):
        if stage.name != "combine":
            stage.run()
    assert len(kind_calls) == 2 and kind_calls == arm_calls
    w13 = kind_calls[0][0][2]
    rotated = precision == "w4a16"
    assert (w13[0] != prob.w13.data_ptr()) == rotated
    assert kind_calls[0][1].get("mx_rotated", False) == rotated
    want_load = pipeline.default_token_load("mxfp4" if rotated else "fp8", tokens)
    assert kind_calls[0][1].get("token_load", "broadcast") == want_load
