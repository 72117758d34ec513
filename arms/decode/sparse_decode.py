"""sparse_decode: a GEMV per (token, slot) that reads only the experts routed to this rank.

The GEMV's programs, launched over (output columns, top-k slots, tokens), read their expert id
from topk_ids on the device and return before loading anything when it is not local; the same
kernel does gate/up (GLU fused) and down, with the expert scale and bias in the epilogue. Nothing
is read back to the host: one CUDA graph replays with any routing.
"""

import functools

from arms.decode import pipeline
from moebench.arm.base import Arm

# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/gates/dispatch.py).
_LAUNCHES = {
    "w8a16": ("_sparse_gemv_fp8", "_combine_topk"),
    "w4a16": ("_sparse_gemv_mxfp4", "_combine_topk"),
}
_FORBIDDEN = ("_batched_gemm",)

ARM = Arm(
    name="sparse_decode",
    family="decode",
    summary="a GEMV per (token, slot) whose programs read only the experts routed here",
    build=pipeline.build_stages,
    weight_bytes=functools.partial(pipeline.weight_bytes, layout="TKD"),
    work=functools.partial(pipeline.work, layout="TKD"),
    layout_bytes=functools.partial(pipeline.layout_bytes, layout="TKD"),
    kernels=("sparse_gemv[fc1+glu]", "sparse_gemv[fc2]", "combine_topk"),
    launches=_LAUNCHES,
    forbidden=_FORBIDDEN,
    layout="TKD",
)
