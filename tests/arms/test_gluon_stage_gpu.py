"""The grouped decode arm's stages on the Gluon tile (``Launch.gluon``), MXFP4 and FP8, on the
GPU: the step against the reference and the Triton tile's step within the precision's tolerance,
the rows it must not write left poisoned, the Gluon kernel launched for both stages and the pass
table written once a step, fc2 waiting for fc1 expert by expert or for the whole of it with the
same bits. Skipped without a GPU or under the Triton interpreter (the CPU suite: Gluon has no
interpreter)."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from arms.decode import grouped_decode
from moebench.arm import decode
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates import checks
from moebench.kernels.grouped_launch import gluon_launch
from moebench.plan import inputs

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
    reason="the Gluon tile runs on a GPU only (TRITON_INTERPRET unset or 0)",
)

K, E_ALL, E, D, F = 4, 16, 8, 512, 512  # rank 1 of two: global experts [8, 16)


# precision: (the format, the default's switch, the arm's name of the tile's launcher)
GLUON = {"w4a16": ("mxfp4", "MX_GLUON", "grouped_gluon_mxfp4"),
         "w8a16": ("fp8", "FP8_GLUON", "grouped_gluon_fp8")}  # fmt: skip


def _problem(tokens: int, seed: int, activation: str, precision: str) -> decode.Problem:
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(E_ALL, generator=g)[:K] for _ in range(tokens)]).int()
    wts = torch.softmax(torch.randn(tokens, K, generator=g), dim=1)
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(E, 2 * E), hidden=D, intermediate=F, seed=seed, device=dev
    )
    x = inputs.make_tokens(tokens=tokens, hidden=D, seed=seed, device=dev)
    return inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=ids.to(dev), topk_weights_TK=wts.to(dev), w13_E2FD=w13, b13_E2F=b13,
        w2_EDF=w2, b2_ED=b2, expert_offset=E, experts=E_ALL, precision=precision,
        activation=activation,
    )  # fmt: skip


def _step(p: decode.Problem, fc1, fc2) -> decode.Workspace:
    ws = decode.Workspace(p, layout="TKD")
    ws.poison()
    for stage in grouped_decode.build_stages(ws, fc1=fc1, fc2=fc2):
        stage.run()
    torch.cuda.synchronize()
    return ws


@pytest.mark.parametrize("precision", ["w4a16", "w8a16"])
@pytest.mark.parametrize("activation", ["swiglu_oai", "silu"])
@pytest.mark.parametrize("tokens", [16, 64])
def test_gluon_stages_match_the_reference_and_the_triton_tile(
    monkeypatch, tokens, activation, precision
):
    from moebench.kernels import grouped_launch

    fmt, switch, launcher = GLUON[precision]
    p = _problem(tokens, seed=tokens, activation=activation, precision=precision)
    monkeypatch.setattr(grouped_launch, switch, False)
    fc1, fc2 = grouped_decode.launches(p)  # the Triton tile's
    assert fc1.pass_grid and fc2.pass_grid and not fc1.gluon
    assert (fc1.expert_ready, fc2.expert_ready) == ("signal", "wait")
    g1, g2 = gluon_launch(fc1, fmt), gluon_launch(fc2, fmt)  # fc2 waiting expert by expert
    monkeypatch.setattr(grouped_launch, switch, True)
    assert grouped_decode.launches(p) == (g1, g2)  # the arm's default with the switch on
    calls = {"tile": 0, "table": 0}
    tile, table = getattr(grouped_decode, launcher), grouped_decode.pass_table

    def counted(name, fn):
        def run(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)

        return run

    monkeypatch.setattr(grouped_decode, launcher, counted("tile", tile))
    monkeypatch.setattr(grouped_decode, "pass_table", counted("table", table))
    want = inputs.decode_reference_output(p)
    gluon = _step(p, g1, g2)
    assert calls == {"tile": 2, "table": 1}
    calls.update(tile=0, table=0)
    triton_ws = _step(p, fc1, fc2)
    tol = TOLERANCE[precision]
    assert calc_diff(gluon.y_TD.float(), want) <= tol / 10
    assert calc_diff(gluon.y_TD.float(), triton_ws.y_TD.float()) <= tol / 10
    # fc2 waiting for the whole of fc1 instead: the same bits.
    whole = _step(p, *(dataclasses.replace(f, expert_ready="") for f in (g1, g2)))
    assert torch.equal(whole.y_TD.view(torch.int16), gluon.y_TD.view(torch.int16))
    live, nonlocal_ = checks.check_decode_sentinels(gluon)
    assert (live.status, nonlocal_.status) == ("pass", "pass"), (live, nonlocal_)
