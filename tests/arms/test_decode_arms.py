"""The two decode arms end to end on one rank: against the reference, NaN garbage in non-local
slots (skipped, never multiplied by zero), what non-local programs leave untouched, and the work
model's byte counts."""

from __future__ import annotations

import pytest
import torch

from arms.decode import pipeline
from arms.prefill import pipeline as prefill_pipeline
from moebench.arm import decode, registry
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates import checks
from moebench.plan import inputs

ARMS = {name: registry.resolve(name) for name in registry.builtin_names()}

T, K, E_ALL, D, F = 5, 2, 8, 64, 32
E = 4  # local experts: this is rank 1 of two, global experts [4, 8)


def problem(precision: str, activation: str, ids: torch.Tensor, weights: torch.Tensor, **over):
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(E, 2 * E), hidden=D, intermediate=F, seed=3, device=torch.device("cpu")
    )
    kw = dict(w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2, b2_ED=b2) | over
    x = inputs.make_tokens(tokens=ids.shape[0], hidden=D, seed=3, device=torch.device("cpu"))
    return inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=ids, topk_weights_TK=weights, expert_offset=E, experts=E_ALL,
        precision=precision, activation=activation, **kw,
    )  # fmt: skip


def run(arm: str, p: decode.Problem) -> decode.Workspace:
    ws = decode.Workspace(p, layout=ARMS[arm].layout)
    ws.poison()
    for stage in ARMS[arm].build(ws):
        stage.run()
    return ws


def routing(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(E_ALL, generator=g)[:K] for _ in range(T)]).int()
    return ids, torch.softmax(torch.randn(T, K, generator=g), dim=1)


# (precision, activation); each names its edge.
CASES = [
    pytest.param("w8a16", "swiglu_oai", id="fp8-gpt-oss-activation"),
    pytest.param("w4a16", "silu", id="mxfp4-silu"),
]


@pytest.mark.parametrize(("precision", "activation"), CASES)
def test_both_arms_match_the_reference_and_each_other(precision, activation):
    ids, wts = routing(1)
    p = problem(precision, activation, ids, wts)
    want = inputs.decode_reference_output(p)
    out = {}
    for arm in ("dense_decode", "sparse_decode"):
        ws = run(arm, p)
        err = calc_diff(ws.y_TD.float(), want)
        assert err <= TOLERANCE[precision] / 10, (arm, err)
        assert all(c.status in ("pass", "skip") for c in checks.check_decode_sentinels(ws)), arm
        out[arm] = checks.DecodeCapture(y_TD=ws.y_TD.clone())
    (cross,) = checks.check_cross_arm_close("dense_decode", out, precision)["sparse_decode"]
    assert cross.status == "pass", cross.detail


@pytest.mark.parametrize("arm", ["dense_decode", "sparse_decode"])
def test_nan_garbage_in_non_local_slots_never_reaches_the_output(arm):
    """Slots routed to the other rank carry NaN router weights and ids outside this rank; the
    output is finite and bitwise the output with harmless values in those slots."""
    ids, wts = routing(2)
    remote = (ids < E) | (ids >= 2 * E)
    assert remote.any() and (~remote).any()
    garbage = problem("w8a16", "swiglu_oai", ids, torch.where(remote, float("nan"), wts))
    clean = problem("w8a16", "swiglu_oai", ids, torch.where(remote, 0.25, wts))
    y_garbage, y_clean = run(arm, garbage).y_TD, run(arm, clean).y_TD
    assert torch.isfinite(y_garbage.float()).all()
    assert torch.equal(y_garbage.view(torch.int16), y_clean.view(torch.int16))


def test_dense_skips_local_experts_no_token_chose():
    """The dense arm computes every (expert, token); a local expert that no token picked holds NaN
    weights and biases, and its NaN products stay out of the sum (skipped, not times zero)."""
    ids, wts = routing(3)
    unused = sorted(set(range(E, 2 * E)) - set(ids.flatten().tolist()))
    if not unused:  # make one local expert unused: move its slots to another rank
        ids = torch.where(ids == E, torch.tensor(0, dtype=torch.int32), ids)
        unused = [E]
    j = unused[0] - E
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(E, 2 * E), hidden=D, intermediate=F, seed=3, device=torch.device("cpu")
    )
    w13[j], b13[j], w2[j], b2[j] = (float("nan"),) * 4
    poisoned = problem("w8a16", "swiglu_oai", ids, wts, w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2,
                       b2_ED=b2)  # fmt: skip
    clean = problem("w8a16", "swiglu_oai", ids, wts)
    ws = run("dense_decode", poisoned)
    assert torch.isnan(ws.o[j].float()).all()  # the dense pass did compute the NaN expert
    assert torch.isfinite(ws.y_TD.float()).all()
    # Only expert j differs between the two problems, so the outputs agree bit for bit.
    assert torch.equal(ws.y_TD.view(torch.int16), run("dense_decode", clean).y_TD.view(torch.int16))


