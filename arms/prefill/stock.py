"""stock: the GEMMs and the activation sweep the whole capacity buffer.

Every BLOCK_M block of the M-row buffer is computed by FC1 and FC2, padding and capacity tail
included (their results are ignored), and the activation + quant kernel runs over all M rows.
This is what a CUDA-graph-friendly MoE does when nothing carries the live-row boundary.
"""

from pathlib import Path

from arms.prefill import pipeline
from moebench.arm.base import Stage
from moebench.arm.prefill import Problem, Workspace

NAME = "stock"
FAMILY = "prefill"
GEMM_MODE = "all"
MASKED_ACT = False
KERNELS = ("scatter", "grouped_gemm[all]", "act_quant_dense", "combine")
# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/dispatch_gate.py). Kernel names carry no constexpr values: the GEMM's
# PSUM=False is invisible, and _grouped_gemm_fp8 is also what a non-persistent psum GEMM launches.
LAUNCHES = {
    "fp8": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_fp8",
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
FORBIDDEN = ("_act_quant_masked_grid_kernel", "_act_quant_masked_kernel", "_grouped_gemm_fp8_live")
SOURCES: tuple[Path, ...] = (Path(__file__), *pipeline.sources(masked_act=MASKED_ACT))


def build(ws: Workspace) -> tuple[Stage, ...]:
    return pipeline.build_stages(ws, gemm_mode=GEMM_MODE, masked_act=MASKED_ACT)


def weight_bytes(p: Problem) -> dict[str, int]:
    """Expert weight bytes each stage reads in one step on this rank (the work model)."""
    return pipeline.weight_bytes(p, gemm_mode=GEMM_MODE)
