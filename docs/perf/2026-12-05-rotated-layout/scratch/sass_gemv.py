"""Offline sm_90a SASS (triton 3.6, no GPU) of the sparse MXFP4 GEMV's fc1 at gpt-oss-20b's shapes
(16 rows, 1,024 values a step, 4 warps, PDL), natural against `mx_rotated`'s layout: registers,
spills and the weight loop's instructions and its most frequent ones, for each register cap and
token load. The grouped arm's one-slot GEMV is in tools/sass_grouped_decode.py (rotated field).

Usage: PYTHONPATH=$PWD:$PWD/tools python DIR/sass_gemv.py OUT   (a venv with triton==3.6.0)
"""

import collections
import os
import re
import sys

from sass_grouped_decode import build, report, values, weight_loop_body

from moebench.kernels import sparse_gemv


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for rot in (False, True):
        for T, cap, token in ((1, 0, 0), (4, 0, 0), (4, 80, 0), (4, 96, 0), (4, 0, 2), (4, 80, 1)):
            ints = values("fc1", T)
            c = dict(GLU="swiglu_oai", BLOCK_N=16, BLOCK_K=1024, EVEN_K=False, EXACT_RNE=False,
                     NUM_STAGES=0, SPLIT_K=1, GDC=True, LATE_TRIGGER=False, EARLY_LOADS=T == 1,
                     GROUP_MAJOR=True, PTX=True, TOKEN_LOAD=token, ROTATED=rot)  # fmt: skip
            name = f"sparse_mxfp4_T{T}_cap{cap}_token{token}_rotated{int(rot)}"
            report(name, build(sparse_gemv._sparse_gemv_mxfp4, "mxfp4", c, ints, 4, 0, cap), out,
                   16 * 1024 / 2 / 128, 4)  # fmt: skip
            body = weight_loop_body(open(f"{out}/{name}.sass").read())
            ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body)
            print("  ", ", ".join(f"{o} {n}" for o, n in ops.most_common(9)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
