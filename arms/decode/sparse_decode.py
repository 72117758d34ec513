"""sparse_decode: a GEMV per (token, slot) that reads only the experts routed to this rank.

The GEMV's programs, launched over (output columns, top-k slots, tokens), read their expert id
from topk_ids on the device and return before loading anything when it is not local; the same
kernel does gate/up (GLU fused) and down, with the expert scale and bias in the epilogue. Nothing
is read back to the host: one CUDA graph replays with any routing.
"""

from pathlib import Path

from arms.decode import pipeline as decode
from moebench.arm.base import Stage
from moebench.arm.decode import Problem, Workspace

NAME = "sparse_decode"
FAMILY = "decode"
LAYOUT = "TKD"
KERNELS = ("sparse_gemv[fc1+glu]", "sparse_gemv[fc2]", "combine_topk")
# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/dispatch_gate.py).
LAUNCHES = {
    "w8a16": ("_sparse_gemv_fp8", "_combine_topk"),
    "w4a16": ("_sparse_gemv_mxfp4", "_combine_topk"),
}
FORBIDDEN = ("_batched_gemm",)
SOURCES: tuple[Path, ...] = (Path(__file__), *decode.sources())


def build(ws: Workspace) -> tuple[Stage, ...]:
    return decode.build_stages(ws)


def weight_bytes(p: Problem) -> dict[str, int]:
    """Expert weight bytes each stage reads in one step on this rank (the work model)."""
    return decode.weight_bytes(p, layout=LAYOUT)
