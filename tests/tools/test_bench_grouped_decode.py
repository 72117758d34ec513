"""tools/bench_grouped_decode.py's variant fields, on the CPU: a variant item's fields become the
launch they name, a field a launch has no use for is ignored (so the variant equals the default
and the bench skips it), and a bad item is refused with its field named."""

import pytest
from tool_modules import REPO, tiny_decode, tool


@pytest.fixture(scope="module")
def bench():
    return tool("bench_grouped_decode")


def _launches(bench, item: str, fmt: str, tokens: int):
    from moebench.kernels.grouped_launch import default_launch

    shape = dict(tokens=tokens, top_k=4, experts=16, pdl=True)
    base = default_launch(fmt, columns=5760, **shape)
    [(_, v)] = bench.parse_variants(item, (tokens,))
    return base, bench.variant_launch(base, v, fmt, 5760)


def _named(bench, launch) -> str:
    """The bench's name of ``launch`` as if its MXFP4 scale bytes were not biased (" biased", the
    name's last word, is the MXFP4 tile's default: `grouped_launch.MX_BIASED_SCALES`), so that the
    word a field adds is the name's last."""
    return bench.describe(bench.dataclasses.replace(launch, mx_biased_scales=False))


def test_the_placed_field_sets_the_fp8_tiles_layout_and_nothing_else(bench):
    base, natural = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:0", "fp8", 64)
    assert base.path == "dot" and base.fp8_placed  # the default (grouped_launch.FP8_PLACED)
    assert natural == bench.dataclasses.replace(base, fp8_placed=False)
    assert bench.describe(base) == bench.describe(natural) + " placed"
    assert _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:1", "fp8", 64)[1] == base
    for fmt, tokens in (("mxfp4", 64), ("fp8", 1)):  # MXFP4's tile, FP8's one-slot GEMV
        for field in "01":
            base, same = _launches(bench, f"-:-:-:-:-:-:-:-:-:-:-:-:-:{field}", fmt, tokens)
            assert same == base, (fmt, tokens, field)


def test_the_packed_field_packs_each_tiles_weights_and_nothing_else(bench):
    # FP8 packs where R is said and whole steps (not here), MXFP4's one-pass tile at any R.
    # (MXFP4: 1 and 0 with the scales in padded rows; 2 packs them too, the default.)
    for fmt, field, default in (("fp8", "fp8_packed", False), ("mxfp4", "mx_packed", True)):
        base, packed = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:-:1", fmt, 64)
        unpacked = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:-:0", fmt, 64)[1]
        assert base.path == "dot" and getattr(base, field) == default
        padded = bench.dataclasses.replace(base, mx_packed_scales=False)
        assert packed == bench.dataclasses.replace(padded, **{field: True})
        assert unpacked == bench.dataclasses.replace(padded, **{field: False})
        assert _named(bench, packed) == _named(bench, unpacked) + " packed"
    for fmt in ("mxfp4", "fp8"):  # the one-slot GEMV
        base, same = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:-:1", fmt, 1)
        assert same == base, fmt


def test_packed_2_packs_the_mxfp4_tiles_scales_too(bench):
    base, both = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:-:2", "mxfp4", 64)
    assert base.mx_packed and base.mx_packed_scales and both == base  # the default
    # packed 1 and 0 leave the scales padded; FP8 takes 2 as packed weights.
    bytes_only = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:-:1", "mxfp4", 64)[1]
    assert bytes_only == bench.dataclasses.replace(base, mx_packed_scales=False)
    assert _named(bench, base) == _named(bench, bytes_only) + " scales-packed"
    fp8 = _launches(bench, "-:-:-:-:-:-:-:-:-:-:-:-:-:-:2", "fp8", 64)[1]
    assert fp8.fp8_packed and not fp8.mx_packed_scales
    with pytest.raises(ValueError, match="packed must be 0, 1 or 2"):
        bench.parse_variants("-:-:-:-:-:-:-:-:-:-:-:-:-:-:3", (64,))


def test_the_ragged_field_keeps_a_block_n_past_n_for_the_fp8_tma_tile_only(bench):
    from moebench.kernels.grouped_launch import default_launch

    shape = dict(tokens=64, top_k=4, experts=16, pdl=True)
    for fmt in ("fp8", "mxfp4"):
        base = default_launch(fmt, columns=2880, **shape)  # fc2: 2,880 rows
        for item, block_n in (("dot:-:128", 64), ("dot:-:128:-:-:-:-:-:-:-:-:-:-:-:-:1", 128),
                              ("dot:-:128:-:-:-:-:-:-:0:-:-:-:-:-:1", 64)):  # fmt: skip
            [(_, v)] = bench.parse_variants(item, (64,))
            want = block_n if fmt == "fp8" else 64  # MXFP4 and the pointer loads: shrunk
            assert bench.variant_launch(base, v, fmt, 2880).block_n == want, (fmt, item)


