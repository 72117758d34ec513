"""Which launch the `grouped_decode` arm takes (`grouped_launch.default_launch`): read from the
shapes alone, each choice measured on the GPU (the constants' comments in
`moebench.kernels.grouped_launch` give the figures). No kernel runs here."""

from __future__ import annotations

import dataclasses

import pytest
from decode_inputs import FORMATS

from moebench.kernels.grouped_launch import default_launch, path_launch


def test_default_launch_follows_the_shapes():
    """gpt-oss-20b at EP2 (16 local experts, top-4): a one-slot GEMV at one and two tokens,
    tensor-core tiles from four, 32-slot passes when the experts average more than 8 slots; row
    blocks shrink to divide N, and an N without 16 rows a block takes the GEMV. A GEMV of several
    slots a pass (spills at 1,024 values a step, and costs each slot's multiply-adds on every
    weight) is never chosen, and asked for, it takes shorter steps."""
    gpt = dict(top_k=4, experts=16, columns=5760)
    assert default_launch("fp8", tokens=1, **gpt).path == "gemv"
    assert default_launch("mxfp4", tokens=2, **gpt).path == "gemv"
    # FP8 takes the tile from 2 tokens (half a slot an expert; DOT_FROM_SLOTS_PER_EXPERT), through
    # TMA and capped, as at every count above.
    two = default_launch("fp8", tokens=2, **gpt)
    assert (two.path, two.tma, two.max_registers) == ("dot", True, 128)
    # One token never takes the tile, whatever its slots an expert: its top-k are distinct.
    for fmt in FORMATS:
        assert default_launch(fmt, tokens=1, top_k=4, experts=4, columns=5760).path == "gemv"
        assert default_launch(fmt, tokens=2, top_k=4, experts=4, columns=5760).path == "dot"
    assert default_launch("mxfp4", tokens=4, **gpt).path == "dot"
    for fmt in FORMATS:
        for tokens in (1, 2, 4, 8, 16, 32, 64):
            for columns in (5760, 2880, 40):
                launch = default_launch(fmt, tokens=tokens, top_k=4, experts=16, columns=columns)
                assert launch.path == "dot" or launch.block_m == 1
    assert path_launch("gemv", "fp8", columns=5760, block_m=4).block_k == 256
    assert path_launch("gemv", "mxfp4", columns=5760, block_m=32).block_k == 64
    mid = default_launch("fp8", tokens=32, **gpt)
    assert (mid.path, mid.block_m, mid.block_n) == ("dot", 16, 64)
    # 16 slots a pass at every count: 32 lost at 32 and 64 tokens on the H200 (default_launch)
    assert {default_launch(f, tokens=64, **gpt).block_m for f in FORMATS} == {16}
    assert default_launch("fp8", tokens=64, top_k=4, experts=16, columns=96).block_n == 32
    assert default_launch("fp8", tokens=64, top_k=4, experts=16, columns=40).path == "gemv"
    # The tile at every count, each choice measured: 128 values on 4 stages, 128 registers at
    # most a thread (grouped_launch.TILE_MAX_REGISTERS), FP8's weights through TMA, and one pass a
    # program, 80 registers at most, from 4 slots an expert (16 tokens;
    # PASS_GRID_FROM_SLOTS_PER_EXPERT): MXFP4's on 3 stages, FP8's 64 values a step on 6
    # (PASS_GRID_FP8_BLOCK_K, PASS_GRID_FP8_STAGES; measured on an H100).
    for fmt in FORMATS:
        for t in (4, 8, 16, 32, 64):
            L = default_launch(fmt, tokens=t, **gpt)
            tma = fmt == "fp8"
            passes = t >= 16
            cap = 80 if passes else 128
            step, stages = ((64, 6) if tma else (128, 3)) if passes else (128, 4)
            want = (step, stages, cap, tma, passes, True)
            got = (L.block_k, L.num_stages, L.max_registers, L.tma, L.pass_grid, L.early_bias)
            assert got == want
    # FP8's one-pass tile reads its weights packed box by box (FP8_PACKED) where R is whole
    # steps of it (the launcher refuses packed boxes otherwise); never the expert loop, MXFP4 or a
    # caller that does not say R.
    for fmt in FORMATS:
        for t in (4, 8, 16, 32, 64):
            for r, whole in ((2880, True), (2848, False), (0, False)):
                L = default_launch(fmt, tokens=t, reduction=r, **gpt)
                assert L.fp8_packed == (fmt == "fp8" and t >= 16 and whole), (fmt, t, r)
    # MXFP4's tile (one pass or the expert loop) stores its values in its K order (MX_DOT_ORDER)
    # where R is whole steps or its last step a power of two of at least 32 values (gpt-oss-20b's
    # 2,880: 22 steps and 64); never FP8, the GEMV or a caller that does not say R.
    for fmt in FORMATS:
        for t in (1, 4, 8, 16, 32, 64):
            for r, fits in ((2880, True), (2816, True), (2848, True), (2912, False), (0, False)):
                L = default_launch(fmt, tokens=t, reduction=r, **gpt)
                # (the Gluon tile, where its layout fits, has its own order: mx_gluon_layout)
                want = fmt == "mxfp4" and L.path == "dot" and fits and not L.gluon
                assert L.mx_dot_order == want, (fmt, t, r)
                assert L.path == ("gemv" if t == 1 else "dot"), (fmt, t)
    # The one-slot GEMV keeps the bias after its loop (mixed on the H200: TILE_EARLY_BIAS).
    assert not default_launch("fp8", tokens=1, **gpt).early_bias


