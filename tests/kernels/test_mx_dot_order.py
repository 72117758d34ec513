"""`mx_dot_order`: the host layout that stores each step's MXFP4 values in the tile's K order."""

from __future__ import annotations

import pytest
import torch

from moebench.kernels.mx_dot_order import (
    dot_order_mxfp4,
    fits,
    natural_order_mxfp4,
    source,
)


@pytest.mark.parametrize("step", [32, 64, 128, 256])
def test_each_step_is_a_permutation_whose_stored_words_hold_one_group_each(step):
    """``source`` maps a step's values one to one onto its positions, and stored word j (8
    values) holds natural values of group j % (step / 32) only: the decode's cyclic scales."""
    places = [source(k, step) for k in range(step)]
    assert sorted(places) == list(range(step))
    groups = step // 32
    for k, p in enumerate(places):
        assert k // 32 == (p // 8) % groups, (k, p)


def test_the_bytes_round_trip_and_move_values_only():
    g = torch.Generator().manual_seed(5)
    for R, block_k in ((288, 128), (320, 128), (256, 128), (2880, 128), (192, 64)):
        w = torch.randint(0, 256, (2, 3, R // 2), generator=g, dtype=torch.uint8)
        d = dot_order_mxfp4(w, block_k)
        assert d.shape == w.shape and not torch.equal(d, w)
        assert torch.equal(natural_order_mxfp4(d, block_k), w)
        codes = lambda t: torch.stack([t & 0xF, t >> 4], -1).flatten(-2)
        # Each step's values are the natural step's, moved (their multiset kept).
        for k0 in range(0, R, block_k):
            width = min(block_k, R - k0)
            nat = codes(w)[..., k0 : k0 + width].sort(-1).values
            assert torch.equal(codes(d)[..., k0 : k0 + width].sort(-1).values, nat)
        # Value k of a step lies where the tile reads it.
        k0, width = (R // block_k - 1) * block_k, block_k
        for k in (0, 5, 17, width - 1):
            assert codes(d)[..., k0 + source(k, width)].equal(codes(w)[..., k0 + k])


def test_rows_whose_last_step_is_no_power_of_two_are_refused():
    assert fits(2880, 128) and fits(2816, 128) and fits(288, 128) and not fits(352, 128)
    assert not fits(272, 128)  # a last step of 16 values
    with pytest.raises(ValueError, match="mx_dot_order needs R"):
        dot_order_mxfp4(torch.zeros(1, 176, dtype=torch.uint8), 128)  # R = 352: 96 left
    with pytest.raises(ValueError, match="power-of-two block_k"):
        dot_order_mxfp4(torch.zeros(1, 64, dtype=torch.uint8), 96)


def test_the_repacks_of_a_layer_go_an_expert_at_a_time_to_the_rows_bits():
    """`dot_order_mxfp4` and `mx_rotated.rotate_mxfp4` repack a 3-D (or deeper) tensor a leading
    slice at a time, so that their temporaries are one expert's, not a layer's: the bytes are those
    of the same rows repacked as one 2-D tensor."""
    from moebench.kernels.mx_rotated import rotate_mxfp4

    g = torch.Generator().manual_seed(5)
    w = torch.randint(0, 256, (3, 16, 144), generator=g, dtype=torch.uint8)
    rows = w.reshape(48, 144)
    assert torch.equal(rotate_mxfp4(w), rotate_mxfp4(rows).reshape(w.shape))
    assert torch.equal(dot_order_mxfp4(w, 128), dot_order_mxfp4(rows, 128).reshape(w.shape))
    deeper = w.reshape(3, 2, 8, 144)
    assert torch.equal(rotate_mxfp4(deeper), rotate_mxfp4(rows).reshape(deeper.shape))
    assert torch.equal(natural_order_mxfp4(dot_order_mxfp4(deeper, 128), 128), deeper)
