"""Scratch (issue 28, 2026-12-05, eighteenth session): the one-token sparse FP8 step with fc2
waiting per slot on fc1, not on fc1's whole grid.

At one token the sparse FP8 step is fc1 (about 19.7 us for 49.8 MB) then fc2 (about 13 us for
24.9 MB with the combine), and fc2 is not bound by its bytes: with its weights already in L2 it
still takes 11 us (docs/perf/HISTORY.md, tenth session): its 5,760 one-warp programs start only
once fc1 has finished, and each is a chain of dependent loads. Here fc2 is launched with
programmatic dependent launch, so its programs take the SMs' program slots as fc1's leave (fc1
lets them launch from its start), and each fc2 program loads its whole weight rows (they do not
depend on fc1) before it waits. It waits for its own slot's activation only: every fc1 program of
(token, slot) counts itself after its stores (a barrier, then an acquire-release add to one of
GROUPS sub-counts, the last of each sub-count adding to the top count: one address for all of
them serialized 2,880 atomics a slot); the one that completes the count publishes the slot as
ready in GROUPS copies of a flag (one release of the warp's lanes, cells 128 bytes apart, so that
the waiting programs' polls spread over the L2's slices); an fc2 program polls its copy (volatile
loads, a sleep between), then takes an acquire load and a barrier before it reads the
activation. The last fc2 program of a slot (counted the same way) resets the cells for the next
replay: by then every fc2 program of the slot has passed its wait, and the next replay's fc1 runs
after this launch has finished. The poll gives up after SPIN_LIMIT rounds (the outputs are then
wrong and fail the checks; a GPU never hangs on it).

The arithmetic is `sparse_gemv._sparse_gemv_fp8`'s at one token (2 rows, 1,024 bytes a step, every
step masked, the token through the row-broadcast tile, the epilogue's loads early), each step's
products summed in the same order, so the output should be the arm's bit for bit. Under the
interpreter the launches run one after the other: fc2's counters are complete when it starts.

Not part of the package: the records' code.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.gemv_parts import gemv_epilogue, program_expert, row_bias
from moebench.kernels.jit import HAS_PDL, pdl_launch_dependents
from moebench.kernels.sparse_gemv import _fp8_step
from moebench.kernels.sparse_launch import default_blocks

GROUPS = 32  # sub-counts of a slot's count, and copies of its ready flag
STRIDE = 32  # int32s between two cells: 128 bytes
SPIN_LIMIT = 1 << 20  # polls before giving up (200 ns sleeps: about 0.3 s)


@triton.jit
def _sleep(c, PTX: tl.constexpr):
    if PTX:
        tl.inline_asm_elementwise("nanosleep.u32 200;\nmov.b32 $0, $1;", "=r,r", [c],
                                  dtype=tl.int32, is_pure=False, pack=1)  # fmt: skip


@triton.jit
def _wait_ready(flag_ptr, PTX: tl.constexpr, LIMIT: tl.constexpr):
    """Poll ``flag_ptr`` until it reads nonzero (or LIMIT polls), then acquire."""
    if PTX:
        c = tl.load(flag_ptr, volatile=True)
        i = 0
        while (c == 0) & (i < LIMIT):
            _sleep(c, PTX)
            c = tl.load(flag_ptr, volatile=True)
            i += 1
        tl.atomic_add(flag_ptr, 0, sem="acquire")
        tl.debug_barrier()


@triton.jit
def _last_of(base, i, n, G: tl.constexpr, STRIDE: tl.constexpr, SEM: tl.constexpr):
    """Whether program ``i`` of ``n`` is the last to count itself: each adds 1 to sub-count i % G
    (cells ``base`` + g * STRIDE) and the last of each sub-count adds 1 to the top (cell G); the
    last of those is the last of all. One address took every program's atomic before, n of them
    one after the other in the L2 (2,880 a slot for fc1 at one token)."""
    g = i % G
    old = tl.atomic_add(base + g * STRIDE, 1, sem=SEM)
    last = old < 0
    if old == (n - 1 - g) // G:
        last = tl.atomic_add(base + G * STRIDE, 1, sem=SEM) == G - 1
    return last


@triton.jit
def _my_flag(cells, i, G: tl.constexpr, STRIDE: tl.constexpr):
    """Program ``i``'s copy of the ready flag among a hand-over's cells."""
    return cells + (2 * G + 2 + i % G) * STRIDE


@triton.jit
def _hand_over_done(cells, i, n, G: tl.constexpr, STRIDE: tl.constexpr, ROLE: tl.constexpr):
    """After program ``i`` of ``n`` has stored its outputs: "signal" counts it, and the last of
    the ``n`` publishes the ready flags; "await" counts it, and the last resets every cell."""
    tl.debug_barrier()  # every thread's stores before the count (release below)
    if ROLE == "signal":
        if _last_of(cells, i, n, G, STRIDE, "acq_rel"):
            # All G copies in one instruction of the warp's lanes: one fence before them (a
            # release each, one at a time, put G fences in a row: 33 MEMBAR.GPU, sm_90a).
            flags = cells + (2 * G + 2 + tl.arange(0, G)) * STRIDE
            tl.atomic_xchg(flags, tl.full([G], 1, tl.int32), sem="release")
    else:
        if _last_of(cells + (G + 1) * STRIDE, i, n, G, STRIDE, "relaxed"):
            # Every fc2 program has passed its wait: reset for the next replay.
            every = cells + tl.arange(0, 4 * G) * STRIDE  # the counts and the flags, G more
            tl.atomic_xchg(every, tl.zeros([4 * G], tl.int32), mask=tl.arange(0, 4 * G) < 3 * G + 2,
                           sem="relaxed")  # fmt: skip


@triton.jit
def _preloaded_step(acc, w, x_rows, offs, k0, k_hi):
    """`_fp8_step`'s arithmetic (masked, the row-broadcast token) on weights ``w`` loaded before."""
    k = k0 + offs[None, :, :]
    xv = tl.load(x_rows + k, mask=k < k_hi, other=0)
    xf = xv.to(tl.bfloat16, bitcast=True).to(tl.float32)
    return acc + tl.sum(w.to(tl.float32) * xf, axis=2)


