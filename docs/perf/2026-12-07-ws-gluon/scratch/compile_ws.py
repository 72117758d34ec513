"""The warp-specialised probe (mx_ws.py) compiled for sm_90a without a GPU (triton 3.6): registers,
shared memory, programs an SM, and each loop's instructions by partition (the consumer's weight
loop counted as tools/sass_grouped_decode.py counts it). Run:
PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/compile_ws.py OUT [BLOCK_M] [STAGES] [MAXNREG]
[PRODUCER_REGS] [ROWS], DIR this folder; READ_ONLY=1 in the environment for the
producer's stream alone, PAIRS=1 for two K steps a stage (`mx_ws_pairs_kernel`)."""

import os
import re
import sys
from collections import Counter

import mx_ws as p
import sass_grouped_decode as s
from triton.backends.compiler import GPUTarget
from triton.compiler import compile as tcompile
from triton.experimental.gluon._runtime import GluonASTSource

out = sys.argv[1]
block_m = int(sys.argv[2]) if len(sys.argv) > 2 else 32
stages = int(sys.argv[3]) if len(sys.argv) > 3 else 4
maxnreg = int(sys.argv[4]) if len(sys.argv) > 4 else 0
producer_regs = int(sys.argv[5]) if len(sys.argv) > 5 else 24
rows = int(sys.argv[6]) if len(sys.argv) > 6 else 64
os.makedirs(out, exist_ok=True)


def desc(dtype: str, block: list[int], layout) -> str:
    return f"tensordesc<{dtype}[{', '.join(map(str, block))}],{layout!r}>"


pairs = bool(int(os.environ.get("PAIRS", "0")))
k_steps = 2 if pairs else 1
sig = {
    "w_desc": desc("i32", [k_steps * rows, 16], p.W_LAYOUT),
    "s_desc": desc("i32", [k_steps, rows], p.W_LAYOUT),
    "wt_desc": desc("i32", [rows, 8], p.W_LAYOUT),
    "st_desc": desc("i32", [1, rows], p.W_LAYOUT),
    "x_desc": desc("bf16", [block_m, 64], p.X_LAYOUT),
    "cnt_ptr": "*i32",
    "out_ptr": "*fp32",
    "N": "i32",
}
cx = {
    "MAIN_STEPS": 22,
    "BLOCK_M": block_m,
    "STAGES": stages,
    "PRODUCER_REGS": producer_regs,
    "TILE_ROWS": rows,
}
if not pairs:
    cx["READ_ONLY"] = bool(int(os.environ.get("READ_ONLY", "0")))
sig.update({c: "constexpr" for c in cx})
attrs = {(i,): [["tt.divisibility", 16]] for i in (5, 6, 7)}
k = tcompile(
    GluonASTSource(p.mx_ws_pairs_kernel if pairs else p.mx_ws_kernel, sig, cx, attrs),
    target=GPUTarget("cuda", 90, 32),
    options={"num_warps": rows // 16, **({"maxnreg": maxnreg} if maxnreg else {})},
)
ro = int(cx.get("READ_ONLY", 0))
name = f"ws_m{block_m}_s{stages}_n{maxnreg}_p{producer_regs}_r{rows}_ro{ro}_pairs{int(pairs)}"
for ext in ("ttgir", "ptx"):
    with open(os.path.join(out, f"{name}.{ext}"), "w") as f:
        f.write(k.asm[ext])
# 2 rows x 16 bytes of weights a consumer thread a step; 8 warps launched (4 + the producer's
# warpgroup)
s.report(name, k, out, 32, rows // 16 + 4)
sass = open(os.path.join(out, f"{name}.sass")).read()
body = s.weight_loop_body(sass)
ops = Counter(
    t.split()[0].split(".")[0] if not t.startswith("@") else t.split()[1].split(".")[0]
    for t in body
)
print("consumer loop mix:", ", ".join(f"{o} {n}" for o, n in ops.most_common()))
print(f"shared {k.metadata.shared} B, warps {k.metadata.num_warps}")
ptx = k.asm["ptx"]
print("setmaxnreg:", re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32 \d+", ptx))
