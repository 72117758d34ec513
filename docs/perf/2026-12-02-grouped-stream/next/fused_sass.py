"""Compile gd_fused._fused for sm_90a offline (triton 3.6, no GPU) at gpt-oss-20b EP2's shapes, 64
tokens: registers, spills, the weight loop's instructions (tools/sass_grouped_decode.py's report)
and the synchronisation the SASS holds. Usage: PYTHONPATH=$REPO python fused_sass.py OUT"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.environ.get("PYTHONPATH", "."), "tools"))
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import gd_fused
import sass_grouped_decode as S
from moebench.kernels.grouped_slots import scan_width

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
fn = gd_fused._fused
T, E, D, F, K = 64, 16, 2880, 2880, 4
for mx in (False, True):
    div = 2 if mx else 1
    ints = dict(TK=T * K, K=K, expert_offset=0, E=E, D=D, F=F, J=16, NB1=90, NB2=45,
                stride_xt=D, stride_it=K, stride_ik=1, stride_w1e=2 * F * D // div,
                stride_w1n=D // div, stride_b1e=2 * F, stride_at=K * F, stride_ak=F,
                stride_w2e=D * F // div, stride_w2n=F // div, stride_b2e=D, stride_ot=K * D,
                stride_ok=D, stride_s1e=2 * F * D // 32, stride_s1n=D // 32,
                stride_s2e=D * F // 32, stride_s2n=F // 32)
    consts = dict(MX=mx, GLU="swiglu_oai", BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, EVEN1=False,
                  EVEN2=False, EXACT_RNE=False, BLOCK_E=16, SCAN=scan_width(T * K, 16, 16),
                  NUM_STAGES=4, INTERPRET=False, TMA=not mx)
    w = "*u8" if mx else "*fp8e4nv"
    sc = "*u8" if mx else "*fp32"
    ptrs = dict(x_ptr="*bf16", ids_ptr="*i32", ws1_ptr=sc, b1_ptr="*bf16", a_ptr="*bf16",
                ws2_ptr=sc, b2_ptr="*bf16", o_ptr="*bf16", sync_ptr="*i32", w1=w, w2=w)
    sig, attrs, cx = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name], cx[name] = "constexpr", consts[name]
        elif name in ("w1", "w2") and not mx:
            sig[name] = "tensordesc<fp8e4nv[64, 128]>"
        elif name in ptrs:
            sig[name], attrs[(i,)] = ptrs[name], [["tt.divisibility", 16]]
        elif ints[name] == 1:
            sig[name], cx[name] = "constexpr", 1
        else:
            sig[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn, sig, cx, attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=4, num_stages=4, maxnreg=128))
    name = "fused_mxfp4" if mx else "fused_fp8"
    S.report(name, k, out, 64 * 128 / div / 128, 4)
    sass = open(os.path.join(out, name + ".sass")).read()
    print("  sync:", {op: len(re.findall(op, sass)) for op in
                      ("ATOMG", "REDG", "LDG.E.STRONG.GPU", "CCTL.IVALL", "MEMBAR.ALL.GPU")})
