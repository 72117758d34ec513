"""Host-side helpers that several kernel launchers share, so that no kernel file keeps a copy.

A launcher checks its arguments, allocates and launches (the shape of the Triton tutorials). Here:
the one-line argument check and the tensor description its messages use, the size of a persistent
grid, and the decode launchers' argument vocabulary (weight formats, GLUs, the MXFP4 block), which
`sparse_gemv` and `batched_gemm` both check against.
"""

from __future__ import annotations

from collections.abc import Callable

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
