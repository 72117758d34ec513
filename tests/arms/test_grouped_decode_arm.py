"""The grouped decode arm end to end on one rank, on both of its launches: against the reference
and the other two decode arms (the decode cross-arm gate), NaN garbage in non-local slots
(skipped, never multiplied by zero), what it leaves unwritten, and its weight bytes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from arms.decode import grouped_decode, pipeline
from moebench.arm import decode, registry
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.gates import checks
from moebench.kernels.fp8_placed import place_e4m3
from moebench.kernels.grouped_gemv import scale_words
from moebench.kernels.grouped_launch import default_launch
from moebench.kernels.mx_rotated import rotate_mxfp4
from moebench.kernels.tile_packed import pack_tiles
from moebench.plan import inputs

ARMS = {n: registry.resolve(n) for n in ("dense_decode", "sparse_decode", "grouped_decode")}

K, E_ALL, D, F = 2, 8, 64, 32
E = 4  # local experts: this is rank 1 of two, global experts [4, 8)


def problem(precision: str, activation: str, ids: torch.Tensor, weights: torch.Tensor,
            intermediate: int = F):  # fmt: skip
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(E, 2 * E), hidden=D, intermediate=intermediate, seed=3,
        device=torch.device("cpu"),
    )  # fmt: skip
    x = inputs.make_tokens(tokens=ids.shape[0], hidden=D, seed=3, device=torch.device("cpu"))
    return inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=ids, topk_weights_TK=weights, w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2,
        b2_ED=b2, expert_offset=E, experts=E_ALL, precision=precision, activation=activation,
    )  # fmt: skip


def run(arm: str, p: decode.Problem) -> decode.Workspace:
    ws = decode.Workspace(p, layout=ARMS[arm].layout)
    ws.poison()
    for stage in ARMS[arm].build(ws):
        stage.run()
    return ws


def step_bits(p: decode.Problem, fc1, fc2) -> torch.Tensor:
    """y of one grouped step on a poisoned workspace with launches ``fc1`` and ``fc2``, as bits."""
    ws = decode.Workspace(p, layout="TKD")
    ws.poison()
    for stage in grouped_decode.build_stages(ws, fc1=fc1, fc2=fc2):
        stage.run()
    return ws.y_TD.view(torch.int16)


def routing(tokens: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(E_ALL, generator=g)[:K] for _ in range(tokens)]).int()
    return ids, torch.softmax(torch.randn(tokens, K, generator=g), dim=1)


# (tokens, precision, activation, the launch the shapes pick); each names its edge.
CASES = [
    pytest.param(1, "w8a16", "swiglu_oai", "gemv", id="one-token-fp8-gpt-oss-gemv"),
    pytest.param(1, "w4a16", "silu", "gemv", id="one-token-mxfp4-silu-gemv"),
    pytest.param(3, "w8a16", "silu", "dot", id="prime-tokens-fp8-silu-tensor-cores"),
    pytest.param(6, "w4a16", "swiglu_oai", "dot", id="mxfp4-gpt-oss-tensor-cores"),
    # 4 and 8 slots an expert: the tile's one pass a program (grouped_launch.default_launch)
    pytest.param(8, "w4a16", "swiglu_oai", "dot-passes", id="mxfp4-one-pass-a-program"),
    pytest.param(16, "w8a16", "silu", "dot-passes", id="fp8-one-pass-a-program"),
]


@pytest.mark.parametrize(("tokens", "precision", "activation", "path"), CASES)
def test_grouped_matches_the_reference_and_the_other_arms(tokens, precision, activation, path):
    ids, wts = routing(tokens, tokens)
    p = problem(precision, activation, ids, wts)
    fmt = "fp8" if precision == "w8a16" else "mxfp4"
    launch = default_launch(fmt, tokens=tokens, top_k=K, experts=E, columns=2 * F)
    assert (launch.path, launch.pass_grid) == (path.split("-")[0], path.endswith("passes"))
    want = inputs.decode_reference_output(p)
    out = {}
    for arm in ARMS:
        ws = run(arm, p)
        err = calc_diff(ws.y_TD.float(), want)
        assert err <= TOLERANCE[precision] / 10, (arm, err)
        out[arm] = checks.DecodeCapture(y_TD=ws.y_TD.clone())
        if arm == "grouped_decode":
            live, nonlocal_ = checks.check_decode_sentinels(ws)
            assert (live.status, nonlocal_.status) == ("pass", "pass"), (live, nonlocal_)
    for base in ("dense_decode", "sparse_decode"):
        (cross,) = checks.check_cross_arm_close(base, out, precision)["grouped_decode"]
        assert cross.status == "pass", cross.detail


# Global ids (local: 4..7); each names the launch its shapes pick.
MIXED = [
    pytest.param([[5, 1]], id="gemv"),
    pytest.param([[5, 1], [0, 4], [7, 6], [2, 3], [4, 9], [6, 5]], id="tensor-cores"),
]


@pytest.mark.parametrize("ids", MIXED)
def test_nan_garbage_in_non_local_slots_never_reaches_the_output(ids):
    """Slots routed to the other rank carry NaN router weights; the output is finite and bitwise
    the output with harmless values in those slots, and their rows keep the poison."""
    ids = torch.tensor(ids, dtype=torch.int32)
    wts = torch.softmax(torch.randn(ids.shape, generator=torch.Generator().manual_seed(2)), 1)
    remote = (ids < E) | (ids >= 2 * E)
    garbage = run("grouped_decode", problem("w8a16", "swiglu_oai", ids,
                                            torch.where(remote, float("nan"), wts)))  # fmt: skip
    clean = run("grouped_decode", problem("w8a16", "swiglu_oai", ids,
                                          torch.where(remote, 0.25, wts)))  # fmt: skip
    assert torch.isfinite(garbage.y_TD.float()).all()
    assert torch.equal(garbage.y_TD.view(torch.int16), clean.y_TD.view(torch.int16))
    assert torch.isnan(garbage.a[remote].float()).all()
    assert torch.isnan(garbage.o[remote].float()).all()
    garbage.o[remote] = 0.0  # what a program that multiplied instead of skipping would leave
    assert checks.check_decode_sentinels(garbage)[1].status == "fail"


def test_a_token_with_no_local_slot_gets_zeros():
    """Tokens whose every slot is remote: y is zero for them (an empty sum), finite for all."""
    ids = torch.tensor([[0, 1], [4, 9], [2, 3]], dtype=torch.int32)
    ws = run("grouped_decode", problem("w4a16", "silu", ids, torch.ones(3, K)))
    assert torch.equal(ws.y_TD[[0, 2]].float(), torch.zeros(2, D))
    assert torch.isfinite(ws.y_TD.float()).all() and ws.y_TD[1].abs().sum() > 0


def test_weight_bytes_are_the_touched_experts_once():
    """Experts 4, 5 and 7 are hit (4 three times): each counted once, as the sparse arm's DRAM
    minimum; dense reads all four local experts."""
    ids = torch.tensor([[4, 0], [5, 4], [1, 2], [4, 5], [7, 3]], dtype=torch.int32)
    for precision in ("w8a16", "w4a16"):
        p = problem(precision, "swiglu_oai", ids, torch.ones(5, K))
        grouped = ARMS["grouped_decode"].weight_bytes(p)
        assert grouped == pipeline.weight_bytes(p, layout="TKD")
        per = pipeline.expert_bytes(p)
        assert grouped["ffn"] == 3 * (per["fc1"] + per["fc2"])
        assert grouped["ffn"] < ARMS["dense_decode"].weight_bytes(p)["ffn"]
        assert ARMS["grouped_decode"].work(p)["fc1"].rows == 6  # the local slots


def test_the_arm_declares_both_launches_to_the_dispatch_gate():
    arm = ARMS["grouped_decode"]
    assert arm.name == "grouped_decode" and arm.build is grouped_decode.build_stages
    assert arm.launches["w8a16"] == (
        "_grouped_gemv_fp8|_grouped_dot_fp8|_grouped_gluon_fp8",
        "_combine_topk",
    )
    assert arm.launches["w4a16"] == (
        "_grouped_gemv_mxfp4|_grouped_dot_mxfp4|_grouped_dot_mxfp4_stream|_grouped_gluon_mxfp4",
        "_combine_topk",
    )
    assert "_batched_gemm" in arm.forbidden and "_sparse_gemv_fp8" in arm.forbidden
    assert arm.layout == "TKD" and arm.family == "decode" and arm.origin == "builtin"


def padded_tile(tokens: int = 6) -> object:
    """The MXFP4 tile's default launch with its scales in padded rows (not packed) and their e8m0
    bytes as they are (not biased: `test_mxfp4_biased_scales_are_a_copy_made_once...`)."""
    tile = default_launch("mxfp4", tokens=tokens, top_k=K, experts=E, columns=2 * F)
    return dataclasses.replace(tile, mx_packed_scales=False, mx_biased_scales=False)


def packed_scales(s: torch.Tensor, launch) -> torch.Tensor:
    return pack_tiles(s.contiguous(), launch.block_n, launch.block_k // 32, ragged_last=True)


def test_mxfp4_tiles_read_scale_rows_padded_once_at_build():
    """The MXFP4 tile reads its scales as words, which needs rows on 4-byte boundaries: without
    ``mx_packed_scales`` the arm hands it a padded copy made when the stages are built (the
    problem's own rows, 2 bytes here, are not), holding the same scales; the GEMV and FP8 take the
    problem's tensors as they are."""
    ids, w = routing(6, seed=5)
    mx = problem("w4a16", "swiglu_oai", ids, w)
    tile = padded_tile()
    assert tile.path == "dot" and not scale_words(mx.w13_scale)
    padded, largest = grouped_decode.tiles_scales(mx.w13, mx.w13_scale, tile)
    assert scale_words(padded) and torch.equal(padded, mx.w13_scale)
    assert padded.data_ptr() != mx.w13_scale.data_ptr()
    assert largest == int(mx.w13_scale.max())
    gemv = default_launch("mxfp4", tokens=1, top_k=K, experts=E, columns=2 * F)
    assert gemv.path == "gemv"
    assert grouped_decode.tiles_scales(mx.w13, mx.w13_scale, gemv) == (mx.w13_scale, None)
    fp8 = problem("w8a16", "swiglu_oai", ids, w)
    assert grouped_decode.tiles_scales(fp8.w13, fp8.w13_scale, tile) == (fp8.w13_scale, None)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_builds_over_the_same_scales_share_one_copy_until_they_change(packed):
    """Every build over the same MXFP4 scales (the model regime builds each layer once a token
    count) reads one padded (or packed, the default) copy; scales written since the copy was made
    get a new one, and a new largest byte."""
    ids, w = routing(6, seed=6)
    mx = problem("w4a16", "swiglu_oai", ids, w)
    tile = dataclasses.replace(padded_tile(), mx_packed_scales=packed)
    as_read = (lambda t: packed_scales(t, tile)) if packed else (lambda t: t)
    first, largest = grouped_decode.tiles_scales(mx.w13, mx.w13_scale, tile)
    assert grouped_decode.tiles_scales(mx.w13, mx.w13_scale, tile)[0] is first
    mx.w13_scale[0, 0, 0] = largest + 1  # a new largest byte, which the next build must see
    again, now = grouped_decode.tiles_scales(mx.w13, mx.w13_scale, tile)
    assert again is not first and torch.equal(again, as_read(mx.w13_scale)) and now == largest + 1
    other = problem("w4a16", "swiglu_oai", ids, w)  # equal values, another tensor
    assert grouped_decode.tiles_scales(other.w13, other.w13_scale, tile)[0] is not again


def test_a_padded_or_packed_copy_goes_with_its_scales():
    """The shared copies (and the largest byte kept beside the packed one) are dropped with the
    scales they were made from (no copy outlives them)."""
    import gc

    ids, w = routing(6, seed=7)
    mx = problem("w4a16", "swiglu_oai", ids, w)
    padded = padded_tile()
    packed = dataclasses.replace(padded, mx_packed_scales=True)
    caches = (
        grouped_decode._TILE_SCALES,
        grouped_decode._LARGEST_SCALE,
        grouped_decode._PACKED_SCALES.setdefault((packed.block_n, packed.block_k, True, False), {}),
    )
    before = [len(c) for c in caches]
    grouped_decode.tiles_scales(mx.w13, mx.w13_scale, padded)
    grouped_decode.tiles_scales(mx.w13, mx.w13_scale, packed)
    assert [len(c) for c in caches] == [n + 1 for n in before]
    del mx
    gc.collect()
    assert [len(c) for c in caches] == before


def test_scales_already_aligned_are_read_as_they_are():
    """Scale rows already on 16-byte boundaries are the tile's as they are: no copy is made or
    kept alive (the entry holds no copy, and goes with them)."""
    import gc

    s = torch.randint(120, 130, (E, 2 * F, 32), dtype=torch.uint8)
    w13 = torch.zeros(E, 2 * F, 512, dtype=torch.uint8)
    tile = padded_tile()
    before = len(grouped_decode._TILE_SCALES)
    assert grouped_decode.tiles_scales(w13, s, tile) == (s, int(s.max()))
    assert len(grouped_decode._TILE_SCALES) == before + 1
    del s
    gc.collect()
    assert len(grouped_decode._TILE_SCALES) == before


@pytest.mark.parametrize(("precision", "tokens", "folds"), [
    ("w4a16", 6, True),  # the MXFP4 tile: the scales' largest byte, read at build
    ("w4a16", 1, False),  # the MXFP4 GEMV: nothing to fold
    ("w8a16", 6, False),  # FP8: no e8m0 scales
])  # fmt: skip
def test_the_stages_hand_the_launcher_the_scales_largest_byte(
    monkeypatch, precision, tokens, folds
):
    """The MXFP4 tile's stages pass ``max_scale_byte`` (the largest byte of the scales they read,
    read when the stages are built), so that its decode multiplies once a pair of values
    (`grouped_gemv`); the GEMV and FP8 pass None."""
    ids, w = routing(tokens, seed=8)
    p = problem(precision, "swiglu_oai", ids, w)
    seen: list[int | None] = []
    real = grouped_decode.grouped_gemv

    def recording(*args, **kwargs):
        seen.append(kwargs["max_scale_byte"])
        return real(*args, **kwargs)

    monkeypatch.setattr(grouped_decode, "grouped_gemv", recording)
    ws = decode.Workspace(p, layout="TKD")
    stages = grouped_decode.build_stages(ws)
    for stage in stages[:2]:
        stage.run()
    want = [int(p.w13_scale.max()), int(p.w2_scale.max())] if folds else [None, None]
    assert seen == want


def _writes_the_arms_bits(p: decode.Problem, fc1, fc2) -> None:
    """The step built with launches ``fc1``, ``fc2`` writes the arm's own step's bits."""
    got = run("grouped_decode", p)
    ws = decode.Workspace(p, layout="TKD")
    ws.poison()
    for stage in grouped_decode.build_stages(ws, fc1=fc1, fc2=fc2):
        stage.run()
    assert torch.equal(got.y_TD.view(torch.int16), ws.y_TD.view(torch.int16))


@pytest.mark.parametrize("tokens", [1, 6])  # the GEMV, the tile
def test_rotated_launches_read_a_rotated_copy_made_once_and_write_the_natural_bits(tokens):
    """The MXFP4 launches (`grouped_launch.MXFP4_ROTATED`: the GEMV's and the tile's) read a copy
    of the weights in `mx_rotated`'s layout, made once when the stages are built and shared by
    later builds over the same, unchanged weights (and the sparse arm's), dropped with them; the
    step writes the bits of the same launches on the natural layout. FP8 and launches without the
    flag read the problem's own tensors."""
    import gc

    ids, w = routing(tokens, seed=9)
    mx = problem("w4a16", "swiglu_oai", ids, w)
    # The tile's bytes are also packed and in its K order, and its scale bytes biased, by default
    # (MX_PACKED, MX_DOT_ORDER, MX_BIASED_SCALES; their own tests below): none here.
    fc1, fc2 = (dataclasses.replace(f, mx_packed=False, mx_dot_order=False, mx_biased_scales=False)
                for f in grouped_decode.launches(mx))  # fmt: skip
    assert fc1.path == ("gemv" if tokens == 1 else "dot") and fc1.mx_rotated and fc2.mx_rotated
    nat1, nat2 = (dataclasses.replace(f, mx_rotated=False) for f in (fc1, fc2))
    copy = grouped_decode.tiles_weights(mx.w13, fc1)
    assert copy is not mx.w13 and torch.equal(copy, rotate_mxfp4(mx.w13))
    assert grouped_decode.tiles_weights(mx.w13, fc1) is copy
    assert pipeline.rotated_weights(mx.w13) is copy
    assert grouped_decode.tiles_weights(mx.w13, nat1) is mx.w13
    fp8 = problem("w8a16", "swiglu_oai", ids, w)
    assert grouped_decode.tiles_weights(fp8.w13, fc1) is fp8.w13

    _writes_the_arms_bits(mx, nat1, nat2)
    # The copies of this problem's weights go with the weights: w13's (made above) and, where the
    # arm's own step reads rotated weights as they are (the GEMV), w2's; the tile's step reads its
    # own copy in K order (`tiles_weights`, MX_DOT_ORDER), made from the natural bytes.
    before = len(pipeline._ROTATED_WEIGHTS)
    made = sum(id(t) in pipeline._ROTATED_WEIGHTS for t in (mx.w13, mx.w2))
    assert made == (2 if fc1.path == "gemv" else 1)
    del mx, copy
    gc.collect()
    assert len(pipeline._ROTATED_WEIGHTS) == before - made


@pytest.mark.parametrize("tokens", [6, 16])  # the tile's expert loop, one pass a program
def test_placed_launches_read_a_placed_copy_made_once_and_write_the_natural_bits(tokens):
    """The FP8 tile's launches (`grouped_launch.FP8_PLACED`) read a copy of the weights in
    `fp8_placed`'s layout, made once when the stages are built and shared by later builds over the
    same, unchanged weights, dropped with them; the step writes the bits of the same launches on
    the natural layout. MXFP4 weights and launches without the flag read the problem's own
    tensors."""
    import gc

    ids, w = routing(tokens, seed=11)
    p = problem("w8a16", "swiglu_oai", ids, w)
    fc1, fc2 = (dataclasses.replace(f, fp8_packed=False) for f in grouped_decode.launches(p))
    assert fc1.path == fc2.path == "dot" and fc1.fp8_placed and fc2.fp8_placed
    nat1, nat2 = (dataclasses.replace(f, fp8_placed=False) for f in (fc1, fc2))
    copy = grouped_decode.tiles_weights(p.w13, fc1)
    assert copy is not p.w13 and torch.equal(
        copy.view(torch.uint8), place_e4m3(p.w13).view(torch.uint8)
    )
    assert grouped_decode.tiles_weights(p.w13, fc1) is copy
    assert grouped_decode.tiles_weights(p.w13, nat1) is p.w13
    mx = problem("w4a16", "swiglu_oai", ids, w)
    assert grouped_decode.tiles_weights(mx.w13, fc1) is mx.w13

    _writes_the_arms_bits(p, nat1, nat2)
    before = len(grouped_decode._PLACED_WEIGHTS)
    del p, copy
    gc.collect()
    assert len(grouped_decode._PLACED_WEIGHTS) == before - 2


def test_packed_launches_read_a_packed_copy_made_once_and_write_the_same_bits():
    """A tile launch with ``fp8_packed`` (placed or not) reads a copy of the weights packed box by
    box for its blocks (`tile_packed.pack_tiles`, of the placed copy where the launch is placed),
    made once for each (blocks, layout) while the weights live; the step writes the bits of the
    same launches unpacked (32 values a step here: F = 32 is no multiple of the arm's 64). MXFP4
    weights do not take it."""

    ids, w = routing(16, seed=13)  # one pass a program
    p = problem("w8a16", "swiglu_oai", ids, w)
    # The arm's launches: packed where R is whole 64-value steps (fc1's D), not fc2's F = 32.
    arms = grouped_decode.launches(p)
    assert [f.fp8_packed for f in arms] == [p.w13.shape[2] % 64 == 0, p.w2.shape[2] % 64 == 0]
    assert arms[0].fp8_packed != arms[1].fp8_packed
    fc1, fc2 = (dataclasses.replace(f, block_k=32, fp8_packed=False) for f in arms)
    assert fc1.pass_grid and fc1.tma

    step = lambda l1, l2: step_bits(p, l1, l2)

    for placed in (True, False):
        un1, un2 = (dataclasses.replace(f, fp8_placed=placed) for f in (fc1, fc2))
        pk1, pk2 = (dataclasses.replace(f, fp8_packed=True) for f in (un1, un2))
        copy = grouped_decode.tiles_weights(p.w13, pk1)
        source = place_e4m3(p.w13) if placed else p.w13
        want = pack_tiles(source, pk1.block_n, pk1.block_k)
        assert torch.equal(copy.view(torch.uint8), want.view(torch.uint8))
        assert grouped_decode.tiles_weights(p.w13, pk1) is copy
        assert torch.equal(step(pk1, pk2), step(un1, un2))
    mx = problem("w4a16", "swiglu_oai", ids, w)
    mx_packed = dataclasses.replace(fc1, fp8_packed=True, fp8_placed=False)
    assert grouped_decode.tiles_weights(mx.w13, mx_packed) is mx.w13


def test_mxfp4_packed_launches_read_a_packed_copy_made_once_and_write_the_same_bits():
    """A MXFP4 tile launch with ``mx_packed`` (rotated or not; the arm's tiles'
    default) reads a copy of the bytes packed box by box for its blocks, the last box ragged
    (`tile_packed.pack_tiles`, of the rotated copy where the launch is rotated), made once for
    each (blocks, layout) while the weights live; the step writes the bits of the same launches
    unpacked."""

    ids, w = routing(16, seed=13)  # one pass a program
    p = problem("w4a16", "swiglu_oai", ids, w)
    fc1, fc2 = grouped_decode.launches(p)
    assert fc1.pass_grid and fc1.mx_packed and fc2.mx_packed  # the arm's default
    for rotated in (True, False):
        # In the natural K order and on e8m0 scale bytes (MX_DOT_ORDER's and MX_BIASED_SCALES'
        # own tests below), which unrotated bytes take.
        un1, un2 = (dataclasses.replace(f, mx_rotated=rotated, mx_packed=False, mx_dot_order=False,
                                        mx_biased_scales=False) for f in (fc1, fc2))  # fmt: skip
        pk1, pk2 = (dataclasses.replace(f, mx_packed=True) for f in (un1, un2))
        copy = grouped_decode.tiles_weights(p.w13, pk1)
        source = rotate_mxfp4(p.w13) if rotated else p.w13
        want = pack_tiles(source, pk1.block_n, pk1.block_k // 2, ragged_last=True)
        assert torch.equal(copy, want)
        assert grouped_decode.tiles_weights(p.w13, pk1) is copy
        assert torch.equal(step_bits(p, pk1, pk2), step_bits(p, un1, un2))
    fp8 = problem("w8a16", "swiglu_oai", ids, w)
    assert grouped_decode.tiles_weights(fp8.w13, dataclasses.replace(fc1, fp8_placed=False,
                                        mx_rotated=False, mx_packed=True)) is fp8.w13  # fmt: skip


def test_mxfp4_packed_scales_launches_read_a_packed_copy_made_once_and_write_the_same_bits():
    """A MXFP4 tile launch with ``mx_packed_scales`` reads a copy of the scale bytes packed box by
    box for its blocks, the last box ragged (`tile_packed.pack_tiles`), made once for each blocks
    while the scales live, with the largest byte of the unpacked scales; the step writes the
    bits of the same launches reading the padded rows, in both arms' passes (one pass a program at
    16 tokens, the expert loop at 4)."""
    for tokens in (16, 4):
        ids, w = routing(tokens, seed=17)
        p = problem("w4a16", "swiglu_oai", ids, w)
        # On e8m0 bytes (the biased bytes, also the arm's default: their own test below).
        pk1, pk2 = (dataclasses.replace(f, mx_biased_scales=False)
                    for f in grouped_decode.launches(p))  # fmt: skip
        assert pk1.path == "dot" and pk1.pass_grid == (tokens == 16)
        assert pk1.mx_packed_scales and pk2.mx_packed_scales  # the arm's default
        fc1, fc2 = (dataclasses.replace(f, mx_packed_scales=False) for f in (pk1, pk2))
        copy, largest = grouped_decode.tiles_scales(p.w13, p.w13_scale, pk1)
        want = packed_scales(p.w13_scale, pk1)
        assert torch.equal(copy, want) and largest == int(p.w13_scale.max())
        assert grouped_decode.tiles_scales(p.w13, p.w13_scale, pk1)[0] is copy
        assert grouped_decode.tiles_scales(p.w13, p.w13_scale, fc1)[0] is not copy
        assert torch.equal(step_bits(p, pk1, pk2), step_bits(p, fc1, fc2)), tokens


def test_mxfp4_dot_order_launches_read_a_copy_made_once_and_write_the_same_step():
    """A MXFP4 tile launch with ``mx_dot_order`` reads a copy of the bytes with each step's values
    in the tile's K order, rotated and (as the arm's launches are) packed box by box
    (`mx_dot_order.dot_order_mxfp4`, `mx_rotated.rotate_mxfp4`, `tile_packed.pack_tiles`), made once
    for each (blocks, packed) while the weights live; the step writes the bits of the same
    launches on the natural order (its sums are exact at these sizes), one pass a program or the
    expert loop."""
    from moebench.kernels.mx_dot_order import dot_order_mxfp4

    for tokens in (16, 4):
        ids, w = routing(tokens, seed=19)
        p = problem("w4a16", "swiglu_oai", ids, w)
        do1, do2 = grouped_decode.launches(p)
        assert do1.mx_dot_order and do2.mx_dot_order  # the arm's default (MX_DOT_ORDER)
        fc1, fc2 = (dataclasses.replace(f, mx_dot_order=False) for f in (do1, do2))
        copy = grouped_decode.tiles_weights(p.w13, do1)
        words = rotate_mxfp4(dot_order_mxfp4(p.w13, do1.block_k))
        assert torch.equal(copy, pack_tiles(words, do1.block_n, do1.block_k // 2, ragged_last=True))
        assert grouped_decode.tiles_weights(p.w13, do1) is copy
        assert torch.equal(step_bits(p, do1, do2), step_bits(p, fc1, fc2)), tokens


def test_mxfp4_biased_scales_are_a_copy_made_once_taken_only_where_the_scales_fold():
    """A MXFP4 tile launch with ``mx_biased_scales`` reads a copy of the scales biased
    (`mx_rotated.biased_scales`) and, as the arm's launches are, packed box by box, made once while
    the scales live, with the largest byte of the e8m0 scales; the step writes the bits of the
    same launches on the e8m0 bytes, one pass a program or the expert loop. Scales with a byte
    above 128 (no folded decode) keep their bytes, and the launch drops the bias
    (`scales_launch`)."""
    from moebench.kernels.mx_rotated import biased_scales

    for tokens in (16, 4):
        ids, w = routing(tokens, seed=23)
        p = problem("w4a16", "swiglu_oai", ids, w)
        b1, b2 = grouped_decode.launches(p)
        assert b1.mx_biased_scales and b2.mx_biased_scales  # the arm's default (MX_BIASED_SCALES)
        fc1, fc2 = (dataclasses.replace(f, mx_biased_scales=False) for f in (b1, b2))
        copy, largest = grouped_decode.tiles_scales(p.w13, p.w13_scale, b1)
        assert largest == int(p.w13_scale.max()) <= 128
        assert torch.equal(copy, packed_scales(biased_scales(p.w13_scale), b1))
        assert grouped_decode.tiles_scales(p.w13, p.w13_scale, b1)[0] is copy
        assert grouped_decode.tiles_scales(p.w13, p.w13_scale, fc1)[0] is not copy
        assert grouped_decode.scales_launch(b1, largest) == b1
        assert torch.equal(step_bits(p, b1, b2), step_bits(p, fc1, fc2)), tokens
    past = p.w13_scale.clone()
    past[0, 0, 0] = 130
    same, largest = grouped_decode.tiles_scales(p.w13, past, b1)
    assert largest == 130 and torch.equal(same, packed_scales(past, b1))
    assert grouped_decode.scales_launch(b1, largest) == fc1
    assert grouped_decode.scales_launch(b1, None) == fc1


def test_fc2_split_in_k_writes_the_same_step_on_scratch_made_at_build():
    """fc2's one-pass MXFP4 tile with its K steps split over 2 programs a row block
    (``Launch.split_k``) writes the step of the unsplit launches (its sums are exact at these
    sizes), its scratch made when the stages are built; fc1 (the GLU) is refused a split."""
    ids, w = routing(16, seed=29)  # one pass a program
    p = problem("w4a16", "swiglu_oai", ids, w, intermediate=256)  # fc2: 2 steps of 128 values
    fc1, fc2 = grouped_decode.launches(p)
    assert fc2.pass_grid and fc2.split_k == 1  # the arm's default: not split
    split = dataclasses.replace(fc2, split_k=2)
    assert torch.equal(step_bits(p, fc1, split), step_bits(p, fc1, fc2))
    with pytest.raises(ValueError, match="split_k must be 1 or"):
        step_bits(p, dataclasses.replace(fc1, split_k=2), fc2)


def test_the_persistent_grid_writes_the_same_step_on_scratch_made_at_build(monkeypatch):
    """fc2's one-pass MXFP4 tile on the persistent grid (``Launch.stream_k``, without the
    expert-by-expert wait, which the grid refuses) writes the one-pass grid's step (its sums are
    exact at these sizes), its scratch made when the stages are built: a grid of 3 programs shares
    tiles, one of 1 takes each whole. fc1's R (64 values) is less than a step: the launcher
    refuses it the grid, and the arm, where PASS_GRID_MXFP4_STREAM_K says so, gives it to fc2
    alone, fc2 then waiting for the whole of fc1."""
    from moebench.kernels import grouped_launch

    ids, w = routing(16, seed=31)  # one pass a program
    p = problem("w4a16", "swiglu_oai", ids, w, intermediate=256)  # fc2: 2 steps of 128 values
    fc1, fc2 = grouped_decode.launches(p)
    assert fc2.pass_grid and fc1.stream_k == 0 == fc2.stream_k  # the arm's default: off
    want = step_bits(p, fc1, fc2)
    l1 = dataclasses.replace(fc1, expert_ready="")
    for per_sm in (1, 3):
        s2 = dataclasses.replace(fc2, stream_k=per_sm, expert_ready="")
        assert torch.equal(step_bits(p, l1, s2), want), per_sm
    with pytest.raises(ValueError, match="stream_k must be 0 or"):
        step_bits(p, dataclasses.replace(l1, stream_k=3), s2)
    monkeypatch.setattr(grouped_launch, "PASS_GRID_MXFP4_STREAM_K", 3)
    d1, d2 = grouped_decode.launches(p)
    assert (d1.stream_k, d2.stream_k, d1.expert_ready, d2.expert_ready) == (0, 3, "", "")
    assert torch.equal(step_bits(p, d1, d2), want)


def test_fc2_waiting_for_fc1_expert_by_expert_writes_the_same_bits():
    """The arm's launches with ``expert_ready`` (fc1 "signal", fc2 "wait"; the counters made when
    the stages are built; the default on the FP8 one-pass tiles) write the whole-grid wait's bits;
    a lone role is refused."""
    ids, w = routing(16, seed=17)
    p = problem("w8a16", "swiglu_oai", ids, w)
    r1, r2 = grouped_decode.launches(p)  # the one-pass FP8 tiles: paired by default
    assert (r1.expert_ready, r2.expert_ready) == ("signal", "wait")
    l1, l2 = (dataclasses.replace(f, expert_ready="") for f in (r1, r2))

    step = lambda f1, f2: step_bits(p, f1, f2)

    assert torch.equal(step(r1, r2), step(l1, l2))
    for f1, f2 in ((r1, l2), (l1, r2), (dataclasses.replace(l1, expert_ready="wait"), r2)):
        with pytest.raises(ValueError, match="expert_ready must be fc1 'signal' with fc2 'wait'"):
            grouped_decode.build_stages(decode.Workspace(p, layout="TKD"), fc1=f1, fc2=f2)


@pytest.mark.parametrize(
    ("precision", "switch", "stages", "registers"),
    [("w4a16", "MX_GLUON", "GLUON_STAGES", "GLUON_MAX_REGISTERS"),
     ("w8a16", "FP8_GLUON", "FP8_GLUON_STAGES", "FP8_GLUON_MAX_REGISTERS")],
)  # fmt: skip
def test_the_gluon_tile_asked_for_off_the_gpu_is_the_triton_tile(
    monkeypatch, precision, switch, stages, registers
):
    """Where the precision's switch (MX_GLUON, FP8_GLUON) is on, the arm's one-pass stages whose
    shapes take the Gluon layout (`mx_gluon_layout.fits`: here fc2, N 64 and R 512; fc1's R of
    64 values does not) ask for the Gluon tile; off a GPU (no Gluon interpreter) the arm runs the
    Triton tile instead, the same bits as with the switch off, fc2 still waiting for fc1 expert
    by expert."""
    from moebench.kernels import grouped_launch

    ids, w = routing(16, seed=37)  # one pass a program
    p = problem(precision, "swiglu_oai", ids, w, intermediate=512)
    monkeypatch.setattr(grouped_launch, switch, False)
    fc1, fc2 = grouped_decode.launches(p)
    assert not fc1.gluon and not fc2.gluon
    want = step_bits(p, fc1, fc2)
    monkeypatch.setattr(grouped_launch, switch, True)
    g1, g2 = grouped_decode.launches(p)
    assert (g1.gluon, g2.gluon) == (False, True)
    assert (g1.expert_ready, g2.expert_ready) == ("signal", "wait")  # the Triton tile's too
    assert (g2.num_stages, g2.max_registers) == (
        getattr(grouped_launch, stages), getattr(grouped_launch, registers))  # fmt: skip
    assert grouped_decode.gluon_or_triton(g2, p.w2, p.w2_scale, p.x_TD) == fc2  # the Triton tile
    assert torch.equal(step_bits(p, g1, g2), want)


@pytest.mark.parametrize("precision", ["w8a16", "w4a16"])
@pytest.mark.parametrize("tokens", [1, 2])
def test_the_slot_grid_writes_the_expert_grids_step(monkeypatch, precision, tokens):
    """With GEMV_SLOT_GRID on (the default), the arm's one-slot GEMV stages (one token; two for
    MXFP4) run on the slot grid (FP8 at its register cap) and write, bit for bit, the step that
    they write with it off (the grid led by touched experts); a stage that is not the one-slot
    GEMV is unchanged."""
    from moebench.kernels import grouped_launch

    ids, w = routing(tokens, seed=41 + tokens)
    p = problem(precision, "swiglu_oai", ids, w)
    monkeypatch.setattr(grouped_launch, "GEMV_SLOT_GRID", False)
    fc1, fc2 = grouped_decode.launches(p)
    assert not (fc1.slot_grid or fc2.slot_grid)
    want = step_bits(p, fc1, fc2)
    monkeypatch.setattr(grouped_launch, "GEMV_SLOT_GRID", True)
    s1, s2 = grouped_decode.launches(p)
    for default, slotted in ((fc1, s1), (fc2, s2)):
        one_slot = default.path == "gemv" and default.block_m == 1
        assert slotted.slot_grid == one_slot
        if not one_slot:
            assert slotted == default
    assert s1.slot_grid or tokens > 1  # one token: the GEMV in both formats
    assert torch.equal(step_bits(p, s1, s2), want)
