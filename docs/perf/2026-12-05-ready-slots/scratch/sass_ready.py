"""Offline sm_90a SASS (triton 3.6, no GPU) of `ready_gemv._fp8_ready`'s two roles at gpt-oss-20b's
one-token shapes: registers, and where the await role's weight loads sit against its poll loop.

Usage: PYTHONPATH=$PWD:$PWD/tools:DIR python DIR/sass_ready.py OUT   (a venv with triton==3.6.0)
"""

import os
import re
import sys

from ready_gemv import GROUPS, SPIN_LIMIT, STRIDE, _fp8_ready
from sass_grouped_decode import build, report, values


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for stage, role, pre in (("fc1", "signal", True), ("fc2", "await", True),
                             ("fc2", "await", False)):  # fmt: skip
        ints = dict(values(stage, 1), NEED=1440, LAST=1440)
        R = ints["R"]
        c = dict(GLU="swiglu_oai" if stage == "fc1" else "none", BLOCK_N=2, BLOCK_K=1024,
                 STEPS=-(-R // 1024), ROLE=role, PRELOAD=pre, EXACT_RNE=False, PTX=True,
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


if __name__ == "__main__":
    main(sys.argv[1])