def test_the_prefetch_field_sets_the_packed_tiles_boxes_and_nothing_else(bench):
    from moebench.kernels.grouped_launch import default_launch

    base = default_launch("fp8", tokens=64, top_k=4, experts=16, pdl=True, columns=5760,
                          reduction=2880)  # fmt: skip
    assert base.fp8_packed and not base.fp8_prefetch  # the default packs, prefetches nothing
    [(_, v)] = bench.parse_variants("dot:-:-:-:-:-:-:-:-:-:-:2:-:-:-:-:8", (64,))
    got = bench.variant_launch(base, v, "fp8", 5760)
    assert got == bench.dataclasses.replace(base, fp8_prefetch=8)
    assert bench.describe(got) == bench.describe(base) + " pf8"
    unpacked = bench.dataclasses.replace(base, fp8_packed=False)  # ignored: nothing to prefetch
    assert bench.variant_launch(unpacked, v, "fp8", 5760) == unpacked
    [(_, v)] = bench.parse_variants("dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:10", (64,))
    got = bench.variant_launch(base, v, "fp8", 5760)
    assert got == bench.dataclasses.replace(base, fp8_prefetch_ahead=10)
    assert bench.describe(got) == bench.describe(base) + " ahead10"
    assert bench.variant_launch(unpacked, v, "fp8", 5760) == unpacked


def test_the_ready_field_pairs_fc1_signalling_with_fc2_waiting_on_the_tiles(bench):
    from moebench.kernels.grouped_launch import default_launch

    shape = dict(tokens=64, top_k=4, experts=16, pdl=True)
    for fmt in ("fp8", "mxfp4"):
        l1 = default_launch(fmt, columns=5760, **shape)
        l2 = default_launch(fmt, columns=2880, **shape)
        [(_, v)] = bench.parse_variants("dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1", (64,))
        got = bench.expert_ready_pair(l1, l2, v[18], fmt, 16.0)
        assert (got[0].expert_ready, got[1].expert_ready) == ("signal", "wait"), fmt
        assert bench.expert_ready_pair(*got, False, fmt, 16.0) == (l1, l2)
        # None: as the arm pairs them (grouped_launch.paired_launches): both one-pass tiles
        paired = bench.expert_ready_pair(l1, l2, None, fmt, 16.0)
        assert (paired[0].expert_ready, paired[1].expert_ready) == ("signal", "wait"), fmt
    fp8 = bench.expert_ready_pair(
        default_launch("fp8", columns=5760, **shape),
        default_launch("fp8", columns=2880, **shape),
        True,
        "fp8",
        16.0,
    )
    assert bench.describe(fp8[1]).endswith(" ready-wait")
    # A variant that takes fc1 off the tile drops the pair's roles (the GEMV has none).
    gemv = default_launch("fp8", columns=5760, tokens=1, top_k=4, experts=16, pdl=True)
    assert bench.expert_ready_pair(gemv, fp8[1], None, "fp8", 0.25) == (
        gemv,
        bench.dataclasses.replace(fp8[1], expert_ready=""),
    )


def test_the_registers_field_caps_the_launch(bench):
    base, capped = _launches(bench, "-:-:-:-:-:-:-:-:96:-:-:-:-:1", "fp8", 8)
    assert (base.max_registers, capped.max_registers) == (128, 96) and capped.fp8_placed


def test_a_bad_stage_field_is_refused(bench):
    with pytest.raises(ValueError, match="stage must be 1"):
        bench.parse_variants("dot:-:-:-:-:-:-:-:-:-:-:3", (8,))


def test_a_precision_that_is_no_decode_precision_is_refused(tmp_path):
    import os
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(REPO / "tools/bench_grouped_decode.py"), str(tmp_path / "o"),
         "--precision", "bf16"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 2 and "--precision: 'bf16' is neither decode precision" in out.stderr
    assert not (tmp_path / "o").exists()


