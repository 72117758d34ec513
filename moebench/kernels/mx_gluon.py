"""The MXFP4 grouped tile in Gluon (triton's lower-level language): `grouped_decode`'s fc1 and fc2
on the GPU where ``Launch.gluon`` says so, one pass of up to BLOCK_M slots a program, the same
grid, products and epilogue as the Triton tile (`grouped_dot`, one pass a program), summed in
another order. GPU only (sm_90): Gluon has no interpreter, so the CPU and the interpreter run the
Triton tile, and `tests/kernels/test_mx_gluon.py` checks this one on the GPU.

Why (docs/perf/HISTORY.md, twenty-sixth to thirty-fourth sessions): the Triton tile copies its
weights through shared memory and re-lays them into the MMA operand (241 instructions a K step at
gpt-oss-20b's shapes); triton 3.6 cannot give a loaded tensor the operand's register layout. This
tile does what the probes measured 17-21% faster on an H100 (`docs/perf/2026-12-06-packed-mx/`):

- each thread loads its own 16 bytes of each of its two rows a step straight into registers
  (`mx_gluon_layout`: a program's steps one contiguous run), two steps ahead of their multiply;
- it decodes them (the rotated decode, the step's scale byte picked out of the row's scale word by
  one byte permute: every scale byte at most 128, `mx_rotated.FOLD_SCALES_UP_TO`) into the
  warpgroup MMA's A fragment, in registers;
- the pass's slots (rows of x) are gathered by cp.async into a ring of STAGES swizzled
  shared-memory buffers that the MMA reads directly;
- the MMA is asynchronous: the next step's decode runs while it multiplies (unrolled by two, so
  the two steps' operands live in two register blocks).

A program's work comes from a pass table (`pass_table`, built from the routing by a small Triton
kernel before fc1 and read by fc1 and fc2): its expert, its live slots and their slot numbers.
The epilogue is the Triton tile's: bias, the GLU of the interleaved (gate, up) rows in fp32 in the
reference's order, bf16 rounded to nearest even, stored into the slots' rows; rows past the live
slots are never written.

Scale byte 0 decodes as 2^-127 (the format's value; the Triton tile gives 0) and the layout needs
bytes up to 128: `grouped_decode` takes this tile only where the scales' largest byte allows it.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_wait

from moebench.kernels.expert_ready import READY_ROLES
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
from moebench.kernels.mx_gluon_layout import ROWS, STEP, GluonWeights
from moebench.kernels.mx_rotated import ROTATIONS, placed_pair


def _decode_asm() -> str:
    """One rotated word ($8) and its row's scale word ($9) to four bf16 pairs, halves $0..$7 (pair
    r in $2r low and $2r+1 high); $10 the byte-permute selector putting the word's scale byte in
    bytes 0 and 2. The scale pair is 2^(s - 1) (s <= 128), the placed values value x 2^-126
    (`mx_rotated.placed_pair`)."""
    lines = ["{", ".reg .b32 c, d;", "prmt.b32 d, $9, 0, $10;", "mad.lo.u32 d, d, 128, 0x3F003F00;"]
    for r in range(len(ROTATIONS)):
        lines += placed_pair(r, "$8")
        lines += ["mul.rn.bf16x2 c, c, d;", f"mov.b32 {{${2 * r}, ${2 * r + 1}}}, c;"]
    return "\n".join(lines + ["}"])


DECODE_ASM = gl.constexpr(_decode_asm())
BLOCK_N = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(STEP)
STEP_WORDS = gl.constexpr(STEP // 8)  # 16 words a row a step


@gluon.constexpr_function
def word_layout():
    """[64 rows, 4 words j, 4 lanes a] int32: thread (warp w, lane l) holds rows 16w + l/4 and
    + 8, lane a = l % 4, all four j (16 contiguous bytes a row)."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 1, 0], [0, 2, 0], [8, 0, 0]],
        lane_bases=[[0, 0, 1], [0, 0, 2], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
        warp_bases=[[16, 0, 0], [32, 0, 0]],
        block_bases=[],
        shape=[64, 4, 4],
    )


