"""dense_decode: every token times every local expert, then only the token's top-k are kept.

The decode baseline that ignores the routing until the end: batched GEMMs over all E local
experts (gate/up + bias with the GLU fused, then down + bias), each expert's weights streamed once
a step whatever the token count, and a weighted sum over the token's local top-k slots that skips
the other (expert, token) products instead of multiplying them by zero.
"""

import functools

from arms.decode import pipeline
from moebench.arm.base import Arm

# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/gates/dispatch.py).
_LAUNCHES = {
    "w8a16": ("_batched_gemm", "_combine_topk"),
    "w4a16": ("_batched_gemm", "_combine_topk"),
}
_FORBIDDEN = ("_sparse_gemv_fp8", "_sparse_gemv_mxfp4")

ARM = Arm(
    name="dense_decode",
    family="decode",
    summary="every token times every local expert (batched GEMMs), only the token's top-k kept",
    build=pipeline.build_stages,
    weight_bytes=functools.partial(pipeline.weight_bytes, layout="ETD"),
    work=functools.partial(pipeline.work, layout="ETD"),
    kernels=("batched_gemm[fc1+glu]", "batched_gemm[fc2]", "combine_topk"),
    launches=_LAUNCHES,
    forbidden=_FORBIDDEN,
    layout="ETD",
)
