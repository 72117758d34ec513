"""tools/sass_grouped_decode.py's default list: the arm's launches as `grouped_launch` gives them
now, every field of the SPEC spelled out (a spec a field short is how a variant once set the field
beside the one it meant). Compiling needs triton 3.6 and is not done here."""

import pytest
from tool_modules import tool


@pytest.fixture(scope="module")
def sass():
    return tool("sass_grouped_decode")


def test_the_default_specs_are_the_arms_launches_every_field_spelled_out(sass):
    from moebench.kernels.grouped_launch import default_launch

    specs = sass.arm_specs()
    assert len(specs) == 6 and all(len(s.split(":")) == 24 for s in specs)
    by = {(s.split(":")[1], int(s.split(":")[7])): s.split(":") for s in specs}
    # MXFP4 at 64 tokens: the one-pass tile, rotated, bytes and scales packed, fc2 waiting expert
    # by expert, its values in K order: as the arm's launch says.
    L = default_launch("mxfp4", tokens=64, top_k=4, experts=16, columns=5760, reduction=2880)
    mx = by[("mxfp4", 64)]
    assert mx[0] == L.path and int(mx[10]) == L.pass_grid and int(mx[14]) == L.mx_rotated
    assert int(mx[16]) == (2 if L.mx_packed_scales else int(L.mx_packed))
    assert int(mx[19]) == 1 and int(mx[20]) == L.mx_dot_order and int(mx[21]) == L.split_k
    assert int(mx[22]) == L.stream_k
    assert by[("fp8", 1)][0] == "gemv" and by[("fp8", 64)][8] == "tma"
    one = default_launch("fp8", tokens=1, top_k=4, experts=16, columns=5760, reduction=2880)
    assert int(by[("fp8", 1)][23]) == one.slot_grid
