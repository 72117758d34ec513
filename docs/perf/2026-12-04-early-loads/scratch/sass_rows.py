import sys
sys.path.insert(0, "tools"); sys.path.insert(0, "docs/perf/2026-12-04-early-loads/scratch")
from sass_grouped_decode import build, report, values
from warp_rows import _sparse_gemv_fp8_rows
out = sys.argv[1]
for bn, nw in ((2, 1), (8, 4), (16, 8), (4, 2)):
    for stage in ("fc1", "fc2"):
        ints = values(stage, 1)
        c = dict(GLU="swiglu_oai" if stage == "fc1" else "none", BLOCK_N=bn, EVEN_K=False, EXACT_RNE=False)
        k = build(_sparse_gemv_fp8_rows, "fp8", c, ints, nw, 0)
        report(f"rows_bn{bn}_w{nw}_{stage}", k, out, bn * 1024 / (32 * nw), nw)