def test_sparse_programs_of_non_local_slots_write_nothing():
    ids, wts = routing(4)
    ws = run("sparse_decode", problem("w4a16", "swiglu_oai", ids, wts))
    local = ws.written_rows()
    assert torch.isnan(ws.a[~local].float()).all() and torch.isnan(ws.o[~local].float()).all()
    assert torch.isfinite(ws.a[local].float()).all() and torch.isfinite(ws.o[local].float()).all()
    (live, nonlocal_) = checks.check_decode_sentinels(ws)
    assert (live.status, nonlocal_.status) == ("pass", "pass")
    ws.a[~local] = 0.0  # what a program that multiplied instead of leaving would leave
    assert checks.check_decode_sentinels(ws)[1].status == "fail"


def test_weight_bytes_count_the_experts_each_arm_reads():
    ids = torch.tensor([[4, 0], [5, 4], [1, 2], [4, 5], [7, 3]], dtype=torch.int32)
    for precision in ("w8a16", "w4a16"):
        p = problem(precision, "swiglu_oai", ids, torch.ones(T, K))
        fc1 = 2 * F * D * (1 if precision == "w8a16" else 0.5) + 2 * F * 2  # values + bias
        fc1 += 4 if precision == "w8a16" else 2 * F * D // 32  # one fp32 scale, or e8m0 bytes
        fc2 = D * F * (1 if precision == "w8a16" else 0.5) + D * 2
        fc2 += 4 if precision == "w8a16" else D * F // 32
        dense = pipeline.weight_bytes(p, layout="ETD")
        sparse = pipeline.weight_bytes(p, layout="TKD")
        assert dense == {"fc1": 4 * fc1, "fc2": 4 * fc2, "combine": 0, "ffn": 4 * (fc1 + fc2)}
        # experts 4, 5 and 7 are hit (4 three times): each counted once
        assert sparse == {"fc1": 3 * fc1, "fc2": 3 * fc2, "combine": 0, "ffn": 3 * (fc1 + fc2)}


def test_prefill_weight_bytes_follow_the_blocks_each_mode_visits():
    """psum reads the experts with live rows; stock every expert owning a block: those and E-1,
    which owns the capacity tail (an empty expert owns no block)."""
    E4, A = 4, 16
    ids = torch.tensor([[0, 2], [2, 0], [0, 2]], dtype=torch.int32)  # experts 1 and 3 empty
    w13 = torch.randn(E4, 256, 128)
    w2 = torch.randn(E4, 128, 128)
    p = inputs.build_problem(
        x_TD=torch.randn(3, 128), topk_ids_TK=ids, topk_weights_TK=torch.ones(3, 2),
        w13_EFD=w13, w2_EDF=w2, expert_offset=0, experts=E4, alignment=A, capacity_rows=128,
        precision="fp8", activation="silu",
    )  # fmt: skip
    per1, per2 = 256 * 128 + 2 * 1 * 4, 128 * 128 + 1 * 1 * 4  # FP8 values + 128x128 scales
    psum = prefill_pipeline.weight_bytes(p, gemm_mode="psum")
    stock = prefill_pipeline.weight_bytes(p, gemm_mode="all")
    assert (psum["fc1"], psum["fc2"], psum["act"]) == (2 * per1, 2 * per2, 0)
    assert (stock["fc1"], stock["ffn"]) == (3 * per1, 3 * (per1 + per2))


def test_every_registered_arm_names_itself_and_a_known_family():
    from moebench.core.vocabulary import FAMILIES

    for name, arm in ARMS.items():
        assert arm.name == name and arm.family in FAMILIES and arm.origin == "builtin"
    for name in ("dense_decode", "sparse_decode"):
        assert ARMS[name].layout in decode.LAYOUTS


def test_sparse_mxfp4_reads_rotated_weights_and_quads_with_the_natural_bits(monkeypatch):
    """The sparse arm's MXFP4 GEMV reads the copy of the weights in `mx_rotated`'s layout that
    `pipeline.rotated_weights` makes (one a tensor, shared) and the token's words as quads
    (`sparse_launch.MXFP4_ROTATED`, `default_token_load`): the natural layout's GEMV's bits."""
    from moebench.kernels.sparse_gemv import sparse_gemv

    ids, wts = routing(4)
    p = problem("w4a16", "swiglu_oai", ids, wts)
    seen = []

    def recording(x, ids_, w, *args, **kwargs):
        seen.append((w, kwargs.get("mx_rotated"), kwargs.get("token_load")))
        sparse_gemv(x, ids_, w, *args, **kwargs)

    monkeypatch.setattr(pipeline, "sparse_gemv", recording)
    got = run("sparse_decode", p)
    rot13, rot2 = pipeline.rotated_weights(p.w13), pipeline.rotated_weights(p.w2)
    assert [(w is r, m, t) for (w, m, t), r in zip(seen, (rot13, rot2), strict=True)] == [
        (True, True, "quads"), (True, True, "quads")
    ]  # fmt: skip
    monkeypatch.setattr(pipeline, "MXFP4_ROTATED", False)
    monkeypatch.setattr(pipeline, "default_token_load", lambda fmt, tokens: "broadcast")
    natural = run("sparse_decode", p)
    assert seen[-2][0] is p.w13 and seen[-1][0] is p.w2
    assert torch.equal(got.y_TD.view(torch.int16), natural.y_TD.view(torch.int16))


