"""dense_decode: every token times every local expert, then only the token's top-k are kept.

The decode baseline that ignores the routing until the end: batched GEMMs over all E local
experts (gate/up + bias with the GLU fused, then down + bias), each expert's weights streamed once
a step whatever the token count, and a weighted sum over the token's local top-k slots that skips
the other (expert, token) products instead of multiplying them by zero.
"""

from pathlib import Path

from arms import decode

NAME = "dense_decode"
FAMILY = "decode"
LAYOUT = "ETD"
KERNELS = ("batched_gemm[fc1+glu]", "batched_gemm[fc2]", "combine_topk")
SOURCES: tuple[Path, ...] = (Path(__file__), *decode.sources())


def build(ws: decode.Workspace) -> tuple[decode.Stage, ...]:
    return decode.build_stages(ws)
