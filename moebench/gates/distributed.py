"""The gates of a distributed case that look at the whole layer (docs/DESIGN.md sections 5, 7).

Rank 0 gathers every rank's layer output (dispatch, local FFN, combine) and compares it with
``reference.moe_ffn`` over all experts for the same tokens and routing
(``distributed_reference``), and across arms bit for bit (``distributed_cross_arm``). The local
gates of each rank's received rows are ``gates.rank``'s, as in simulated mode.
"""

from __future__ import annotations

import dataclasses

import torch

from moebench.core.numerics import bitwise_compare
from moebench.gates.checks import check_reference
from moebench.plan.cases import PlannedCase
from moebench.plan.inputs import build_problem, make_weights, reference_output
from moebench.results.rows import CaseRows, Check
from moebench.spec.schema import local_experts


def reference_all(p: PlannedCase, x_all: torch.Tensor, device: torch.device) -> torch.Tensor:
    """float32 [T, D]: reference.moe_ffn over every expert for the whole step, built one rank's
    experts at a time (moe_ffn skips slots of other experts, so the parts add up)."""
    s = p.case.scenario
    E = local_experts(s)
    ids = p.routing.topk_ids_TK.to(device)
    weights = p.routing.topk_weights_TK.to(device)
    y = None
    for r in range(s.topology.ep):
        w13, w2 = make_weights(experts=range(r * E, (r + 1) * E), hidden=s.model.hidden,
                               intermediate=s.model.intermediate, seed=s.routing.seed,
                               device=device)  # fmt: skip
        part = reference_output(build_problem(
            x_TD=x_all, topk_ids_TK=ids, topk_weights_TK=weights, w13_EFD=w13, w2_EDF=w2,
            expert_offset=r * E, experts=s.model.experts, alignment=s.shape.alignment,
            capacity_rows=p.capacity_rows, precision=s.precision, activation=s.activation,
        ))  # fmt: skip
        y = part if y is None else y + part
    return y


def check_layer(
    p: PlannedCase,
    x_all: torch.Tensor,
    gathered: list[dict[str, torch.Tensor]],
    token_ranges: list[tuple[int, int]],
    rank_cols: dict,
    device: torch.device,
    staged: set[str],
) -> list[dict]:
    """Rank 0: every rank's layer output ({arm: y} per rank) against the single-process
    reference, and, among the ``staged`` arms (moebench's workspace, the same numerics), across
    arms bit for bit; ``checks`` rows, one per rank and arm."""
    s = p.case.scenario
    arms = list(gathered[0])
    if not arms:
        return []
    same_numerics = [a for a in arms if a in staged]
    ref = reference_all(p, x_all, device)
    out = CaseRows()
    for rank, (t0, t1) in enumerate(token_ranges):
        cols = {**rank_cols, "rank": rank}
        for arm in arms:
            y = gathered[rank][arm].to(device)
            x = check_reference(y, ref[t0:t1], s.precision)
            out.add(cols, arm, dataclasses.replace(
                x, name="distributed_reference",
                detail=f"tokens [{t0}, {t1}) after dispatch and combine vs reference.moe_ffn "
                       f"over all experts: {x.detail}",
            ))  # fmt: skip
            if arm in same_numerics and arm != same_numerics[0]:
                first = same_numerics[0]
                same = bitwise_compare(y, gathered[rank][first].to(device))
                out.add(cols, arm, Check(
                    name="distributed_cross_arm", status="pass" if same.equal else "fail",
                    detail=f"layer output vs {first}: {same.describe()}",
                ))  # fmt: skip
    return out.checks
