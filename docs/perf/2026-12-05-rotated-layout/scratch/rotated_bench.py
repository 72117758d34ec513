"""Scratch A/B (issue 28): the grouped arm's MXFP4 tile reading its weights in `mx_rotated`'s
layout (``Launch.mx_rotated``: a rotation and a mask a pair of values in the decode) against the
arm's step, over `tools/sparse_ab.py`'s draws and ranks. Counts where the arm takes the GEMV
(1-2 tokens) have no rotated launch and run the arm's step only.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools:DIR python3 DIR/rotated_bench.py [--tokens 4,8,16,32,64]
[--seeds 0,1,2,3] [--rank 0,1] [--scenario S]   (DIR this folder; on the CPU with a tiny decode
scenario it checks and compares the steps and times nothing)
"""

from __future__ import annotations

import dataclasses

from sparse_ab import main, parser

from arms.decode import grouped_decode


def rotated(ws):
    """The arm's stages with each MXFP4 tile launch in the rotated layout."""
    on = lambda launch: dataclasses.replace(launch, mx_rotated=launch.path == "dot")
    fc1, fc2 = grouped_decode.launches(ws.problem)
    if ws.problem.precision == "w4a16":
        fc1, fc2 = on(fc1), on(fc2)
    return grouped_decode.build_stages(ws, fc1=fc1, fc2=fc2)


if __name__ == "__main__":
    a = parser("4,8,16,32,64", "0,1,2,3", "w4a16", "rot").parse_args()
    main(a, [("rot", rotated)], arm_name="grouped_decode")