@pytest.mark.parametrize(("tokens", "load"), [(1, "broadcast"), (2, "quads")])
def test_sparse_fp8_loads_the_token_as_quads_from_two_tokens(monkeypatch, tokens, load):
    """FP8's sparse GEMV loads the token's values as 16-byte quads from
    `sparse_launch.FP8_QUADS_FROM_TOKENS` tokens (the row-broadcast tile below): the same bits."""
    ids, wts = routing(5)
    ids, wts = ids[:tokens].contiguous(), wts[:tokens].contiguous()
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(E, 2 * E), hidden=D, intermediate=F, seed=3, device=torch.device("cpu")
    )
    x = inputs.make_tokens(tokens=tokens, hidden=D, seed=3, device=torch.device("cpu"))
    p = inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=ids, topk_weights_TK=wts, w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2,
        b2_ED=b2, expert_offset=E, experts=E_ALL, precision="w8a16", activation="swiglu_oai",
    )  # fmt: skip
    seen = []
    real = pipeline.sparse_gemv
    recording = lambda *a, **k: (seen.append(k.get("token_load")), real(*a, **k))  # noqa: E731
    monkeypatch.setattr(pipeline, "sparse_gemv", recording)
    got = run("sparse_decode", p)
    assert seen == [load, load]
    monkeypatch.setattr(pipeline, "default_token_load", lambda fmt, tokens: "broadcast")
    want = run("sparse_decode", p)
    assert torch.equal(got.y_TD.view(torch.int16), want.y_TD.view(torch.int16))


@pytest.mark.parametrize(
    ("arm", "precision", "tokens", "want"),
    [
        pytest.param("sparse_decode", "w8a16", 1, (True, "local"), id="sparse-fp8-one-token"),
        pytest.param("sparse_decode", "w8a16", 4, (True, "local"), id="sparse-fp8-four-tokens"),
        pytest.param("sparse_decode", "w8a16", 5, (False, "start"), id="sparse-fp8-five-tokens"),
        pytest.param("sparse_decode", "w4a16", 1, (True, "start"), id="sparse-mxfp4-one-token"),
        pytest.param("sparse_decode", "w4a16", 3, (True, "start"), id="sparse-mxfp4-three-tokens"),
        pytest.param("dense_decode", "w8a16", 1, (False, None), id="dense-fp8-one-token"),
        pytest.param("dense_decode", "w4a16", 1, (True, None), id="dense-mxfp4-one-token"),
    ],
)
def test_each_step_kernel_gets_the_dependent_launch_its_format_and_count_take(
    monkeypatch, arm, precision, tokens, want
):
    """`sparse_launch.default_pdl`: FP8's sparse GEMVs and combine are dependent launches up to 4
    tokens, each GEMV program letting the next kernel launch once its slot is local; MXFP4's
    at every count, from each program's start; the dense arm's combine as MXFP4's sparse one, its
    batched GEMMs never. The outputs are the plain launches' bits."""
    ids, wts = routing(6)
    p = problem(precision, "swiglu_oai", ids[:tokens].contiguous(), wts[:tokens].contiguous())
    seen = []
    gemv, combine = pipeline.sparse_gemv, pipeline.combine_topk
    monkeypatch.setattr(pipeline, "sparse_gemv", lambda *a, **k: (
        seen.append(("gemv", k["pdl"], k["pdl_trigger"])), gemv(*a, **k)))  # fmt: skip
    monkeypatch.setattr(pipeline, "combine_topk", lambda *a, **k: (
        seen.append(("combine", k["pdl"], None)), combine(*a, **k)))  # fmt: skip
    got = run(arm, p)
    gemvs = [("gemv", *want)] * 2 if arm == "sparse_decode" else []
    assert seen == [*gemvs, ("combine", want[0], None)]
    ws = decode.Workspace(p, layout=ARMS[arm].layout)
    ws.poison()
    for stage in pipeline.build_stages(ws, pdl=False, pdl_trigger="start"):
        stage.run()
    assert torch.equal(got.y_TD.view(torch.int16), ws.y_TD.view(torch.int16))
