"""Host-side helpers that several kernel launchers share, so that no kernel file keeps a copy.

A launcher checks its arguments, allocates and launches (the shape of the Triton tutorials). Here:
the one-line argument check and the tensor description its messages use, the size of a persistent
grid, the decode launchers' argument vocabulary (weight formats, GLUs, the MXFP4 block), which
`sparse_gemv` and `batched_gemm` both check against, and the operand checks of the two launchers
that serve top-k slots (`sparse_gemv`, `grouped_gemv`: `check_slot_operands`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from moebench.core.vocabulary import ACTIVATIONS

# Decode weight formats, as `weight_format` names them: FP8 e4m3 (W8A16) or packed MXFP4 (W4A16).
FORMATS = ("fp8", "mxfp4")
# The decode launchers' ``glu``: none, or a gated activation of the interleaved (gate, up) pairs.
GLUS = ("none", *ACTIVATIONS)
# Values along the reduction that share one e8m0 scale byte in MXFP4 weights.
MX_BLOCK = 32


def checker(launcher: str) -> Callable[[bool, str], None]:
    """A ``check(cond, message)`` that raises ``ValueError("<launcher>: <message>")`` unless
    ``cond`` holds."""

    def check(cond: bool, message: str) -> None:
        if not cond:
            raise ValueError(f"{launcher}: {message}")

    return check


def describe(t: torch.Tensor | None) -> str:
    """dtype and shape of ``t`` for an error message ("None" when it is missing)."""
    return "None" if t is None else f"{t.dtype} {list(t.shape)}"


def programs_per_device(device: torch.device, per_sm: int) -> int:
    """Persistent grid size: a few programs per SM on the GPU; a handful in the interpreter."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count * per_sm


def weight_format(w: torch.Tensor) -> str:
    """``fp8`` for float8_e4m3fn weights, ``mxfp4`` for packed uint8 ones."""
    if w.dtype == torch.float8_e4m3fn:
        return "fp8"
    if w.dtype == torch.uint8:
        return "mxfp4"
    raise ValueError(f"weights must be float8_e4m3fn (W8A16) or uint8 MXFP4, got {w.dtype}")


@dataclass(frozen=True)
class SlotOperands:
    """What `check_slot_operands` read off a slot launcher's tensors: the weight format, T tokens,
    K slots a token, E local experts, N output rows and R reduction values a weight row, and x's
    token and slot strides (0 for a [T, R] x, which every slot of a token reads)."""

    fmt: str
    T: int
    K: int
    E: int
    N: int
    R: int
    stride_xt: int
    stride_xk: int


def check_slot_operands(
    check: Callable[[bool, str], None],
    x: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    bias_EN: torch.Tensor,
    out: torch.Tensor,
    glu: str,
) -> SlotOperands:
    """The argument checks of a launcher that multiplies each (token, slot) by its expert's
    weights (`sparse_gemv`, `grouped_gemv`), with that launcher's ``check``: FP8 [E, N, R] or
    MXFP4 [E, N, R/2] weights with their scales, int32 [T, K] ids, bf16 x [T, R] (fc1) or
    [T, K, R] (fc2) with 4-byte aligned rows, bf16 bias [E, N] and out [T, K, N] (N/2 with a GLU),
    all on one device. A launcher's own limits (N's or the blocks' multiples) are its own."""
    check(glu in GLUS, f"glu must be one of {GLUS}, got {glu!r}")
    fmt = weight_format(w)
    check(w.dim() == 3 and w.stride(2) == 1, f"w must be 3-D, rows contiguous: {describe(w)}")
    E, N, Rw = w.shape
    R = Rw * (2 if fmt == "mxfp4" else 1)
    check(
        topk_ids_TK.dim() == 2 and topk_ids_TK.dtype == torch.int32,
        f"topk_ids_TK must be int32 [T, K], got {describe(topk_ids_TK)}",
    )
    T, K = topk_ids_TK.shape
    check(x.dtype == torch.bfloat16 and x.stride(-1) == 1, f"x must be bf16: {describe(x)}")
    if x.dim() == 2:
        check(tuple(x.shape) == (T, R), f"x must be [T={T}, R={R}], got {list(x.shape)}")
        stride_xt, stride_xk = x.stride(0), 0
    else:
        check(tuple(x.shape) == (T, K, R), f"x must be [{T}, {K}, {R}], got {list(x.shape)}")
        stride_xt, stride_xk = x.stride(0), x.stride(1)
    check(R % MX_BLOCK == 0 and R > 0, f"R ({R}) must be a positive multiple of {MX_BLOCK}")
    check(
        (stride_xt % 2, stride_xk % 2, x.data_ptr() % 4) == (0, 0, 0),
        "x rows must be 4-byte aligned (read as bf16 pairs)",
    )
    n_out = N // 2 if glu != "none" else N
    check(
        out.dtype == torch.bfloat16 and tuple(out.shape) == (T, K, n_out) and out.stride(2) == 1,
        f"out must be bf16 [{T}, {K}, {n_out}] with unit column stride, got {describe(out)}",
    )
    check(
        bias_EN.dtype == torch.bfloat16
        and tuple(bias_EN.shape) == (E, N)
        and bias_EN.stride(1) == 1,
        f"bias_EN must be bf16 [{E}, {N}], got {describe(bias_EN)}",
    )
    if fmt == "fp8":
        check(
            w_scale.dtype == torch.float32 and tuple(w_scale.shape) == (E,),
            f"FP8 weights need w_scale float32 [{E}], got {describe(w_scale)}",
        )
    else:
        check(
            w_scale.dtype == torch.uint8
            and tuple(w_scale.shape) == (E, N, R // MX_BLOCK)
            and w_scale.stride(2) == 1,
            f"MXFP4 weights need w_scale uint8 [{E}, {N}, {R // MX_BLOCK}], "
            f"got {describe(w_scale)}",
        )
        check(w.stride(1) % 4 == 0 and w.data_ptr() % 4 == 0, "MXFP4 rows must be 4-byte aligned")
    devices = {t.device for t in (x, topk_ids_TK, w, w_scale, bias_EN, out)}
    check(len(devices) == 1, f"all tensors must be on one device, got {sorted(map(str, devices))}")
    return SlotOperands(fmt, T, K, E, N, R, stride_xt, stride_xk)
