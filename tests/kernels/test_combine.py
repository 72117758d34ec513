"""The combine kernel against reference.combine (the interpreter on the CPU, compiled on a GPU)."""

from __future__ import annotations

import pytest
import torch
from kernel_device import on_device

from moebench.core import layout, reference
from moebench.kernels.combine import combine as combine_kernel

combine = on_device(combine_kernel)  # the GPU under make test-gpu, else the interpreter


def plan_for(T: int, K: int, n_global: int, E: int, offset: int, mode: str, A: int, seed: int):
    """(slot_row_TK, M) from routing with distinct top-k ids per token, shaped by ``mode``."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(T, n_global, generator=g)
    if mode == "none_local":  # every slot goes to another rank
        scores[:, offset : offset + E] = -1.0
    elif mode == "one_expert":  # each token's only local slot is local expert 1
        scores[:, offset : offset + E] = -1.0
        scores[:, offset + 1] = 2.0
    ids = scores.topk(K, dim=1).indices.to(torch.int32)
    M = layout.capacity_rows(T, 1, K, E, A)
    return reference.scatter_plan(ids, offset, E, A, M), M


def poisoned_inputs(plan: dict, M: int, D: int, out_dtype: torch.dtype, seed: int):
    """out_MD with NaN on every non-live row; weights with NaN on every non-local slot."""
    g = torch.Generator().manual_seed(seed)
    out = torch.randn(M, D, generator=g).to(out_dtype)
    out[plan["row_expert_M"] < 0] = float("nan")
    slot_row = plan["slot_row_TK"]
    w = torch.rand(slot_row.shape, generator=g) + 0.05
    w[slot_row < 0] = float("nan")
    return out, slot_row, w


# (T, K, n_global, E, offset, mode)
CASES = [
    pytest.param(24, 4, 16, 8, 0, "random", id="random"),
    pytest.param(20, 4, 16, 8, 8, "random", id="rank-1-offset"),
    pytest.param(10, 3, 12, 4, 4, "none_local", id="all-experts-empty"),
    pytest.param(14, 3, 12, 4, 0, "one_expert", id="one-expert-holds-all"),
    pytest.param(3, 2, 8, 4, 0, "random", id="T-and-D-smaller-than-a-block"),
    pytest.param(9, 7, 7, 7, 0, "random", id="K-equals-E-prime"),
]


@pytest.mark.parametrize("T, K, n_global, E, offset, mode", CASES)
def test_combine_fp32_bitwise(T, K, n_global, E, offset, mode):
    # Padding rows of out are NaN and non-local slots carry NaN weights, yet y stays finite and
    # equals the reference bit for bit (same products, same k order, float32 throughout).
    D = 80
    plan, M = plan_for(T, K, n_global, E, offset, mode, 16, seed=T * 7 + K)
    out, slot_row, w = poisoned_inputs(plan, M, D, torch.float32, seed=T)
    y = torch.full((T, D), float("nan"), dtype=torch.float32)
    combine(out, slot_row, w, y)
    ref = reference.combine(out, slot_row, w)
    assert bool(torch.isfinite(y).all())
    assert torch.equal(y, ref)
    if mode == "none_local":
        assert bool((y == 0).all())


@pytest.mark.parametrize("T, K, n_global, E, offset, mode", CASES[:4])
def test_combine_bf16(T, K, n_global, E, offset, mode):
    # bf16 out, weights and y: float32 accumulation, one rounding to nearest even at the store, so
    # y is the reference rounded to bf16, bit for bit.
    D = 80
    plan, M = plan_for(T, K, n_global, E, offset, mode, 16, seed=T * 5 + K)
    out, slot_row, w = poisoned_inputs(plan, M, D, torch.bfloat16, seed=T + 1)
    w = w.to(torch.bfloat16)
    y = torch.full((T, D), float("nan"), dtype=torch.bfloat16)
    combine(out, slot_row, w, y)
    ref = reference.combine(out, slot_row, w)
    assert bool(torch.isfinite(y).all())
    assert torch.equal(y.view(torch.int16), ref.to(torch.bfloat16).view(torch.int16))


def test_combine_strided_inputs():
    # Non-contiguous out and weights (column slices of wider buffers) are read through strides.
    T, K, E, D = 6, 2, 4, 48
    plan, M = plan_for(T, K, 8, E, 0, "random", 16, seed=11)
    out, slot_row, w = poisoned_inputs(plan, M, D, torch.float32, seed=12)
    wide = torch.full((M, D + 16), float("nan"))
    wide[:, 8 : 8 + D] = out
    w_wide = torch.full((T, 2 * K), float("nan"))
    w_wide[:, ::2] = w
    y = torch.full((T, D), float("nan"))
    combine(wide[:, 8 : 8 + D], slot_row, w_wide[:, ::2], y)
    assert torch.equal(y, reference.combine(out, slot_row, w))


def test_combine_rejects_bad_inputs():
    out = torch.randn(32, 16)
    slot_row = torch.zeros(4, 2, dtype=torch.int32)
    w = torch.rand(4, 2)
    y = torch.empty(4, 16)
    with pytest.raises(ValueError, match="slot_row_TK"):
        combine(out, slot_row.long(), w, y)
    with pytest.raises(ValueError, match="topk_weights_TK"):
        combine(out, slot_row, w[:, :1], y)
    with pytest.raises(ValueError, match="y_TD"):
        combine(out, slot_row, w, torch.empty(4, 16, dtype=torch.float16))
    with pytest.raises(ValueError, match="out_MD"):
        combine(out.to(torch.float16), slot_row, w, y)


@pytest.mark.parametrize("block_t, block_d", [(2, 32), (4, 128), (8, 16)])
def test_combine_tiles_write_the_same_bits(block_t, block_d):
    # Other tiles (several tokens a program, narrower or wider columns) change which program adds
    # a term, never the order: bitwise the default's y, T and D not multiples of the tile.
    T, K, D = 13, 4, 80
    plan, M = plan_for(T, K, 16, 8, 0, "random", 16, seed=3)
    out, slot_row, w = poisoned_inputs(plan, M, D, torch.bfloat16, seed=4)
    want = torch.full((T, D), float("nan"), dtype=torch.bfloat16)
    combine(out, slot_row, w, want)
    got = torch.full((T, D), float("nan"), dtype=torch.bfloat16)
    combine(out, slot_row, w, got, block_t=block_t, block_d=block_d, num_warps=2)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    with pytest.raises(ValueError, match="block_t"):
        combine(out, slot_row, w, got, block_t=3)
