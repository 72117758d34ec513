"""prefix_sum_masked: the live-row boundary carried through the whole FFN.

As prefix_sum, and the activation + quant kernel also takes the endpoints: its grid is (row
programs, column groups, experts) and each program walks only its expert's [start, end), so
padding rows are never touched (not zeroed: every consumer obeys the same ranges).
"""

from pathlib import Path

from arms import pipeline

NAME = "prefix_sum_masked"
FAMILY = "prefill"
GEMM_MODE = "psum"
MASKED_ACT = True
KERNELS = ("scatter", "grouped_gemm[psum]", "act_quant_masked", "combine")
SOURCES: tuple[Path, ...] = (Path(__file__), *pipeline.sources(masked_act=MASKED_ACT))


def build(ws: pipeline.Workspace) -> tuple[pipeline.Stage, ...]:
    return pipeline.build_stages(ws, gemm_mode=GEMM_MODE, masked_act=MASKED_ACT)
