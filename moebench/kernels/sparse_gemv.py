"""The sparse decode GEMV: `fc1` and `fc2` of the `sparse_decode` arm, one kernel for both.

Legend: T tokens, K top-k slots, E local experts, N output columns (2F for fc1, D for fc2),
R reduction length (D for fc1, F for fc2), F intermediate, D hidden.

Tensors:
- ``x``:         bf16, row (t, k) at ``x + t * stride_xt + k * stride_xk``, R contiguous values:
  the tokens ``x_TD`` for fc1 (``stride_xk = 0``: every slot reads its token) or the activation
  ``a_TKF`` for fc2. R even and the row 4-byte aligned (read as bf16 pairs).
- ``topk_ids_TK``: int32 [T, K] global expert ids; the local experts are
  [expert_offset, expert_offset + E).
- ``w``:         [E, N, R] FP8 e4m3 (W8A16) or [E, N, R/2] uint8 MXFP4 (two e2m1 a byte, low
  nibble first), rows contiguous.
- ``w_scale``:   float32 [E] (FP8: one scale an expert) or uint8 [E, N, R/32] (MXFP4: e8m0 bytes).
- ``bias``:      bf16 [E, N].
- ``out``:       bf16, row (t, k) at ``out + t * stride_ot + k * stride_ok``: h (N columns) or,
  with a GLU, the activation of the interleaved pairs (N/2 columns: gate = h[0::2],
  up = h[1::2], as gpt-oss's gate_up_proj).

The grid is (N / BLOCK_N, K, T): one program a block of output columns of one (token, slot). A
program reads its expert id from ``topk_ids_TK`` on the device and, when that expert is not local,
returns before loading anything else: uniformly for the whole program, so a non-local slot costs
one 4-byte load and writes nothing (its output rows keep whatever they held). The grid depends only
on the shapes; nothing is read back to the host, so the step can be captured in a CUDA graph and
replayed with any routing. The pieces the kernels share (the program's expert and K slice, the
epilogue, split-K partials and their second pass) are in `moebench.kernels.gemv_parts`; the MXFP4
kernel is in `moebench.kernels.sparse_gemv_mxfp4`, its tensor-core variant in
`moebench.kernels.sparse_gemv_dot`.

Inner loop (M = 1: no tensor cores). Each program holds a [BLOCK_N, BLOCK_K] tile, laid out so
that one warp covers a row's BLOCK_K span with a 16-byte load per lane (a warp-sized group per
output column, fully coalesced), and several rows per thread share the token's values, which are
converted once. FP8 values are widened in registers; MXFP4 words are decoded by `kernels.jit`
(its docstring gives the instruction counts). Products accumulate in fp32 per lane and are summed
across lanes once at the end; the expert scale (FP8) or the group scale (MXFP4, per 32 values),
the bias and the GLU are applied in the epilogue, and the bf16 store is rounded to nearest even
(on the bits under the interpreter, docs/DESIGN.md section 11).

Launch variants (launcher arguments; the defaults keep the kernel above). ``num_stages``
software-pipelines the K loop (cp.async copies of the next steps' tiles into shared memory, so the
bytes in flight no longer cost registers; same arithmetic, bitwise the default's output).
``split_k`` gives each column block that many programs over slices of R, writing fp32 partials
that a second kernel sums in slice order before the epilogue: more programs when only 2-3
experts are live, at the price of another launch and a different fp32 summation order.

Budget, from sm_90a SASS of the default launches compiled offline with triton 3.6 and the launch's
divisibility hints (docs/PERF.md, 2026-12-01 second session and 2026-12-04 fifteenth): the FP8
loop is 5.4 instructions a weight byte at one token (2 rows, 1,024 bytes, one warp, 64 registers,
every step masked) and 4.0 from 2 tokens (4 rows, 512 bytes, whole steps unmasked, the token as
quads); the MXFP4 loop 12.2 a byte with the group-major tile and the PTX bit-select on the natural
layout (95 registers at 16 rows, 1,024 values, 4 warps; 16.3 with the row-major tile and no PTX),
most of it the integer decode, the fp16-to-fp32 widening and the FMAs, and 8.8-8.9 on the arm's
rotated layout (`mx_rotated`; 96 registers, 80 under the cap from 4 tokens). FP8 is bound by bytes
(its step runs at 1.25x a kernel that only reads the same bytes); MXFP4 by instructions: in the
gated scenario of 2026-12-05 (docs/PERF.md, `format_race_rotated`), on the rotated layout, its
sparse step is 11-22% below FP8's at 1-4 tokens, not 2x below.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.gemv_combine import combine_last, combine_none, fold_args
from moebench.kernels.gemv_parts import (
    gemv_epilogue,
    k_range,
    program_expert,
    row_bias,
    split_k_sum,
    store_partial,
)
from moebench.kernels.jit import (
    HAS_PDL,
    bf16_pairs,
    load_word_quads,
    pdl_launch_dependents,
    pdl_wait,
)
from moebench.kernels.launch import check_slot_operands, checker, describe
from moebench.kernels.sparse_gemv_dot import _sparse_gemv_mxfp4_dot
from moebench.kernels.sparse_gemv_mxfp4 import TOKEN_LOADS, _sparse_gemv_mxfp4
from moebench.kernels.sparse_launch import (
    FP8_TOKEN_ONCE_FROM_ROWS,
    FP8_WHOLE_STEPS_FROM_ROWS,
    LOCAL_FIRST_MAX_SLOTS,
    default_blocks,
    default_local_first,
    default_registers,
    token_quads_fit,
)


@triton.jit
def _fp8_step(acc, w_rows, x_row, x_rows, offs, k0, k_hi, MASKED: tl.constexpr,
              ONCE: tl.constexpr, QUADS: tl.constexpr, PTX: tl.constexpr):  # fmt: skip
    """One K step of `_sparse_gemv_fp8`: the [BLOCK_N, LANES, 16] weight tile at ``k0`` times the
    token's values (``x_row`` once with ONCE, else the row-broadcast ``x_rows``; with QUADS once,
    as bf16-pair words in 16-byte quads, `jit.load_word_quads`), each lane's 16 products summed
    into ``acc``. MASKED: values at ``k_hi`` and past it read as zeros."""
    k = k0 + offs[None, :, :]
    if MASKED:
        w = tl.load(w_rows + k, mask=k < k_hi, other=0.0)
    else:
        w = tl.load(w_rows + k)
    if QUADS:
        # Word i of the row holds values 2i (low half) and 2i + 1; a lane's 16 values are its 8
        # words, 2 quads, widened (`jit.bf16_pairs`) and joined back in order.
        LANES: tl.constexpr = offs.shape[0]
        words = (k0 // 2 + tl.arange(0, LANES)[:, None, None] * 8
                 + tl.arange(0, 2)[None, :, None] * 4 + tl.arange(0, 4)[None, None, :])  # fmt: skip
        q = tl.reshape(load_word_quads(x_row.to(tl.pointer_type(tl.uint32)) + words,
                                       words < k_hi // 2, not MASKED, PTX), [LANES, 8])  # fmt: skip
        xf = tl.reshape(tl.join(*bf16_pairs(q)), [LANES, 16])
    else:
        if ONCE and MASKED:
            xv = tl.load(x_row + k0 + offs, mask=k0 + offs < k_hi, other=0)
        elif ONCE:
            xv = tl.load(x_row + k0 + offs)
        elif MASKED:
            xv = tl.load(x_rows + k, mask=k < k_hi, other=0)
        else:
            xv = tl.load(x_rows + k)
        xf = xv.to(tl.bfloat16, bitcast=True).to(tl.float32)
    if ONCE or QUADS:
        xf = xf[None, :, :]
    return acc + tl.sum(w.to(tl.float32) * xf, axis=2)


@triton.jit
def _sparse_gemv_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok, part_ptr, stride_pt, stride_pk, N, K_SPLIT,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr, NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr,
    PEEL: tl.constexpr, GDC: tl.constexpr, TRIGGER: tl.constexpr, EARLY_LOADS: tl.constexpr,
    TOKEN_ONCE: tl.constexpr, WHOLE_STEPS: tl.constexpr, QUADS: tl.constexpr, PTX: tl.constexpr,
    LOCAL_FIRST: tl.constexpr,
    cw_ptr, y_ptr, cnt_ptr, stride_cwt, stride_cwk, stride_yt,
    COMBINE_K: tl.constexpr = 0, Y_BF16: tl.constexpr = True,
):  # fmt: skip
    # The next kernel may launch (`pdl_trigger`) from this program's start, once its slot is
    # known to be local (a program that returns counts as having let it), or after its K loop.
    pdl_launch_dependents(GDC and TRIGGER == "start")
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E, LOCAL_FIRST)
    if (e < 0) | (e >= E):
        if COMBINE_K:  # the combine folded in (`gemv_combine`): a token with no local slot
            combine_none(ids_ptr, y_ptr, t, slot, tl.program_id(0), N, expert_offset, E,
                         stride_it, stride_ik, stride_yt, COMBINE_K, BLOCK_N, Y_BF16,
                         EXACT_RNE)  # fmt: skip
        return
    pdl_launch_dependents(GDC and TRIGGER == "local")
    e64 = e.to(tl.int64)
    n_block, k_lo, k_hi = k_range(R, K_SPLIT, SPLIT_K)
    if EARLY_LOADS and SPLIT_K == 1:
        # The epilogue's bias and scale asked for now, in flight with the loop's first loads,
        # not after the loop, where they are one more round trip at the end of every program.
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        scale = tl.load(ws_ptr + e64)
    # Tile [BLOCK_N, LANES, 16]: 16 consecutive weight bytes a lane (one 16-byte load), a warp
    # across a row. The token row is read as int16, either through a pointer tile broadcast over
    # the rows, so that it takes the weights' layout with no data movement (triton 3.6 then loads
    # and widens it once a row: sm_90a, 2 rows, 8 of the loop's 12 16-byte loads), or with
    # TOKEN_ONCE loaded once as [LANES, 16] and broadcast over the rows in registers, the compiler
    # moving it into the weights' layout (2 rows: by warp shuffles, 365 instructions a step
    # against 344; 4 rows: through 512 bytes of shared memory, 313 against 344). With QUADS the
    # values are loaded once a step as inline PTX, which the compiler lays out as the weights'
    # (`jit.load_word_quads`; no data movement), and widened from their 32-bit words (2 rows 308
    # instructions a step against 344, 4 rows 253 against 290 with WHOLE_STEPS; the arm's from 2
    # tokens, `sparse_launch.FP8_QUADS_FROM_TOKENS`, with the H200 figures).
    # With NUM_STAGES the loop is software-pipelined: the compiler copies the next NUM_STAGES - 1
    # steps' tiles into shared memory asynchronously (cp.async) while this one is computed, so the
    # bytes in flight no longer cost registers. The token row is then loaded once as [LANES, 16]
    # (a row-broadcast pointer tile would be copied BLOCK_N times into shared memory).
    ONCE: tl.constexpr = TOKEN_ONCE or NUM_STAGES != 0
    LANES: tl.constexpr = BLOCK_K // 16
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, LANES)[:, None] * 16 + tl.arange(0, 16)[None, :]
    w_rows = w_ptr + e64 * stride_we + rows.to(tl.int64)[:, None, None] * stride_wn
    x_row = (x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk).to(
        tl.pointer_type(tl.int16)
    )
    x_rows = x_row + 0 * rows[:, None, None]
    acc = tl.zeros([BLOCK_N, LANES], dtype=tl.float32)
    k_first = k_lo
    if PEEL:
        # The first PEEL steps' weights (1 or 2) are loaded before the wait for the previous
        # kernel (they are constant), then their token values after it; the sums are the loop's
        # first steps, in its order, so the bits are the plain loop's (plain loop only:
        # NUM_STAGES == 0). Names of their own: compiled, a name the loop assigns is carried
        # through it, one shape.
        k1 = k_lo + offs[None, :, :]
        w1 = tl.load(w_rows + k1, mask=k1 < k_hi, other=0.0)
        if PEEL == 2:
            k2 = k1 + BLOCK_K
            w2 = tl.load(w_rows + k2, mask=k2 < k_hi, other=0.0)
        pdl_wait(GDC)
        if ONCE:
            x1 = tl.load(x_row + k_lo + offs, mask=k_lo + offs < k_hi, other=0)[None, :, :]
        else:
            x1 = tl.load(x_rows + k1, mask=k1 < k_hi, other=0)
        acc += tl.sum(w1.to(tl.float32) * x1.to(tl.bfloat16, bitcast=True).to(tl.float32), axis=2)
        if PEEL == 2:
            if ONCE:
                k_at = k_lo + BLOCK_K + offs
                x2 = tl.load(x_row + k_at, mask=k_at < k_hi, other=0)[None, :, :]
            else:
                x2 = tl.load(x_rows + k2, mask=k2 < k_hi, other=0)
            acc += tl.sum(w2.to(tl.float32) * x2.to(tl.bfloat16, bitcast=True).to(tl.float32),
                          axis=2)  # fmt: skip
        k_first = k_lo + PEEL * BLOCK_K
    else:
        pdl_wait(GDC)
    # With WHOLE_STEPS the whole steps run unmasked and the step that passes k_hi (R not a
    # multiple of BLOCK_K) masked after them, instead of every step masked: the masks' zero fills
    # and compares make the loop 344 instructions a step against 314 (sm_90a, 2 rows at 1,024
    # bytes; 313 against 290 at 4 rows). The step after the loop, compiled apart from it, costs
    # more than a loop step, so this pays with many steps a program (4 rows: 6 of 512 bytes) and
    # not with 3 (FP8_WHOLE_STEPS_FROM_ROWS). The same products in the same order.
    TAIL: tl.constexpr = WHOLE_STEPS and not EVEN_K  # a masked step after the loop
    k_main = k_first + tl.maximum(k_hi - k_first, 0) // BLOCK_K * BLOCK_K if TAIL else k_hi
    for k0 in tl.range(k_first, k_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        acc = _fp8_step(acc, w_rows, x_row, x_rows, offs, k0, k_hi, not (EVEN_K or TAIL), ONCE,
                        QUADS, PTX)  # fmt: skip
    if TAIL:
        if k_main < k_hi:
            acc = _fp8_step(acc, w_rows, x_row, x_rows, offs, k_main, k_hi, True, ONCE, QUADS,
                            PTX)  # fmt: skip
    pdl_launch_dependents(GDC and TRIGGER == "end")
    h = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        if not EARLY_LOADS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
            scale = tl.load(ws_ptr + e64)
        gemv_epilogue(h * scale, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU,
                      BLOCK_N, EXACT_RNE)  # fmt: skip
        if COMBINE_K:  # the last of the token's local slots combines (`gemv_combine`)
            combine_last(out_ptr, ids_ptr, cw_ptr, y_ptr, cnt_ptr, t, n_block, N, expert_offset, E,
                         stride_ot, stride_ok, stride_it, stride_ik, stride_cwt, stride_cwk,
                         stride_yt, COMBINE_K, BLOCK_N, Y_BF16, EXACT_RNE, PTX)  # fmt: skip
    else:
        store_partial(h, n_block, t, slot, part_ptr, stride_pt, stride_pk, N, BLOCK_N, SPLIT_K)


_check = checker("sparse_gemv")


def sparse_gemv(
    x: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    bias_EN: torch.Tensor,
    out: torch.Tensor,
    *,
    expert_offset: int,
    glu: str = "none",
    block_n: int | None = None,
    block_k: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    split_k: int = 1,
    partials: torch.Tensor | None = None,
    tensor_cores: bool = False,
    group_major: bool | None = None,
    pdl: bool = False,
    pdl_peel: bool | int = True,
    pdl_trigger: str = "start",
    early_loads: bool | None = None,
    token_once: bool | None = None,
    whole_steps: bool | None = None,
    max_registers: int | None = None,
    token_load: str | None = None,
    mx_rotated: bool = False,
    local_first: bool | None = None,
    combine: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """One GEMV per (token, slot) routed to a local expert; see the module docstring.

    ``x`` is [T, R] (fc1: each slot reads its token) or [T, K, R] (fc2: each slot its own row);
    ``out`` is [T, K, N] or, with ``glu``, [T, K, N/2]. Both bf16, unit stride along the last
    dimension. ``w``, ``w_scale`` and ``bias_EN`` as in the module docstring. Non-local slots'
    rows of ``out`` are left untouched.

    Launch variants (the defaults are the kernel measured in docs/PERF.md):
    - ``num_stages``: software-pipeline the K loop that deep (cp.async into shared memory);
      None keeps the plain loop. Same arithmetic, same order: bitwise the default's output.
    - ``split_k``: split R into that many slices (multiples of ``block_k``), one program each,
      so that a few live experts still fill the GPU; fp32 partials go to ``partials``
      (float32 [T, K, split_k, N], allocated when None) and a second kernel sums them in slice
      order and applies the epilogue. This changes the fp32 summation order (slice sums are added
      last), so outputs may differ from the default in the last bits.
    - ``pdl``: programmatic dependent launch (`kernels.jit`). On the GPU the kernel is launched
      to start while the previous kernel finishes: it reads its expert id and (FP8) its first
      step's weights, then waits for the previous kernel before reading ``x``; it also lets the
      next kernel launch early. Under the interpreter only the FP8 first step's peeling runs.
      No ``split_k`` or ``tensor_cores``, and for FP8 no ``num_stages``; the same bits.
      ``pdl_peel=False`` waits before the first weight load instead (FP8), ``pdl_peel=2`` loads
      the first two steps' weights before it (the same bits; fc2 so at one token on an H100: the
      step's mean within 0.2% of one step's, docs/perf/2026-12-06-one-token/call6, not taken);
      ``pdl_trigger="end"`` lets the next kernel launch after this program's K loop instead of
      at its start, ``"local"`` once the program has found its slot local (the programs of
      other ranks' slots leave without a trigger, which counts as one).
    - ``early_loads``: the epilogue's bias (and FP8's expert scale) loaded before the K loop,
      their latency behind the loop's loads, instead of after it, a round trip more at the end
      of every program (None: `default_registers`). The same bits; the sparse step 0.7-1.3%
      faster at 1-4 tokens (H200, gpt-oss-20b EP2, six routing draws, both ranks, the slower
      rank's step: FP8 31.54 against 31.90 us at one token; docs/perf/2026-12-04-early-loads/).
    - ``token_once`` (FP8): the plain loop loads the token's values once a step, not once a row
      (None: from FP8_TOKEN_ONCE_FROM_ROWS rows a program, `_sparse_gemv_fp8`). The same bits.
    - ``whole_steps`` (FP8): the K loop's whole steps unmasked, the step past R masked after them,
      instead of every step masked (None: from FP8_WHOLE_STEPS_FROM_ROWS rows). The same bits.
    - ``max_registers``: a register cap a thread for the compiler (0: its own choice; None:
      `default_registers`). The same bits (what it may cost is spills, never arithmetic).
    - ``token_load``: how the loop loads the token's values, ``broadcast`` (None: ``tl.load``,
      in a layout the compiler then moves to the weights' through shared memory), or as inline
      PTX in the layout of their use, ``words`` (MXFP4) or ``quads`` (16-byte loads; the token
      rows 16-byte aligned); MXFP4 with the group-major tile
      (`sparse_gemv_mxfp4`'s docstring), FP8 ``quads`` once a step (`_sparse_gemv_fp8`). The
      same bits.
    - ``mx_rotated`` (MXFP4): ``w`` in `mx_rotated`'s layout (`mx_rotated.rotate_mxfp4`, made by
      the caller), decoded a word at a time, exact (no 2^-14 to undo). The same bits; no
      ``split_k`` or ``tensor_cores``.
    - ``local_first``: the programs serve the local (token, slot) pairs first, in launch order,
      and the programs past their count leave at once, instead of each program its own (token,
      slot) (`gemv_parts.program_expert`; None: `sparse_launch.default_local_first`). For at
      most LOCAL_FIRST_MAX_SLOTS pairs (each program reads the whole routing); no ``split_k`` or
      ``tensor_cores``. The same bits.
    - ``combine``: ``(topk_weights_TK, y_TD, counters)``: fc2 (no ``glu``) with the step's combine
      folded in (`gemv_combine`): y_TD [T, N] (bf16 or float32, unit column stride) gets
      `combine_topk`'s bits from the last of each (token, row block)'s local slots, with no
      combine launch; ``counters`` int32, at least T * N / block_n values, zero before and after
      (`gemv_combine.combine_counters`). ``out`` is written as without it. No ``split_k``,
      ``tensor_cores`` or ``local_first``. Not yet run on a GPU.
    """
    ops = check_slot_operands(_check, x, topk_ids_TK, w, w_scale, bias_EN, out, glu)
    fmt, T, K, E, N, R = ops.fmt, ops.T, ops.K, ops.E, ops.N, ops.R
    stride_xt, stride_xk = ops.stride_xt, ops.stride_xk
    _check(N > 0 and N % 32 == 0, f"N ({N}) must be a positive multiple of 32")

    bn, bk, nw = default_blocks(fmt, T)
    bn, bk, num_warps = block_n or bn, block_k or bk, num_warps or nw
    _check(
        bn >= 2 and bn & (bn - 1) == 0 and N % bn == 0,
        f"block_n must be a power of two dividing N ({N}), got {bn}",
    )
    _check(bk >= 32 and bk & (bk - 1) == 0, f"block_k must be a power of two >= 32, got {bk}")
    _check(num_stages is None or num_stages >= 1, f"num_stages must be >= 1, got {num_stages}")
    _check(split_k >= 1, f"split_k must be >= 1, got {split_k}")
    # Each slice a whole number of block_k steps; the last slice may be short (or empty).
    k_split = triton.cdiv(triton.cdiv(R, split_k), bk) * bk
    if split_k > 1:
        if partials is None:
            partials = torch.empty(T, K, split_k, N, dtype=torch.float32, device=out.device)
        _check(
            partials.dtype == torch.float32
            and tuple(partials.shape) == (T, K, split_k, N)
            and partials.stride(3) == 1
            and partials.stride(2) == N,
            f"partials must be float32 [{T}, {K}, {split_k}, {N}], (split, N) contiguous, "
            f"got {describe(partials)}",
        )
        part_args = (partials, partials.stride(0), partials.stride(1), N, k_split)
    else:
        part_args = (out, 0, 0, N, k_split)  # never written: SPLIT_K == 1 stores through out
    _check(fmt == "mxfp4" or not group_major, "group_major is for MXFP4 weights only")
    group_major = fmt == "mxfp4" if group_major is None else group_major
    if tensor_cores:
        _check(fmt == "mxfp4", "tensor_cores is implemented for MXFP4 weights only")
        _check(
            bn % 16 == 0 and bk >= 64,
            f"tensor_cores needs block_n % 16 == 0 and block_k >= 64, got {bn}, {bk}",
        )
        _check(split_k == 1, "tensor_cores takes no split_k")
    # MXFP4 waits for the previous kernel before its K loop, whose pipeline's first copies come
    # after the wait (sm_90a PTX, offline); FP8's peeled first step is the plain loop's.
    _check(
        not pdl or ((num_stages is None or fmt == "mxfp4") and split_k == 1 and not tensor_cores),
        "pdl takes the plain loop (MXFP4 also the pipelined one): no split_k or tensor_cores, "
        "no num_stages for FP8",
    )
    _check(pdl_peel in (0, 1, 2), f"pdl_peel must be False, True, 1 or 2, got {pdl_peel!r}")
    _check(pdl_trigger in ("start", "local", "end"),
           f"pdl_trigger must be start, local or end: {pdl_trigger!r}")  # fmt: skip
    _check(token_once is None or fmt == "fp8", "token_once is for FP8 weights only")
    _check(whole_steps is None or fmt == "fp8", "whole_steps is for FP8 weights only")
    rotated_ok = fmt == "mxfp4" and split_k == 1 and not tensor_cores
    _check(not mx_rotated or rotated_ok, "mx_rotated is for MXFP4 weights on the CUDA-core "
           "loop (no split_k, tensor_cores)")  # fmt: skip
    token_load = token_load or "broadcast"
    _check(token_load in TOKEN_LOADS, f"token_load must be one of {list(TOKEN_LOADS)}, got "
           f"{token_load!r}")  # fmt: skip
    if token_load != "broadcast":
        _check(
            not tensor_cores and (group_major if fmt == "mxfp4" else token_load == "quads"),
            "token_load takes the CUDA-core loops: MXFP4's group-major tile, FP8 'quads'",
        )
        # 16-byte loads from each row's start (`load_word_quads`); no quad crosses R, a multiple
        # of 32. The arms ask the same `token_quads_fit` before they choose quads.
        _check(token_load != "quads" or token_quads_fit(x),
               "token_load='quads' needs the token rows 16-byte aligned")  # fmt: skip
    regs, early = default_registers(fmt, T)
    max_registers = regs if max_registers is None else max_registers
    early_loads = early if early_loads is None else early_loads
    _check(max_registers >= 0, f"max_registers must be >= 0, got {max_registers}")
    local_first = default_local_first(fmt, T) if local_first is None else local_first
    if combine is not None:
        _check(not local_first, "combine takes no local_first (its programs serve other slots)")
        combine_args = fold_args(_check, combine, topk_ids_TK, out, glu, split_k, tensor_cores, bn)
    else:
        combine_args = dict(cw_ptr=out, y_ptr=out, cnt_ptr=topk_ids_TK, stride_cwt=0,
                            stride_cwk=0, stride_yt=0)  # fmt: skip
    _check(
        not local_first or (T * K <= LOCAL_FIRST_MAX_SLOTS and split_k == 1 and not tensor_cores),
        f"local_first takes at most {LOCAL_FIRST_MAX_SLOTS} (token, slot) pairs (got {T * K}), "
        "no split_k or tensor_cores",
    )
    gdc = pdl and HAS_PDL and out.is_cuda
    if T == 0 or K == 0 or E == 0:
        if combine is not None:
            combine[1].zero_()  # no local slot: the combine's sum of nothing
        return
    if tensor_cores:
        _sparse_gemv_mxfp4_dot[(N // bn, K, T)](
            x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
            stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
            w_scale.stride(0), w_scale.stride(1), bias_EN.stride(0), out.stride(0),
            out.stride(1),
            GLU=glu, BLOCK_N=bn, BLOCK_K=bk, EVEN_K=R % bk == 0, EXACT_RNE=not out.is_cuda,
            num_warps=num_warps, num_stages=num_stages or 3,
        )  # fmt: skip
        return
    grid = (N // bn * split_k, K, T)
    common = dict(
        GLU=glu, BLOCK_N=bn, BLOCK_K=bk, EVEN_K=R % bk == 0, EXACT_RNE=not out.is_cuda,
        NUM_STAGES=num_stages or 0, SPLIT_K=split_k, num_warps=num_warps, GDC=gdc,
        TRIGGER=pdl_trigger, EARLY_LOADS=early_loads,
        LOCAL_FIRST=triton.next_power_of_2(T * K) if local_first else 0,
    )  # fmt: skip
    common.update(combine_args)
    if gdc:
        common["launch_pdl"] = True
    if max_registers:
        common["maxnreg"] = max_registers
    if fmt == "fp8":
        once = bn >= FP8_TOKEN_ONCE_FROM_ROWS if token_once is None else token_once
        whole = bn >= FP8_WHOLE_STEPS_FROM_ROWS if whole_steps is None else whole_steps
        _sparse_gemv_fp8[grid](
            x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
            stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
            bias_EN.stride(0), out.stride(0), out.stride(1), *part_args,
            PEEL=int(pdl_peel) if pdl else 0, TOKEN_ONCE=once, WHOLE_STEPS=whole,
            QUADS=token_load == "quads", PTX=out.is_cuda, **common,
        )  # fmt: skip
    else:
        _sparse_gemv_mxfp4[grid](
            x, topk_ids_TK, w, w_scale, bias_EN, out, expert_offset, E, R,
            stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
            w_scale.stride(0), w_scale.stride(1), bias_EN.stride(0), out.stride(0),
            out.stride(1), *part_args, GROUP_MAJOR=group_major, PTX=out.is_cuda,
            TOKEN_LOAD=TOKEN_LOADS[token_load], ROTATED=mx_rotated, **common,
        )  # fmt: skip
    if split_k > 1:
        split_k_sum(
            topk_ids_TK,
            w_scale,
            bias_EN,
            out,
            partials,
            expert_offset=expert_offset,
            glu=glu,
            block_n=bn,
            fp8=fmt == "fp8",
        )
