"""The FP8 grouped tile in Gluon: `grouped_decode`'s fc1 and fc2 on the GPU where
``Launch.fp8_gluon`` says so, one pass of up to BLOCK_M slots a program, the same grid, products
and epilogue as the Triton tile (`grouped_dot`'s FP8 tile, one pass a program), summed in another
order. The FP8 counterpart of `mx_gluon` (its docstring says what the tile does and why), with
two differences:

- the weights are e4m3 in `fp8_placed`'s bits, laid out by `fp8_gluon_layout`: a thread's 32 bytes
  of each of its two rows a 128-value step, eight words a row, each word one 16-value slice's
  fragment (two bf16 pairs, `fp8_placed.E4M3_BF16_PLACED_ASM`: a mask, two shifts, three masks
  and ors and two multiplies by 2^120, exact);
- the expert's scale multiplies the fp32 sums after the loop, then the bias is added, as the
  Triton tile does.

GPU only (sm_90): Gluon has no interpreter, so the CPU and the interpreter run the Triton tile and
`tests/kernels/test_fp8_gluon.py` checks this one on the GPU.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_wait

from moebench.kernels.expert_ready import READY_ROLES
from moebench.kernels.fp8_gluon_layout import TAIL_WORDS, WORDS, Fp8GluonWeights
from moebench.kernels.fp8_placed import FROM_LEFT_SHIFT, FROM_RIGHT_SHIFT, PAIR_MASK, TWO_TO_120
from moebench.kernels.gluon_parts import (
    copy_slots,
    gdc_launch_dependents,
    launch_setup,
    multiply_steps,
    multiply_tail,
    open_pass,
    signal_done,
    slot_rows,
    store_rows,
)
from moebench.kernels.mx_gluon_layout import ROWS, STEP

# One placed word ($4) to its four bf16 values, $0..$3 (values 0..3: pair 0's low and high half,
# then pair 1's), each the placed bits times 2^120 (`fp8_placed`).
DECODE_ASM = gl.constexpr(f"""{{
.reg .b32 a, b, k;
mov.b32 k, 0x{TWO_TO_120:08X};
and.b32 a, $4, 0x{PAIR_MASK:08X};
mul.rn.bf16x2 a, a, k;
mov.b32 {{$0, $1}}, a;
shl.b32 a, $4, 4;
and.b32 a, a, 0x{FROM_LEFT_SHIFT:08X};
shr.b32 b, $4, 4;
and.b32 b, b, 0x{FROM_RIGHT_SHIFT:08X};
or.b32 a, a, b;
mul.rn.bf16x2 a, a, k;
mov.b32 {{$2, $3}}, a;
}}""")
BLOCK_N = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(STEP)
TILE_WORDS = gl.constexpr(ROWS * WORDS)  # a step of a program: 2,048 words
T_WORDS = gl.constexpr(TAIL_WORDS)


@gluon.constexpr_function
def word_layout():
    """[64 rows, 8 words j, 4 lanes a] int32: thread (warp w, lane l) holds rows 16w + l/4 and
    + 8, lane a = l % 4, all eight j (32 bytes a row, two 16-byte loads)."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1, 0], [0, 2, 0], [0, 4, 0], [8, 0, 0]],
        lane_bases=[[0, 0, 1], [0, 0, 2], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
        warp_bases=[[16, 0, 0], [32, 0, 0]],
        block_bases=[],
        shape=[64, 8, 4],
    )


@gluon.jit
def _load_step(w_at, q):
    """Step q's words of the program's rows: [64, 8, 4], 64 bytes a thread."""
    return gl.load(w_at + q * TILE_WORDS)


@gluon.jit
def _decode(words, unused, A_LAYOUT: gl.constexpr):
    """Placed words [64, 8, 4]: the A operand [64, 128] bf16 in the MMA's register layout (the
    second argument, `gluon_parts.multiply_steps`' aux, is MXFP4's)."""
    v0, v1, v2, v3 = gl.inline_asm_elementwise(
        DECODE_ASM, "=h,=h,=h,=h,r", [words], dtype=(gl.bfloat16,) * 4, is_pure=True, pack=1,
    )  # fmt: skip
    t = gl.join(gl.join(v0, v1), gl.join(v2, v3))  # [64, j, a, h, p]
    t = gl.permute(t, (0, 1, 4, 2, 3))  # k = 16j + 8p + 2a + h
    return gl.convert_layout(gl.reshape(t, [BLOCK_N, BLOCK_K]), A_LAYOUT)


