"""dense_decode: every token times every local expert, then only the token's top-k are kept.

The decode baseline that ignores the routing until the end: batched GEMMs over all E local
experts (gate/up + bias with the GLU fused, then down + bias), each expert's weights streamed once
a step whatever the token count, and a weighted sum over the token's local top-k slots that skips
the other (expert, token) products instead of multiplying them by zero.
"""

from pathlib import Path

from arms.decode import pipeline as decode
from moebench.arm.base import Stage
from moebench.arm.decode import Problem, Workspace

NAME = "dense_decode"
FAMILY = "decode"
LAYOUT = "ETD"
KERNELS = ("batched_gemm[fc1+glu]", "batched_gemm[fc2]", "combine_topk")
# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/dispatch_gate.py).
LAUNCHES = {
    "w8a16": ("_batched_gemm", "_combine_topk"),
    "w4a16": ("_batched_gemm", "_combine_topk"),
}
FORBIDDEN = ("_sparse_gemv_fp8", "_sparse_gemv_mxfp4")
SOURCES: tuple[Path, ...] = (Path(__file__), *decode.sources())


def build(ws: Workspace) -> tuple[Stage, ...]:
    return decode.build_stages(ws)


def weight_bytes(p: Problem) -> dict[str, int]:
    """Expert weight bytes each stage reads in one step on this rank (the work model)."""
    return decode.weight_bytes(p, layout=LAYOUT)
