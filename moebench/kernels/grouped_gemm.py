"""Grouped GEMM over the contiguous (endpoint) layout: the `fc1` and `fc2` products.

Each expert's rows sit contiguously in the capacity buffer, between ``start[e]`` and ``end[e]``
(docs/DESIGN.md section 2); ``out[m] = a[m] @ w[e].T`` for the expert ``e`` that owns row ``m``.

Legend: M rows of the capacity buffer, K reduction columns, N output columns, E local experts,
G4 = ceil(K / 128 / 4) packed activation-scale words per row.

Tensors:
- ``a_MK``: float8_e4m3fn (fp8) or bfloat16 (bf16) [M, K].
- ``a_sf_MG4``: int32 [M, G4], M-major (strides (1, M_pad)), packed UE8M0 exponents, byte j of
  word p for the 128-column group 4p+j (fp8 only; None for bf16).
- ``w_ENK``: float8_e4m3fn or bfloat16 [E, N, K], row-major (the product uses ``w[e].T``).
- ``w_scale``: float32 [E, N/128, K/128], one dequant multiplier per 128x128 weight block (fp8
  only; None for bf16).
- ``ends_E``: int32 [E] endpoints on the device; never read by the host.
- ``out_MN``: bfloat16 [M, N], written in place.

Row block ownership: a block of BLOCK_M rows belongs to the last expert whose start is <= the
block's first row. BLOCK_M divides the alignment, so a block never straddles two experts, and blocks
past the last expert's aligned end (the capacity tail) fall to expert E-1. Mode ``"all"`` (the stock
arm) computes every block of the buffer; mode ``"psum"`` (the prefix-sum arms) returns from a block
that holds no live row before it loads any operand. The grid depends only on M, N and the block
shapes, so one CUDA graph replays with any routing.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.core.layout import check_alignment
from moebench.kernels.grouped_gemm_tiles import block_owner, fp8_tile
from moebench.kernels.jit import expert_spans, fp32_to_bf16
from moebench.kernels.launch import checker, programs_per_device

GROUP = 128  # quantisation group: 128 columns of a, 128x128 blocks of w
MODES = ("all", "psum")
# fp8 tile loops (`k_loop`), all bitwise equal: "plain" waits for each K step's product before
# promoting it; "unroll2" issues two steps' products, then promotes both; "overlap1"/"overlap2"
# keep one product a step in flight while the previous ones are promoted (see
# `grouped_gemm_tiles.fp8_tile`).
K_LOOPS = ("plain", "unroll2", "overlap1", "overlap2")
# How the fp8 operand tiles are fetched: masked pointer loads, or Hopper TMA through tensor
# descriptors (see `grouped_gemm_tiles.fp8_tile`).
LOADS = ("pointer", "tma")
# Programs along M that share a band of N blocks, so that consecutive programs reuse the same
# weight tiles from L2 (the grouped ordering of Triton's matmul tutorial).
GROUP_M = 8


@triton.jit
def _grouped_gemm_fp8(
    a_ptr,
    a_sf_ptr,
    w_ptr,
    w_scale_ptr,
    ends_ptr,
    out_ptr,
    M,
    N,
    K,
    E,
    stride_am,
    stride_ak,
    stride_sfm,
    stride_sfp,
    stride_we,
    stride_wn,
    stride_wk,
    stride_se,
    stride_sn,
    stride_sk,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_E: tl.constexpr,
    ALIGNMENT: tl.constexpr,
    GROUP_M: tl.constexpr,
    PSUM: tl.constexpr,
    K_LOOP: tl.constexpr,
    TMA: tl.constexpr,
    INTERPRET: tl.constexpr,
):
    pid = tl.program_id(0)
    m0, n0, e, end = block_owner(
        pid, ends_ptr, E, M, N, BLOCK_M, BLOCK_N, BLOCK_E, ALIGNMENT, GROUP_M
    )
    # Prefix-sum arms: rows [m0, m0 + BLOCK_M) lie inside one expert's aligned span, which starts
    # at or before m0, so the block holds a live row exactly when m0 < end.
    if PSUM:
        if m0 >= end:
            return

    fp8_tile(
        a_ptr, a_sf_ptr, w_ptr, w_scale_ptr, out_ptr, m0, n0, e, M, N, K,
        stride_am, stride_ak, stride_sfm, stride_sfp, stride_we, stride_wn, stride_wk,
        stride_se, stride_sn, stride_sk, stride_om, stride_on,
        BLOCK_M, BLOCK_N, K_LOOP, TMA, INTERPRET,
    )  # fmt: skip


@triton.jit
def _grouped_gemm_fp8_live(
    a_ptr, a_sf_ptr, w_ptr, w_scale_ptr, ends_ptr, out_ptr, M, N, K, E,
    stride_am, stride_ak, stride_sfm, stride_sfp, stride_we, stride_wn, stride_wk,
    stride_se, stride_sn, stride_sk, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr,
    ALIGNMENT: tl.constexpr, GROUP_M: tl.constexpr, K_LOOP: tl.constexpr, TMA: tl.constexpr,
    INTERPRET: tl.constexpr, FLATTEN: tl.constexpr,
):  # fmt: skip
    # psum with a persistent grid: a fixed number of programs strides over the live tiles only, so
    # no program is spent on the capacity buffer's dead blocks. Live row blocks of all experts are
    # numbered one after another (each expert's span starts aligned, so its blocks are
    # [start, start + cdiv(count, BLOCK_M) * BLOCK_M)); work w is (column block w // blocks, row
    # block w % blocks) in grouped order.
    offs_e, in_e, starts, ends = expert_spans(ends_ptr, E, ALIGNMENT, BLOCK_E)
    ends = tl.minimum(ends, M)
    blocks = tl.where(in_e, (tl.maximum(ends - starts, 0) + BLOCK_M - 1) // BLOCK_M, 0)
    blocks_end = tl.cumsum(blocks, axis=0)
    total = tl.sum(blocks, axis=0)
    num_n = N // BLOCK_N
    # FLATTEN asks the compiler to fuse this loop with the tile's K loop into one pipelined loop,
    # so the next tile's first operand loads are in flight while this tile's last steps run.
    for w in tl.range(tl.program_id(0), total * num_n, tl.num_programs(0), flatten=FLATTEN):
        # Grouped ordering over the live blocks, as in block_owner: GROUP_M row blocks walk the
        # column blocks together, so activation rows and weight tiles are both reused from L2.
        in_group = GROUP_M * num_n
        first_m = (w // in_group) * GROUP_M
        group_rows = tl.minimum(total - first_m, GROUP_M)
        mb = first_m + (w % in_group) % group_rows
        n0 = ((w % in_group) // group_rows) * BLOCK_N
        e = tl.sum((blocks_end <= mb).to(tl.int32), axis=0)
        mine = offs_e == e
        first = tl.sum(tl.where(mine, blocks_end - blocks, 0), axis=0)
        m0 = tl.sum(tl.where(mine, starts, 0), axis=0) + (mb - first) * BLOCK_M
        fp8_tile(
            a_ptr, a_sf_ptr, w_ptr, w_scale_ptr, out_ptr, m0, n0, e, M, N, K,
            stride_am, stride_ak, stride_sfm, stride_sfp, stride_we, stride_wn, stride_wk,
            stride_se, stride_sn, stride_sk, stride_om, stride_on,
            BLOCK_M, BLOCK_N, K_LOOP, TMA, INTERPRET,
        )  # fmt: skip


@triton.jit
def _grouped_gemm_bf16(
    a_ptr,
    w_ptr,
    ends_ptr,
    out_ptr,
    M,
    N,
    K,
    E,
    stride_am,
    stride_ak,
    stride_we,
    stride_wn,
    stride_wk,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    ALIGNMENT: tl.constexpr,
    GROUP_M: tl.constexpr,
    PSUM: tl.constexpr,
    INTERPRET: tl.constexpr,
):
    pid = tl.program_id(0)
    m0, n0, e, end = block_owner(
        pid, ends_ptr, E, M, N, BLOCK_M, BLOCK_N, BLOCK_E, ALIGNMENT, GROUP_M
    )
    # Prefix-sum arms: see _grouped_gemm_fp8; a block without a live row loads nothing.
    if PSUM:
        if m0 >= end:
            return

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    row_ok = offs_m < M
    rows = offs_m.to(tl.int64)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    w_base = w_ptr + e.to(tl.int64) * stride_we
    w_ptrs = w_base + offs_n.to(tl.int64)[:, None] * stride_wn + offs_k[None, :] * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        a = tl.load(a_ptrs, mask=row_ok[:, None], other=0.0)
        w = tl.load(w_ptrs)
        # The CPU interpreter multiplies the raw bit patterns of bf16 dot operands (DESIGN
        # section 11): widen them there; the GPU keeps bf16 tensor-core products.
        if INTERPRET:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, tl.trans(w), acc, out_dtype=tl.float32)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk

    out_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, fp32_to_bf16(acc, INTERPRET), mask=row_ok[:, None])


_check = checker("grouped_gemm")


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def grouped_gemm(
    a_MK: torch.Tensor,
    a_sf_MG4: torch.Tensor | None,
    w_ENK: torch.Tensor,
    w_scale: torch.Tensor | None,
    ends_E: torch.Tensor,
    out_MN: torch.Tensor,
    *,
    alignment: int,
    mode: str,
    BLOCK_M: int = 64,
    BLOCK_N: int = 128,
    num_warps: int = 4,
    num_stages: int = 4,
    persistent: bool = False,
    programs_per_sm: int = 2,
    k_loop: str = "plain",
    loads: str = "pointer",
    group_m: int = GROUP_M,
    flatten: bool = False,
) -> None:
    """Write ``out_MN[m] = a_MK[m] @ w_ENK[e].T`` (dequantised for fp8) for the blocks that ``mode``
    visits; see the module docstring for shapes, dtypes and block ownership.

    The precision follows ``a_MK.dtype``: float8_e4m3fn needs ``a_sf_MG4`` and ``w_scale``;
    bfloat16 needs both to be None. Rows of a visited block that no expert owns get garbage.
    ``persistent`` (fp8 psum only) replaces the capacity-sized grid by ``programs_per_sm`` programs
    per SM that stride over the live tiles; the tiles, and so the outputs, are the same.
    ``k_loop`` (fp8 only) picks the tile's K loop from ``K_LOOPS``; every choice gives the same
    bits. The loops of two steps an iteration hold twice the operand tiles per pipeline stage, so
    they want about half the ``num_stages`` of "plain" for the same shared memory.
    ``loads`` (fp8) picks how the operand tiles are fetched: "pointer" (masked
    pointer loads, pipelined with cp.async) or "tma" (tensor descriptors, the Hopper copy engine;
    ``w_ENK`` must be contiguous). Same tiles, same bits.
    ``group_m``: row blocks that walk the column blocks together (the L2 reuse order); it changes
    which tiles run at the same time, never a tile's bits.
    ``flatten`` (persistent only): the compiler fuses the tile loop with the K loop and pipelines
    across tiles; same tiles, same bits.
    """
    _check(mode in MODES, f"mode must be one of {MODES}, got {mode!r}")
    _check(k_loop in K_LOOPS, f"k_loop must be one of {K_LOOPS}, got {k_loop!r}")
    _check(loads in LOADS, f"loads must be one of {LOADS}, got {loads!r}")
    _check(group_m >= 1, f"group_m must be >= 1, got {group_m}")
    check_alignment(alignment)
    _check(
        _is_pow2(BLOCK_M) and BLOCK_M >= 16 and alignment % BLOCK_M == 0,
        f"BLOCK_M must be a power of two >= 16 dividing alignment {alignment}, got {BLOCK_M}",
    )
    _check(
        _is_pow2(BLOCK_N) and 16 <= BLOCK_N <= 2 * GROUP,
        f"BLOCK_N must be a power of two in [16, {2 * GROUP}], got {BLOCK_N}",
    )
    _check(a_MK.dim() == 2, f"a_MK must be 2-D [M, K], got shape {tuple(a_MK.shape)}")
    _check(w_ENK.dim() == 3, f"w_ENK must be 3-D [E, N, K], got shape {tuple(w_ENK.shape)}")
    M, K = a_MK.shape
    E, N, Kw = w_ENK.shape
    _check(Kw == K, f"K of a_MK ({K}) and w_ENK ({Kw}) differ")
    _check(E >= 1, "w_ENK has no experts")
    _check(
        K % GROUP == 0 and K > 0 and N % GROUP == 0 and N > 0,
        f"N ({N}) and K ({K}) must be positive multiples of {GROUP}",
    )
    _check(
        ends_E.dtype == torch.int32 and tuple(ends_E.shape) == (E,),
        f"ends_E must be int32 [{E}], got {ends_E.dtype} {tuple(ends_E.shape)}",
    )
    _check(
        out_MN.dtype == torch.bfloat16 and tuple(out_MN.shape) == (M, N),
        f"out_MN must be bfloat16 [{M}, {N}], got {out_MN.dtype} {tuple(out_MN.shape)}",
    )
    tensors = [a_MK, w_ENK, ends_E, out_MN, a_sf_MG4, w_scale]
    devices = {t.device for t in tensors if t is not None}
    _check(len(devices) == 1, f"all tensors must be on one device, got {sorted(map(str, devices))}")

    if M == 0:
        return
    interpreting = not a_MK.is_cuda
    grid = (triton.cdiv(M, BLOCK_M) * (N // BLOCK_N),)
    common = dict(
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_E=triton.next_power_of_2(E),
        ALIGNMENT=alignment,
        GROUP_M=group_m,
        PSUM=mode == "psum",
        num_warps=num_warps,
        num_stages=num_stages,
    )

    if a_MK.dtype == torch.float8_e4m3fn:
        _check(w_ENK.dtype == torch.float8_e4m3fn, f"fp8 a_MK needs fp8 w_ENK, got {w_ENK.dtype}")
        G4 = -(-(K // GROUP) // 4)
        _check(
            a_sf_MG4 is not None
            and a_sf_MG4.dtype == torch.int32
            and tuple(a_sf_MG4.shape) == (M, G4),
            f"fp8 needs a_sf_MG4 int32 [{M}, {G4}], got "
            f"{None if a_sf_MG4 is None else (a_sf_MG4.dtype, tuple(a_sf_MG4.shape))}",
        )
        _check(
            w_scale is not None
            and w_scale.dtype == torch.float32
            and tuple(w_scale.shape) == (E, N // GROUP, K // GROUP),
            f"fp8 needs w_scale float32 [{E}, {N // GROUP}, {K // GROUP}], got "
            f"{None if w_scale is None else (w_scale.dtype, tuple(w_scale.shape))}",
        )
        a_op, w_op = a_MK, w_ENK
        if loads == "tma":
            _check(w_ENK.is_contiguous(), "loads='tma' needs a contiguous w_ENK")
            # The copy engine reads from 16-byte aligned rows (fp8: one byte a value).
            _check(
                a_MK.stride(1) == 1 and a_MK.stride(0) % 16 == 0 and a_MK.data_ptr() % 16 == 0,
                "loads='tma' needs a_MK with unit column stride and 16-byte aligned rows",
            )
            a_op = TensorDescriptor.from_tensor(a_MK, [BLOCK_M, GROUP])
            w_op = TensorDescriptor.from_tensor(w_ENK.view(E * N, K), [BLOCK_N, GROUP])
        _check(persistent or not flatten, "flatten applies to the persistent launch only")
        if persistent:
            _check(mode == "psum", "persistent=True schedules the psum mode only")
            programs = min(
                programs_per_device(a_MK.device, programs_per_sm),
                triton.cdiv(M, BLOCK_M) * (N // BLOCK_N),
            )
            _grouped_gemm_fp8_live[(programs,)](
                a_op, a_sf_MG4, w_op, w_scale, ends_E, out_MN, M, N, K, E,
                *a_MK.stride(), *a_sf_MG4.stride(), *w_ENK.stride(), *w_scale.stride(),
                *out_MN.stride(),
                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_E=common["BLOCK_E"],
                ALIGNMENT=alignment, GROUP_M=group_m, K_LOOP=k_loop, TMA=loads == "tma",
                INTERPRET=interpreting, FLATTEN=flatten, num_warps=num_warps,
                num_stages=num_stages,
            )  # fmt: skip
            return
        _grouped_gemm_fp8[grid](
            a_op,
            a_sf_MG4,
            w_op,
            w_scale,
            ends_E,
            out_MN,
            M,
            N,
            K,
            E,
            *a_MK.stride(),
            *a_sf_MG4.stride(),
            *w_ENK.stride(),
            *w_scale.stride(),
            *out_MN.stride(),
            K_LOOP=k_loop,
            TMA=loads == "tma",
            INTERPRET=interpreting,
            **common,
        )
    elif a_MK.dtype == torch.bfloat16:
        _check(w_ENK.dtype == torch.bfloat16, f"bf16 a_MK needs bf16 w_ENK, got {w_ENK.dtype}")
        _check(a_sf_MG4 is None and w_scale is None, "bf16 takes no a_sf_MG4 or w_scale")
        _check(k_loop == "plain", f"k_loop {k_loop!r} is for fp8; bf16 has one K loop")
        _check(loads == "pointer", f"loads {loads!r} is for fp8; bf16 uses pointer loads")
        _grouped_gemm_bf16[grid](
            a_MK,
            w_ENK,
            ends_E,
            out_MN,
            M,
            N,
            K,
            E,
            *a_MK.stride(),
            *w_ENK.stride(),
            *out_MN.stride(),
            BLOCK_K=64,
            INTERPRET=interpreting,
            **common,
        )
    else:
        raise ValueError(f"grouped_gemm: a_MK must be float8_e4m3fn or bfloat16, got {a_MK.dtype}")