@gluon.jit
def _decode(words, scale_words, sel, A_LAYOUT: gl.constexpr):
    """Words [64, 4, 4], their rows' scale words [64] and the selectors: the A operand [64, 128]
    bf16 in the MMA's register layout."""
    sw = gl.broadcast(gl.expand_dims(gl.expand_dims(scale_words, 1), 2), words)[0]
    v0, v1, v2, v3, v4, v5, v6, v7 = gl.inline_asm_elementwise(
        DECODE_ASM, "=h,=h,=h,=h,=h,=h,=h,=h,r,r,r", [words, sw, sel],
        dtype=(gl.bfloat16,) * 8, is_pure=True, pack=1,
    )  # fmt: skip
    # pair r = 2 cp + sub holds (v[2r], v[2r + 1]) = (h 0, h 1)
    xh0 = gl.join(gl.join(v0, v4), gl.join(v2, v6))  # [64, j, a, cp, sub], h 0
    xh1 = gl.join(gl.join(v1, v5), gl.join(v3, v7))
    t = gl.join(xh0, xh1)  # [64, j, a, cp, sub, h]
    t = gl.permute(t, (0, 1, 3, 4, 2, 5))  # k = 32j + 16cp + 8sub + 2a + h
    return gl.convert_layout(gl.reshape(t, [BLOCK_N, BLOCK_K]), A_LAYOUT)


@gluon.jit
def _load_step(at, q):
    """Step q's words [64, 4, 4] and their rows' scale words [64] (``at``: their pointers)."""
    w_at, s_at = at
    return gl.load(w_at + q * (BLOCK_N * STEP_WORDS)), gl.load(s_at + q * BLOCK_N)


@gluon.jit
def _decode_step(step, sel, A_LAYOUT: gl.constexpr):
    """`_decode` of `_load_step`'s pair (`gluon_parts.multiply_steps`)."""
    words, scale_words = step
    return _decode(words, scale_words, sel, A_LAYOUT)


