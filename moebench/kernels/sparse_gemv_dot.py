"""The sparse MXFP4 GEMV on tensor cores: a launch variant of `moebench.kernels.sparse_gemv`
(``sparse_gemv(tensor_cores=True)``), kept apart from the CUDA-core kernels the arms launch.
Tensors, grid and the non-local early return as in that module's docstring."""

import triton
import triton.language as tl

from moebench.kernels.gemv_parts import gemv_epilogue, program_expert, row_bias


@triton.jit
def _sparse_gemv_mxfp4_dot(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_se, stride_sn,
    stride_be, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr,
):  # fmt: skip
    """The MXFP4 GEMV on tensor cores: ``tl.dot_scaled`` of the [BLOCK_N, BLOCK_K] weight tile
    (e2m1 with its e8m0 group scales, upcast to bf16 by the compiler) by the token as a
    [BLOCK_K, 16] bf16 operand whose first column is the token and the rest zeros (the smallest
    tile the instruction takes); column 0 of the fp32 product is the row sums. The decode is the
    compiler's (about 10 SASS instructions a weight byte with tiles of 64+ rows, against 16 for
    the CUDA-core loop of `_sparse_gemv_mxfp4`), and the loop's loads are software-pipelined
    through shared memory. Products are exact in fp32 (bf16 operands); the tensor cores' sums run
    in their own order, so the outputs match the CUDA-core kernel within the tolerance, and bit
    for bit when every sum is exact. Scale byte 255 (NaN in the format) gives a non-finite
    output, as in the CUDA-core kernel (``fast_math`` skips only the NaN select)."""
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E)
    if (e < 0) | (e >= E):
        return
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0)
    rows64 = (n_block * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    kb = tl.arange(0, BLOCK_K // 2)
    kg = tl.arange(0, BLOCK_K // 32)
    kx = tl.arange(0, BLOCK_K)
    first = tl.arange(0, 16)[None, :] == 0  # the token's column of the [BLOCK_K, 16] operand
    w_tile = w_ptr + e64 * stride_we + rows64[:, None] * stride_wn + kb[None, :]
    s_tile = ws_ptr + e64 * stride_se + rows64[:, None] * stride_sn + kg[None, :]
    x_tile = x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk + kx[:, None]
    x_tile = x_tile + 0 * first  # [BLOCK_K, 16] pointers; only column 0 is read
    acc = tl.zeros([BLOCK_N, 16], dtype=tl.float32)
    for k0 in range(0, R, BLOCK_K):
        if EVEN_K:
            w = tl.load(w_tile + k0 // 2)
            s = tl.load(s_tile + k0 // 32)
            xv = tl.load(x_tile + k0, mask=first, other=0.0)
        else:
            w = tl.load(w_tile + k0 // 2, mask=(k0 // 2 + kb < R // 2)[None, :], other=0)
            s = tl.load(s_tile + k0 // 32, mask=(k0 // 32 + kg < R // 32)[None, :], other=0)
            xv = tl.load(x_tile + k0, mask=first & (k0 + kx < R)[:, None], other=0.0)
        acc = tl.dot_scaled(w, s, "e2m1", xv, None, "bf16", acc, fast_math=True)
    h = tl.sum(tl.where(first, acc, 0.0), axis=1)
    bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    gemv_epilogue(h, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU, BLOCK_N,
                  EXACT_RNE)  # fmt: skip
