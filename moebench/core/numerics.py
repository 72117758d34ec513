"""Tolerances, a scale-free error and bitwise comparison: the one place numerics are judged."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Scale-free error (DeepGEMM's calc_diff) allowed against the float32 reference, per precision.
# bf16: every stage rounds to bf16 (2^-9 relative), so the error is ~1e-5; fp8 rounds the
# activation and the token to e4m3 (2^-4 relative), ~1e-3. The decode precisions (w8a16, w4a16)
# are judged against the reference on the same dequantised weights with bf16 activations, so only
# bf16 roundings and the accumulation order remain, as for bf16.
TOLERANCE = {"bf16": 2e-4, "fp8": 2e-3, "w8a16": 2e-4, "w4a16": 2e-4}


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """1 - cosine-like similarity; 0 for identical tensors, scale-free. NaN if either has NaN."""
    return diff_of(*diff_sums(x, y).tolist())


def diff_sums(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The two float64 sums ``calc_diff`` needs, (x*x + y*y, x*y), on the tensors' device and
    not read back: a caller may queue them and read them later (``gates.checks``)."""
    x, y = x.double(), y.double()
    return torch.stack([(x * x + y * y).sum(), (x * y).sum()])


def diff_of(denom: float, dot: float) -> float:
    """``calc_diff`` from its two sums."""
    return 0.0 if denom == 0 else 1 - 2 * dot / denom


def nonfinite(t: torch.Tensor) -> int:
    return int((~torch.isfinite(t.float())).sum()) if t.is_floating_point() else 0


@dataclass(frozen=True, kw_only=True)
class BitwiseResult:
    equal: bool
    differing: int
    first: tuple[int, ...] | None

    def describe(self) -> str:
        if self.equal:
            return "bitwise equal"
        return f"{self.differing} elements differ, first at {self.first}"


def _raw(t: torch.Tensor) -> torch.Tensor:
    """Integer view of a tensor's bits, so NaN payloads and -0.0 compare exactly."""
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(view)


def bitwise_compare(a: torch.Tensor, b: torch.Tensor) -> BitwiseResult:
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"cannot compare {a.dtype}{tuple(a.shape)} with {b.dtype}{tuple(b.shape)}")
    diff = _raw(a) != _raw(b)
    n = int(diff.sum())
    first = tuple(int(i) for i in torch.nonzero(diff)[0]) if n else None
    return BitwiseResult(equal=n == 0, differing=n, first=first)
