"""Arm families, the gates' half of their record: how to build, check and account for each kind
of arm (the other half, what the layers below ask, is ``core.families.FamilyFacts``).

``prefill`` is the capacity-buffer pipeline (scatter, fc1, act, fc2, combine; the workspace of
``moebench.arm.prefill``); ``decode`` is a decode step (fc1 with the GLU fused, fc2, combine;
``moebench.arm.decode``). Each arm names its family and a scenario runs arms of one family. The
case sequence asks the family's ``FamilyRecord`` for a rank's problem, each arm's workspace, the
reference output, the gates and the work model, for either contract (staged or whole-FFN,
docs/DESIGN.md section 13), and never needs to know which family or contract it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from moebench.arm import assemble, decode, prefill
from moebench.arm.base import Arm
from moebench.core.families import FACTS, FamilyFacts
from moebench.core.vocabulary import WHOLE_FFN, Family
from moebench.gates import checks as gates
from moebench.gates.integrity import expects_output
from moebench.plan import inputs
from moebench.results.rows import Check
from moebench.routing.synthetic import Routing, local_counts
from moebench.spec.schema import Scenario, local_experts


@dataclass(frozen=True, kw_only=True)
class FamilyRecord:
    facts: FamilyFacts  # stages, precisions, widths, baseline, ... (``core.families``)
    # (scenario, routing, capacity rows, tokens x_TD, rank, device) -> one rank's problem
    problem: Callable[[Scenario, Routing, int, torch.Tensor, int, torch.device], Any]
    # (arm, problem) -> a fresh workspace for a staged arm of this family
    staged_workspace: Callable[[Arm, Any], Any]
    # problem -> float32 [T, D] reference output
    reference: Callable[[Any], torch.Tensor]
    # workspace -> what the cross-arm gate of the staged arms compares (copied)
    staged_capture: Callable[[Any], Any]
    # (arm, workspace, capture, reference, problem) -> a staged arm's own gates
    staged_checks: Callable[[Arm, Any, Any, torch.Tensor, Any], list[Check]]
    # (first arm, {arm: capture}, problem) -> {arm: cross-arm gates}
    cross_arm: Callable[[str, dict[str, Any], Any], dict[str, list[Check]]]
    # the problem's expert weight tensors (moebench/measure/cold.py copies them; the default
    # weight-byte model counts them)
    weight_fields: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def stages(self) -> tuple[str, ...]:
        return self.facts.stages

    def workspace(self, arm: Arm, problem) -> Any:
        """A fresh workspace of ``arm`` (either contract) for ``problem``."""
        return assemble.workspace(arm, problem, self.staged_workspace)

    def capture(self, arm: Arm, ws) -> Any:
        """What the gates compare later, copied: the family's capture for a staged arm, the
        output alone for a whole-FFN arm."""
        return self.staged_capture(ws) if arm.staged else gates.WholeCapture(y_TD=ws.y_TD.clone())

    def checks(self, arm: Arm, ws, cap, ref: torch.Tensor, problem) -> list[Check]:
        """The arm's own gates after its gated run. A whole-FFN arm is held to the reference
        within the precision's tolerance and must write every output row (its buffer started as
        NaN); sentinels of moebench's workspace do not apply to it."""
        if arm.staged:
            return self.staged_checks(arm, ws, cap, ref, problem)
        return [
            gates.check_reference(
                ws.y_TD, ref, problem.precision, expect_output=expects_output(problem)
            ),  # fmt: skip
            gates.check_nan_poison(ws.y_TD, "the output buffer"),
        ]

    def weight_bytes(self, arm: Arm, problem) -> dict[str, int]:
        """{stage: expert weight bytes one step reads on the rank}: the arm's own model, else
        every local expert some slot routes to, once (the DRAM minimum), counted for ``ffn``."""
        if arm.weight_bytes is not None:
            return dict(arm.weight_bytes(problem))
        return routed_expert_bytes(problem, self.weight_fields, self.stages)


