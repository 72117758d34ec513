"""`moebench.kernels.tile_packed`: the FP8 tile's weights packed box by box (`Launch.fp8_packed`).
The tile reading them is tests/kernels/test_grouped_decode.py's."""

from __future__ import annotations

import pytest
import torch

from moebench.kernels.tile_packed import pack_tiles, unpack_tiles


def test_each_box_is_one_contiguous_run_in_the_order_the_tile_reads_them():
    E, N, R, bn, bk = 2, 8, 12, 4, 3
    w = torch.arange(E * N * R, dtype=torch.int32).view(E, N, R)
    flat = pack_tiles(w, bn, bk).view(-1)
    at = 0
    for e in range(E):
        for nb in range(N // bn):
            for step in range(R // bk):
                box = w[e, nb * bn : (nb + 1) * bn, step * bk : (step + 1) * bk]
                assert torch.equal(flat[at : at + bn * bk], box.reshape(-1))
                at += bn * bk
    assert at == w.numel()


def test_packing_keeps_the_shape_and_dtype_and_unpacking_undoes_it():
    w = torch.randint(0, 256, (3, 16, 128), dtype=torch.uint8).view(torch.float8_e4m3fn)
    packed = pack_tiles(w, 8, 64)
    assert packed.shape == w.shape and packed.dtype == w.dtype
    assert not torch.equal(packed.view(torch.uint8), w.view(torch.uint8))
    assert torch.equal(unpack_tiles(packed, 8, 64).view(torch.uint8), w.view(torch.uint8))


def test_a_ragged_last_box_follows_the_whole_ones_and_unpacking_undoes_it():
    """``ragged_last`` (the MXFP4 tile's 1,440-byte rows in 64-byte boxes): a row block's run is
    its whole boxes, then the [block_n, R % block_k] rest of its rows; R whole boxes pack as
    without it."""
    E, N, R, bn, bk = 2, 8, 14, 4, 4
    w = torch.arange(E * N * R, dtype=torch.int32).view(E, N, R)
    packed = pack_tiles(w, bn, bk, ragged_last=True)
    flat, at = packed.view(-1), 0
    for e in range(E):
        for nb in range(N // bn):
            rows = w[e, nb * bn : (nb + 1) * bn]
            for k0, width in ((0, bk), (4, bk), (8, bk), (12, 2)):
                box = rows[:, k0 : k0 + width].reshape(-1)
                assert torch.equal(flat[at : at + box.numel()], box)
                at += box.numel()
    assert at == w.numel() and packed.shape == w.shape
    assert torch.equal(unpack_tiles(packed, bn, bk, ragged_last=True), w)
    whole = w[..., :12].contiguous()
    assert torch.equal(pack_tiles(whole, bn, bk, ragged_last=True), pack_tiles(whole, bn, bk))


@pytest.mark.parametrize(
    "shape, bn, bk, match",
    [
        ((2, 16, 96), 16, 64, "R \\(96\\) a multiple of block_k \\(64\\)"),
        ((2, 24, 64), 16, 64, "N \\(24\\) a multiple of block_n \\(16\\)"),
        ((16, 64), 16, 64, "contiguous \\[E, N, R\\]"),
    ],
)
def test_shapes_that_are_not_whole_boxes_are_refused(shape, bn, bk, match):
    with pytest.raises(ValueError, match=match):
        pack_tiles(torch.zeros(shape, dtype=torch.uint8), bn, bk)
    with pytest.raises(ValueError, match="contiguous"):
        pack_tiles(torch.zeros(2, 64, 64, dtype=torch.uint8).transpose(1, 2), 16, 16)