def test_the_dot_field_stores_the_mxfp4_tiles_values_in_its_k_order(bench):
    item = "dot" + ":-" * 18 + ":{}"
    base, ordered = _launches(bench, item.format(1), "mxfp4", 64)
    assert not base.mx_dot_order  # no R given (default_launch takes it only where R fits)
    assert ordered == bench.dataclasses.replace(base, mx_dot_order=True)
    assert _named(bench, ordered) == _named(bench, base) + " dot-order"
    assert _launches(bench, item.format(0), "mxfp4", 64)[1] == base
    assert _launches(bench, item.format(1), "fp8", 64)[1].mx_dot_order is False
    # Only rotated bytes take the layout (field 12: rot).
    unrotated = "dot" + ":-" * 11 + ":0" + ":-" * 6 + ":1"
    assert not _launches(bench, unrotated, "mxfp4", 64)[1].mx_dot_order


def test_the_biased_field_biases_the_rotated_mxfp4_tiles_scale_bytes_and_nothing_else(bench):
    item = "dot" + ":-" * 19 + ":{}"
    base, unbiased = _launches(bench, item.format(0), "mxfp4", 64)
    assert base.mx_rotated and base.mx_biased_scales  # the default (MX_BIASED_SCALES)
    assert unbiased == bench.dataclasses.replace(base, mx_biased_scales=False)
    assert bench.describe(base) == bench.describe(unbiased) + " biased"
    assert _launches(bench, item.format(1), "mxfp4", 64)[1] == base
    assert _launches(bench, item.format(1), "fp8", 64)[1].mx_biased_scales is False
    # Only rotated bytes take it (field 12: rot).
    unrotated = "dot" + ":-" * 11 + ":0" + ":-" * 7 + ":1"
    assert not _launches(bench, unrotated, "mxfp4", 64)[1].mx_biased_scales


def test_the_split_field_splits_the_mxfp4_tiles_k_steps_and_is_named(bench):
    item = "dot" + ":-" * 20 + ":{}"
    base, split = _launches(bench, item.format(2), "mxfp4", 64)
    assert base.split_k == 1 and split == bench.dataclasses.replace(base, split_k=2)
    assert bench.describe(split) == bench.describe(base) + " split2"
    assert _launches(bench, item.format(2), "fp8", 64)[1].split_k == 1  # MXFP4's tile only
    gemv = "-" + ":-" * 20 + ":2"  # the arm's path at one token: the GEMV
    base, same = _launches(bench, gemv, "mxfp4", 1)
    assert base.path == "gemv" and same == base


def test_the_stream_field_puts_the_mxfp4_tile_on_the_persistent_grid_and_is_named(bench):
    item = "dot" + ":-" * 21 + ":{}"
    base, stream = _launches(bench, item.format(6), "mxfp4", 64)
    assert base.stream_k == 0 and stream == bench.dataclasses.replace(base, stream_k=6)
    assert bench.describe(stream) == bench.describe(base) + " stream6"
    assert _launches(bench, item.format(6), "fp8", 64)[1].stream_k == 0  # MXFP4's tile only


def test_the_gluon_field_puts_the_one_pass_tile_in_gluon_and_is_named(bench):
    """Field 24: either format's one-pass tile in Gluon on its own stages and register cap
    (unless the variant gives them), named; MXFP4's GEMV ignores it."""
    from moebench.kernels import grouped_launch as gl

    item = "-" + ":-" * 22 + ":{}"
    for fmt in ("mxfp4", "fp8"):
        base, gluon = _launches(bench, item.format(1), fmt, 64)
        assert base.pass_grid and not base.gluon
        assert gluon == gl.gluon_launch(base, fmt)
        assert bench.describe(gluon).endswith(" gluon")
    staged = "-:-:-:-:-:2:-:-:96" + ":-" * 14 + ":1"  # 2 stages (field 6), 96 registers (9)
    _, given = _launches(bench, staged, "mxfp4", 64)
    assert (given.gluon, given.num_stages, given.max_registers) == (True, 2, 96)
    base, same = _launches(bench, item.format(1), "mxfp4", 1)
    assert base.path == "gemv" and same == base


@pytest.mark.parametrize("fmt", ["mxfp4", "fp8"])
def test_gluon_off_gives_the_triton_tile_the_arm_falls_back_to(bench, fmt):
    """Field 24 at 0 where the arm's launch is the Gluon tile: the Triton one-pass tile exactly as
    the arm launches it where a stage cannot run Gluon (`grouped_launch.triton_tile`: its own
    stages, register cap and, for MXFP4, its K order), not the Gluon launch with the flag off."""
    from moebench.kernels import grouped_launch as gl

    R = 2880
    shape = dict(tokens=64, top_k=4, experts=16, pdl=True, columns=5760)
    triton = gl.default_launch(fmt, **shape, reduction=R)
    gluon = gl.gluon_launch(triton, fmt)
    [(_, v)] = bench.parse_variants("-" + ":-" * 22 + ":0", (64,))
    got = bench.variant_launch(gluon, v, fmt, 5760, R)
    assert got == gl.triton_tile(gluon, R, fmt) and not got.gluon
    assert got.max_registers == (gl.PASS_GRID_MAX_REGISTERS if fmt == "fp8"
                                 else gl.PASS_GRID_MXFP4_MAX_REGISTERS)  # fmt: skip
    if fmt == "mxfp4":
        assert got.mx_dot_order and " dot-order" in bench.describe(got)
    else:
        assert got.num_stages == gl.PASS_GRID_FP8_STAGES


