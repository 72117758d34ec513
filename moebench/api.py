"""The Python API: run one arm of the MoE FFN on your own tensors.

All experts are local (a single rank). On a machine without a GPU set TRITON_INTERPRET=1 before
importing triton (the moebench command does this itself).
"""

from __future__ import annotations

import torch

from moebench.arm import registry
from moebench.arm.base import run_all
from moebench.arm.prefill import Workspace
from moebench.plan.inputs import build_problem, default_capacity


def run_arm(
    name: str,
    x_TD: torch.Tensor,
    topk_ids_TK: torch.Tensor,
    topk_weights_TK: torch.Tensor,
    w13_EFD: torch.Tensor,
    w2_EDF: torch.Tensor,
    *,
    precision: str = "bf16",
    alignment: int = 128,
    activation: str = "silu",
) -> torch.Tensor:
    """y_TD (bf16 [T, D]) of the MoE FFN computed by arm ``name``.

    x_TD: [T, D] tokens; topk_ids_TK: int [T, K] expert ids in [0, E); topk_weights_TK: [T, K];
    w13_EFD: [E, 2F, D] gate rows then up rows; w2_EDF: [E, D, F] (any float dtype; fp8 precision
    quantises tokens per 128 columns and weights per 128x128 block, as the benchmark does).
    D and F must be multiples of 128.
    """
    if name not in registry.builtin_names():
        raise ValueError(f"unknown arm {name!r}; known: {', '.join(registry.builtin_names())}")
    arm = registry.resolve(name)
    if arm.FAMILY != "prefill":
        raise ValueError(
            f"run_arm runs the prefill arms; {name!r} is a {arm.FAMILY} arm "
            "(build it with moebench.inputs.build_decode_problem and moebench.arm.decode.Workspace)"
        )
    T, K = topk_ids_TK.shape
    E = w13_EFD.shape[0]
    if x_TD.shape[0] != T or topk_weights_TK.shape != (T, K):
        raise ValueError("x_TD, topk_ids_TK and topk_weights_TK disagree on T or K")
    if w13_EFD.shape[1] != 2 * w2_EDF.shape[2] or w13_EFD.shape[2] != x_TD.shape[1]:
        raise ValueError("w13_EFD must be [E, 2F, D] and w2_EDF [E, D, F]")
    problem = build_problem(
        x_TD=x_TD,
        topk_ids_TK=topk_ids_TK,
        topk_weights_TK=topk_weights_TK,
        w13_EFD=w13_EFD,
        w2_EDF=w2_EDF,
        expert_offset=0,
        alignment=alignment,
        capacity_rows=default_capacity(T, K, E, alignment),
        precision=precision,
        activation=activation,
    )
    ws = Workspace(problem)
    run_all(arm.build(ws))
    return ws.y_TD.clone()
