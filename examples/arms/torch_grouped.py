"""A whole-FFN arm in plain torch: moebench's gates and statistics for an implementation that is
not moebench's (the "whole_ffn" contract, docs/DESIGN.md section 13).

It stands where a serving engine's fused-MoE call would: ``prepare`` turns moebench's problem
into the implementation's own layout once, untimed (here: weights dequantised to bf16 and
transposed to [E, K, N] as torch._grouped_mm takes them), and returns the callable that is timed.
That callable sorts the slots by local expert on the device (no host read, so one CUDA graph
replays it with any routing), runs both projections through torch._grouped_mm, applies SiLU·mul
(and, at precision fp8, the same FP8 quantisation of the activation that moebench's reference
does), and sums each token's slots with the router weights into ``y_TD``.

Run it: ``moebench run examples/arms/scenario.yaml`` (CPU) or
``moebench run examples/arms/v4-flash-ep8-torch.yaml`` (the H200).
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.core import reference


def _dequant_weights(p) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 w13 [E, 2F, D] and w2 [E, D, F] as moebench hands them (FP8 with 128x128 block scales
    at precision fp8, bf16 otherwise)."""
    if p.precision == "fp8":
        w13 = reference.dequant_weight_fp8_block(p.w13_EFD, p.w13_scale)
        w2 = reference.dequant_weight_fp8_block(p.w2_EDF, p.w2_scale)
        return w13.to(torch.bfloat16), w2.to(torch.bfloat16)
    return p.w13_EFD, p.w2_EDF


def prepare(p, y_TD: torch.Tensor):
    """Untimed: the weights in torch._grouped_mm's layout; returns the timed callable."""
    w13, w2 = _dequant_weights(p)
    w13_EDN = w13.transpose(1, 2).contiguous()  # [E, D, 2F]
    w2_EFN = w2.transpose(1, 2).contiguous()  # [E, F, D]
    E, F = p.local_experts, p.w2_EDF.shape[2]
    T, K = p.topk_ids_TK.shape
    fp8 = p.precision == "fp8"
    groups = p.x_TD.shape[1] // reference.GROUP

    def run() -> None:
        if fp8:  # the tokens as the dispatch carries them: FP8 with UE8M0 scales per 128 columns
            x = reference.dequant_fp8_ue8m0(p.x_TD, reference.unpack_ue8m0(p.x_sf_TG4, groups))
            x = x.to(torch.bfloat16)
        else:
            x = p.x_TD
        e = p.topk_ids_TK.to(torch.int64) - p.expert_offset
        local = (e >= 0) & (e < E)
        key = torch.where(local, e, E).flatten()  # other ranks' slots sort last
        order = torch.argsort(key, stable=True)
        token = order // K
        # Per-expert slot counts by scatter_add (bincount reads its maximum back to the host,
        # which a CUDA graph cannot capture).
        counts = torch.zeros(E + 1, dtype=torch.int64, device=key.device)
        counts.scatter_add_(0, key, torch.ones_like(key))
        offs = torch.cumsum(counts[:E], 0).to(torch.int32)
        h = torch._grouped_mm(x[token], w13_EDN, offs=offs)  # rows past offs[-1]: not computed
        a = torch.nn.functional.silu(h[:, :F].float()) * h[:, F:].float()
        if fp8:
            q, exp = reference.quant_fp8_ue8m0(a)
            a = reference.dequant_fp8_ue8m0(q, exp)
        o = torch._grouped_mm(a.to(torch.bfloat16), w2_EFN, offs=offs)
        keep = local.flatten()[order]
        weight = p.topk_weights_TK.flatten()[order]
        # Rows of non-local slots hold whatever _grouped_mm left there: select, never multiply
        # them by zero (NaN x 0 = NaN).
        o = torch.where(keep[:, None], o.float() * weight[:, None], 0.0)
        y = torch.zeros(T, o.shape[1], dtype=torch.float32, device=o.device)
        y.index_add_(0, token, o)
        y_TD.copy_(y)

    return run


ARM = Arm(
    name="torch_grouped",
    family="prefill",
    contract="whole_ffn",
    summary="plain torch: slots sorted by expert, torch._grouped_mm for both projections",
    prepare=prepare,
    kernels=("argsort", "torch._grouped_mm x2", "index_add_"),
)
