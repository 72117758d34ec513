"""The single plain-torch truth: every stage and the whole FFN in float32.

Tests, correctness gates and benchmarks import these functions; nothing retypes them. Each function
mirrors one stage (same name as the kernel file) or the whole FFN.

Legend: T tokens, K top-k, E experts (local unless said), D hidden, F intermediate,
M capacity rows, G = C/128 column groups of a C-column row, G4 = ceil(G/4) packed scale words.

Numerics (docs/DESIGN.md section 4):
- activations: FP8 e4m3 per (row, 128-column group), power-of-two scale whose byte is the fp32
  scale's exponent (UE8M0); scales packed four groups per int32, least significant byte first,
  stored M-major (element [m, p] at m + p * M_pad, M_pad = rows rounded up to 4).
- weights: FP8 e4m3 with one fp32 scale per 128x128 block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F_

GROUP = 128
FP8_MAX = 448.0
# DeepGEMM clamps the group maximum before taking the scale so that an all-zero group gets a
# finite, tiny scale instead of 0 (and 0/0).
AMAX_FLOOR = 1e-4
SWIGLU_ALPHA = 1.702
SWIGLU_LIMIT = 7.0


# --------------------------------------------------------------------------- FP8 activations


def ue8m0_exponent(amax: torch.Tensor) -> torch.Tensor:
    """Biased exponent byte (int32) of the smallest power of two >= amax / 448.

    Computed on the fp32 bits so that it is exact and identical to the kernels: the exponent field,
    plus one when any mantissa bit is set (ceil of log2).
    """
    s = (amax.float().clamp_min(AMAX_FLOOR) / FP8_MAX).contiguous()
    bits = s.view(torch.int32)
    exp = (bits >> 23) & 0xFF
    return exp + ((bits & 0x7FFFFF) != 0).to(torch.int32)


def exponent_to_scale(exp: torch.Tensor) -> torch.Tensor:
    """fp32 power of two 2**(exp-127) from a biased exponent (int32)."""
    return (exp.to(torch.int32) << 23).view(torch.float32)


def quant_fp8_ue8m0(x_MC: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise rows per 128-column group. Returns (q_MC float8_e4m3fn, exp_MG uint8).

    C need not be a multiple of 128: the last group is partial.
    """
    M, C = x_MC.shape
    G = -(-C // GROUP)
    xf = x_MC.float()
    pad = G * GROUP - C
    xp = F_.pad(xf, (0, pad)) if pad else xf
    amax = xp.view(M, G, GROUP).abs().amax(dim=2)
    exp = ue8m0_exponent(amax)
    inv = exponent_to_scale(254 - exp)  # 1/scale, exact for a power of two
    q = (xp.view(M, G, GROUP) * inv[:, :, None]).view(M, G * GROUP)[:, :C]
    return q.to(torch.float8_e4m3fn), exp.to(torch.uint8)


def dequant_fp8_ue8m0(q_MC: torch.Tensor, exp_MG: torch.Tensor) -> torch.Tensor:
    """float32 [M, C] from FP8 values and their group exponents."""
    M, C = q_MC.shape
    scale = exponent_to_scale(exp_MG.to(torch.int32)).repeat_interleave(GROUP, dim=1)[:, :C]
    return q_MC.float() * scale


def packed_scale_words(groups: int) -> int:
    return -(-groups // 4)


def empty_packed_scales(rows: int, groups: int, device: torch.device | str) -> torch.Tensor:
    """int32 [M, G4] M-major view (strides (1, M_pad)), M_pad = rows rounded up to 4."""
    m_pad = -(-rows // 4) * 4
    store = torch.zeros(packed_scale_words(groups), m_pad, dtype=torch.int32, device=device)
    return store.t()[:rows]


def pack_ue8m0(exp_MG: torch.Tensor) -> torch.Tensor:
    """Pack exponent bytes four groups per int32 (byte j of word p holds group 4p+j), M-major.

    Groups beyond the last are zero bytes.
    """
    M, G = exp_MG.shape
    G4 = packed_scale_words(G)
    e = torch.zeros(M, G4 * 4, dtype=torch.int64, device=exp_MG.device)
    e[:, :G] = exp_MG.to(torch.int64)
    e = e.view(M, G4, 4)
    words = e[..., 0] | (e[..., 1] << 8) | (e[..., 2] << 16) | (e[..., 3] << 24)
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    out = empty_packed_scales(M, G, exp_MG.device)
    out.copy_(words)
    return out


def unpack_ue8m0(sf_MG4: torch.Tensor, groups: int) -> torch.Tensor:
    """uint8 [M, G] exponent bytes from packed words (any strides)."""
    w = sf_MG4.to(torch.int64) & 0xFFFFFFFF
    parts = [(w >> (8 * j)) & 0xFF for j in range(4)]
    return torch.stack(parts, dim=2).reshape(w.shape[0], 4 * w.shape[1])[:, :groups].to(torch.uint8)


# --------------------------------------------------------------------------- FP8 weights


def quant_weight_fp8_block(w_ENK: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-128x128-block weight quantisation. Returns (q_ENK e4m3fn, scale_E(N/128)(K/128) fp32).

    N and K must be multiples of 128.
    """
    E, N, K = w_ENK.shape
    blocks = w_ENK.float().view(E, N // GROUP, GROUP, K // GROUP, GROUP)
    amax = blocks.abs().amax(dim=(2, 4)).clamp_min(AMAX_FLOOR)
    scale = amax / FP8_MAX
    q = (blocks / scale[:, :, None, :, None]).view(E, N, K).to(torch.float8_e4m3fn)
    return q, scale


def dequant_weight_fp8_block(q_ENK: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    E, N, K = q_ENK.shape
    s = scale.repeat_interleave(GROUP, dim=1).repeat_interleave(GROUP, dim=2)
    return q_ENK.float() * s


# --------------------------------------------------------------------------- stages


def activation(h_M2F: torch.Tensor, kind: str = "silu") -> torch.Tensor:
    """float32 [M, F] from the FC1 output [M, 2F] (gate columns first, then up)."""
    h = h_M2F.float()
    F = h.shape[1] // 2
    gate, up = h[:, :F], h[:, F:]
    if kind == "silu":
        return gate * torch.sigmoid(gate) * up
    if kind == "swiglu_oai":
        gate = gate.clamp(max=SWIGLU_LIMIT)
        up = up.clamp(min=-SWIGLU_LIMIT, max=SWIGLU_LIMIT)
        return gate * torch.sigmoid(SWIGLU_ALPHA * gate) * (up + 1.0)
    raise ValueError(f"unknown activation {kind!r}")


def act_quant(h_M2F: torch.Tensor, kind: str = "silu", precision: str = "fp8"):
    """The `act` stage on every row. fp8: (q_MF e4m3fn, packed sf_MG4 int32); bf16: a_MF bf16."""
    a = activation(h_M2F, kind)
    if precision == "bf16":
        return a.to(torch.bfloat16)
    q, exp = quant_fp8_ue8m0(a)
    return q, pack_ue8m0(exp)


def scatter_plan(
    topk_ids_TK: torch.Tensor, expert_offset: int, local_experts: int, alignment: int, rows: int
) -> dict[str, torch.Tensor]:
    """Where each (token, slot) lands in the capacity buffer, in stable token-major order.

    Returns int32 tensors: ``ends_E``, ``row_expert_M`` (-1 for padding and tail), ``row_src_M``
    (t*K + k of the slot in that row, -1 for padding) and ``slot_row_TK`` (row of each slot, -1 when
    the slot's expert is not local).
    """
    from moebench.core.layout import expert_ends, expert_starts

    T, K = topk_ids_TK.shape
    ids = topk_ids_TK.to(torch.int64).reshape(-1) - expert_offset
    local = (ids >= 0) & (ids < local_experts)
    counts = torch.bincount(ids[local], minlength=local_experts)
    ends = expert_ends(counts, alignment)
    starts = expert_starts(ends, alignment).to(torch.int64)
    row_expert = torch.full((rows,), -1, dtype=torch.int32, device=topk_ids_TK.device)
    row_src = torch.full((rows,), -1, dtype=torch.int32, device=topk_ids_TK.device)
    slot_row = torch.full((T * K,), -1, dtype=torch.int32, device=topk_ids_TK.device)
    for e in range(local_experts):
        slots = torch.nonzero(ids == e).flatten()
        r = starts[e] + torch.arange(slots.numel(), device=ids.device)
        if r.numel() and int(r[-1]) >= rows:
            raise ValueError("routing overflows the capacity buffer")
        row_expert[r] = e
        row_src[r] = slots.to(torch.int32)
        slot_row[slots] = r.to(torch.int32)
    return {
        "ends_E": ends,
        "row_expert_M": row_expert,
        "row_src_M": row_src,
        "slot_row_TK": slot_row.view(T, K),
    }


def grouped_gemm(a_MK: torch.Tensor, w_ENK: torch.Tensor, row_expert_M: torch.Tensor):
    """float32 [M, N]: each live row times its expert's weight (transposed); padding rows NaN."""
    M = a_MK.shape[0]
    N = w_ENK.shape[1]
    out = torch.full((M, N), float("nan"), dtype=torch.float32, device=a_MK.device)
    for e in torch.unique(row_expert_M[row_expert_M >= 0]).tolist():
        rows = row_expert_M == e
        out[rows] = a_MK[rows].float() @ w_ENK[e].float().t()
    return out


def combine(out_MD: torch.Tensor, slot_row_TK: torch.Tensor, topk_weights_TK: torch.Tensor):
    """float32 [T, D]: weighted sum of each token's local slots; non-local slots are skipped."""
    T, K = slot_row_TK.shape
    y = torch.zeros(T, out_MD.shape[1], dtype=torch.float32, device=out_MD.device)
    for k in range(K):
        r = slot_row_TK[:, k].to(torch.int64)
        hit = r >= 0
        y[hit] += topk_weights_TK[hit, k].float()[:, None] * out_MD[r[hit]].float()
    return y


# --------------------------------------------------------------------------- whole FFN


def moe_ffn(
    x_TD: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    w13_EFD: torch.Tensor,
    w2_EDF: torch.Tensor,
    *,
    activation_kind: str = "silu",
    expert_offset: int = 0,
    quantize_act: bool = False,
) -> torch.Tensor:
    """float32 [T, D]: the MoE FFN over the experts [expert_offset, expert_offset + E).

    ``w13_EFD`` and ``w2_EDF`` are already dequantised (any float dtype). Slots routed to other
    experts are skipped, so summing this over all expert ranges gives the full FFN.
    With ``quantize_act`` the activation is rounded through FP8 (UE8M0 groups) as the fp8 pipeline
    does, so the comparison measures only accumulation error.
    """
    T, K = topk_ids_TK.shape
    E = w13_EFD.shape[0]
    y = torch.zeros(T, x_TD.shape[1], dtype=torch.float32, device=x_TD.device)
    ids = topk_ids_TK.to(torch.int64) - expert_offset
    for e in range(E):
        tok, slot = torch.nonzero(ids == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x_TD[tok].float() @ w13_EFD[e].float().t()
        a = activation(h, activation_kind)
        if quantize_act:
            q, exp = quant_fp8_ue8m0(a)
            a = dequant_fp8_ue8m0(q, exp)
        o = a @ w2_EDF[e].float().t()
        y.index_add_(0, tok, topk_weights_TK[tok, slot].float()[:, None] * o)
    return y


# --------------------------------------------------------------------------- decode family
#
# The decode arms (docs/DESIGN.md sections 3, 4) follow gpt-oss: the gate/up weight interleaves its
# rows, row 2j the gate and row 2j+1 the up projection of intermediate column j (gpt-oss's
# `gate_up_proj`, whose output is split as gate = h[..., ::2], up = h[..., 1::2]); both
# projections carry an expert bias. Weight formats: FP8 e4m3 with one fp32 scale per expert
# (W8A16) and MXFP4 (OCP microscaling: e2m1 values two a byte, low nibble first, one e8m0 scale
# per 32 consecutive values along K; W4A16). Activations stay bf16.

MX_BLOCK = 32
E2M1_MAX = 6.0
# Magnitudes of the eight e2m1 codes (1 sign, 2 exponent, 1 mantissa bit; code 1 is subnormal).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def quant_weight_fp8_expert(w_ENK: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-expert weight quantisation. Returns (q_ENK e4m3fn, scale_E fp32) with
    ``w ~= q * scale[e]``; the scale maps the expert's largest magnitude to 448."""
    amax = w_ENK.float().abs().amax(dim=(1, 2)).clamp_min(AMAX_FLOOR)
    scale = amax / FP8_MAX
    q = (w_ENK.float() / scale[:, None, None]).to(torch.float8_e4m3fn)
    return q, scale


def dequant_weight_fp8_expert(q_ENK: torch.Tensor, scale_E: torch.Tensor) -> torch.Tensor:
    """float32 [E, N, K] from FP8 weights and their per-expert scales."""
    return q_ENK.float() * scale_E.float()[:, None, None]


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """uint8 e2m1 codes (sign in bit 3) of float values, rounded to nearest even, saturating at 6.

    The seven midpoints between neighbouring magnitudes alternate in which side is even (ties at
    0.25, 1.25, 2.5 and 5 go down, at 0.75, 1.75 and 3.5 up), so the code is a count of
    thresholds passed, strict or not.
    """
    a = v.float().abs()
    code = torch.zeros(v.shape, dtype=torch.int32, device=v.device)
    for t in (0.25, 1.25, 2.5, 5.0):
        code += (a > t).to(torch.int32)
    for t in (0.75, 1.75, 3.5):
        code += (a >= t).to(torch.int32)
    sign = torch.signbit(v.float()).to(torch.int32) << 3
    return (code | sign).to(torch.uint8)


def e2m1_values(code: torch.Tensor) -> torch.Tensor:
    """float32 values of uint8 e2m1 codes (low four bits)."""
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=code.device)
    c = code.to(torch.int64)
    mag = lut[c & 7]
    return torch.where((c & 8) != 0, -mag, mag)


def e8m0_exponent(amax: torch.Tensor) -> torch.Tensor:
    """Biased exponent (int32) of the smallest power of two >= amax / 6: the MXFP4 block scale.

    Rounding the scale up (as triton_kernels' MXFP4 downcast does by default) keeps every scaled
    value within [-6, 6]: nothing is clipped. The floor 2^-126 keeps an all-zero block's exponent
    at 1 or above (byte 0 would be 2^-127, byte 255 is NaN).
    """
    s = (amax.float().clamp_min(torch.finfo(torch.float32).tiny) / E2M1_MAX).contiguous()
    bits = s.view(torch.int32)
    exp = (bits >> 23) & 0xFF
    return (exp + ((bits & 0x7FFFFF) != 0).to(torch.int32)).clamp_min(1)


def e8m0_to_scale(exp: torch.Tensor) -> torch.Tensor:
    """float32 2**(exp - 127) of e8m0 bytes; byte 255 is NaN."""
    e = exp.to(torch.int32)
    s = torch.ldexp(torch.ones_like(e, dtype=torch.float32), e - 127)
    return torch.where(e == 255, torch.full_like(s, float("nan")), s)


def quant_weight_mxfp4(w_ENK: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP4 along K. Returns (packed_E,N,K/2 uint8, scale_E,N,K/32 uint8 e8m0).

    Byte j of a row holds values 2j (low nibble) and 2j+1 (high nibble); K must be a multiple of
    32. Each block of 32 values is divided by its power-of-two scale (exact) and rounded to e2m1.
    """
    E, N, K = w_ENK.shape
    if K % MX_BLOCK:
        raise ValueError(f"MXFP4 needs K a multiple of {MX_BLOCK}, got {K}")
    blocks = w_ENK.float().reshape(E, N, K // MX_BLOCK, MX_BLOCK)
    exp = e8m0_exponent(blocks.abs().amax(dim=3))
    code = e2m1_codes(blocks / e8m0_to_scale(exp)[..., None]).reshape(E, N, K)
    packed = code[..., 0::2] | (code[..., 1::2] << 4)
    return packed.contiguous(), exp.to(torch.uint8)


def dequant_weight_mxfp4(packed_ENK2: torch.Tensor, scale_ENG: torch.Tensor) -> torch.Tensor:
    """float32 [E, N, K] from packed e2m1 pairs and e8m0 block scales."""
    E, N, K2 = packed_ENK2.shape
    code = torch.stack([packed_ENK2 & 0xF, packed_ENK2 >> 4], dim=3).reshape(E, N, 2 * K2)
    v = e2m1_values(code).reshape(E, N, -1, MX_BLOCK)
    return (v * e8m0_to_scale(scale_ENG)[..., None]).reshape(E, N, 2 * K2)


def glu_interleaved(h_M2F: torch.Tensor, kind: str = "swiglu_oai") -> torch.Tensor:
    """float32 [M, F] from an interleaved gate/up output [M, 2F] (gate = h[:, 0::2],
    up = h[:, 1::2], as gpt-oss); the activation is `activation` itself."""
    h = h_M2F.float()
    return activation(torch.cat([h[:, 0::2], h[:, 1::2]], dim=1), kind)


def moe_ffn_decode(
    x_TD: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    w13_E2FD: torch.Tensor,
    b13_E2F: torch.Tensor,
    w2_EDF: torch.Tensor,
    b2_ED: torch.Tensor,
    *,
    activation_kind: str = "swiglu_oai",
    expert_offset: int = 0,
    act_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """float32 [T, D]: the decode MoE FFN (gpt-oss layout) over experts
    [expert_offset, expert_offset + E).

    ``w13_E2FD`` [E, 2F, D] (rows interleaved gate/up) and ``w2_EDF`` [E, D, F] already
    dequantised; ``b13_E2F`` [E, 2F] and ``b2_ED`` [E, D] the expert biases. Per expert:
    h = x @ w13.T + b13, a = glu_interleaved(h), o = a @ w2.T + b2, and y adds
    topk_weight * o for the token's slots routed here; other slots are skipped, never multiplied
    by zero. ``act_dtype`` rounds the activation through that dtype (the kernels store it bf16).
    """
    T, K = topk_ids_TK.shape
    E = w13_E2FD.shape[0]
    y = torch.zeros(T, x_TD.shape[1], dtype=torch.float32, device=x_TD.device)
    ids = topk_ids_TK.to(torch.int64) - expert_offset
    for e in range(E):
        tok, slot = torch.nonzero(ids == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x_TD[tok].float() @ w13_E2FD[e].float().t() + b13_E2F[e].float()
        a = glu_interleaved(h, activation_kind)
        if act_dtype is not None:
            a = a.to(act_dtype).float()
        o = a @ w2_EDF[e].float().t() + b2_ED[e].float()
        y.index_add_(0, tok, topk_weights_TK[tok, slot].float()[:, None] * o)
    return y
