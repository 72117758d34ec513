"""moebench.run_arm: the Python API on a user's own tensors, every prefill arm, both precisions."""

import pytest
import torch

import moebench
from moebench.core import reference
from moebench.core.numerics import TOLERANCE, bitwise_compare, calc_diff


def inputs(T=6, K=2, E=3, D=128, F=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).to(torch.int32)
    w = torch.softmax(torch.randn(T, K, generator=g), dim=1)
    w13 = (torch.randn(E, 2 * F, D, generator=g) / D**0.5).to(torch.bfloat16)
    w2 = (torch.randn(E, D, F, generator=g) / F**0.5).to(torch.bfloat16)
    return x, ids, w, w13, w2


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_run_arm_matches_the_reference_and_the_other_arms(precision):
    x, ids, w, w13, w2 = inputs()
    ys = {
        arm: moebench.run_arm(arm, x, ids, w, w13, w2, precision=precision, alignment=16)
        for arm in ("stock", "prefix_sum", "prefix_sum_masked")
    }
    if precision == "bf16":
        ref = reference.moe_ffn(x, ids, w, w13, w2)
    else:  # the reference on the same quantised operands
        q, exp = reference.quant_fp8_ue8m0(x)
        ref = reference.moe_ffn(
            reference.dequant_fp8_ue8m0(q, exp),
            ids,
            w,
            reference.dequant_weight_fp8_block(*reference.quant_weight_fp8_block(w13)),
            reference.dequant_weight_fp8_block(*reference.quant_weight_fp8_block(w2)),
            quantize_act=True,
        )
    for arm, y in ys.items():
        assert y.shape == x.shape and y.dtype == torch.bfloat16
        assert calc_diff(y.float(), ref) < TOLERANCE[precision], arm
        assert bitwise_compare(y, ys["stock"]).equal, arm


def test_run_arm_rejects_bad_input():
    x, ids, w, w13, w2 = inputs()
    with pytest.raises(ValueError, match="unknown arm"):
        moebench.run_arm("fastest", x, ids, w, w13, w2)
    with pytest.raises(ValueError, match="w13_EFD"):
        moebench.run_arm("stock", x, ids, w, w13[:, :100], w2)
