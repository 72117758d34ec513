"""prefix_sum_masked: the live-row boundary carried through the whole FFN.

As prefix_sum, and the activation + quant kernel also takes the endpoints: its grid is (row
programs, column groups, experts) and each program walks only its expert's [start, end), so
padding rows are never touched (not zeroed: every consumer obeys the same ranges).
"""

from pathlib import Path

from arms.prefill import pipeline
from moebench.arm.base import Stage
from moebench.arm.prefill import Problem, Workspace

NAME = "prefix_sum_masked"
FAMILY = "prefill"
GEMM_MODE = "psum"
MASKED_ACT = True
KERNELS = ("scatter", "grouped_gemm[psum]", "act_quant_masked", "combine")
# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/dispatch_gate.py): the masked activation (grid schedule), never the
# dense one; fp8 GEMMs are the persistent live-tile kernel (bf16: PSUM is invisible in the name).
LAUNCHES = {
    "fp8": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_fp8_live",
        "_act_quant_masked_grid_kernel",
        "_combine",
    ),
    "bf16": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_bf16",
        "_act_quant_masked_grid_kernel",
        "_combine",
    ),
}
FORBIDDEN = ("_act_quant_dense_kernel", "_act_quant_masked_kernel", "_grouped_gemm_fp8")
SOURCES: tuple[Path, ...] = (Path(__file__), *pipeline.sources(masked_act=MASKED_ACT))


def build(ws: Workspace) -> tuple[Stage, ...]:
    return pipeline.build_stages(ws, gemm_mode=GEMM_MODE, masked_act=MASKED_ACT)


def weight_bytes(p: Problem) -> dict[str, int]:
    """Expert weight bytes each stage reads in one step on this rank (the work model)."""
    return pipeline.weight_bytes(p, gemm_mode=GEMM_MODE)