def test_fc2_waits_for_fc1_expert_by_expert_where_measured():
    """`paired_launches` (EXPERT_READY_FROM_SLOTS_PER_EXPERT): fc1 "signal" and fc2 "wait" where
    both are the tile with the dependent launch, from one slot an expert (4 tokens at
    gpt-oss-20b EP2: the looping tile at 4 and 8, the one-pass tile at 16-64) in both formats;
    the whole-grid wait for the GEMV, FP8 at 2 tokens and without the dependent launch."""
    from moebench.kernels.grouped_launch import paired_launches

    def roles(fmt: str, tokens: int, pdl: bool = True) -> tuple[str, str]:
        shape = dict(tokens=tokens, top_k=4, experts=16, pdl=pdl)
        fc1 = default_launch(fmt, columns=5760, reduction=2880, **shape)
        fc2 = default_launch(fmt, columns=2880, reduction=2880, **shape)
        pair = paired_launches(fc1, fc2, fmt, slots_per_expert=tokens * 4 / 16)
        return tuple(f.expert_ready for f in pair)

    paired, whole = ("signal", "wait"), ("", "")
    for tokens in (1, 2, 4, 8, 16, 32, 64):
        fp8, mx = roles("fp8", tokens), roles("mxfp4", tokens)
        assert fp8 == (paired if tokens >= 4 else whole), tokens
        assert mx == (paired if tokens >= 4 else whole), tokens  # the GEMV below 4 tokens
        assert roles("fp8", tokens, pdl=False) == whole, tokens
    # The rule itself: below one slot an expert only MXFP4's one-pass tile pairs.
    from moebench.kernels.grouped_launch import Launch

    tile = Launch(path="dot", block_m=16, block_n=64, block_k=128, num_warps=4, pdl=True)
    one_pass = dataclasses.replace(tile, pass_grid=True)
    assert paired_launches(tile, tile, "mxfp4", 0.5) == (tile, tile)
    assert [f.expert_ready for f in paired_launches(one_pass, one_pass, "mxfp4", 0.5)] == [
        "signal", "wait"]  # fmt: skip
    # Never on the persistent grid (`stream_k`), which takes no expert_ready.
    stream = dataclasses.replace(one_pass, stream_k=6)
    assert paired_launches(stream, one_pass, "mxfp4", 4.0) == (stream, one_pass)


def test_mxfp4_one_pass_tile_takes_the_persistent_grid_where_the_constant_says(monkeypatch):
    """PASS_GRID_MXFP4_STREAM_K (0: off, as now) puts MXFP4's one-pass tile (16-64 tokens at
    gpt-oss-20b EP2) on the persistent grid of that many programs an SM where its scales are
    packed and R (said) is at least one step; never FP8, the expert loop or the GEMV."""
    from moebench.kernels import grouped_launch

    gpt = dict(top_k=4, experts=16, columns=5760)
    for fmt in FORMATS:
        for t in (1, 4, 8, 16, 32, 64):
            assert default_launch(fmt, tokens=t, reduction=2880, **gpt).stream_k == 0
    monkeypatch.setattr(grouped_launch, "MX_GLUON", False)  # the Triton tile's grid
    monkeypatch.setattr(grouped_launch, "PASS_GRID_MXFP4_STREAM_K", 6)
    for fmt in FORMATS:
        for t in (1, 4, 8, 16, 32, 64):
            for r in (2880, 64, 0):
                L = default_launch(fmt, tokens=t, reduction=r, **gpt)
                want = 6 if fmt == "mxfp4" and t >= 16 and r >= 128 else 0
                assert L.stream_k == want, (fmt, t, r)


