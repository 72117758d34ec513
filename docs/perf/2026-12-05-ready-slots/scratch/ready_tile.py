"""Scratch (issue 28, 2026-12-05, eighteenth session): the grouped decode's tile (one pass a
program: the arm's launch from 16 tokens; FP8 through TMA, MXFP4 on the rotated layout with its
word-aligned scales, as the arm builds them) with fc2 waiting per pass on fc1,
not on fc1's whole grid; `ready_gemv.py`'s hand-over (counts in sub-counts, ready flags, the
reset by fc2's last program) with a pass in place of a (token, slot).

fc1's grid is (column blocks, passes), column blocks first, so the hardware starts fc1's passes
in order; fc2, a programmatic dependent launch, starts once every fc1 program has started (at 32
to 64 tokens, 1,440 fc1 programs on 792 places: when fc1's first wave leaves). A pass's fc2
programs then wait for that pass's 90 fc1 programs only, not for the last of fc1's second wave,
so fc2 streams its weights while fc1's last wave drains. Each program's arithmetic is
`grouped_dot._fp8_pass` / `_mxfp4_pass`, unchanged, so the outputs should be the two launches'
bit for bit.

Not part of the package: the records' code.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ready_gemv import SPIN_LIMIT, STRIDE, _hand_over_done, _my_flag, _wait_ready
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import _fp8_pass, _mxfp4_pass, loaded_rows
from moebench.kernels.grouped_gemv import FOLD_SCALES_UP_TO, scale_words
from moebench.kernels.grouped_launch import Launch
from moebench.kernels.grouped_slots import program_work, scan_width
from moebench.kernels.jit import HAS_PDL, pdl_launch_dependents, pdl_wait


@triton.jit
def _ready_dot_fp8(
    x_ptr, ids_ptr, w, ws_ptr, b_ptr, out_ptr, cell_ptr,
    TK, K, expert_offset, E, R, NEED,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, TMA: tl.constexpr,
    EARLY_BIAS: tl.constexpr, ROLE: tl.constexpr, G: tl.constexpr, STRIDE_: tl.constexpr,
    LIMIT: tl.constexpr, PLACED: tl.constexpr,
):  # fmt: skip
    """`grouped_dot._grouped_dot_fp8` with PASS_GRID (``PLACED``: the weights in `fp8_placed`'s
    layout, added in the nineteenth session); ROLE "signal" (fc1) counts each pass's
    programs after their stores, ROLE "await" (fc2) waits for its pass's flag instead of the
    dependent-launch wait."""
    pdl_launch_dependents(GDC)
    e, count, m_first = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                                     BLOCK_E, SCAN, BLOCK_M, True)  # fmt: skip
    if count == 0:
        return
    n_block = tl.program_id(0)
    cells = cell_ptr + tl.program_id(1) * (3 * G + 2) * STRIDE_
    if ROLE == "signal":
        pdl_wait(GDC)
    else:
        _wait_ready(_my_flag(cells, n_block, G, STRIDE_), not INTERPRET, LIMIT)
    e64 = e.to(tl.int64)
    if TMA:
        w_src = w
        w_row = e * (stride_we // stride_wn) + n_block * BLOCK_N
    else:
        rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        w_src = w + e64 * stride_we + rows64[:, None] * stride_wn + tl.arange(0, BLOCK_K)[None, :]
        w_row = 0
    scale = tl.load(ws_ptr + e64)
    _fp8_pass(x_ptr, ids_ptr, w_src, w_row, scale, b_ptr, out_ptr, TK, K, expert_offset, R,
              e, e64, count, m_first, n_block, stride_xt, stride_xk, stride_it, stride_ik,
              stride_be, stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
              EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, TMA, EARLY_BIAS, PLACED)  # fmt: skip
    _hand_over_done(cells, n_block, NEED, G, STRIDE_, ROLE)


@triton.jit
def _ready_dot_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, cell_ptr,
    TK, K, expert_offset, E, R, NEED,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr,
    SCALE_WORDS: tl.constexpr, FOLD_SCALES: tl.constexpr, EARLY_BIAS: tl.constexpr,
    ROTATED: tl.constexpr, ROLE: tl.constexpr, G: tl.constexpr, STRIDE_: tl.constexpr,
    LIMIT: tl.constexpr,
):  # fmt: skip
    """`grouped_dot._grouped_dot_mxfp4` with PASS_GRID and the roles of `_ready_dot_fp8`."""
    pdl_launch_dependents(GDC)
    e, count, m_first = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                                     BLOCK_E, SCAN, BLOCK_M, True)  # fmt: skip
    if count == 0:
        return
    n_block = tl.program_id(0)
    cells = cell_ptr + tl.program_id(1) * (3 * G + 2) * STRIDE_
    if ROLE == "signal":
        pdl_wait(GDC)
    else:
        _wait_ready(_my_flag(cells, n_block, G, STRIDE_), not INTERPRET, LIMIT)
    e64 = e.to(tl.int64)
    rows64 = (n_block * BLOCK_N + loaded_rows(BLOCK_N)).to(tl.int64)
    w_at = (w_ptr + e64 * stride_we + rows64[:, None] * stride_wn
            + tl.arange(0, BLOCK_K // 2)[None, :])  # fmt: skip
    s_rows = ws_ptr + e64 * stride_se + rows64 * stride_sn
    s_at = s_rows[:, None] + tl.arange(0, BLOCK_K // 32)[None, :]
    s_words = s_at
    if SCALE_WORDS:
        s_words = (s_rows.to(tl.pointer_type(tl.int32))[:, None]
                   + tl.arange(0, BLOCK_K // 128)[None, :])  # fmt: skip
    _mxfp4_pass(x_ptr, ids_ptr, w_at, s_at, s_words, b_ptr, out_ptr, TK, K, expert_offset, R,
                e, e64, count, m_first, n_block, stride_xt, stride_xk, stride_it, stride_ik,
                stride_be, stride_ot, stride_ok, GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
                EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, SCALE_WORDS, FOLD_SCALES, EARLY_BIAS,
                ROTATED)  # fmt: skip
    _hand_over_done(cells, n_block, NEED, G, STRIDE_, ROLE)


def groups_for(*programs_a_pass: int) -> int:
    """The sub-counts (and flag copies) of a pass: the largest power of two up to 32 that is at
    most each launch's programs a pass (every sub-count then has a program)."""
    g = 32
    while g > min(programs_a_pass):
        g //= 2
    return g


