"""Scratch: sm_90a SASS of `token_gemv.py`'s kernel and the package's sparse FP8 GEMV, offline
(triton 3.6): registers, programs an SM, the weight loop. Usage: python sass_token.py OUT"""

import os
import sys

sys.path.insert(0, "tools")
sys.path.insert(0, os.path.dirname(__file__))
from sass_grouped_decode import build, report, values  # noqa: E402
from token_gemv import _token_gemv_fp8  # noqa: E402

from moebench.kernels.sparse_gemv import _sparse_gemv_fp8  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for bn, bk, g, cap in (
    (2, 1024, 1, 0),
    (2, 1024, 2, 0),
    (2, 512, 4, 0),
    (2, 512, 2, 0),
    (4, 512, 1, 0),
    (4, 512, 2, 0),
    (2, 1024, 1, 64),
    (2, 512, 2, 64),
    (4, 512, 1, 64),
):
    for stage in ("fc1", "fc2"):
        ints = values(stage, 1)
        c = dict(
            K=4,
            KP=4,
            GROUP=g,
            SHARED_X=stage == "fc1",
            GLU="swiglu_oai" if stage == "fc1" else "none",
            BLOCK_N=bn,
            BLOCK_K=bk,
            EVEN_K=False,
            EXACT_RNE=False,
            GDC=False,
        )
        k = build(_token_gemv_fp8, "fp8", c, ints, 1, 0, maxnreg=cap)
        report(f"token_bn{bn}_k{bk}_g{g}_r{cap}_{stage}", k, out, g * bn * bk / 32, 1)
for bn, bk in ((2, 1024), (4, 512)):
    c = dict(
        GLU="none",
        BLOCK_N=bn,
        BLOCK_K=bk,
        EVEN_K=False,
        EXACT_RNE=False,
        NUM_STAGES=0,
        SPLIT_K=1,
        PEEL=False,
        GDC=False,
        LATE_TRIGGER=False,
        EARLY_LOADS=True,
        TOKEN_ONCE=False,  # the kernel as these records ran it
    )
    k = build(_sparse_gemv_fp8, "fp8", c, values("fc2", 1), 1, 0)
    report(f"sparse_bn{bn}_k{bk}_fc2", k, out, bn * bk / 32, 1)
