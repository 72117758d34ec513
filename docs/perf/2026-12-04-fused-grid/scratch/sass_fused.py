"""Scratch: the fused launch (`fused_tile`) compiled offline for sm_90a (triton 3.6 venv), at
gpt-oss-20b's shapes and 64 tokens, 80 registers as the arm's one-pass tile and uncapped:
registers, shared memory, stack, local loads/stores. Usage: PYTHONPATH=$PWD:$PWD/tools:DIR
/tmp/t36/bin/python DIR/sass_fused.py OUT"""

import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fused_tile import _fused1_fp8, _fused1_mxfp4, _fused_fp8, _fused_mxfp4
from sass_grouped_decode import report

out = sys.argv[1]
import os
SPIN_ = os.environ.get("SPIN", "1") == "1"
D = F = 2880  # noqa
# The integer arguments at 64 tokens (top-4, 16 local experts, 64-row blocks, MXFP4 scale rows
# padded to 96 bytes), as a launch passes them: the launcher marks those divisible by 16.
INTS = dict(TK=256, K=4, expert_offset=0, E=16, R=2880, D=2880, F=2880, G=4320, NB1=90, NB2=45,
            rows1=5760, rows2=2880, stride_xt=2880, stride_it=4, stride_ik=1, stride_b1e=5760,
            stride_at=11520, stride_ak=2880, stride_b2e=2880, stride_ot=11520, stride_ok=2880,
            stride_w1e=5760 * 1440, stride_w1n=1440, stride_s1e=5760 * 96, stride_s1n=96,
            stride_w2e=2880 * 1440, stride_w2n=1440, stride_s2e=2880 * 96, stride_s2n=96)
for fmt, fn in (("fp8", _fused_fp8), ("mxfp4", _fused_mxfp4), ("fp8", _fused1_fp8),
                ("mxfp4", _fused1_mxfp4)):
    for maxnreg in (80, 88):
        sig, attrs, cx = {}, {}, {}
        consts = dict(GLU="swiglu_oai", BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, EVEN_K1=False,
                      EVEN_K2=False, EVEN_K=False, EXACT_RNE=False, BLOCK_E=16, SCAN=256, NUM_STAGES=3,
                      INTERPRET=False, GDC=False, SPIN=SPIN_, SCALE_WORDS=True, FOLD_SCALES=True)
        wt = "*fp8e4nv" if fmt == "fp8" else "*u8"
        ptrs = dict(x_ptr="*bf16", ids_ptr="*i32", ws1_ptr="*fp32" if fmt == "fp8" else "*u8",
                    ws2_ptr="*fp32" if fmt == "fp8" else "*u8", b1_ptr="*bf16", b2_ptr="*bf16",
                    a_ptr="*bf16", o_ptr="*bf16", ticket_ptr="*i64", done_ptr="*i64")
        for i, name in enumerate(fn.arg_names):
            if name in consts:
                sig[name], cx[name] = "constexpr", consts[name]
            elif name in ("w1", "w2", "wcat"):
                if fmt == "fp8":
                    sig[name] = "tensordesc<fp8e4nv[64, 128]>"
                else:
                    sig[name], attrs[(i,)] = wt, [["tt.divisibility", 16]]
            elif name in ptrs:
                sig[name], attrs[(i,)] = ptrs[name], [["tt.divisibility", 16]]
            elif INTS[name] == 1:
                sig[name], cx[name] = "constexpr", 1
            else:
                sig[name] = "i32"
                if INTS[name] % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
        opts = dict(num_warps=4, num_stages=3, **({"maxnreg": maxnreg} if maxnreg else {}))
        k = triton.compile(ASTSource(fn, sig, cx, attrs), target=GPUTarget("cuda", 90, 32),
                           options=opts)
        report(f"{fn.__name__}_{fmt}_r{maxnreg}", k, out, 64 * 128 / (2 if fmt == "mxfp4" else 1) / 128, 4)
