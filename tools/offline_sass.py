"""The masked activation's kernels compiled for sm_90a without a GPU, and what their SASS holds.

Compiles the dense kernel, the masked grid kernel and the grid probes (tools/act_probe.py) at the
full-buffer shape (12,288 rows, F 2,048, FP8 out) with the divisibility hints a launch gives, then
counts instructions, global loads and stores in each cubin (nvdisasm from the triton wheel). Needs
triton 3.6 (the GPU's version) in the environment, e.g. a venv with `pip install triton==3.6.0
torch==2.13.0`; no GPU and no device time.

Usage: python tools/offline_sass.py OUT   (writes OUT/<kernel>.{ptx,sass}; prints one line each)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import triton
from act_probe import _act_grid_probe
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from moebench.kernels import act_quant as aq

M, F = 12_288, 2_048
VALUES = dict(M=M, F=F, E=32, stride_hm=2 * F, stride_om=F, stride_sm=1, stride_sw=M)
POINTERS = {"h_ptr": "*bf16", "out_ptr": "*u8", "sf_ptr": "*i32", "ends_ptr": "*i32"}


def build(fn, consts: dict):
    """``fn`` compiled as a launch at this shape would specialise it: 16-byte aligned pointers,
    integers divisible by 16 marked so, integers equal to 1 folded in."""
    sig, attrs, cx = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name], cx[name] = "constexpr", consts[name]
        elif name in POINTERS:
            sig[name], attrs[(i,)] = POINTERS[name], [["tt.divisibility", 16]]
        elif VALUES[name] == 1:
            sig[name], cx[name] = "constexpr", 1
        else:
            sig[name] = "i32"
            if VALUES[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return triton.compile(ASTSource(fn, sig, cx, attrs), target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=4))  # fmt: skip


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    tile = dict(BLOCK_ROWS=16, GROUPS=2)
    act = dict(ACTIVATION="silu", OUT_FP8=True, EXACT_RNE=False, **tile)
    probe = dict(ALIGNMENT=128, BLOCK_E=32, EAGER=False, **tile)
    kernels = {
        "dense": build(aq._act_quant_dense_kernel, act),
        "masked_grid": build(
            aq._act_quant_masked_grid_kernel, dict(act, ALIGNMENT=128, BLOCK_E=32)
        ),  # fmt: skip
        "probe_no_lookup": build(_act_grid_probe, dict(probe, LOOKUP=False)),
        "probe_lookup": build(_act_grid_probe, dict(probe, LOOKUP=True)),
    }
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/nvdisasm")
    for name, k in kernels.items():
        cubin = os.path.join(out, f"{name}.cubin")
        with open(cubin, "wb") as f:
            f.write(k.asm["cubin"])
        with open(os.path.join(out, f"{name}.ptx"), "w") as f:
            f.write(k.asm["ptx"])
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True).stdout
        with open(os.path.join(out, f"{name}.sass"), "w") as f:
            f.write(sass)
        ins = [ln for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
        kinds = lambda op: sorted(set(re.findall(rf"{op}[.A-Z0-9]*", " ".join(ins))))  # noqa: E731
        loads = sum("LDG" in ln for ln in ins)
        stores = sum("STG" in ln for ln in ins)
        print(f"{name}: {len(ins)} instructions, {loads} global loads {kinds('LDG')}, "
              f"{stores} stores {kinds('STG')}, shared {k.metadata.shared} B")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
