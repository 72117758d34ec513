"""The honest computation the GPU cheats wrap (side_stream.py, l2_window.py): every local expert
on every token, one batched matmul a projection, the router weights as a dense [T, E] matrix.

Nothing in a call reads back to the host (no ``nonzero``, no ``.item()``), so a call only queues
work on the GPU, and its time is the GPU's: what a cheat needs to show what escapes a timer.
Shapes: x_TD [T, D]; w13_EDN [E, D, 2F] (gate columns, then up); w2_EFD [E, F, D]; gate_TE
float32 [T, E]; h [E, T, 2F]; o [E, T, D]; the result float32 [T, D].
"""

from __future__ import annotations

import torch

from moebench.core import reference


def weights(p, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The arm's own copies of the rank's weights, dequantised to ``dtype`` and transposed for
    ``x @ w``: w13_EDN [E, D, 2F] and w2_EFD [E, F, D] (untimed: call it in prepare)."""
    if p.precision == "fp8":
        w13 = reference.dequant_weight_fp8_block(p.w13_EFD, p.w13_scale)
        w2 = reference.dequant_weight_fp8_block(p.w2_EDF, p.w2_scale)
    else:
        w13, w2 = p.w13_EFD, p.w2_EDF
    return (w13.to(dtype).transpose(1, 2).contiguous(), w2.to(dtype).transpose(1, 2).contiguous())


def ffn(p, w13_EDN: torch.Tensor, w2_EFD: torch.Tensor) -> torch.Tensor:
    """float32 [T, D]: the rank's MoE FFN of the tokens as they are now, in the weights' dtype."""
    if p.precision == "fp8":
        groups = p.x_TD.shape[1] // reference.GROUP
        x = reference.dequant_fp8_ue8m0(p.x_TD, reference.unpack_ue8m0(p.x_sf_TG4, groups))
    else:
        x = p.x_TD
    E, F = w2_EFD.shape[0], w2_EFD.shape[1]
    T = x.shape[0]
    e = p.topk_ids_TK.to(torch.int64) - p.expert_offset
    local = (e >= 0) & (e < E)
    gate_TE = torch.zeros(T, E + 1, dtype=torch.float32, device=x.device)
    gate_TE.scatter_add_(1, torch.where(local, e, E), p.topk_weights_TK.float())
    h = torch.matmul(x.to(w13_EDN.dtype), w13_EDN)  # [E, T, 2F]
    a = reference.activation(h.reshape(E * T, 2 * F), p.activation)
    if p.precision == "fp8":  # the activation rounded through FP8, as the reference does
        q, exp = reference.quant_fp8_ue8m0(a)
        a = reference.dequant_fp8_ue8m0(q, exp)
    o = torch.matmul(a.view(E, T, F).to(w2_EFD.dtype), w2_EFD)  # [E, T, D]
    return torch.einsum("te,etd->td", gate_TE[:, :E], o.float())
