"""The Gluon probe compiled for sm_90a without a GPU (triton 3.6): registers, shared memory, the
weight loop's instructions (tools/sass_grouped_decode.py's counting), its SASS written to OUT.
Run: PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/compile_offline.py OUT [BLOCK_M] [STAGES], DIR
this folder; BARRIER=1 in the environment for the explicit barrier (and RING, PLACE_ONLY,
MAXNREG, TILED, AHEAD likewise)."""

import os
import sys
from collections import Counter

import mx_gluon as g
import sass_grouped_decode as s
from triton.backends.compiler import GPUTarget
from triton.compiler import compile as tcompile
from triton.experimental.gluon._runtime import GluonASTSource

out = sys.argv[1]
block_m = int(sys.argv[2]) if len(sys.argv) > 2 else 16
stages = int(sys.argv[3]) if len(sys.argv) > 3 else 4
os.makedirs(out, exist_ok=True)
fn = g.mx_probe_kernel
sig = {
    "w_ptr": "*i32",
    "wt_ptr": "*i32",
    "s_ptr": "*i32",
    "st_ptr": "*i32",
    "x_ptr": "*bf16",
    "idx_ptr": "*i32",
    "cnt_ptr": "*i32",
    "out_ptr": "*fp32",
    "N": "i32",
}
sig.update(
    {
        c: "constexpr"
        for c in (
            "R",
            "MAIN_STEPS",
            "BLOCK_M",
            "STAGES",
            "BARRIER",
            "RING",
            "PLACE_ONLY",
            "num_warps",
            "TILED",
            "AHEAD",
        )
    }
)
cx = {
    "R": 2880,
    "MAIN_STEPS": 22,
    "BLOCK_M": block_m,
    "STAGES": stages,
    "BARRIER": int(os.environ.get("BARRIER", "0")),
    "RING": int(os.environ.get("RING", "0")),
    "PLACE_ONLY": int(os.environ.get("PLACE_ONLY", "0")),
    "num_warps": 4,
    "TILED": bool(int(os.environ.get("TILED", "0"))),
    "AHEAD": int(os.environ.get("AHEAD", "0")),
}
attrs = {(i,): [["tt.divisibility", 16]] for i in range(9)}
k = tcompile(
    GluonASTSource(fn, sig, cx, attrs),
    target=GPUTarget("cuda", 90, 32),
    options={
        "num_warps": 4,
        **({"maxnreg": int(os.environ["MAXNREG"])} if os.environ.get("MAXNREG") else {}),
    },
)
name = (
    f"probe_m{block_m}_s{stages}_r{cx['RING']}_p{cx['PLACE_ONLY']}_n{os.environ.get('MAXNREG', 0)}"
    f"_t{int(cx['TILED'])}_a{cx['AHEAD']}"
)
with open(os.path.join(out, f"{name}.ttgir"), "w") as f:
    f.write(k.asm["ttgir"])
with open(os.path.join(out, f"{name}.ptx"), "w") as f:
    f.write(k.asm["ptx"])
s.report(name, k, out, 32, 4)  # 2 rows x 16 bytes of weights a thread a step
sass = open(os.path.join(out, f"{name}.sass")).read()
body = s.weight_loop_body(sass)
ops = Counter(
    t.split()[0].split(".")[0] if not t.startswith("@") else t.split()[1].split(".")[0]
    for t in body
)
print("loop mix:", ", ".join(f"{o} {n}" for o, n in ops.most_common()))