@gluon.jit
def _grouped_gluon_fp8(
    x_ptr, table_ptr, w_ptr, wt_ptr, ws_ptr, b_ptr, out_ptr,
    N, K, E, stride_xt, stride_xk, stride_be, stride_ot, stride_ok, ready_ptr,
    R: gl.constexpr, MAIN_STEPS: gl.constexpr, TAIL: gl.constexpr, BLOCK_M: gl.constexpr,
    STAGES: gl.constexpr, GLU: gl.constexpr, GDC: gl.constexpr, READY: gl.constexpr = 0,
):  # fmt: skip
    """Program (row block nb, pass j): pass j of the table times the expert's rows nb * 64 ..
    nb * 64 + 63, times the expert's scale, through bias and GLU into the slots' rows of ``out``
    (`mx_gluon._grouped_gluon_mxfp4`, whose structure this follows step for step)."""
    LW: gl.constexpr = word_layout()
    MMA: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16]
    )
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    X_SMEM: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)

    gdc_launch_dependents(GDC and READY != 1)
    nb = gl.program_id(0)
    entry, e, live = open_pass(table_ptr, ready_ptr, E, BLOCK_M, GDC, READY)
    if live == 0:
        return

    # Weight words of (row, j, a): a program's steps one run, a step 2,048 words
    # (`fp8_gluon_layout`).
    L_RJ: gl.constexpr = gl.SliceLayout(2, LW)
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, L_RJ))
    jj = gl.arange(0, 8, layout=gl.SliceLayout(0, L_RJ))
    aa = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, LW)))
    grow = (e * N + nb * BLOCK_N + rows).to(gl.int64)  # the expert's row among [E * N]
    r3 = gl.expand_dims(gl.expand_dims(grow, 1), 2)
    j3 = gl.expand_dims(gl.expand_dims(jj, 0), 2)
    a3 = gl.expand_dims(gl.expand_dims(aa, 0), 1)
    lr = gl.expand_dims(gl.expand_dims(rows, 1), 2)
    tile = ((e * (N // BLOCK_N) + nb) * MAIN_STEPS).to(gl.int64)
    within = ((lr // 16) * 512 + ((lr // 8) % 2) * 256 + (j3 // 4) * 128 + (lr % 8) * 16 + 4 * a3
              + j3 % 4)  # fmt: skip
    w_at = w_ptr + tile * TILE_WORDS + within

    # The pass's slots' rows of x, [BLOCK_M, 128] a step, gathered by cp.async.
    x_at, ok_main, ok_tail = slot_rows(entry, live, x_ptr, K, stride_xt, stride_xk, R, MAIN_STEPS,
                                       BLOCK_M)  # fmt: skip
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_M, BLOCK_K], X_SMEM)

    for p in gl.static_range(STAGES - 1):
        copy_slots(x_smem, x_at, ok_main, ok_tail, p, MAIN_STEPS, STAGES, TAIL)
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, MMA)
    acc, a0, a1 = multiply_steps(acc, w_at, 0, x_smem, x_at, ok_main, ok_tail, _load_step, _decode,
                                 A_LAYOUT, MAIN_STEPS, STAGES, TAIL)  # fmt: skip
    if TAIL:
        # The last 64 values: 16 words a row (`fp8_gluon_layout`), the operand's other half zeros.
        wt = gl.load(wt_ptr + r3 * T_WORDS + (4 * a3 + j3), mask=(j3 < 4) & (a3 >= 0) & (r3 >= 0),
                     other=0)  # fmt: skip
        a0 = _decode(wt, 0, A_LAYOUT)
        acc = multiply_tail(acc, a0, x_smem, MAIN_STEPS, STAGES)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a0, a1))[0]
    async_copy.wait_group(0)

    # Epilogue: h [64 rows, BLOCK_M slots] times the expert's scale, then as MXFP4's (bias, GLU,
    # bf16 into the live slots' rows; `grouped_dot`'s FP8 tile's order).
    EPI: gl.constexpr = gl.BlockedLayout([2, 1], [16, 2], [1, 4], [0, 1])
    h = gl.convert_layout(acc, EPI) * gl.load(ws_ptr + e)
    store_rows(h, entry, live, e, nb, b_ptr, out_ptr, K, stride_be, stride_ot, stride_ok, EPI,
               BLOCK_M, GLU)  # fmt: skip
    if READY == 1:
        signal_done(ready_ptr, e, E)


def grouped_gluon_fp8(
    x: torch.Tensor,
    table: torch.Tensor,
    w: Fp8GluonWeights,
    w_scale: torch.Tensor,
    bias_EN: torch.Tensor,
    out: torch.Tensor,
    *,
    top_k: int,
    block_m: int,
    glu: str = "none",
    stages: int = 3,
    pdl: bool = False,
    max_registers: int = 0,
    expert_ready: str = "",
    ready: torch.Tensor | None = None,
) -> None:
    """Every pass of ``table`` (`pass_table`) times its expert's weights ``w`` (`pack_fp8_gluon`'s)
    and fp32 scale ``w_scale`` [E], through bias and GLU into ``out``; the rest as
    `mx_gluon.grouped_gluon_mxfp4`."""
    E, nb, S = w.main.shape[:3]
    N, R, grid, kwargs, strides = launch_setup(
        "grouped_gluon_fp8", "fp8_gluon_layout", x, table, S, E, nb, bias_EN, out,
        block_m=block_m, glu=glu, pdl=pdl, max_registers=max_registers,
        expert_ready=expert_ready, ready=ready,
        format_ok=tuple(w_scale.shape) == (E,) and w_scale.dtype == torch.float32,
        format_needs=f"fp32 scales [{E}], ",
    )  # fmt: skip
    _grouped_gluon_fp8[grid](
        x, table, w.main, w.tail, w_scale, bias_EN, out, N, top_k, E, *strides,
        R=R, MAIN_STEPS=S, TAIL=R > S * STEP, BLOCK_M=block_m, STAGES=stages, GLU=glu, GDC=pdl,
        READY=READY_ROLES[expert_ready], num_warps=4, **kwargs,
    )  # fmt: skip
