"""The sparse MXFP4 GEMV on CUDA cores: `_sparse_gemv_mxfp4`, the MXFP4 kernel of
`moebench.kernels.sparse_gemv` (its docstring has the tensors, the grid, the inner loop and the
budget; its launcher launches this kernel). Here only the kernel and what is MXFP4's own.

The token's words (``TOKEN_LOAD``, `TOKEN_LOADS`). With the group-major tile a thread holds one
MX group of several rows, spread over the program's warps, and needs its group's 16 token words
(bf16 pairs) for all of them. ``broadcast`` (0, the default) loads the words with ``tl.load``:
triton 3.6 gives that load a layout of its own (one word a thread, the warps across the words of
a group) and moves the words to every warp through shared memory, eight times a step with two
barriers each (sm_90a, offline: 16 ``BAR.SYNC`` a step at fc1's 16 rows, 1,024 values, 4 warps).
``words`` (1) and ``quads`` (2) load them as inline PTX, which the compiler treats as arithmetic, so
the addresses and the loads take the layout of the words' use: each thread loads its own group's
words, every warp the same ones (from L1 after the first), and nothing moves between threads.
``words`` loads one 32-bit word at a time (16 loads a step; 80 registers, 791 instructions a step
with the masks' zero fills), ``quads`` a 16-byte quad of words at a time (4 loads a step; 95
registers, 771 instructions), which needs the token rows 16-byte aligned. Under the interpreter
(no PTX) every form loads with ``tl.load``; the values, and so the bits, are the same. The arm
takes ``quads`` with the rotated layout (``ROTATED``, `mx_rotated`: a word's values decoded
exact, four at a time; `sparse_launch.MXFP4_ROTATED`, with the H200 figures).
"""

import triton
import triton.language as tl

from moebench.kernels.gemv_combine import combine_last, combine_none
from moebench.kernels.gemv_parts import (
    gemv_epilogue,
    k_range,
    program_expert,
    row_bias,
    store_partial,
)
from moebench.kernels.jit import (
    bf16_pairs,
    e2m1_pair,
    e8m0_scale,
    load_word_quads,
    load_words,
    pdl_launch_dependents,
    pdl_wait,
)
from moebench.kernels.mx_rotated import rotated_word_values

# How the kernel loads the token's words (module docstring), by launcher name.
TOKEN_LOADS = {"broadcast": 0, "words": 1, "quads": 2}


