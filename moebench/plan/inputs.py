"""Inputs of one rank: seeded weights, tokens and routing turned into an arm's Problem.

Prepared before anything is timed. Weights are seeded per global expert id, so an expert has the
same weights whatever the topology; tokens are seeded per case.
"""

from __future__ import annotations

import torch

from moebench.arm import decode
from moebench.arm.prefill import Problem
from moebench.core import reference
from moebench.core.layout import capacity_rows as capacity_formula


def _randn(shape, *, seed: int, device: torch.device, scale: float) -> torch.Tensor:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32) * scale


def make_weights(
    *, experts: range, hidden: int, intermediate: int, seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 w13_EFD [E, 2F, D] and w2_EDF [E, D, F] for the given global expert ids.

    Scaled by 1/sqrt(fan-in) so that activations stay O(1) through the FFN.
    """
    w13 = torch.empty(len(experts), 2 * intermediate, hidden, dtype=torch.bfloat16, device=device)
    w2 = torch.empty(len(experts), hidden, intermediate, dtype=torch.bfloat16, device=device)
    for i, e in enumerate(experts):
        base = seed * 1_000_003 + 2 * e
        w13[i] = _randn(w13.shape[1:], seed=base, device=device, scale=hidden**-0.5)
        w2[i] = _randn(w2.shape[1:], seed=base + 1, device=device, scale=intermediate**-0.5)
    return w13, w2


def make_tokens(*, tokens: int, hidden: int, seed: int, device: torch.device) -> torch.Tensor:
    return _randn((tokens, hidden), seed=seed * 7919 + 17, device=device, scale=1.0).to(
        torch.bfloat16
    )


def prefill_tokens(x_TD: torch.Tensor, precision: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The tokens as a prefill problem carries them: FP8 e4m3 with packed UE8M0 scales per 128
    columns for ``fp8`` (as a serving engine's dispatch carries FP8 rows), bf16 otherwise."""
    if precision == "fp8":
        q, exp = reference.quant_fp8_ue8m0(x_TD)
        return q, reference.pack_ue8m0(exp)
    if precision == "bf16":
        return x_TD.to(torch.bfloat16).contiguous(), None
    raise ValueError(f"unknown precision {precision!r}")


def build_problem(
    *,
    x_TD: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    w13_EFD: torch.Tensor,
    w2_EDF: torch.Tensor,
    expert_offset: int,
    experts: int,
    alignment: int,
    capacity_rows: int,
    precision: str,
    activation: str,
    gemm: str = "triton",
) -> Problem:
    """Quantise what the precision asks for and bundle one rank's inputs.

    fp8: tokens are quantised per (token, 128 columns) before the scatter, as a serving engine's
    dispatch carries FP8 rows; weights get 128x128 block scales. ``experts``: the model's global
    expert count, of which w13_EFD holds [expert_offset, expert_offset + E).
    """
    check_experts(experts, expert_offset, w13_EFD.shape[0])
    x, x_sf = prefill_tokens(x_TD, precision)
    if precision == "fp8":
        w13, w13_s = reference.quant_weight_fp8_block(w13_EFD)
        w2, w2_s = reference.quant_weight_fp8_block(w2_EDF)
    elif precision == "bf16":
        w13, w13_s = w13_EFD.to(torch.bfloat16).contiguous(), None
        w2, w2_s = w2_EDF.to(torch.bfloat16).contiguous(), None
    else:
        raise ValueError(f"unknown precision {precision!r}")
    return Problem(
        x_TD=x,
        x_sf_TG4=x_sf,
        topk_ids_TK=topk_ids_TK.to(device=x.device, dtype=torch.int32).contiguous(),
        topk_weights_TK=topk_weights_TK.to(device=x.device, dtype=torch.float32).contiguous(),
        w13_EFD=w13,
        w13_scale=w13_s,
        w2_EDF=w2,
        w2_scale=w2_s,
        expert_offset=expert_offset,
        experts=experts,
        alignment=alignment,
        capacity_rows=capacity_rows,
        precision=precision,
        activation=activation,
        gemm=gemm,
    )


def check_experts(experts: int, expert_offset: int, local: int) -> None:
    """ValueError unless the rank's experts [expert_offset, expert_offset + local) lie within
    the model's ``experts``."""
    if not (isinstance(experts, int) and 0 <= expert_offset and expert_offset + local <= experts):
        raise ValueError(
            f"experts: the model's global expert count must hold this rank's experts "
            f"[{expert_offset}, {expert_offset + local}); got {experts!r}"
        )


def reference_output(p: Problem) -> torch.Tensor:
    """float32 [T, D]: the reference FFN of this rank's experts on the same (quantised) inputs."""
    if p.precision == "fp8":
        x = reference.dequant_fp8_ue8m0(
            p.x_TD, reference.unpack_ue8m0(p.x_sf_TG4, p.x_TD.shape[1] // reference.GROUP)
        )
        w13 = reference.dequant_weight_fp8_block(p.w13_EFD, p.w13_scale)
        w2 = reference.dequant_weight_fp8_block(p.w2_EDF, p.w2_scale)
    else:
        x, w13, w2 = p.x_TD, p.w13_EFD, p.w2_EDF
    return reference.moe_ffn(
        x,
        p.topk_ids_TK,
        p.topk_weights_TK,
        w13,
        w2,
        activation_kind=p.activation,
        expert_offset=p.expert_offset,
        quantize_act=p.precision == "fp8",
    )


def default_capacity(tokens: int, top_k: int, experts: int, alignment: int) -> int:
    """Capacity when every expert is local (the Python API's single-rank case)."""
    return capacity_formula(tokens, 1, top_k, experts, alignment)


# --------------------------------------------------------------------------- decode family


def make_decode_weights(
    *, experts: range, hidden: int, intermediate: int, seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """bf16 w13 [E, 2F, D] (gate/up rows interleaved), b13 [E, 2F], w2 [E, D, F], b2 [E, D].

    The matrices are `make_weights`'s (same seeds); the biases have their own seeds per global
    expert and a scale of 0.5, large enough that a wrong expert's bias shows in the checks.
    """
    w13, w2 = make_weights(
        experts=experts, hidden=hidden, intermediate=intermediate, seed=seed, device=device
    )
    b13 = torch.empty(len(experts), 2 * intermediate, dtype=torch.bfloat16, device=device)
    b2 = torch.empty(len(experts), hidden, dtype=torch.bfloat16, device=device)
    for i, e in enumerate(experts):
        base = seed * 1_000_003 + 2 * e + (1 << 40)
        b13[i] = _randn(b13.shape[1:], seed=base, device=device, scale=0.5)
        b2[i] = _randn(b2.shape[1:], seed=base + 1, device=device, scale=0.5)
    return w13, b13, w2, b2


def build_decode_problem(
    *,
    x_TD: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    w13_E2FD: torch.Tensor,
    b13_E2F: torch.Tensor,
    w2_EDF: torch.Tensor,
    b2_ED: torch.Tensor,
    expert_offset: int,
    experts: int,
    precision: str,
    activation: str,
) -> decode.Problem:
    """Quantise the weights as the precision asks (w8a16: FP8 e4m3, one scale an expert; w4a16:
    MXFP4 along the reduction dimension) and bundle one rank's decode inputs; tokens stay bf16.
    ``experts``: the model's global expert count, of which the weights hold
    [expert_offset, expert_offset + E)."""
    check_experts(experts, expert_offset, w13_E2FD.shape[0])
    if precision == "w8a16":
        quant = reference.quant_weight_fp8_expert
    elif precision == "w4a16":
        quant = reference.quant_weight_mxfp4
    else:
        raise ValueError(f"unknown decode precision {precision!r}; expected w8a16 or w4a16")
    # A transformers checkpoint holds its experts transposed ([E, K, N]); the view given here
    # keeps those strides through the element-wise quantiser, and the kernels read rows.
    w13, w13_s = (t.contiguous() for t in quant(w13_E2FD))
    w2, w2_s = (t.contiguous() for t in quant(w2_EDF))
    dev = x_TD.device
    return decode.Problem(
        x_TD=x_TD.to(torch.bfloat16).contiguous(),
        topk_ids_TK=topk_ids_TK.to(device=dev, dtype=torch.int32).contiguous(),
        topk_weights_TK=topk_weights_TK.to(device=dev, dtype=torch.float32).contiguous(),
        w13=w13,
        w13_scale=w13_s,
        b13_E2F=b13_E2F.to(torch.bfloat16).contiguous(),
        w2=w2,
        w2_scale=w2_s,
        b2_ED=b2_ED.to(torch.bfloat16).contiguous(),
        expert_offset=expert_offset,
        experts=experts,
        precision=precision,
        activation=activation,
    )


def dequant_decode_weights(p: decode.Problem) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 w13 [E, 2F, D] and w2 [E, D, F] as the kernels see them."""
    if p.precision == "w8a16":
        deq = reference.dequant_weight_fp8_expert
    else:
        deq = reference.dequant_weight_mxfp4
    return deq(p.w13, p.w13_scale), deq(p.w2, p.w2_scale)


def decode_reference_output(p: decode.Problem) -> torch.Tensor:
    """float32 [T, D]: the reference decode FFN of this rank's experts on the same (quantised)
    weights, the activation rounded to bf16 as the kernels store it."""
    w13, w2 = dequant_decode_weights(p)
    return reference.moe_ffn_decode(
        p.x_TD, p.topk_ids_TK, p.topk_weights_TK, w13, p.b13_E2F, w2, p.b2_ED,
        activation_kind=p.activation, expert_offset=p.expert_offset, act_dtype=torch.bfloat16,
    )  # fmt: skip