@triton.jit
def _fp8_ready(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, cell_ptr,
    expert_offset, E, R, NEED,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STEPS: tl.constexpr,
    ROLE: tl.constexpr, PRELOAD: tl.constexpr, TRIGGER: tl.constexpr, EXACT_RNE: tl.constexpr,
    PTX: tl.constexpr,
    G: tl.constexpr, STRIDE: tl.constexpr, LIMIT: tl.constexpr,
):  # fmt: skip
    """ROLE "signal" (fc1): the arm's program, then its slot's count. ROLE "await" (fc2): the
    weights first (PRELOAD), then the wait for its slot, then the arm's arithmetic."""
    # fc1 lets fc2 launch (TRIGGER): "start" in every program, "local" only in those with work
    # (a program that leaves counts as having let it), "none" never (fc2 starts when fc1 ends).
    pdl_launch_dependents(ROLE == "signal" and PTX and TRIGGER == "start")
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    pdl_launch_dependents(ROLE == "signal" and PTX and TRIGGER == "local")
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    k_hi = R
    bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    scale = tl.load(ws_ptr + e64)
    LANES: tl.constexpr = BLOCK_K // 16
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, LANES)[:, None] * 16 + tl.arange(0, 16)[None, :]
    w_rows = w_ptr + e64 * stride_we + rows.to(tl.int64)[:, None, None] * stride_wn
    x_row = (x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk).to(
        tl.pointer_type(tl.int16)
    )
    x_rows = x_row + 0 * rows[:, None, None]
    acc = tl.zeros([BLOCK_N, LANES], dtype=tl.float32)
    # This (token, slot)'s cells, STRIDE int32s apart: fc1's count (G sub-counts, then the
    # top), fc2's count (the same), then G copies of the ready flag.
    cells = cell_ptr + (t * tl.num_programs(1) + slot) * (3 * G + 2) * STRIDE
    if ROLE == "signal":
        for k0 in tl.range(0, k_hi, BLOCK_K):
            acc = _fp8_step(acc, w_rows, x_row, x_rows, offs, k0, k_hi, True, False, False, PTX)
    else:
        mine = _my_flag(cells, n_block, G, STRIDE)
        if PRELOAD:
            k = offs[None, :, :]
            w0 = tl.load(w_rows + k, mask=k < k_hi, other=0.0)
            if STEPS > 1:
                w1 = tl.load(w_rows + BLOCK_K + k, mask=BLOCK_K + k < k_hi, other=0.0)
            if STEPS > 2:
                w2 = tl.load(w_rows + 2 * BLOCK_K + k, mask=2 * BLOCK_K + k < k_hi, other=0.0)
            if STEPS > 3:
                w3 = tl.load(w_rows + 3 * BLOCK_K + k, mask=3 * BLOCK_K + k < k_hi, other=0.0)
            _wait_ready(mine, PTX, LIMIT)
            acc = _preloaded_step(acc, w0, x_rows, offs, 0, k_hi)
            if STEPS > 1:
                acc = _preloaded_step(acc, w1, x_rows, offs, BLOCK_K, k_hi)
            if STEPS > 2:
                acc = _preloaded_step(acc, w2, x_rows, offs, 2 * BLOCK_K, k_hi)
            if STEPS > 3:
                acc = _preloaded_step(acc, w3, x_rows, offs, 3 * BLOCK_K, k_hi)
        else:
            _wait_ready(mine, PTX, LIMIT)
            for k0 in tl.range(0, k_hi, BLOCK_K):
                acc = _fp8_step(acc, w_rows, x_row, x_rows, offs, k0, k_hi, True, False, False,
                                PTX)  # fmt: skip
    h = tl.sum(acc, axis=1)
    gemv_epilogue(h * scale, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU, BLOCK_N,
                  EXACT_RNE)  # fmt: skip
    _hand_over_done(cells, n_block, NEED, G, STRIDE, ROLE)


