"""prefix_sum_masked: the live-row boundary carried through the whole FFN.

As prefix_sum, and the activation + quant kernel also takes the endpoints and visits only each
expert's [start, end), so padding rows are never touched (not zeroed: every consumer obeys the
same ranges). Its schedule is chosen per case from the routing: a persistent grid striding over
the live items when at most a quarter of the buffer is live, the dense grid with an early exit per
row block above that (pipeline.masked_act_launch).
"""

import functools

from arms.prefill import pipeline
from moebench.arm.base import Arm

# Triton kernel functions the stages launch, per precision, and those they must not (checked under
# the profiler by moebench/gates/dispatch.py): the masked activation (its grid or its persistent
# schedule, chosen per case by pipeline.masked_act_launch), never the dense one; fp8 GEMMs are the
# persistent live-tile kernel (bf16: PSUM is invisible in the name).
_MASKED_ACT = "_act_quant_masked_grid_kernel|_act_quant_masked_kernel"
_LAUNCHES = {
    "fp8": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_fp8_live",
        _MASKED_ACT,
        "_combine",
    ),
    "bf16": (
        "_scatter_count",
        "_scatter_assign_maps",
        "_scatter_copy",
        "_grouped_gemm_bf16",
        _MASKED_ACT,
        "_combine",
    ),
}
_FORBIDDEN = ("_act_quant_dense_kernel", "_grouped_gemm_fp8")

ARM = Arm(
    name="prefix_sum_masked",
    family="prefill",
    summary="both GEMMs and the activation visit only each expert's live rows [start, end)",
    build=functools.partial(pipeline.build_stages, gemm_mode="psum", masked_act=True),
    weight_bytes=functools.partial(pipeline.weight_bytes, gemm_mode="psum"),
    work=functools.partial(pipeline.work, gemm_mode="psum", masked_act=True),
    kernels=("scatter", "grouped_gemm[psum]", "act_quant_masked", "combine"),
    launches=_LAUNCHES,
    forbidden=_FORBIDDEN,
    masked_act=True,
)