class ReadyPasses:
    """The cells of one step's fc1 -> fc2 hand-over, for ``passes`` passes, at zero."""

    def __init__(self, passes: int, groups: int, device) -> None:
        self.groups = groups
        self.cells = torch.zeros(passes * (3 * groups + 2) * STRIDE, dtype=torch.int32,
                                 device=device)  # fmt: skip


def ready_tile(x, topk_ids_TK, w, w_scale, bias_EN, out, cells: ReadyPasses, *, role: str,
               expert_offset: int, launch: Launch, glu: str = "none",
               max_scale_byte: int | None = None) -> None:  # fmt: skip
    """fc1 (``role="signal"``) or fc2 (``role="await"``) of the grouped step on the tile, one
    pass a program; ``launch`` the arm's (dot, pass_grid), FP8 or MXFP4 (``w`` and ``w_scale``
    as the arm gives them: `grouped_decode.tiles_weights`, `tiles_scales`)."""
    L = launch
    assert L.path == "dot" and L.pass_grid
    T, K = topk_ids_TK.shape
    E, N = w.shape[0], w.shape[1]
    R = w.shape[2] if w.dtype == torch.float8_e4m3fn else 2 * w.shape[2]  # MXFP4: R / 2 bytes
    stride_xt, stride_xk = (x.stride(0), 0) if x.dim() == 2 else (x.stride(0), x.stride(1))
    block_e = triton.next_power_of_2(E)
    gdc = L.pdl and HAS_PDL and out.is_cuda
    programs = min(E, T * K) + T * K // L.block_m
    extra = {"launch_pdl": True} if gdc else {}
    if L.max_registers:
        extra["maxnreg"] = L.max_registers
    common = dict(
        GLU=glu, BLOCK_M=L.block_m, BLOCK_N=L.block_n, BLOCK_K=L.block_k,
        EVEN_K=R % L.block_k == 0, EXACT_RNE=not out.is_cuda, BLOCK_E=block_e,
        SCAN=scan_width(T * K, block_e, L.block_m), NUM_STAGES=L.num_stages,
        INTERPRET=not out.is_cuda, GDC=gdc, EARLY_BIAS=L.early_bias, ROLE=role,
        G=cells.groups, STRIDE_=STRIDE, LIMIT=SPIN_LIMIT, num_warps=L.num_warps, **extra,
    )  # fmt: skip
    if w.dtype == torch.float8_e4m3fn:
        tma = L.tma and w.is_contiguous() and w.data_ptr() % 16 == 0
        w_arg = TensorDescriptor.from_tensor(w.view(E * N, R), [L.block_n, L.block_k]) if tma else w
        _ready_dot_fp8[(N // L.block_n, programs)](
            x, topk_ids_TK, w_arg, w_scale, bias_EN, out, cells.cells, T * K, K, expert_offset,
            E, R, N // L.block_n, stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0),
            w.stride(1), bias_EN.stride(0), out.stride(0), out.stride(1), TMA=tma,
            PLACED=L.fp8_placed, **common,
        )  # fmt: skip
    else:
        fold = max_scale_byte is not None and max_scale_byte <= FOLD_SCALES_UP_TO
        _ready_dot_mxfp4[(N // L.block_n, programs)](
            x, topk_ids_TK, w, w_scale, bias_EN, out, cells.cells, T * K, K, expert_offset, E, R,
            N // L.block_n, stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0),
            w.stride(1), w_scale.stride(0), w_scale.stride(1), bias_EN.stride(0), out.stride(0),
            out.stride(1), SCALE_WORDS=scale_words(w_scale) and L.block_k % 128 == 0,
            FOLD_SCALES=fold, ROTATED=L.mx_rotated, **common,
        )  # fmt: skip
