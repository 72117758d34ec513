"""The Python API: run one arm of the MoE FFN on your own tensors.

All experts are local (a single rank). On a machine without a GPU set TRITON_INTERPRET=1 before
importing triton (the moebench command does this itself).
"""

from __future__ import annotations

import os

import torch

from moebench.arm import assemble, registry
from moebench.arm.base import Arm, run_all
from moebench.arm.prefill import Workspace
from moebench.plan.inputs import build_problem, default_capacity


def run_arm(
    arm: str | Arm,
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
    """y_TD (bf16 [T, D]) of the MoE FFN computed by ``arm``: a built-in arm's name, an arm
    reference as a scenario names one (``module:ATTR``, ``file.py:ATTR``) or an ``Arm`` itself.

    x_TD: [T, D] tokens; topk_ids_TK: int [T, K] expert ids in [0, E); topk_weights_TK: [T, K];
    w13_EFD: [E, 2F, D] gate rows then up rows; w2_EDF: [E, D, F] (any float dtype; fp8 precision
    quantises tokens per 128 columns and weights per 128x128 block, as the benchmark does).
    D and F must be multiples of 128. Tensors on the CPU run the kernels in the Triton
    interpreter, which must be chosen before triton is imported (``TRITON_INTERPRET=1``).
    """
    if not isinstance(arm, Arm):
        try:
            arm = registry.resolve(arm)
        except registry.ArmError as exc:
            raise ValueError(str(exc)) from None
    if arm.family != "prefill":
        raise ValueError(
            f"run_arm runs the prefill arms; {arm.name!r} is a {arm.family} arm (build its "
            "problem with moebench.plan.inputs.build_decode_problem and its workspace with "
            "moebench.arm.decode.Workspace)"
        )
    if not x_TD.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "CPU tensors run the Triton kernels in the interpreter: set TRITON_INTERPRET=1 in "
            "the environment before anything imports triton (the moebench command does this)"
        )
    T, K = topk_ids_TK.shape
    E = w13_EFD.shape[0]
    if x_TD.shape[0] != T or topk_weights_TK.shape != (T, K):
        raise ValueError("x_TD, topk_ids_TK and topk_weights_TK disagree on T or K")
    if w13_EFD.shape[1] != 2 * w2_EDF.shape[2] or w13_EFD.shape[2] != x_TD.shape[1]:
        raise ValueError("w13_EFD must be [E, 2F, D] and w2_EDF [E, D, F]")
    if topk_ids_TK.numel() and (int(topk_ids_TK.min()) < 0 or int(topk_ids_TK.max()) >= E):
        bad = topk_ids_TK[(topk_ids_TK < 0) | (topk_ids_TK >= E)][0].item()
        raise ValueError(f"topk_ids_TK holds expert id {bad}; the experts are [0, {E})")
    if not arm.runs(precision):
        raise ValueError(f"arm {arm.name!r} runs precision {', '.join(arm.precisions)} only")
    problem = build_problem(
        x_TD=x_TD,
        topk_ids_TK=topk_ids_TK,
        topk_weights_TK=topk_weights_TK,
        w13_EFD=w13_EFD,
        w2_EDF=w2_EDF,
        expert_offset=0,
        experts=E,
        alignment=alignment,
        capacity_rows=default_capacity(T, K, E, alignment),
        precision=precision,
        activation=activation,
    )
    ws = assemble.workspace(arm, problem, lambda a, p: Workspace(p))
    run_all(assemble.build(arm, ws))
    return ws.y_TD.clone()
