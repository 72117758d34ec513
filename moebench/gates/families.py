"""Arm families: what the runner needs to build, check and account for each kind of arm.

``prefill`` is the capacity-buffer pipeline of `arms.pipeline` (scatter, fc1, act, fc2, combine);
``decode`` is `arms.decode` (fc1 with the GLU fused, fc2, combine). Each arm module names its
family (``FAMILY``) and a scenario runs arms of one family. The runner asks the family for a
rank's problem, each arm's workspace, the reference output, the gates and the work model, and
never needs to know which family it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from moebench.arm import decode, prefill, registry
from moebench.core.vocabulary import DECODE_STAGES, PREFILL_STAGES
from moebench.gates import checks as gates
from moebench.plan import inputs
from moebench.results.rows import Check
from moebench.routing.synthetic import Routing
from moebench.spec.schema import Scenario, local_experts


@dataclass(frozen=True, kw_only=True)
class Family:
    name: str
    stages: tuple[str, ...]
    # (scenario, routing, capacity rows, tokens x_TD, rank, device) -> one rank's problem
    problem: Callable[[Scenario, Routing, int, torch.Tensor, int, torch.device], Any]
    # (arm module, problem) -> a fresh workspace for that arm
    workspace: Callable[[ModuleType, Any], Any]
    # problem -> float32 [T, D] reference output
    reference: Callable[[Any], torch.Tensor]
    # workspace -> what the cross-arm gate compares (copied)
    capture: Callable[[Any], Any]
    # (arm module, workspace, capture, reference, problem) -> the arm's own gates
    checks: Callable[[ModuleType, Any, Any, torch.Tensor, Any], list[Check]]
    # (first arm, {arm: capture}, problem) -> {arm: cross-arm gates}
    cross_arm: Callable[[str, dict[str, Any], Any], dict[str, list[Check]]]
    # (arm module, problem) -> {stage: expert weight bytes read in one step}, "ffn" included
    weight_bytes: Callable[[ModuleType, Any], dict[str, int]]
    # the problem's expert weight tensors (moebench/cold.py copies them)
    weight_fields: tuple[str, ...]


def _rank_experts(s: Scenario, rank: int) -> range:
    E = local_experts(s)
    return range(rank * E, (rank + 1) * E)


def _prefill_problem(s, rt, capacity_rows, x, rank, device) -> prefill.Problem:
    experts = _rank_experts(s, rank)
    w13, w2 = inputs.make_weights(
        experts=experts, hidden=s.model.hidden, intermediate=s.model.intermediate,
        seed=s.routing.seed, device=device,
    )  # fmt: skip
    return inputs.build_problem(
        x_TD=x, topk_ids_TK=rt.topk_ids_TK.to(device),
        topk_weights_TK=rt.topk_weights_TK.to(device), w13_EFD=w13, w2_EDF=w2,
        expert_offset=experts.start, alignment=s.shape.alignment, capacity_rows=capacity_rows,
        precision=s.precision, activation=s.activation, gemm=s.gemm,
    )  # fmt: skip


def _prefill_checks(arm, ws, cap, ref, p) -> list[Check]:
    return [
        gates.check_reference(ws.y_TD, ref, p.precision),
        gates.check_nan_poison(ws.y_TD),
        *gates.check_sentinels(ws, cap, masked_act=arm.MASKED_ACT),
    ]


def _decode_problem(s, rt, capacity_rows, x, rank, device) -> decode.Problem:
    experts = _rank_experts(s, rank)
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=experts, hidden=s.model.hidden, intermediate=s.model.intermediate,
        seed=s.routing.seed, device=device,
    )  # fmt: skip
    return inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=rt.topk_ids_TK.to(device),
        topk_weights_TK=rt.topk_weights_TK.to(device), w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2,
        b2_ED=b2, expert_offset=experts.start, precision=s.precision, activation=s.activation,
    )  # fmt: skip


def _decode_checks(arm, ws, cap, ref, p) -> list[Check]:
    return [
        gates.check_reference(ws.y_TD, ref, p.precision),
        gates.check_nan_poison(ws.y_TD, "rows of non-local slots and unwritten buffers"),
        *gates.check_decode_sentinels(ws),
    ]


FAMILIES: dict[str, Family] = {
    "prefill": Family(
        name="prefill",
        stages=PREFILL_STAGES,
        problem=_prefill_problem,
        workspace=lambda arm, p: prefill.Workspace(p),
        reference=inputs.reference_output,
        capture=gates.capture,
        checks=_prefill_checks,
        cross_arm=lambda base, caps, p: gates.check_cross_arm(base, caps),
        weight_bytes=lambda arm, p: arm.weight_bytes(p),
        weight_fields=("w13_EFD", "w13_scale", "w2_EDF", "w2_scale"),
    ),
    "decode": Family(
        name="decode",
        stages=DECODE_STAGES,
        problem=_decode_problem,
        workspace=lambda arm, p: decode.Workspace(p, layout=arm.LAYOUT),
        reference=inputs.decode_reference_output,
        capture=gates.capture_decode,
        checks=_decode_checks,
        cross_arm=lambda base, caps, p: gates.check_cross_arm_close(base, caps, p.precision),
        weight_bytes=lambda arm, p: arm.weight_bytes(p),
        weight_fields=("w13", "w13_scale", "b13_E2F", "w2", "w2_scale", "b2_ED"),
    ),
}


def family_of(s: Scenario) -> Family:
    """The family of the scenario's arms (validation guarantees they share one)."""
    return FAMILIES[registry.family(s.arms[0])]
