"""Scratch A/B (issue 28, prepared 2026-12-05 in a session without a device; not yet run): MXFP4
weights in `mx_rotated`'s layout against the arms' steps, over `tools/sparse_ab.py`'s draws and
ranks (each step checked and compared bit for bit with the arm's before it is timed).

``--arm sparse``: the `sparse_decode` step with the package's GEMV reading rotated weights
(`sparse_gemv(mx_rotated=True)`; sm_90a offline 568 instructions a step against 776, the same
registers), kinds ``rot`` (the launcher's registers: uncapped to 2 tokens, 80 from 4) and
``rotq`` (the token's words as 16-byte quads too, `token_load="quads"`).
``--arm grouped``: the `grouped_decode` step with its MXFP4 launches reading rotated weights
(`Launch.mx_rotated`; the tile 219 against 276 at one pass a program, 204 against 261 for the
expert loop; the one-slot GEMV 567 against 783, capped at 96 registers, which it needs to keep
5 programs an SM), kind ``rot``.
The rotated copies are made once per weight tensor before timing, as an arm makes them when it
builds its stages.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/rotated_bench.py --arm sparse|grouped
[--tokens ...] [--seeds 0,1,2,3] [--rank 0,1] [--scenario S]   (DIR this folder; on the CPU with a
tiny decode scenario it checks and compares the steps and times nothing)
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time

from sparse_ab import main, parser, steps_with

from arms.decode import grouped_decode
from moebench.kernels.mx_rotated import rotate_mxfp4
from moebench.kernels.sparse_gemv import sparse_gemv

_ROTATED: dict = {}  # id(weights) -> (weights, their rotated copy), kept for the run


def rotated_of(w):
    if id(w) not in _ROTATED:
        _ROTATED[id(w)] = (w, rotate_mxfp4(w))
    return _ROTATED[id(w)][1]


def sparse_rotated(x, ids, w, *args, **kwargs):
    return sparse_gemv(x, ids, rotated_of(w), *args, mx_rotated=True, **kwargs)


def grouped_rotated(ws):
    """The grouped arm's stages with each MXFP4 launch rotated (the GEMV capped at 96)."""

    def on(launch):
        cap = launch.max_registers if launch.path == "dot" else 96
        return dataclasses.replace(launch, mx_rotated=True, max_registers=cap)

    fc1, fc2 = grouped_decode.launches(ws.problem)
    if ws.problem.precision == "w4a16":
        fc1, fc2 = on(fc1), on(fc2)
    return grouped_decode.build_stages(ws, fc1=fc1, fc2=fc2)


if __name__ == "__main__":
    t0 = time.monotonic()
    arm = sys.argv.pop(sys.argv.index("--arm") + 1) if "--arm" in sys.argv else "sparse"
    sys.argv.remove("--arm") if "--arm" in sys.argv else None
    if arm == "sparse":
        a = parser("1,2,4,8", "0,1,2,3", "w4a16", "rot,rotq").parse_args()
        quads = functools.partial(sparse_rotated, token_load="quads")
        builds = {"rot": functools.partial(steps_with, gemv=sparse_rotated),
                  "rotq": functools.partial(steps_with, gemv=quads)}  # fmt: skip
        main(a, [(k, builds[k]) for k in a.kinds.split(",")])
    else:
        a = parser("1,2,4,8,16,32,64", "0,1,2,3", "w4a16", "rot").parse_args()
        main(a, [("rot", grouped_rotated)], arm_name="grouped_decode")
    print(f"total {time.monotonic() - t0:.0f} s")