def ledger_rows(arm: Arm, name: str, problem, rank_cols: dict) -> list[dict]:
    """The ``ledger`` rows of one arm on one rank: its work model (``Arm.work``) per stage, or
    none when the arm declares no model (its weight bytes still reach the samples)."""
    if arm.work is None:
        return []
    return [
        {"run_id": rank_cols["run_id"], "case_id": rank_cols["case_id"],
         "rank": rank_cols["rank"], "arm": name, "stage": stage, "rows": int(w.rows),
         "bytes_read": int(w.bytes_read), "bytes_written": int(w.bytes_written),
         "flops": int(w.flops)}
        for stage, w in arm.work(problem).items()
    ]  # fmt: skip


def routed_expert_bytes(
    problem, fields: tuple[str, ...], stages: tuple[str, ...]
) -> dict[str, int]:
    """The default weight-byte model: each local expert with a routed slot read once, all its
    weight tensors (values, scales, biases), for the whole FFN; stages are not split."""
    counts = local_counts(problem.topk_ids_TK.cpu(), problem.expert_offset, problem.local_experts)
    hit = int((counts > 0).sum())
    per_expert = 0
    for f in fields:
        t = getattr(problem, f)
        if isinstance(t, torch.Tensor) and t.dim() > 0:
            per_expert += t[0].numel() * t.element_size() if t.dim() > 1 else t.element_size()
    out = dict.fromkeys(stages, 0)
    out[WHOLE_FFN] = hit * per_expert
    return out


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
        expert_offset=experts.start, experts=s.model.experts, alignment=s.shape.alignment,
        capacity_rows=capacity_rows, precision=s.precision, activation=s.activation, gemm=s.gemm,
    )  # fmt: skip


def _prefill_checks(arm, ws, cap, ref, p) -> list[Check]:
    return [
        gates.check_reference(ws.y_TD, ref, p.precision, expect_output=expects_output(p)),
        gates.check_nan_poison(ws.y_TD),
        *gates.check_sentinels(ws, cap, masked_act=arm.masked_act),
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
        b2_ED=b2, expert_offset=experts.start, experts=s.model.experts, precision=s.precision,
        activation=s.activation,
    )  # fmt: skip


def _decode_checks(arm, ws, cap, ref, p) -> list[Check]:
    return [
        gates.check_reference(ws.y_TD, ref, p.precision, expect_output=expects_output(p)),
        gates.check_nan_poison(ws.y_TD, "rows of non-local slots and unwritten buffers"),
        *gates.check_decode_sentinels(ws),
    ]


FAMILIES: dict[str, FamilyRecord] = {
    Family.PREFILL: FamilyRecord(
        facts=FACTS[Family.PREFILL],
        problem=_prefill_problem,
        staged_workspace=lambda arm, p: prefill.Workspace(p),
        reference=inputs.reference_output,
        staged_capture=gates.capture,
        staged_checks=_prefill_checks,
        cross_arm=lambda base, caps, p: gates.check_cross_arm(base, caps),
        weight_fields=("w13_EFD", "w13_scale", "w2_EDF", "w2_scale"),
    ),
    Family.DECODE: FamilyRecord(
        facts=FACTS[Family.DECODE],
        problem=_decode_problem,
        staged_workspace=lambda arm, p: decode.Workspace(p, layout=arm.layout),
        reference=inputs.decode_reference_output,
        staged_capture=gates.capture_decode,
        staged_checks=_decode_checks,
        cross_arm=lambda base, caps, p: gates.check_cross_arm_close(base, caps, p.precision),
        weight_fields=("w13", "w13_scale", "b13_E2F", "w2", "w2_scale", "b2_ED"),
    ),
}


def family_of(s: Scenario) -> FamilyRecord:
    """The family of the scenario's arms (validation guarantees they share one)."""
    return FAMILIES[s.family]
