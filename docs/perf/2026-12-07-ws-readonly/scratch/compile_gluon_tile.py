"""The arm's Gluon tile (moebench/kernels/mx_gluon.py) compiled for sm_90a without a GPU (triton
3.6): registers, spills, programs an SM and the weight loop's instructions a step, as
tools/sass_grouped_decode.py counts them. PYTHONPATH=$PWD:$PWD/tools python3 THIS OUT [GLU]
[MAXNREG] [STAGES]"""

import os
import sys

import sass_grouped_decode as s
from triton.backends.compiler import GPUTarget
from triton.compiler import compile as tcompile
from triton.experimental.gluon._runtime import GluonASTSource

from moebench.kernels import mx_gluon as g

out = sys.argv[1]
glu = sys.argv[2] if len(sys.argv) > 2 else "none"
maxnreg = int(sys.argv[3]) if len(sys.argv) > 3 else 0
stages = int(sys.argv[4]) if len(sys.argv) > 4 else 3
os.makedirs(out, exist_ok=True)
sig = {n: "*i32" for n in ("table_ptr", "w_ptr", "wt_ptr", "s_ptr", "st_ptr")}
sig = {"x_ptr": "*bf16", **sig, "b_ptr": "*bf16", "out_ptr": "*bf16"}
for n in ("N", "K", "E", "stride_xt", "stride_xk", "stride_be", "stride_ot", "stride_ok"):
    sig[n] = "i32"
sig["ready_ptr"] = "*i32"
R = int(os.environ.get("R", "2880"))
cx = {"R": R, "MAIN_STEPS": R // 128, "TAIL": R % 128 > 0, "BLOCK_M": int(os.environ.get("BM", "16")), "STAGES": stages, "GLU": glu,
      "GDC": True, "READY": int(os.environ.get("READY", "0"))}
sig.update({c: "constexpr" for c in cx})
names = list(sig)
attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in names[:8]}
for n in ("N", "stride_xt", "stride_xk", "stride_be", "stride_ot", "stride_ok"):
    attrs[(names.index(n),)] = [["tt.divisibility", 16]]
k = tcompile(GluonASTSource(g._grouped_gluon_mxfp4, sig, cx, attrs),
             target=GPUTarget("cuda", 90, 32),
             options={"num_warps": 4, **({"maxnreg": maxnreg} if maxnreg else {})})
name = f"gluon_tile_{glu}_n{maxnreg}_s{stages}_ready{cx['READY']}"
for ext in ("ttgir", "ptx"):
    with open(os.path.join(out, f"{name}.{ext}"), "w") as f:
        f.write(k.asm[ext])
s.report(name, k, out, 32, 4)
print(f"shared {k.metadata.shared} B")
