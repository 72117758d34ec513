"""Offline sm_90a SASS (triton 3.6, no GPU) of `ready_gemv._fp8_ready`'s two roles at gpt-oss-20b's
one-token shapes: registers, and where the await role's weight loads sit against its poll loop.

Usage: PYTHONPATH=$PWD:$PWD/tools:DIR python DIR/sass_ready.py OUT   (a venv with triton==3.6.0)
"""

import os
import re
import sys

from ready_gemv import GROUPS, SPIN_LIMIT, STRIDE, _fp8_ready
from ready_tile import _ready_dot_fp8, _ready_dot_mxfp4
from sass_grouped_decode import build, report, values


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for stage, role, pre in (("fc1", "signal", True), ("fc2", "await", True),
                             ("fc2", "await", False)):  # fmt: skip
        ints = dict(values(stage, 1), NEED=1440)
        R = ints["R"]
        c = dict(GLU="swiglu_oai" if stage == "fc1" else "none", BLOCK_N=2, BLOCK_K=1024,
                 STEPS=-(-R // 1024), ROLE=role, PRELOAD=pre, TRIGGER="local",
                 EXACT_RNE=False, PTX=True,
                 G=GROUPS, STRIDE=STRIDE, LIMIT=SPIN_LIMIT)  # fmt: skip
        name = f"ready_{stage}_{role}_pre{int(pre)}"
        k = build(
            _fp8_ready,
            "fp8",
            c,
            ints,
            1,
            0,
            more_pointers={"cell_ptr": "*i32"},
        )
        report(name, k, out, 2 * 1024 / 32, 1)
        sass = open(f"{out}/{name}.sass").read()
        ops = [ln for ln in sass.splitlines() if re.search(r"LDG|NANOSLEEP|ATOM|RED|BAR|BRA", ln)]
        print("\n".join("   " + re.sub(r"\s+", " ", o.strip()) for o in ops[:60]))


def tiles(out: str) -> None:
    """The tile's two roles at 64 tokens, the arm's launches (3 stages, capped at 80; FP8 through
    TMA, MXFP4 rotated with word scales and folded)."""
    for stage, role in (("fc1", "signal"), ("fc2", "await")):
        ints = dict(values(stage, 64), NEED=90 if stage == "fc1" else 45)
        for k in ("stride_se", "stride_sn", "stride_pt", "stride_pk", "N", "K_SPLIT"):
            ints.pop(k)
        for placed in (False, True):  # PLACED: the nineteenth session's fp8_placed layout
            c = dict(GLU="swiglu_oai" if stage == "fc1" else "none", BLOCK_M=16, BLOCK_N=64,
                     BLOCK_K=128, EVEN_K=False, EXACT_RNE=False, BLOCK_E=16, SCAN=256,
                     NUM_STAGES=3, INTERPRET=False, GDC=True, TMA=True, EARLY_BIAS=True,
                     ROLE=role, G=GROUPS, STRIDE_=STRIDE, LIMIT=SPIN_LIMIT,
                     PLACED=placed)  # fmt: skip
            k = build(_ready_dot_fp8, "fp8", c, ints, 4, 3, 80, box=(64, 128),
                      more_pointers={"cell_ptr": "*i32"})  # fmt: skip
            name = f"ready_tile_{stage}_{role}" + ("_placed" if placed else "")
            report(name, k, out, 64 * 128 / 128, 4)
        ints = dict(values(stage, 64), NEED=90 if stage == "fc1" else 45)
        for k in ("stride_pt", "stride_pk", "N", "K_SPLIT"):
            ints.pop(k)
        c = dict(GLU="swiglu_oai" if stage == "fc1" else "none", BLOCK_M=16, BLOCK_N=64,
                 BLOCK_K=128, EVEN_K=False, EXACT_RNE=False, BLOCK_E=16, SCAN=256,
                 NUM_STAGES=3, INTERPRET=False, GDC=True, SCALE_WORDS=True, FOLD_SCALES=True,
                 EARLY_BIAS=True, ROTATED=True, ROLE=role, G=GROUPS, STRIDE_=STRIDE,
                 LIMIT=SPIN_LIMIT)  # fmt: skip
        k = build(_ready_dot_mxfp4, "mxfp4", c, ints, 4, 3, 80,
                  more_pointers={"cell_ptr": "*i32"})  # fmt: skip
        report(f"ready_tile_mxfp4_{stage}_{role}", k, out, 64 * 64 / 128, 4)


if __name__ == "__main__":
    main(sys.argv[1])
    tiles(sys.argv[1])
