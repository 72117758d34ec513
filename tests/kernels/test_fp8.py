"""The FP8 and bf16 conversion helpers of moebench.kernels.jit against torch, bit for bit.

Under the interpreter (the default here) only the exact path runs, since the interpreter's native
conversions misround (docs/DESIGN.md section 11). Run with TRITON_INTERPRET=0 on a GPU to check the
native path against torch as well.
"""

import os

import pytest
import torch
import triton
import triton.language as tl

from moebench.core import reference
from moebench.core.numerics import bitwise_compare
from moebench.kernels.jit import fp32_to_bf16, fp32_to_e4m3_bits, ue8m0_scale

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETING else "cpu"
# The native conversion is only trusted where it is compiled (the GPU).
EXACT_MODES = [True] if DEVICE == "cpu" else [True, False]
BLOCK = 1024


@triton.jit
def _convert_kernel(x_ptr, e4m3_ptr, bf16_ptr, n, EXACT_RNE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(e4m3_ptr + offs, fp32_to_e4m3_bits(x, EXACT_RNE), mask=mask)
    tl.store(bf16_ptr + offs, fp32_to_bf16(x, EXACT_RNE), mask=mask)


@triton.jit
def _scale_kernel(amax_ptr, exp_ptr, inv_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    exp, inv = ue8m0_scale(tl.load(amax_ptr + offs, mask=mask, other=1.0))
    tl.store(exp_ptr + offs, exp, mask=mask)
    tl.store(inv_ptr + offs, inv, mask=mask)


def _convert(x: torch.Tensor, exact: bool) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.to(DEVICE, torch.float32).contiguous()
    e4m3 = torch.empty(x.numel(), dtype=torch.uint8, device=DEVICE)
    bf16 = torch.empty(x.numel(), dtype=torch.bfloat16, device=DEVICE)
    _convert_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, e4m3, bf16, x.numel(), exact, BLOCK)
    return e4m3.view(torch.float8_e4m3fn).cpu(), bf16.cpu()


def _finite_e4m3() -> torch.Tensor:
    """All finite e4m3fn values, ascending (-448 .. 448, both zeros)."""
    v = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    return torch.sort(v[torch.isfinite(v)]).values


def _random_values(n: int, seed: int) -> torch.Tensor:
    """Random fp32 across every e4m3 binade (log-uniform magnitudes, both signs), within +-448."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.exp2(torch.rand(n, generator=g) * 21 - 12)  # 2^-12 .. 2^9
    sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    return (sign * mag).clamp(-448, 448)


def _edge_values() -> torch.Tensor:
    pos = _finite_e4m3()
    pos = pos[pos > 0]
    ties = (pos[:-1] + pos[1:]) / 2  # exactly halfway: must go to the even mantissa
    near = torch.cat([torch.nextafter(ties, ties + 1), torch.nextafter(ties, ties - 1)])
    sub = torch.arange(0, 17, dtype=torch.float32) * 2.0**-10  # subnormal steps and their ties
    named = torch.tensor(
        [
            31.625,  # the interpreter's native conversion gives 16.0; torch 32.0
            100.0,  # the interpreter's native conversion gives 104.0; torch 96.0
            0.0,
            448.0,
            2.0**-6,  # smallest normal
            2.0**-6 - 2.0**-10,  # rounds up from the subnormals into the smallest normal
            2.0**-9,  # smallest subnormal
            2.0**-10,  # tie between 0 and the smallest subnormal: to 0
            3 * 2.0**-10,  # tie between 1 and 2 subnormal steps: to 2
            1e-30,  # far below the subnormals: signed zero
            1e-45,  # an fp32 subnormal
        ]
    )
    vals = torch.cat([pos, ties, near, sub, named])
    return torch.cat([vals, -vals])


@pytest.mark.parametrize("exact", EXACT_MODES)
def test_e4m3_matches_torch_on_random_values(exact):
    x = _random_values(100_000, seed=1)
    got, _ = _convert(x, exact)
    result = bitwise_compare(got, x.to(torch.float8_e4m3fn))
    assert result.equal, result.describe()


@pytest.mark.parametrize("exact", EXACT_MODES)
def test_e4m3_matches_torch_on_edge_values(exact):
    x = _edge_values()
    got, _ = _convert(x, exact)
    want = x.to(torch.float8_e4m3fn)
    result = bitwise_compare(got, want)
    assert result.equal, f"{result.describe()}: x={x[result.first[0]].item()!r}"
    # Signed zero survives: -0.0 and negative values below the subnormals give 0x80.
    neg_zero = torch.tensor([-0.0, -1e-30, -(2.0**-10)])
    assert _convert(neg_zero, exact)[0].view(torch.uint8).tolist() == [0x80] * 3


def test_e4m3_saturates():
    # Out of the kernels' range but defined: finite and infinite magnitudes past 448 give +-448 and
    # NaN stays NaN, as torch 2.13 on the CPU and the GPU's satfinite conversion do. Written out
    # rather than taken from torch: torch 2.11 on the CPU turns 1e9 and inf into NaN instead.
    x = torch.tensor([450.0, 464.0, 1e9, float("inf"), -460.0, -float("inf"), float("nan")])
    got, _ = _convert(x, exact=True)
    assert got.view(torch.uint8).tolist()[:6] == [0x7E] * 4 + [0xFE] * 2
    assert torch.isnan(got[6:].float()).all()


@pytest.mark.parametrize("exact", EXACT_MODES)
def test_bf16_matches_torch(exact):
    # Random values over a wide range, plus exact ties between bf16 neighbours (low 16 bits 0x8000)
    # below the NaN exponent, and the overflow to inf.
    g = torch.Generator().manual_seed(2)
    x = torch.randn(50_000, generator=g) * torch.exp2(
        torch.randint(-60, 60, (50_000,), generator=g)
    )
    ties = (torch.randint(0, 0x7F00, (1000,), generator=g, dtype=torch.int32) << 16) | 0x8000
    big = torch.tensor([3.3895e38, 3.3961e38, 3.4e38, -3.4e38, 0.0, -0.0])
    x = torch.cat([x, ties.view(torch.float32), -ties.view(torch.float32), big])
    _, got = _convert(x, exact)
    result = bitwise_compare(got, x.to(torch.bfloat16))
    assert result.equal, f"{result.describe()}: x={x[result.first[0]].item()!r}"
    _, nan = _convert(torch.tensor([float("nan")]), exact)
    assert torch.isnan(nan).all()


def test_ue8m0_scale_matches_reference():
    g = torch.Generator().manual_seed(3)
    random = torch.exp2(torch.rand(20_000, generator=g) * 80 - 30)
    powers = 448.0 * torch.exp2(torch.arange(-20, 20, dtype=torch.float32))  # exact: no bump
    amax = torch.cat(
        [
            random,
            powers,
            torch.nextafter(powers, powers + 1),  # one ulp above: bumped to the next power
            torch.nextafter(powers, powers - 1),
            torch.tensor([0.0, 1e-6, 1e-4, 1.01e-4, 448.0, 896.0, 1e30]),  # floor, boundaries
        ]
    ).to(DEVICE)
    exp = torch.empty(amax.numel(), dtype=torch.int32, device=DEVICE)
    inv = torch.empty(amax.numel(), dtype=torch.float32, device=DEVICE)
    _scale_kernel[(triton.cdiv(amax.numel(), BLOCK),)](amax, exp, inv, amax.numel(), BLOCK)
    want_exp = reference.ue8m0_exponent(amax.cpu())
    result = bitwise_compare(exp.cpu(), want_exp)
    assert result.equal, f"{result.describe()}: amax={amax[result.first[0]].item()!r}"
    result = bitwise_compare(inv.cpu(), reference.exponent_to_scale(254 - want_exp))
    assert result.equal, result.describe()
