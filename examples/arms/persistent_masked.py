"""A staged arm built only from moebench's public pieces: the masked pipeline with another
activation schedule (the "staged" contract, docs/DESIGN.md section 13).

It takes the built-in ``prefix_sum_masked`` stages over moebench's workspace and swaps the
activation stage for ``act_quant_masked(schedule="persistent")`` (a persistent grid striding over
the live (tile, group) items) in every case, where the built-in arm chooses the schedule per case
from the live fraction. Because it writes moebench's workspace, every gate applies to it, bitwise
equality with the other arms included.
"""

from __future__ import annotations

from arms.prefill.prefix_sum_masked import ARM as MASKED
from moebench.arm.base import Arm, Stage
from moebench.kernels.act_quant import act_quant_masked


def build(ws) -> tuple[Stage, ...]:
    p = ws.problem

    def act() -> None:
        act_quant_masked(ws.h_M2F, ws.a_MF, ws.a_sf_MG4, ws.ends_E, alignment=p.alignment,
                         activation=p.activation, schedule="persistent")  # fmt: skip

    return tuple(Stage(name="act", run=act) if s.name == "act" else s for s in MASKED.build(ws))


def _launches(precision: str) -> tuple[str, ...]:
    names = MASKED.launches[precision]
    # The built-in arm's activation may be either schedule; this one is always persistent.
    return tuple("_act_quant_masked_kernel" if "_act_quant_masked_kernel" in k.split("|") else k
                 for k in names)  # fmt: skip


ARM = Arm(
    name="masked_persistent",
    family="prefill",
    summary="prefix_sum_masked with the persistent activation schedule",
    build=build,
    weight_bytes=MASKED.weight_bytes,
    work=MASKED.work,
    kernels=("scatter", "grouped_gemm[psum]", "act_quant_masked[persistent]", "combine"),
    launches={precision: _launches(precision) for precision in MASKED.launches},
    forbidden=("_act_quant_dense_kernel", "_act_quant_masked_grid_kernel"),
    masked_act=True,
)
