"""What the Gluon tiles (`mx_gluon` for MXFP4, `fp8_gluon` for FP8) share: a program's pass read
from the table (`pass_table`) and the waits around it (the dependent launch, `expert_ready`'s
counters), the ring of the pass's slots gathered by cp.async into swizzled shared memory, the K
loop (`multiply_steps`: each tile gives its step's load and decode) and the epilogue (bias, the
GLU in the reference's order, bf16 into the slots' rows). The tiles differ only in their weights'
layout and decode; `mx_gluon`'s docstring says what a tile does and why.
GPU only (sm_90): Gluon has no interpreter.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from moebench.kernels.expert_ready import READY_ROLES
from moebench.kernels.expert_ready import WAIT_LIMIT as WAIT_READS
from moebench.kernels.mx_gluon_layout import ROWS, STEP, fits
from moebench.kernels.pass_table import TABLE_HEAD

BLOCK_N = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(STEP)
HEAD = gl.constexpr(TABLE_HEAD)
WAIT_LIMIT = gl.constexpr(WAIT_READS)


@gluon.jit
def gdc_wait(GDC: gl.constexpr):
    if GDC:
        gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32,
                                  is_pure=False, pack=1)  # fmt: skip


@gluon.jit
def gdc_launch_dependents(GDC: gl.constexpr):
    if GDC:
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [],
                                  dtype=gl.int32, is_pure=False, pack=1)  # fmt: skip


@gluon.jit
def _signal_started(ready_ptr, e, GDC: gl.constexpr):
    """fc1, after its dependent-launch wait: count this program started on expert ``e``, then let
    fc2 launch, the trigger taking the atomic's result (`expert_ready.signal_started`)."""
    old = gl.atomic_add(ready_ptr + e, 1, sem="relaxed")
    if GDC:
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; mov.b32 $0, $1;", "=r,r",
                                  [old], dtype=gl.int32, is_pure=False, pack=1)  # fmt: skip


@gluon.jit
def signal_done(ready_ptr, e, E):
    """fc1: this program's stores done, count it finished on expert ``e``."""
    gl.thread_barrier()
    gl.atomic_add(ready_ptr + E + e, 1, sem="release")


@gluon.jit
def _wait_for_expert(ready_ptr, e, E):
    """fc2: wait until every fc1 program started on expert ``e`` has finished, at most
    WAIT_LIMIT reads (`expert_ready.wait_for_expert`)."""
    started = gl.atomic_add(ready_ptr + e, 0, sem="acquire")
    done = gl.atomic_add(ready_ptr + E + e, 0, sem="acquire")
    reads = 0
    while (started - done > 0) & (reads < WAIT_LIMIT):
        done = gl.atomic_add(ready_ptr + E + e, 0, sem="acquire")
        reads += 1


@gluon.jit
def open_pass(table_ptr, ready_ptr, E, BLOCK_M: gl.constexpr, GDC: gl.constexpr,
              READY: gl.constexpr):  # fmt: skip
    """Program (row block, pass j)'s table row, its expert and its live slots (0: nothing to do,
    the caller returns), past the waits its inputs need: fc2 waiting for fc1 expert by expert
    (READY 2) for the expert's fc1 programs, otherwise for the previous kernel (the table and x
    may be its outputs); fc1 with READY 1 counts itself started on its expert and then lets fc2
    launch (`expert_ready`)."""
    entry = table_ptr + gl.program_id(1) * (HEAD + BLOCK_M)
    if READY == 2:
        # The table was complete before fc1's programs passed their wait, so before this launch;
        # read past the SM's L1.
        e = gl.load(entry, cache_modifier=".cg")
        live = gl.load(entry + 1, cache_modifier=".cg")
        if live > 0:
            _wait_for_expert(ready_ptr, e, E)
    else:
        gdc_wait(GDC)
        e = gl.load(entry, cache_modifier=".cg")
        live = gl.load(entry + 1, cache_modifier=".cg")
        if READY == 1 and live > 0:
            _signal_started(ready_ptr, e, GDC)
    return entry, e, live


@gluon.jit
def slots_ready(STAGES: gl.constexpr):
    """The oldest step's slots in shared memory, every thread's copies, seen by the MMA."""
    async_copy.wait_group(STAGES - 2)
    fence_async_shared()
    gl.thread_barrier()


@gluon.jit
def copy_slots(x_smem, x_at, ok_main, ok_tail, q, MAIN_STEPS: gl.constexpr,
               STAGES: gl.constexpr, TAIL: gl.constexpr):  # fmt: skip
    """Step q's slots into stage q % STAGES as one copy group (empty past the last step)."""
    if q < MAIN_STEPS:
        async_copy.async_copy_global_to_shared(x_smem.index(q % STAGES), x_at + q * BLOCK_K,
                                               mask=ok_main)  # fmt: skip
    elif TAIL and q == MAIN_STEPS:
        async_copy.async_copy_global_to_shared(x_smem.index(q % STAGES), x_at + q * BLOCK_K,
                                               mask=ok_tail)  # fmt: skip
    async_copy.commit_group()


