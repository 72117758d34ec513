"""stock: the GEMMs and the activation sweep the whole capacity buffer.

Every BLOCK_M block of the M-row buffer is computed by FC1 and FC2, padding and capacity tail
included (their results are ignored), and the activation + quant kernel runs over all M rows.
This is what a CUDA-graph-friendly MoE does when nothing carries the live-row boundary.
"""

import functools

from arms.prefill import pipeline
from moebench.arm.base import Arm

# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/gates/dispatch.py). Kernel names carry no constexpr values: the GEMM's
# PSUM=False is invisible, and _grouped_gemm_fp8 is also what a non-persistent psum GEMM launches.
_LAUNCHES = {
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
_FORBIDDEN = ("_act_quant_masked_grid_kernel", "_act_quant_masked_kernel", "_grouped_gemm_fp8_live")

ARM = Arm(
    name="stock",
    family="prefill",
    summary="every capacity block through both GEMMs; the dense activation over the whole buffer",
    build=functools.partial(pipeline.build_stages, gemm_mode="all", masked_act=False),
    weight_bytes=functools.partial(pipeline.weight_bytes, gemm_mode="all"),
    work=functools.partial(pipeline.work, gemm_mode="all", masked_act=False),
    kernels=("scatter", "grouped_gemm[all]", "act_quant_dense", "combine"),
    launches=_LAUNCHES,
    forbidden=_FORBIDDEN,
    masked_act=False,
)
