"""prefix_sum: the scatter's endpoints let both GEMMs skip blocks that hold no live row.

FC1 and FC2 visit only BLOCK_M blocks overlapping some [start[e], end[e]) (the others return before
loading anything); the activation + quant kernel still sweeps the whole capacity buffer.
"""

import functools

from arms.prefill import pipeline
from moebench.arm.base import Arm

# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/gates/dispatch.py). fp8: the persistent live-tile GEMM, never the
# capacity-grid one. bf16: _grouped_gemm_bf16 whatever the mode (PSUM is a constexpr, invisible).
_LAUNCHES = {
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
_FORBIDDEN = ("_act_quant_masked_grid_kernel", "_act_quant_masked_kernel", "_grouped_gemm_fp8")

ARM = Arm(
    name="prefix_sum",
    family="prefill",
    summary="both GEMMs skip blocks with no live row; the dense activation over the whole buffer",
    build=functools.partial(pipeline.build_stages, gemm_mode="psum", masked_act=False),
    weight_bytes=functools.partial(pipeline.weight_bytes, gemm_mode="psum"),
    work=functools.partial(pipeline.work, gemm_mode="psum", masked_act=False),
    kernels=("scatter", "grouped_gemm[psum]", "act_quant_dense", "combine"),
    launches=_LAUNCHES,
    forbidden=_FORBIDDEN,
    masked_act=False,
)