@gluon.jit
def slot_rows(entry, live, x_ptr, K, stride_xt, stride_xk, R: gl.constexpr,
              MAIN_STEPS: gl.constexpr, BLOCK_M: gl.constexpr):  # fmt: skip
    """The pass's slots' rows of x as cp.async sources [BLOCK_M, 128] (a step's, from its first
    value) and their masks for a whole step and for the tail; past the live slots the table
    repeats the last one (never copied: masked)."""
    X_LOAD: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    mm = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, X_LOAD))
    kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, X_LOAD))
    m_ok = mm < live
    slot = gl.load(entry + HEAD + mm, cache_modifier=".cg").to(gl.int64)
    x_at = x_ptr + gl.expand_dims((slot // K) * stride_xt + (slot % K) * stride_xk, 1)
    x_at = x_at + gl.expand_dims(kk, 0)
    ok_main = gl.expand_dims(m_ok, 1) & gl.expand_dims(kk >= 0, 0)
    ok_tail = gl.expand_dims(m_ok, 1) & gl.expand_dims(MAIN_STEPS * BLOCK_K + kk < R, 0)
    return x_at, ok_main, ok_tail


@gluon.jit
def multiply_steps(acc, at, aux, x_smem, x_at, ok_main, ok_tail, load_step: gl.constexpr,
                   decode: gl.constexpr, A_LAYOUT: gl.constexpr, MAIN_STEPS: gl.constexpr,
                   STAGES: gl.constexpr, TAIL: gl.constexpr):  # fmt: skip
    """The whole 128-value steps of a pass: ``acc`` [64, BLOCK_M] fp32 plus each step's weights
    (``load_step(at, q)``: step q's words, straight into registers, two steps ahead of their
    multiply; ``decode(words, aux, A_LAYOUT)``: the A operand [64, 128] bf16 in registers) times
    its slots (copied into the ring by cp.async, STAGES - 1 steps ahead: `copy_slots`, which the
    caller started for the first STAGES - 1). The warpgroup MMA is asynchronous, unrolled by two
    so that the two steps' operands live in two register blocks: the next step's decode runs while
    the current one multiplies. Returns (acc, a0, a1), the last MMA still in flight, reading a0."""
    w0 = load_step(at, 0)
    w1 = load_step(at, 1)
    a0 = decode(w0, aux, A_LAYOUT)
    a1 = gl.zeros([BLOCK_N, BLOCK_K], gl.bfloat16, A_LAYOUT)
    for it in range(MAIN_STEPS // 2):
        i = 2 * it
        # Past the last step the loads read it again (an L2 hit; decoded, never multiplied).
        n0 = gl.minimum(i + 2, MAIN_STEPS - 1)
        n1 = gl.minimum(i + 3, MAIN_STEPS - 1)
        w0 = load_step(at, n0)
        # Step i multiplies; step i - 1's product (a1's) is done.
        slots_ready(STAGES)
        acc = warpgroup_mma(a0, x_smem.index(i % STAGES).permute((1, 0)), acc, is_async=True)
        acc, a1 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a1))
        copy_slots(x_smem, x_at, ok_main, ok_tail, i + STAGES - 1, MAIN_STEPS, STAGES, TAIL)
        # Step i + 1 decoded while step i multiplies, then issued.
        a1 = decode(w1, aux, A_LAYOUT)
        w1 = load_step(at, n1)
        slots_ready(STAGES)
        acc = warpgroup_mma(a1, x_smem.index((i + 1) % STAGES).permute((1, 0)), acc,
                            is_async=True)  # fmt: skip
        acc, a0 = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a0))
        copy_slots(x_smem, x_at, ok_main, ok_tail, i + STAGES, MAIN_STEPS, STAGES, TAIL)
        # Step i + 2 decoded while step i + 1 multiplies.
        a0 = decode(w0, aux, A_LAYOUT)
    return acc, a0, a1


@gluon.jit
def multiply_tail(acc, a_tail, x_smem, MAIN_STEPS: gl.constexpr, STAGES: gl.constexpr):
    """The 64-value tail's operand ``a_tail`` (its other half zeros) times its slots, issued."""
    slots_ready(STAGES)
    return warpgroup_mma(a_tail, x_smem.index(MAIN_STEPS % STAGES).permute((1, 0)), acc,
                         is_async=True)  # fmt: skip


@gluon.jit
def _activation(gate, up, GLU: gl.constexpr):
    """`jit.gated_activation`'s arithmetic, operation for operation (the same bits)."""
    if GLU == "silu":
        return gate * (1 / (1 + gl.exp(-gate))) * up
    else:
        gate = gl.minimum(gate, 7.0)
        up = gl.minimum(gl.maximum(up, -7.0), 7.0)
        g = 1.702 * gate
        return gate * (1 / (1 + gl.exp(-g))) * (up + 1.0)


