"""The decode family's float32 truth: FP8 per-expert and MXFP4 quantisers, the interleaved GLU and
the decode FFN (skipping, never multiplying by zero)."""

from __future__ import annotations

import math

import pytest
import torch

from moebench.core import reference as ref


def test_e2m1_codes_round_to_nearest_even_and_saturate():
    mags = torch.tensor(ref.E2M1_VALUES)
    # Every representable magnitude maps to its own code, both signs.
    assert torch.equal(ref.e2m1_codes(mags), torch.arange(8, dtype=torch.uint8))
    assert torch.equal(ref.e2m1_codes(-mags[1:]), torch.arange(9, 16, dtype=torch.uint8))
    assert torch.equal(ref.e2m1_values(torch.arange(16)), torch.cat([mags, -mags]))
    # Midpoints go to the even code (0, 2, 2, 4, 4, 6, 6), just off them to the nearer value.
    mid = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert ref.e2m1_values(ref.e2m1_codes(mid)).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert ref.e2m1_values(ref.e2m1_codes(mid + 1e-3)).tolist() == [0.5, 1, 1.5, 2, 3, 4, 6]
    assert ref.e2m1_values(ref.e2m1_codes(torch.tensor([7.0, -100.0]))).tolist() == [6.0, -6.0]


def test_mxfp4_layout_scales_and_error_bound():
    torch.manual_seed(0)
    w = torch.randn(2, 3, 64) * torch.logspace(-3, 1, 64)  # blocks of very different ranges
    packed, scale = ref.quant_weight_mxfp4(w)
    assert packed.shape == (2, 3, 32) and packed.dtype == torch.uint8
    assert scale.shape == (2, 3, 2) and scale.dtype == torch.uint8
    # Low nibble first: byte j holds values 2j (low) and 2j + 1 (high).
    codes = ref.e2m1_codes(w / ref.e8m0_to_scale(scale).repeat_interleave(32, dim=2))
    assert torch.equal(packed, codes[..., 0::2] | (codes[..., 1::2] << 4))
    # The scale is the smallest power of two that keeps the block within +-6: nothing clipped.
    amax = w.reshape(2, 3, 2, 32).abs().amax(dim=3)
    s = ref.e8m0_to_scale(scale)
    assert (amax <= 6 * s).all() and (amax > 3 * s).all()
    # Round to nearest: at most half the largest step (2 between 4 and 6) of each block's scale.
    err = (ref.dequant_weight_mxfp4(packed, scale) - w).abs().reshape(2, 3, 2, 32)
    assert (err <= s[..., None]).all()
    # Values already on the grid survive exactly.
    again = ref.dequant_weight_mxfp4(
        *ref.quant_weight_mxfp4(ref.dequant_weight_mxfp4(packed, scale))
    )
    assert torch.equal(again, ref.dequant_weight_mxfp4(packed, scale))


def test_mxfp4_special_scales_and_zero_blocks():
    packed, scale = ref.quant_weight_mxfp4(torch.zeros(1, 1, 32))
    assert int(scale) >= 1 and torch.equal(
        ref.dequant_weight_mxfp4(packed, scale), torch.zeros(1, 1, 32)
    )
    assert math.isnan(float(ref.e8m0_to_scale(torch.tensor(255))))
    assert float(ref.e8m0_to_scale(torch.tensor(127))) == 1.0
    with pytest.raises(ValueError, match="multiple of 32"):
        ref.quant_weight_mxfp4(torch.zeros(1, 1, 48))


def test_fp8_per_expert_scale():
    torch.manual_seed(1)
    w = torch.randn(3, 16, 32) * torch.tensor([0.01, 1.0, 100.0])[:, None, None]
    q, s = ref.quant_weight_fp8_expert(w)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (3,) and s.dtype == torch.float32
    assert torch.allclose(q.float().abs().amax(dim=(1, 2)), torch.full((3,), 448.0))
    err = (ref.dequant_weight_fp8_expert(q, s) - w).abs() / w.abs().amax(dim=(1, 2))[:, None, None]
    assert err.max() <= 2**-4


def test_glu_interleaved_is_the_activation_of_the_pairs():
    h = torch.randn(4, 12) * 5
    for kind in ("silu", "swiglu_oai"):
        split = torch.cat([h[:, 0::2], h[:, 1::2]], dim=1)
        assert torch.equal(ref.glu_interleaved(h, kind), ref.activation(split, kind))
    # swiglu_oai: gate clamped from above at 7, up both ways, (up + 1), alpha 1.702.
    h = torch.tensor([[9.0, 8.0]])
    assert torch.allclose(
        ref.glu_interleaved(h), torch.tensor([[7 * torch.sigmoid(torch.tensor(7 * 1.702)) * 8]])
    )


def test_moe_ffn_decode_skips_other_ranks_and_sums_to_the_whole():
    torch.manual_seed(2)
    T, K, E, D, F = 5, 2, 4, 32, 16
    x = torch.randn(T, D)
    w13, b13 = torch.randn(E, 2 * F, D) * 0.2, torch.randn(E, 2 * F)
    w2, b2 = torch.randn(E, D, F) * 0.2, torch.randn(E, D)
    ids = torch.stack([torch.randperm(E)[:K] for _ in range(T)]).to(torch.int32)
    wts = torch.rand(T, K)
    full = ref.moe_ffn_decode(x, ids, wts, w13, b13, w2, b2)
    # Two ranks of two experts each; each rank's slots elsewhere hold NaN weights, never read.
    parts = []
    for r in range(2):
        local = (ids // 2) == r
        mine = slice(2 * r, 2 * r + 2)
        parts.append(ref.moe_ffn_decode(
            x, ids, torch.where(local, wts, float("nan")), w13[mine], b13[mine], w2[mine],
            b2[mine], expert_offset=2 * r,
        ))  # fmt: skip
        assert torch.isfinite(parts[-1]).all()
    assert torch.allclose(parts[0] + parts[1], full, atol=1e-5)
    # Per slot by hand for one token: h = x w13^T + b13, GLU of the pairs, o = a w2^T + b2.
    t = 3
    y = sum(
        wts[t, k] * (ref.glu_interleaved((x[t] @ w13[e].T + b13[e])[None])[0] @ w2[e].T + b2[e])
        for k, e in enumerate(ids[t].tolist())
    )
    assert torch.allclose(full[t], y, atol=1e-5)