@triton.jit
def _step_scales(s_rows, g, k_hi, GROUP_MAJOR: tl.constexpr):
    """The scale bytes of groups ``g`` [GROUPS] of the rows ``s_rows`` in `_sparse_gemv_mxfp4`'s
    tile order, groups at ``k_hi`` / 32 and past it read as 0."""
    if GROUP_MAJOR:
        return tl.load(s_rows + g[:, None], mask=(g < k_hi // 32)[:, None], other=0)
    else:
        return tl.load(s_rows + g[None, :], mask=(g < k_hi // 32)[None, :], other=0)


@triton.jit
def _sparse_gemv_mxfp4(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok, part_ptr, stride_pt, stride_pk, N, K_SPLIT,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr, NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr,
    GROUP_MAJOR: tl.constexpr, PTX: tl.constexpr, GDC: tl.constexpr, TRIGGER: tl.constexpr,
    EARLY_LOADS: tl.constexpr, TOKEN_LOAD: tl.constexpr, ROTATED: tl.constexpr,
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
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)  # as in the FP8 kernel
    # Only the routing (and the bias) was read so far; the token row may be the previous
    # kernel's output.
    pdl_wait(GDC)
    # A lane loads one MX group (16 bytes, 32 values) of a row, as 4 uint32 words, and its single
    # e8m0 scale. Word q of group g holds values 32g + 8q + 2j (low nibble of byte j) and
    # 32g + 8q + 2j + 1 (high nibble), which pair with bf16-pair word 16g + 4q + j of the token
    # row: low half even, high half odd, each widened by a shift. The tile is [GROUPS, BLOCK_N, 4]
    # with GROUP_MAJOR, else [BLOCK_N, GROUPS, 4]: the compiler spreads the lanes over the first
    # two dimensions in that order, so with GROUP_MAJOR a thread holds several rows of one group
    # and reads and widens the token's values once for all of them (13.2 SASS instructions a
    # weight byte at 16 rows, 1,024 values, 4 warps, against 16.3). NUM_STAGES pipelines the loop
    # as in the FP8 kernel. PTX (compiled, not interpreted): the decode's bit-select as inline
    # PTX (kernels.jit), one instruction fewer a weight byte; the same bits.
    GROUPS: tl.constexpr = BLOCK_K // 32
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_g = tl.arange(0, GROUPS)
    offs_q = tl.arange(0, 4)
    w_base = (w_ptr + e64 * stride_we).to(tl.pointer_type(tl.uint32))
    s_base = ws_ptr + e64 * stride_se
    if GROUP_MAJOR:
        w_rows = w_base + rows64[None, :, None] * (stride_wn // 4)
        s_rows = s_base + rows64[None, :] * stride_sn
        acc = tl.zeros([GROUPS, BLOCK_N], dtype=tl.float32)
    else:
        w_rows = w_base + rows64[:, None, None] * (stride_wn // 4)
        s_rows = s_base + rows64[:, None] * stride_sn
        acc = tl.zeros([BLOCK_N, GROUPS], dtype=tl.float32)
    x_row = x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk
    x_pairs = x_row.to(tl.pointer_type(tl.uint32))
    # Every step masked: whole steps unmasked and the last one masked after them (the FP8
    # kernel's WHOLE_STEPS) is 768 instructions a step against 778, but that step, compiled apart
    # from the loop, costs more than a loop step, so with 3 steps a program the kernel executes 2%
    # more instructions and the step is 3.5-4.6% slower at 1-8 tokens (H200, six draws, Nsight
    # Compute; docs/perf/2026-12-04-unmasked-steps/).
    # Pipelined (NUM_STAGES), the weights and the token's words are copied asynchronously, but a
    # row's scale bytes (R / 32 of them, 90 at gpt-oss-20b: no whole 32-bit words) are byte loads
    # the pipeline leaves synchronous, one round trip a step; they are loaded a step ahead into
    # registers instead (as the grouped tile's byte scales, `grouped_dot`), so that their latency
    # hides behind a step of work (sm_90a, offline: 2 barriers a step against the plain loop's 16,
    # the compiler's broadcast of the token through shared memory). The same values, the same bits.
    AHEAD: tl.constexpr = NUM_STAGES != 0
    if AHEAD:
        s_next = _step_scales(s_rows, k_lo // 32 + offs_g, k_hi, GROUP_MAJOR)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        g = k0 // 32 + offs_g
        word = g[:, None] * 4 + offs_q[None, :]
        g_ok = g < k_hi // 32
        if GROUP_MAJOR:
            w_at, s_at = w_rows + word[:, None, :], s_rows + g[:, None]
            w_ok, s_ok = g_ok[:, None, None], g_ok[:, None]
        else:
            w_at, s_at = w_rows + word[None, :, :], s_rows + g[None, :]
            w_ok, s_ok = g_ok[None, :, None], g_ok[None, :]
        if EVEN_K:
            w = tl.load(w_at)
        else:
            w = tl.load(w_at, mask=w_ok, other=0)
        if AHEAD:
            s = s_next
            s_next = _step_scales(s_rows, g + BLOCK_K // 32, k_hi, GROUP_MAJOR)
        elif EVEN_K:
            s = tl.load(s_at)
        else:
            s = tl.load(s_at, mask=s_ok, other=0)
        if not ROTATED:
            w_hi = w >> 16
        part = tl.zeros(w.shape, dtype=tl.float32)
        if TOKEN_LOAD == 2:
            # A group's 16 token words (4q + j) in one 16-byte load a quad j = 0..3, then split
            # into the four [GROUPS, 4] tensors of j (module docstring: the token's words).
            quads = word[:, :, None] * 4 + tl.arange(0, 4)[None, None, :]
            x16 = load_word_quads(x_pairs + quads, g_ok[:, None, None], EVEN_K, PTX)
            x_even, x_odd = tl.split(tl.reshape(x16, [GROUPS, 4, 2, 2]))
            x_j0, x_j2 = tl.split(x_even)
            x_j1, x_j3 = tl.split(x_odd)
        for j in tl.static_range(4):
            if TOKEN_LOAD == 2:
                xp = x_j0 if j == 0 else x_j1 if j == 1 else x_j2 if j == 2 else x_j3
            else:  # ``broadcast``: the same load as ``tl.load`` (`load_words` without PTX)
                xp = load_words(x_pairs + word * 4 + j, g_ok[:, None], EVEN_K,
                                PTX and TOKEN_LOAD == 1)  # fmt: skip
            x_lo, x_hi = bf16_pairs(xp)
            if GROUP_MAJOR:
                x_lo, x_hi = x_lo[:, None, :], x_hi[:, None, :]
            else:
                x_lo, x_hi = x_lo[None, :, :], x_hi[None, :, :]
            if ROTATED:  # each word in `mx_rotated`'s layout: values exact, 4 at a time
                if j % 2 == 0:
                    lo, hi, lo_next, hi_next = rotated_word_values(w, j // 2, PTX)
                else:
                    lo, hi = lo_next, hi_next
            elif j < 2:
                lo, hi = e2m1_pair(w, j, PTX)
            else:
                lo, hi = e2m1_pair(w_hi, j - 2, PTX)
            # Two separate updates keep each product a fused multiply-add.
            part += lo * x_lo
            part += hi * x_hi
        acc += tl.sum(part, axis=2) * e8m0_scale(s)
    pdl_launch_dependents(GDC and TRIGGER == "end")
    h = tl.sum(acc, axis=0 if GROUP_MAJOR else 1)
    if SPLIT_K == 1:
        if not EARLY_LOADS:
            bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        if not ROTATED:  # undo the 2^-14 of the fp16 placement (kernels.jit); no module globals
            h = h * 16384.0
        gemv_epilogue(h, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU,
                      BLOCK_N, EXACT_RNE)  # fmt: skip
        if COMBINE_K:  # the last of the token's local slots combines (`gemv_combine`)
            combine_last(out_ptr, ids_ptr, cw_ptr, y_ptr, cnt_ptr, t, n_block, N, expert_offset, E,
                         stride_ot, stride_ok, stride_it, stride_ik, stride_cwt, stride_cwk,
                         stride_yt, COMBINE_K, BLOCK_N, Y_BF16, EXACT_RNE, PTX)  # fmt: skip
    else:
        store_partial(h, n_block, t, slot, part_ptr, stride_pt, stride_pk, N, BLOCK_N, SPLIT_K)