@gluon.jit
def store_rows(h, entry, live, e, nb, b_ptr, out_ptr, K, stride_be, stride_ot, stride_ok,
               EPI: gl.constexpr, BLOCK_M: gl.constexpr, GLU: gl.constexpr):  # fmt: skip
    """The epilogue: h [64 rows, BLOCK_M slots] fp32 in layout EPI (scaled already) + bias, the
    GLU over (gate, up) row pairs, bf16 into the live slots' rows of ``out``; rows past the live
    slots are never written."""
    n_rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, EPI))
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, EPI))
    bias = gl.load(b_ptr + e.to(gl.int64) * stride_be + nb * BLOCK_N + n_rows)
    h = h + gl.expand_dims(bias.to(gl.float32), 1)
    if GLU == "none":
        c_slot = gl.load(entry + HEAD + cols, cache_modifier=".cg").to(gl.int64)
        c_rows = (c_slot // K) * stride_ot + (c_slot % K) * stride_ok
        o_at = out_ptr + gl.expand_dims(c_rows, 0) + gl.expand_dims(nb * BLOCK_N + n_rows, 1)
        ok = gl.expand_dims(cols < live, 0) & gl.expand_dims(n_rows >= 0, 1)
        gl.store(o_at, h.to(gl.bfloat16), mask=ok)
    else:
        gate, up = gl.split(gl.permute(gl.reshape(h, [BLOCK_N // 2, 2, BLOCK_M]), (0, 2, 1)))
        act = _activation(gate, up, GLU).to(gl.bfloat16)
        L_ACT: gl.constexpr = act.type.layout
        half = gl.arange(0, BLOCK_N // 2, layout=gl.SliceLayout(1, L_ACT))
        a_cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, L_ACT))
        a_slot = gl.load(entry + HEAD + a_cols, cache_modifier=".cg").to(gl.int64)
        a_rows = (a_slot // K) * stride_ot + (a_slot % K) * stride_ok
        o_at = out_ptr + gl.expand_dims(a_rows, 0) + gl.expand_dims(nb * (BLOCK_N // 2) + half, 1)
        ok = gl.expand_dims(a_cols < live, 0) & gl.expand_dims(half >= 0, 1)
        gl.store(o_at, act, mask=ok)


def launch_setup(
    name: str,
    layout: str,
    x: torch.Tensor,
    table: torch.Tensor,
    steps: int,
    experts: int,
    row_blocks: int,
    bias_EN: torch.Tensor,
    out: torch.Tensor,
    *,
    block_m: int,
    glu: str,
    pdl: bool,
    max_registers: int,
    expert_ready: str,
    ready: torch.Tensor | None,
    format_ok: bool = True,
    format_needs: str = "",
) -> tuple[int, int, tuple[int, int], dict, tuple]:
    """What both tiles' launchers check and pass (`mx_gluon.grouped_gluon_mxfp4`'s docstring):
    a ValueError naming the launcher ``name`` (its weights in ``layout``; ``format_ok`` and
    ``format_needs`` for the format's own operands) unless the operands fit the tile; else (N,
    R, the grid, the launch's keyword arguments, and the arguments every tile takes after N,
    top-k and E: x's, the bias's and out's strides and the counters, the table where none)."""
    E, N, R, S = experts, row_blocks * ROWS, x.shape[-1], steps
    width = TABLE_HEAD + block_m
    out_n = N // 2 if glu != "none" else N
    ok = (out.is_cuda and fits(N, R) and R // STEP == S and x_rows_aligned(x)
          and tuple(table.shape[1:]) == (width,) and table.dtype == torch.int32
          and out.shape[-1] == out_n and out.stride(-1) == 1 and out.dim() == 3
          and tuple(bias_EN.shape) == (E, N) and block_m in (16, 32) and format_ok
          and expert_ready in READY_ROLES
          and (not expert_ready or (pdl and ready is not None)))  # fmt: skip
    if not ok:
        raise ValueError(
            f"{name}: needs CUDA tensors, weights of {S} steps for R {R} and N {N} ({layout}), "
            f"x's rows on 16-byte boundaries, an int32 [P, {width}] table, {format_needs}bias "
            f"[{E}, {N}], out [T, K, {out_n}] bf16, block_m 16 or 32 and, with expert_ready, the "
            f"dependent launch and counters"
        )
    kwargs = {"launch_pdl": True} if pdl else {}
    if max_registers:
        kwargs["maxnreg"] = max_registers
    strides = (x.stride(0), x.stride(1) if x.dim() == 3 else 0, bias_EN.stride(0), out.stride(0),
               out.stride(1), table if ready is None else ready)  # fmt: skip
    return N, R, (row_blocks, table.shape[0]), kwargs, strides


def x_rows_aligned(x: torch.Tensor) -> bool:
    """Whether every row of ``x`` (unit stride along it) starts on a 16-byte boundary: the tiles
    copy their slots' rows 16 bytes at a time."""
    return (x.dtype == torch.bfloat16 and x.stride(-1) == 1 and x.data_ptr() % 16 == 0
            and all(st % 8 == 0 for st in x.stride()[:-1]))  # fmt: skip
