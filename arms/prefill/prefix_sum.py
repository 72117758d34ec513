"""prefix_sum: the scatter's endpoints let both GEMMs skip blocks that hold no live row.

FC1 and FC2 visit only BLOCK_M blocks overlapping some [start[e], end[e]) (the others return before
loading anything); the activation + quant kernel still sweeps the whole capacity buffer.
"""

from pathlib import Path

from arms.prefill import pipeline
from moebench.arm.base import Stage
from moebench.arm.prefill import Problem, Workspace

NAME = "prefix_sum"
FAMILY = "prefill"
GEMM_MODE = "psum"
MASKED_ACT = False
KERNELS = ("scatter", "grouped_gemm[psum]", "act_quant_dense", "combine")
# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/dispatch_gate.py). fp8: the persistent live-tile GEMM, never the
# capacity-grid one. bf16: _grouped_gemm_bf16 whatever the mode (PSUM is a constexpr, invisible).
LAUNCHES = {
    "fp8": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_fp8_live",
        "_act_quant_dense_kernel",
        "_combine",
    ),
    "bf16": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_bf16",
        "_act_quant_dense_kernel",
        "_combine",
    ),
}
FORBIDDEN = ("_act_quant_masked_grid_kernel", "_act_quant_masked_kernel", "_grouped_gemm_fp8")
SOURCES: tuple[Path, ...] = (Path(__file__), *pipeline.sources(masked_act=MASKED_ACT))


def build(ws: Workspace) -> tuple[Stage, ...]:
    return pipeline.build_stages(ws, gemm_mode=GEMM_MODE, masked_act=MASKED_ACT)


def weight_bytes(p: Problem) -> dict[str, int]:
    """Expert weight bytes each stage reads in one step on this rank (the work model)."""
    return pipeline.weight_bytes(p, gemm_mode=GEMM_MODE)
