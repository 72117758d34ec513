"""Inputs and float32 references the decode kernel tests share (test_decode_kernels.py,
test_grouped_decode.py): quantised weights, one expert's reference rows, a routing that mixes
local and remote experts, and weights whose sums are exact in fp32 in any order."""

from __future__ import annotations

import torch

from moebench.core import reference as ref
from moebench.kernels.launch import FORMATS  # the decode weight formats the tests run

__all__ = ["FORMATS", "exact_weights", "quantised", "routing", "rows_ref"]


def quantised(fmt: str, w: torch.Tensor):
    """(weights, scales, float32 dequantised) of float weights [E, N, R]."""
    if fmt == "fp8":
        q, s = ref.quant_weight_fp8_expert(w)
        return q, s, ref.dequant_weight_fp8_expert(q, s)
    q, s = ref.quant_weight_mxfp4(w)
    return q, s, ref.dequant_weight_mxfp4(q, s)


def rows_ref(x_rows: torch.Tensor, wd: torch.Tensor, b: torch.Tensor, glu: str) -> torch.Tensor:
    """float32 reference of one expert's output for rows x [M, R]."""
    h = x_rows.float() @ wd.t() + b.float()
    return h if glu == "none" else ref.glu_interleaved(h, glu)


def routing(T: int, K: int, E: int, offset: int, seed: int) -> torch.Tensor:
    """int32 ids [T, K]: distinct per token, drawn from the local range and two remote ranks."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.arange(offset - E, offset + 2 * E).clamp_min(0).unique()
    return torch.stack([pool[torch.randperm(len(pool), generator=g)[:K]] for _ in range(T)]).int()


def exact_weights(fmt: str, E: int, N: int, R: int, g: torch.Generator):
    """Weights whose products with small integer tokens sum exactly in fp32, in any order."""
    if fmt == "fp8":
        w = torch.randint(-16, 17, (E, N, R), generator=g).float().to(torch.float8_e4m3fn)
        s = torch.full((E,), 0.125)
        return w, s, ref.dequant_weight_fp8_expert(w, s)
    packed = torch.randint(0, 256, (E, N, R // 2), generator=g, dtype=torch.uint8)
    s = torch.randint(124, 131, (E, N, R // 32), generator=g, dtype=torch.uint8)
    return packed, s, ref.dequant_weight_mxfp4(packed, s)