TINY = tiny_decode(8, "dense_decode, sparse_decode, grouped_decode")


def test_a_stream_variant_runs_on_the_persistent_grid_without_the_expert_wait(bench, tmp_path):
    """On the CPU (the interpreter: checks, no timing) the stream variant (field 23) for fc1 (field
    12; the tiny scenario's fc2 has fewer values a row than one K step) builds fc1 on the
    persistent grid, drops the expert-by-expert wait of both stages (the grid takes none), passes
    the reference check and is named for it."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    item = "dot:-:-:-:-:-:-:1:-:-:-:1" + ":-" * 10 + ":3"  # one pass (field 8), fc1, 3 programs
    rows = bench.main(str(tmp_path / "out"), [8], bench.parse_variants(item, (8,)), set(),
                      scenario=str(path), precisions={"w4a16"})  # fmt: skip
    grouped = [r for r in rows if r["arm"] == "grouped_decode"]
    assert [r["variant"] == "default" for r in grouped] == [True, False]
    assert grouped[1]["variant"].endswith(" stream3 fc1")
    assert not any("ready" in grouped[1][f] for f in ("fc1_launch", "fc2_launch"))
    assert "stream3" not in grouped[1]["fc2_launch"]
    assert all(r["ok"] for r in grouped)


def test_a_variant_equal_to_the_arms_launch_is_said_and_the_others_checked(bench, tmp_path,
                                                                           capsys):  # fmt: skip
    """On the CPU (the interpreter: checks, no timing) a variant that is the arm's own launch (here
    field 19, ready, set as the arm sets it: the slip that once cost a device call) is said to be
    skipped, not passed over in silence; a variant that differs (the scale bytes not biased, field
    21 at 0; biased is the arm's default) is built, checked against the reference and reported
    under its own name."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    items = "dot" + ":-" * 18 + ":1," + "dot" + ":-" * 19 + ":0"
    rows = bench.main(str(tmp_path / "out"), [8], bench.parse_variants(items, (8,)), set(),
                      scenario=str(path), precisions={"w4a16"})  # fmt: skip
    out = capsys.readouterr().out
    assert "at 8 tokens: the arm's launch, not timed again" in out
    grouped = [r for r in rows if r["arm"] == "grouped_decode"]
    assert [r["variant"] == "default" for r in grouped] == [True, False]
    assert ["biased" in r["fc1_launch"].split() for r in grouped] == [True, False]
    assert all(r["ok"] for r in grouped)


@pytest.mark.parametrize("fmt", ["fp8", "mxfp4"])
def test_the_slots_field_leads_the_one_slot_gemvs_grid_by_slots_and_is_named(bench, fmt):
    """slots 0: the one-token GEMV's grid led by touched experts instead of the default's slots
    (`grouped_launch.GEMV_SLOT_GRID`), its register cap left as the default's unless the
    registers field says another; the default is named with " slots". slots 1, where the default
    has it, and slots on the tile, give the default (skipped as equal)."""
    base, led = _launches(bench, "-:" * 24 + "0", fmt, 1)
    assert base.path == "gemv" and base.block_m == 1 and base.slot_grid
    assert led == bench.dataclasses.replace(base, slot_grid=False)
    assert bench.describe(base) == bench.describe(led) + " slots"
    assert _launches(bench, "-:" * 24 + "1", fmt, 1)[1] == base
    base, same = _launches(bench, "-:" * 24 + "0", fmt, 64)  # the tile: no slot grid
    assert base.path == "dot" and same == base
    # With the early bias (field 11) and no register cap (field 9): the expert grid uncapped.
    _, both = _launches(bench, "-:" * 8 + "0:-:1:" + "-:" * 13 + "0", fmt, 1)
    want = bench.dataclasses.replace(base_gemv(fmt), slot_grid=False, early_bias=True,
                                     max_registers=0)  # fmt: skip
    assert both == want


def base_gemv(fmt: str):
    from moebench.kernels.grouped_launch import default_launch

    return default_launch(fmt, columns=5760, tokens=1, top_k=4, experts=16, pdl=True)