@gluon.jit
def _grouped_gluon_mxfp4(
    x_ptr, table_ptr, w_ptr, wt_ptr, s_ptr, st_ptr, b_ptr, out_ptr,
    N, K, E, stride_xt, stride_xk, stride_be, stride_ot, stride_ok, ready_ptr,
    R: gl.constexpr, MAIN_STEPS: gl.constexpr, TAIL: gl.constexpr, BLOCK_M: gl.constexpr,
    STAGES: gl.constexpr, GLU: gl.constexpr, GDC: gl.constexpr, READY: gl.constexpr = 0,
):  # fmt: skip
    """Program (row block nb, pass j): pass j of the table times the expert's rows nb * 64 ..
    nb * 64 + 63, through bias and GLU into the slots' rows of ``out``."""
    LW: gl.constexpr = word_layout()
    MMA: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16]
    )
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    X_SMEM: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    TILE_WORDS: gl.constexpr = BLOCK_N * STEP_WORDS

    # fc1 with READY lets fc2 launch only once it counted itself (`gluon_parts.open_pass`).
    gdc_launch_dependents(GDC and READY != 1)
    nb = gl.program_id(0)
    entry, e, live = open_pass(table_ptr, ready_ptr, E, BLOCK_M, GDC, READY)
    if live == 0:
        return

    # Weight words of (row, j, a): a program's steps one run, a step [64, 16] words
    # (`mx_gluon_layout`).
    L_RJ: gl.constexpr = gl.SliceLayout(2, LW)
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, L_RJ))
    jj = gl.arange(0, 4, layout=gl.SliceLayout(0, L_RJ))
    aa = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, LW)))
    grow = (e * N + nb * BLOCK_N + rows).to(gl.int64)  # the expert's row among [E * N]
    r3 = gl.expand_dims(gl.expand_dims(grow, 1), 2)
    j3 = gl.expand_dims(gl.expand_dims(jj, 0), 2)
    a3 = gl.expand_dims(gl.expand_dims(aa, 0), 1)
    lr = gl.expand_dims(gl.expand_dims(rows, 1), 2)
    tile = ((e * (N // BLOCK_N) + nb) * MAIN_STEPS).to(gl.int64)
    within = (lr // 16) * 256 + ((lr // 8) % 2) * 128 + (lr % 8) * 16 + 4 * a3 + j3
    w_at = w_ptr + tile * TILE_WORDS + within
    s_at = s_ptr + tile * BLOCK_N + rows
    sel = gl.full([BLOCK_N, 4, 4], 0x4040, gl.uint32, LW) + (j3 * 0x0101).to(gl.uint32)

    # The pass's slots' rows of x, [BLOCK_M, 128] a step, gathered by cp.async.
    x_at, ok_main, ok_tail = slot_rows(entry, live, x_ptr, K, stride_xt, stride_xk, R, MAIN_STEPS,
                                       BLOCK_M)  # fmt: skip
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_M, BLOCK_K], X_SMEM)

    for p in gl.static_range(STAGES - 1):
        copy_slots(x_smem, x_at, ok_main, ok_tail, p, MAIN_STEPS, STAGES, TAIL)
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, MMA)
    acc, a0, a1 = multiply_steps(acc, (w_at, s_at), sel, x_smem, x_at, ok_main, ok_tail,
                                 _load_step, _decode_step, A_LAYOUT, MAIN_STEPS, STAGES,
                                 TAIL)  # fmt: skip
    if TAIL:
        # The last 64 values: 8 words a row (`mx_gluon_layout`), the operand's other half zeros.
        wt = gl.load(wt_ptr + r3 * 8 + (2 * a3 + j3), mask=(j3 < 2) & (a3 >= 0) & (r3 >= 0),
                     other=0)  # fmt: skip
        a0 = _decode(wt, gl.load(st_ptr + grow), sel, A_LAYOUT)
        acc = multiply_tail(acc, a0, x_smem, MAIN_STEPS, STAGES)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a0, a1))[0]
    async_copy.wait_group(0)

    # Epilogue: h [64 rows, BLOCK_M slots] + bias, the GLU over (gate, up) row pairs, bf16 into
    # the live slots' rows.
    EPI: gl.constexpr = gl.BlockedLayout([2, 1], [16, 2], [1, 4], [0, 1])
    store_rows(gl.convert_layout(acc, EPI), entry, live, e, nb, b_ptr, out_ptr, K, stride_be,
               stride_ot, stride_ok, EPI, BLOCK_M, GLU)  # fmt: skip
    if READY == 1:
        signal_done(ready_ptr, e, E)


def grouped_gluon_mxfp4(
    x: torch.Tensor,
    table: torch.Tensor,
    w: GluonWeights,
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
    """Every pass of ``table`` (`pass_table`) times its expert's weights ``w`` (`pack_gluon`'s),
    through bias and GLU into ``out`` ([T, K, N] or [T, K, N / 2] bf16, unit stride along the
    last dimension); ``x`` [T, R] (fc1) or [T, K, R] (fc2) bf16. The caller checks `gluon_fits`
    and passes the table `pass_table` filled for the same routing and ``block_m``.
    ``expert_ready`` ("signal" for fc1, "wait" for fc2, with the dependent launch) and ``ready``:
    fc2 waiting for fc1 expert by expert through `expert_ready`'s counters, as the Triton tile
    does; fc2 waits so only where the table was filled before fc1 (the table's kernel lets the
    next one launch before it writes)."""
    E, nb, S = w.main.shape[:3]
    N, R, grid, kwargs, strides = launch_setup(
        "grouped_gluon_mxfp4", "mx_gluon_layout", x, table, S, E, nb, bias_EN, out,
        block_m=block_m, glu=glu, pdl=pdl, max_registers=max_registers,
        expert_ready=expert_ready, ready=ready,
    )  # fmt: skip
    _grouped_gluon_mxfp4[grid](
        x, table, w.main, w.tail, w.scales, w.tail_scales, bias_EN, out, N, top_k, E, *strides,
        R=R, MAIN_STEPS=S, TAIL=R > S * STEP, BLOCK_M=block_m, STAGES=stages, GLU=glu, GDC=pdl,
        READY=READY_ROLES[expert_ready], num_warps=4, **kwargs,
    )  # fmt: skip
