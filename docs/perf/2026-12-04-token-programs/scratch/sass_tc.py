"""Scratch: sm_90a SASS of `tc_gemv.py` offline (triton 3.6). Usage: python sass_tc.py OUT"""

import os
import sys

sys.path.insert(0, "tools")
sys.path.insert(0, os.path.dirname(__file__))
from sass_grouped_decode import build, report, values
from tc_gemv import _tc_gemv_fp8

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for bn, bk, nw, st in (
    (16, 128, 1, 0),
    (16, 256, 1, 0),
    (32, 128, 1, 0),
    (16, 128, 1, 2),
    (16, 512, 1, 0),
    (32, 256, 2, 0),
):
    for stage in ("fc1", "fc2"):
        c = dict(
            GLU="swiglu_oai" if stage == "fc1" else "none",
            BLOCK_N=bn,
            BLOCK_K=bk,
            EXACT_RNE=False,
            NUM_STAGES=st,
            INTERPRET=False,
        )
        try:
            k = build(_tc_gemv_fp8, "fp8", c, values(stage, 1), nw, st)
            report(f"tc_bn{bn}_k{bk}_w{nw}_s{st}_{stage}", k, out, bn * bk / (32 * nw), nw)
        except Exception as ex:
            print("FAIL", bn, bk, nw, st, stage, str(ex)[:300])