@pytest.mark.parametrize("fp8_gluon", [False, True], ids=["fp8-triton", "fp8-gluon"])
def test_one_pass_tile_is_the_gluon_tile_where_its_layout_fits(monkeypatch, fp8_gluon):
    """MX_GLUON (on) and FP8_GLUON (either way here) take that format's one-pass tile (16-64
    tokens at gpt-oss-20b EP2) to the Gluon tile, on its own stages and register cap, where the
    stage's shapes take its layout (`mx_gluon_layout.fits`: N whole tiles of 64 rows, R an even
    number of 128-value steps, at least 4, and at most a 64-value tail); never the expert loop,
    the GEMV, a caller that does not say R, or with the switch off; `triton_tile` gives back the
    Triton tile's launch."""
    from moebench.kernels import grouped_launch as gl

    monkeypatch.setattr(gl, "FP8_GLUON", fp8_gluon)
    gpt = dict(top_k=4, experts=16)
    stages = ((5760, 2880, True), (2880, 2880, True), (5760, 2848, False), (5760, 0, False),
              (96, 2880, False), (5760, 384, False))  # (N, R, whether the layout fits)  # fmt: skip
    own = {"mxfp4": (gl.GLUON_STAGES, gl.GLUON_MAX_REGISTERS),
           "fp8": (gl.FP8_GLUON_STAGES, gl.FP8_GLUON_MAX_REGISTERS)}  # fmt: skip
    for fmt in FORMATS:
        switch = fmt == "mxfp4" or fp8_gluon
        for t in (1, 2, 4, 8, 16, 32, 64):
            for n, r, fits in stages:
                L = default_launch(fmt, tokens=t, columns=n, reduction=r, **gpt)
                want = switch and t >= 16 and fits
                assert L.gluon == want, (fmt, t, n, r)
                if want:
                    assert (L.pass_grid, L.num_stages, L.max_registers, L.mx_dot_order) == (
                        True, *own[fmt], False)  # fmt: skip
    # Where a stage cannot run the Gluon tile, the arm takes the Triton tile in its place:
    # `triton_tile`, the launch the switch off gives.
    for fmt, name in (("mxfp4", "MX_GLUON"), ("fp8", "FP8_GLUON")):
        monkeypatch.setattr(gl, name, True)
        gluon = {t: default_launch(fmt, tokens=t, columns=5760, reduction=2880, **gpt)
                 for t in (16, 32, 64)}  # fmt: skip
        monkeypatch.setattr(gl, name, False)
        for t in (16, 32, 64):
            triton = default_launch(fmt, tokens=t, columns=5760, reduction=2880, **gpt)
            assert gluon[t].gluon and not triton.gluon
            assert triton.mx_dot_order == (fmt == "mxfp4")
            assert gl.triton_tile(gluon[t], 2880, fmt) == triton


@pytest.mark.parametrize("slot_grid", [False, True])
def test_the_one_slot_gemv_is_led_by_slots_where_the_constant_says(monkeypatch, slot_grid):
    """GEMV_SLOT_GRID: the one-slot GEMV (one token) on the slot grid, FP8 then capped at
    GEMV_SLOT_GRID_FP8_REGISTERS, MXFP4 at its own cap; never a GEMV of several slots a pass or
    the tile."""
    import moebench.kernels.grouped_launch as gl

    monkeypatch.setattr(gl, "GEMV_SLOT_GRID", slot_grid)
    shape = dict(top_k=4, experts=16, columns=5760, pdl=True)
    fp8, mx = (gl.default_launch(fmt, tokens=1, **shape) for fmt in ("fp8", "mxfp4"))
    assert (fp8.path, fp8.block_m, mx.path, mx.block_m) == ("gemv", 1, "gemv", 1)
    assert fp8.slot_grid == mx.slot_grid == slot_grid
    assert fp8.max_registers == (gl.GEMV_SLOT_GRID_FP8_REGISTERS if slot_grid else 0)
    assert mx.max_registers == gl.MXFP4_ROTATED_GEMV_REGISTERS
    assert not gl.path_launch("gemv", "fp8", columns=5760, block_m=2).slot_grid
    assert not gl.default_launch("fp8", tokens=64, **shape).slot_grid
