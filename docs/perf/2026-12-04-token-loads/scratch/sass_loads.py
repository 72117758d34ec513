"""Scratch (issue 28, 2026-12-04): the sparse MXFP4 GEMV's fc1 at 4 tokens compiled for sm_90a
without a GPU, the plain K loop (the arm's) beside the loop pipelined 2-4 stages deep with PDL,
each uncapped and capped at 80 registers (the arm's cap from 4 tokens), and the token's words
loaded as inline PTX (``token``: 1 words, 2 quads; 0 the arm's broadcast): registers, spills, the
weight loop's instructions, its barriers (BAR.SYNC), its waits on the asynchronous copies
(DEPBAR.LE and the count they allow in flight) and its loads.

Then FP8's loop at the arm's blocks with the token's values as 16-byte quads of inline PTX or not
(`fp8`).

Usage: PYTHONPATH=$PWD:$PWD/tools python DIR/sass_loads.py OUT, with the GPU's triton (3.6) and
torch in the environment (`tools/sass_grouped_decode.py`'s docstring).
"""

from __future__ import annotations

import collections
import os
import re
import sys

from sass_grouped_decode import build, report, values
from sass_grouped_decode import weight_loop_body as loop_body

from moebench.kernels import sparse_gemv


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    forms = [
        (s, cap, 0)
        for s, cap in ((0, 0), (0, 80), (2, 0), (3, 0), (4, 0), (2, 80), (3, 80), (4, 80))
    ]
    forms += [(0, 0, 1), (0, 80, 1), (0, 0, 2), (0, 80, 2), (3, 0, 2)]
    for stages, cap, token in forms:
        ints = values("fc1", 4)
        c = dict(GLU="swiglu_oai", BLOCK_N=16, BLOCK_K=1024, EVEN_K=False, EXACT_RNE=False,
                 NUM_STAGES=stages, SPLIT_K=1, GDC=True, LATE_TRIGGER=False, EARLY_LOADS=False,
                 GROUP_MAJOR=True, PTX=True, TOKEN_LOAD=token, ROTATED=False)  # fmt: skip
        name = f"sparse_mxfp4_fc1_stages{stages}_cap{cap}_token{token}"
        kernel = build(sparse_gemv._sparse_gemv_mxfp4, "mxfp4", c, ints, 4, stages, cap)
        report(name, kernel, out, 16 * 1024 / 2 / 128, 4)
        body = loop_body(open(f"{out}/{name}.sass").read())
        ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body)
        waits = [t for t in body if t.startswith("DEPBAR")]
        print(f"  {len(body)} instructions; BAR.SYNC {ops['BAR.SYNC.DEFER_BLOCKING']}, "
              f"LDG {sum(n for o, n in ops.items() if o.startswith('LDG.'))}, "
              f"LDGSTS {sum(n for o, n in ops.items() if o.startswith('LDGSTS'))}, "
              f"waits {waits}", flush=True)  # fmt: skip


def fp8(out: str) -> None:
    """FP8's fc1 loop at the arm's blocks (2 rows at 1,024 bytes a step, every step masked, the
    row-broadcast token: one token; 4 rows at 512, whole steps unmasked, the token once a step:
    from 2 tokens), the token's values loaded by `tl.load` (``quads`` 0) or as 16-byte quads of
    inline PTX (1)."""
    for bn, bk, once, whole in ((2, 1024, False, False), (4, 512, True, True)):
        for quads in (False, True):
            ints = values("fc1", 1 if bn == 2 else 4)
            c = dict(GLU="swiglu_oai", BLOCK_N=bn, BLOCK_K=bk, EVEN_K=False, EXACT_RNE=False,
                     NUM_STAGES=0, SPLIT_K=1, GDC=False, LATE_TRIGGER=False, EARLY_LOADS=True,
                     PEEL=False, TOKEN_ONCE=once, WHOLE_STEPS=whole, QUADS=quads,
                     PTX=True)  # fmt: skip
            name = f"sparse_fp8_fc1_{bn}rows_quads{int(quads)}"
            report(name, build(sparse_gemv._sparse_gemv_fp8, "fp8", c, ints, 1, 0), out,
                   bn * bk / 32, 1)  # fmt: skip
            body = loop_body(open(f"{out}/{name}.sass").read())
            ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body)
            count = lambda prefix, ops=ops: sum(n for o, n in ops.items() if o.startswith(prefix))
            print(f"  {len(body)} instructions; BAR.SYNC {ops['BAR.SYNC.DEFER_BLOCKING']}, "
                  f"LDG {count('LDG.')}, LDS {count('LDS')}, STS {count('STS')}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
    fp8(sys.argv[1])