class ReadySlots:
    """The cells of one step's fc1 -> fc2 hand-over, for T tokens of K slots, at zero."""

    def __init__(self, T: int, K: int, device) -> None:
        self.cells = torch.zeros(T * K * (3 * GROUPS + 2) * STRIDE, dtype=torch.int32,
                                 device=device)  # fmt: skip


def ready_gemv(x, topk_ids_TK, w, w_scale, bias_EN, out, slots: ReadySlots, *, role: str,
               expert_offset: int, glu: str = "none", preload: bool = True,
               trigger: str = "start") -> None:  # fmt: skip
    """fc1 (``role="signal"``) or fc2 (``role="await"``, launched to start early) of the one-token
    sparse FP8 step, over the same ``slots``."""
    assert w.dtype == torch.float8_e4m3fn
    T, K = topk_ids_TK.shape
    E, N, R = w.shape
    bn, bk, nw = default_blocks("fp8", T)
    assert (bn, bk, nw) == (2, 1024, 1), "the one-token launch only"
    assert N // bn >= GROUPS, "a program at least in each sub-count"
    if x.dim() == 2:
        stride_xt, stride_xk = x.stride(0), 0
    else:
        stride_xt, stride_xk = x.stride(0), x.stride(1)
    gdc = role == "await" and HAS_PDL and out.is_cuda
    extra = {"launch_pdl": True} if gdc else {}
    _fp8_ready[(N // bn, K, T)](
        x, topk_ids_TK, w, w_scale, bias_EN, out, slots.cells,
        expert_offset, E, R, N // bn,
        stride_xt, stride_xk, *topk_ids_TK.stride(), w.stride(0), w.stride(1),
        bias_EN.stride(0), out.stride(0), out.stride(1),
        GLU=glu, BLOCK_N=bn, BLOCK_K=bk, STEPS=triton.cdiv(R, bk), ROLE=role, PRELOAD=preload,
        TRIGGER=trigger,
        EXACT_RNE=not out.is_cuda, PTX=out.is_cuda, G=GROUPS, STRIDE=STRIDE,
        LIMIT=SPIN_LIMIT, num_warps=nw, **extra,
    )  # fmt: skip
