"""A small emulator of the PTX instructions the decode kernels' inline asm uses, elementwise on
32-bit words held in int64 tensors: the interpreter runs no PTX, so the CPU suite checks the
instructions themselves here (tests/kernels/test_mx_decode_ptx.py, test_fp8_placed.py); the GPU
runs of the kernel tests check the compiled kernels."""

from __future__ import annotations

import torch

__all__ = ["bf16x2_mul", "prmt", "run_ptx"]


def prmt(a: torch.Tensor, b: torch.Tensor, sel: int) -> torch.Tensor:
    """PTX prmt.b32 (default mode) with an immediate selector, elementwise on int64 words."""
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = torch.zeros_like(a)
    for i in range(4):
        nib = (sel >> (4 * i)) & 0xF
        byte = src[nib & 7]
        if nib & 8:  # sign replicate
            byte = torch.where(byte & 0x80 != 0, 0xFF, 0)
        out |= byte << (8 * i)
    return out


def bf16_of(bits: torch.Tensor) -> torch.Tensor:
    return (bits & 0xFFFF).to(torch.int32).to(torch.int16).view(torch.bfloat16)


def bf16x2_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """mul.rn.bf16x2: each half's product rounded to nearest even (subnormals kept): the fp32
    product of two bf16 numbers is exact, and its rounding to bf16 is torch's."""
    out = torch.zeros_like(a)
    for shift in (0, 16):
        p = (bf16_of(a >> shift).float() * bf16_of(b >> shift).float()).bfloat16()
        out |= (p.view(torch.int16).to(torch.int64) & 0xFFFF) << shift
    return out


def run_ptx(text: str, operands: dict[int, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Registers after ``text`` (an inline-asm body: $i operands, .reg declarations, the
    instructions mov, prmt, and, or, shl, shr, mul.lo.u32, shf.l.wrap and mul.rn.bf16x2) on the
    given $i words."""
    regs = {f"${i}": v for i, v in operands.items()}
    like = next(iter(operands.values()))

    def val(x: str) -> torch.Tensor:
        return regs[x] if x in regs else torch.full_like(like, int(x, 0))

    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if line in ("{", "}", "") or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        a = [x.strip() for x in rest.split(",")]
        if op == "mov.b32":
            regs[a[0]] = val(a[1])
        elif op == "prmt.b32":
            regs[a[0]] = prmt(val(a[1]), val(a[2]), int(a[3], 0))
        elif op == "and.b32":
            regs[a[0]] = val(a[1]) & val(a[2])
        elif op == "mul.lo.u32":
            regs[a[0]] = (val(a[1]) * val(a[2])) & 0xFFFFFFFF
        elif op == "shf.l.wrap.b32":  # funnel shift of a:b's... here both halves one word: rotate
            lo, hi, n = val(a[1]), val(a[2]), int(a[3], 0) % 32
            regs[a[0]] = ((hi << n) | (lo >> (32 - n))) & 0xFFFFFFFF if n else hi
        elif op == "or.b32":
            regs[a[0]] = val(a[1]) | val(a[2])
        elif op == "shl.b32":
            regs[a[0]] = (val(a[1]) << int(a[2], 0)) & 0xFFFFFFFF
        elif op == "shr.b32":  # logical: the words are non-negative int64 below 2^32
            regs[a[0]] = val(a[1]) >> int(a[2], 0)
        elif op == "mul.rn.bf16x2":
            regs[a[0]] = bf16x2_mul(val(a[1]), val(a[2]))
        else:
            raise AssertionError(f"the emulator has no {op!r}")
    return regs
