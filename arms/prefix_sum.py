"""prefix_sum: the scatter's endpoints let both GEMMs skip blocks that hold no live row.

FC1 and FC2 visit only BLOCK_M blocks overlapping some [start[e], end[e]) (the others return before
loading anything); the activation + quant kernel still sweeps the whole capacity buffer.
"""

from pathlib import Path

from arms import pipeline

NAME = "prefix_sum"
FAMILY = "prefill"
GEMM_MODE = "psum"
MASKED_ACT = False
KERNELS = ("scatter", "grouped_gemm[psum]", "act_quant_dense", "combine")
SOURCES: tuple[Path, ...] = (Path(__file__), *pipeline.sources(masked_act=MASKED_ACT))


def build(ws: pipeline.Workspace) -> tuple[pipeline.Stage, ...]:
    return pipeline.build_stages(ws, gemm_mode=GEMM_MODE, masked_act=MASKED_ACT)
