"""One rank's side of one distributed MoE layer: its inputs (this rank's tokens and experts, the
exchange buffers, the FFN's problem over the received rows) and one pass of the layer (dispatch,
the arm's local FFN, the meeting point, combine). Shared by the one-layer case loop
(``run.distributed``) and the model step (``run.distributed_step``), which builds one of these per
MoE layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from moebench.arm.base import run_all
from moebench.arm.prefill import Workspace
from moebench.comm import world as distributed
from moebench.comm.exchange import Exchange
from moebench.comm.world import World
from moebench.plan.cases import PlannedCase, case_columns, routing_row
from moebench.plan.inputs import build_problem, make_tokens, make_weights
from moebench.spec.schema import global_tokens, local_experts


@dataclasses.dataclass(kw_only=True)
class LayerCase:
    """What one rank holds for one case."""

    exchange: Exchange
    problem: object  # moebench.arm.prefill.Problem of the received rows
    x_all: torch.Tensor | None  # the global tokens, on rank 0 for the reference
    rank_cols: dict
    routing_row: dict


def layer_inputs(
    world: World, p: PlannedCase, run_id: str, share: Exchange | None = None
) -> LayerCase:
    """The case's inputs on this rank; ``share``: an earlier layer's exchange whose buffers this
    layer's exchange uses (``Exchange.for_layer``: a model step's layers)."""
    s = p.case.scenario
    dev, rank = world.device, world.rank
    E = local_experts(s)
    t0, t1 = distributed.token_range(s, rank)
    x_all = make_tokens(tokens=global_tokens(s), hidden=s.model.hidden, seed=s.routing.seed,
                        device=dev)  # fmt: skip
    ids = p.routing.topk_ids_TK.to(dev)
    weights = p.routing.topk_weights_TK.to(dev)
    w13, w2 = make_weights(
        experts=range(rank * E, (rank + 1) * E),
        hidden=s.model.hidden,
        intermediate=s.model.intermediate,
        seed=s.routing.seed,
        device=dev,
    )
    # This rank's tokens quantised as a single-process run quantises them (per token), and its
    # experts' weights; the FFN's tokens are then the rows received by dispatch.
    own = build_problem(
        x_TD=x_all[t0:t1], topk_ids_TK=ids[t0:t1], topk_weights_TK=weights[t0:t1], w13_EFD=w13,
        w2_EDF=w2, expert_offset=rank * E, alignment=s.shape.alignment,
        capacity_rows=p.capacity_rows, precision=s.precision, activation=s.activation,
    )  # fmt: skip
    del w13, w2
    if share is not None:
        ex = share.for_layer(x_TD=own.x_TD, x_sf_TG4=own.x_sf_TG4, topk_ids_TK=own.topk_ids_TK,
                             topk_weights_TK=own.topk_weights_TK)  # fmt: skip
    else:
        ex = Exchange(
            world, x_TD=own.x_TD, x_sf_TG4=own.x_sf_TG4, topk_ids_TK=own.topk_ids_TK,
            topk_weights_TK=own.topk_weights_TK, experts_per_rank=E,
            slots_per_rank=distributed.max_tokens(s) * s.model.top_k,
        )  # fmt: skip
    problem = dataclasses.replace(own, x_TD=ex.x_RD, x_sf_TG4=ex.x_sf_RG4, topk_ids_TK=ex.ids_R1,
                                  topk_weights_TK=ex.ones_R1)  # fmt: skip
    row = routing_row(p, run_id, rank)
    return LayerCase(
        exchange=ex, problem=problem, x_all=x_all if world.leader else None,
        rank_cols={**case_columns(p, run_id), "rank": rank, "live_rows": row["live_rows"]},
        routing_row=row,
    )  # fmt: skip


def settle(world: World, fn: Callable[[], None] | None = None) -> None:
    """Run ``fn`` and wait until the device has finished it (with World.wait's deadline)."""
    if fn is not None:
        fn()
    if world.device.type == "cuda":
        done = torch.cuda.Event()
        done.record()
        world.wait(done)


def run_layer(c: LayerCase, ws: Workspace, local: Callable[[], None]) -> None:
    ex = c.exchange
    ex.dispatch()
    local()
    ex.sync()
    ex.combine(ws.y_TD)


def layer_outputs(world, c: LayerCase, arms, stage_sets) -> dict[str, torch.Tensor]:
    out = {}
    for arm in arms:
        ws, stages = stage_sets[arm]
        settle(world, lambda ws=ws, stages=stages: run_layer(c, ws, lambda: run_all(stages)))
        out[arm] = c.exchange.y_TD.clone()
    return out
