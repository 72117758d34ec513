"""The distributed topology: this process is one rank of a torchrun world (docs/DESIGN.md 7, 14).

What the regimes (``run.layer``, ``run.step``) ask of a topology, for a rank whose peers are
other processes: every phase ends with the ranks agreeing (``comm.world.phase``), so an error on
one rank stops all of them at the same point; the arms timed are those every rank may time; a
layer's inputs are this rank's tokens and experts and the rows its dispatch received; the
whole-layer gate gathers every arm's layer output on rank 0 and checks it end to end
(``gates.distributed``); a timed call is a pass of the layer (dispatch, the arm's FFN, the
meeting point, combine: ``measure.passes``), with no L2 flush (inside a model step every layer
follows the others' weights). An arm that fails where its peers would wait in a collective
stops the case (the failure is raised, not recorded). Rank 0 gathers every rank's rows at the
end of the case.

A layer's inputs (``LayerCase``) are built here for the one-layer case and for each MoE layer of
a model step, whose layers share one set of exchange buffers (``Exchange.for_layer``), as a
model's layers share their all-to-all buffers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from moebench.arm.base import run_all
from moebench.arm.prefill import Workspace
from moebench.comm import world as distributed
from moebench.comm.exchange import Exchange
from moebench.comm.world import World, phase
from moebench.core.numerics import bitwise_compare
from moebench.core.vocabulary import WHOLE_FFN, WHOLE_STEP, Regime
from moebench.gates.distributed import check_layer
from moebench.measure.clock import Clock
from moebench.measure.graphs import capture_replay
from moebench.measure.passes import pass_probe
from moebench.measure.sampling import Probe
from moebench.plan.cases import PlannedCase, routing_row
from moebench.plan.inputs import build_problem, make_tokens, make_weights
from moebench.plan.steps import layer_scenario
from moebench.results.rows import CaseRows, Check
from moebench.spec.schema import global_tokens, local_experts

PASS = ("dispatch", WHOLE_FFN, "sync_wait", "combine_a2a")  # a pass's steps; "layer": the whole


@dataclasses.dataclass(kw_only=True)
class LayerCase:
    """What one rank holds for one layer."""

    exchange: Exchange
    problem: object  # the family's Problem of the received rows
    x_all: torch.Tensor | None  # the global tokens, on rank 0 for the end-to-end reference
    routing_row: dict
    planned: PlannedCase | None = None  # the layer as a one-layer case (a model step's layers)


class DistributedRank:
    """This process's rank of the world (module docstring)."""

    warm_probes = True  # the warm-up runs whole passes, so that the collectives warm up too
    rotates_inputs = False  # an arm cannot leave the rotation on one rank alone

    def __init__(self, world: World, clock: Clock, run_id: str, *, allow_mismatch: bool = False):
        self.world = world
        self.allow_mismatch = allow_mismatch
        self.device = world.device
        self.clock = clock
        self.run_id = run_id
        self.leader = world.leader

    # ----------------------------------------------------------------- the case sequence's

    def ranks(self, p: PlannedCase) -> tuple[int, ...]:
        return (self.world.rank,)

    def phase(self, what: str, fn: Callable[[], Any]) -> Any:
        return phase(self.world, what, fn)

    def agree(self, arms: list[str]) -> list[str]:
        everywhere = distributed.all_gather(self.world, arms)
        return [a for a in arms if all(a in t for t in everywhere)]

    def collect(self, out: CaseRows) -> CaseRows | None:
        parts = distributed.gather(self.world, (out.samples, out.checks, out.routing, out.ledger))
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # the case's buffers went with the case
        if not self.leader:
            return None
        return CaseRows(
            samples=[row for part in parts for row in part[0]],
            checks=[row for part in parts for row in part[1]],
            routing=[row for part in parts for row in part[2]],
            ledger=[row for part in parts for row in part[3]],
            warnings=out.warnings,
        )

    def release(self) -> None:
        pass

    def recover(self, out: CaseRows, cols: dict, arms, gate: str, exc: Exception) -> None:
        """Raised: the peers would otherwise wait for this rank in a collective; the phase makes
        every rank stop at the same point."""
        raise exc

    def on_fail(self, out: CaseRows, cols: dict, gate: str) -> None:
        return None  # the timing loop raises, the phase stops every rank

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        # NCCL's watchdog thread queries events while this thread captures: thread-local capture.
        return capture_replay(fn, thread_local=True) if self.clock.cuda else fn

    def settle(self, fn: Callable[[], None] | None = None) -> None:
        """Run ``fn`` and wait until the device has finished it (with World.wait's deadline)."""
        if fn is not None:
            fn()
        if self.device.type == "cuda":
            done = torch.cuda.Event()
            done.record()
            self.world.wait(done)

    def _probe(self, steps, rows) -> Probe:
        wait = self.world.wait if self.device.type == "cuda" else None
        return pass_probe(steps, rows, align=self.world.align, wait=wait,
                          spin_cycles=distributed.SPIN_CYCLES)  # fmt: skip

    # ----------------------------------------------------------------- one layer

    def layer_inputs(self, p: PlannedCase, rank: int):
        """(the problem of the rows this rank received, its LayerCase): inputs, then one
        dispatch."""
        c = layer_inputs(self.world, p, self.run_id)
        self.settle(c.exchange.dispatch)
        return c.problem, c

    def end_to_end(self, p: PlannedCase, held, timed: list[str], arms, out: CaseRows) -> list[str]:
        """Every arm's whole layer once (dispatch, FFN, meeting point, combine), gathered on rank
        0 and checked there against the reference over all experts; returns the arms still
        timed (every rank hears rank 0's verdict). ``held.outputs`` keeps each arm's output."""
        c, world = held.link, self.world
        where = f"case {p.case.case_id}"
        held.outputs = phase(world, f"in the end-to-end run of {where}",
                             lambda: self._layer_outputs(c, timed, held.stage_sets))  # fmt: skip
        gathered = distributed.gather(world, {a: y.cpu() for a, y in held.outputs.items()})
        ranges = [distributed.token_range(p.case.scenario, r) for r in range(world.size)]
        staged = {a for a, arm in arms.items() if arm.staged}
        checks = phase(world, f"checking the gathered outputs of {where}",
                       lambda: check_layer(p, c.x_all, gathered, ranges, held.cols, self.device,
                                           staged) if self.leader else None)  # fmt: skip
        if self.leader:
            out.checks += checks
        failed = distributed.broadcast(world, sorted({
            r["arm"] for r in checks if r["status"] in ("fail", "error")
        }) if self.leader else None)  # fmt: skip
        return [a for a in timed if self.allow_mismatch or a not in failed]

    def _layer_outputs(self, c: LayerCase, arms, stage_sets) -> dict[str, torch.Tensor]:
        out = {}
        for arm in arms:
            ws, stages = stage_sets[arm]
            self.settle(lambda ws=ws, st=stages: run_layer(c, ws, lambda: run_all(st)))
            out[arm] = c.exchange.y_TD.clone()
        return out

    def ffn_probe(self, held):
        """The ffn regime on this rank: a pass of the layer with the arm's FFN inside."""
        ex = held.link.exchange

        def probe(arm: str, ffn: Callable[[], None], wbytes) -> Probe:
            y = held.stage_sets[arm][0].y_TD
            steps = (("dispatch", ex.dispatch), (WHOLE_FFN, ffn), ("sync_wait", ex.sync),
                     ("combine_a2a", lambda: ex.combine(y)))  # fmt: skip
            # The whole pass (``layer``) reads what the local FFN reads; the exchanges no weights.
            rows = {name: {"stage": name, "regime": Regime.FFN,
                           "weight_bytes": wbytes.get(WHOLE_FFN if name == "layer" else name, 0)}
                    for name in (*PASS, "layer")}  # fmt: skip
            return self._probe(steps, rows)

        return probe

    def after_timing_layer(self, held, timed: list[str], out: CaseRows) -> None:
        """The whole layer after timing is bitwise the layer the end-to-end gate ran."""
        c = held.link
        for arm in timed:
            ws, stages = held.stage_sets[arm]
            self.settle(lambda ws=ws, st=stages: run_layer(c, ws, lambda: run_all(st)))
            same = bitwise_compare(c.exchange.y_TD, held.outputs[arm])
            out.add(held.cols, arm, Check(
                name="distributed_post_timing", status="pass" if same.equal else "fail",
                detail=f"layer output after timing vs gated run: {same.describe()}",
            ))  # fmt: skip

    # ----------------------------------------------------------------- a model step

    def step_inputs(self, p, gi: int, group, family, weights: dict, check) -> dict:
        """Every MoE layer of a token group as a one-layer distributed case of its own seed,
        routed as the group's first step routes it: {layer: LayerCase}. Only the first group's
        first layer keeps the global tokens (the end-to-end gate's)."""
        s = p.case.scenario
        T = group.tokens_per_rank * s.topology.dp
        out: dict[int, LayerCase] = {}
        for li, layer in enumerate(p.layers):
            layer_s = layer_scenario(s, layer, group.tokens_per_rank)
            draw = p.router.draw(group.steps[0], layer, T)
            counts = torch.bincount(draw.topk_ids_TK.flatten().to(torch.int64),
                                    minlength=s.model.experts)  # fmt: skip
            planned = PlannedCase(
                case=dataclasses.replace(p.case, scenario=layer_s), routing=draw,
                capacity_rows=group.capacity_rows, ranks=p.ranks,
                counts_RE=counts.view(s.topology.ep, local_experts(s)),
            )  # fmt: skip
            share = next(iter(out.values())).exchange if out else None
            c = layer_inputs(self.world, planned, self.run_id, share=share)
            keep = gi == 0 and li == 0
            out[layer] = dataclasses.replace(c, x_all=c.x_all if keep else None, planned=planned)
            check()
        return out

    def step_end_to_end(self, first, timed: list[str], arms, out: CaseRows) -> list[str]:
        """The first layer of the first group end to end, as a one-layer case checks it."""
        return self.end_to_end(first.link.planned, first, timed, arms, out)

    def step_guards(self, p, group, links: dict, family) -> dict:
        """None: the layers' received rows are rewritten by every dispatch (module docstring)."""
        return {}

    def step_problem(self, link: LayerCase, rank: int, layer: int):
        """The layer's problem on this rank: the rows its dispatch receives, which the next
        layer's dispatch overwrites (the layers share the exchange), so a layer is dispatched
        right before it is used."""
        self.settle(link.exchange.dispatch)
        return link.problem

    def step_routing(self, links: dict, p, si: int, group) -> dict[int, Any]:
        """Write step ``si``'s routing into every layer's exchange (this rank's tokens of the
        global draw); returns {layer: the draw}."""
        s = p.case.scenario
        draws = {}
        for layer, c in links.items():
            draw = p.router.draw(si, layer, group.tokens_per_rank * s.topology.dp)
            t0, t1 = distributed.token_range(c.planned.case.scenario, self.world.rank)
            c.exchange.ids_TK.copy_(draw.topk_ids_TK[t0:t1])
            c.exchange.topk_weights_TK.copy_(draw.topk_weights_TK[t0:t1])
            draws[layer] = draw
        return draws

    def step_calls(self, p, links: dict, stages: dict, workspaces: dict, arm: str,
                   graph: bool) -> list:  # fmt: skip
        """The arm's step pass: (model layer id, one layer's dispatch, FFN, meeting point and
        combine) for every layer in order, the FFN a CUDA graph with ``graph``."""
        calls = []
        for layer, c in links.items():
            key = (arm, self.world.rank, layer)
            ws, st = workspaces[key], stages[key]
            ffn = self.capture(lambda st=st: run_all(st)) if graph else (lambda st=st: run_all(st))
            calls.append((layer, lambda c=c, ws=ws, ffn=ffn: run_layer(c, ws, ffn)))
        return calls

    def step_probes(self, arm: str, p, calls, live: dict, wbytes: dict) -> list[Probe]:
        """One pass of the whole step per iteration: each layer's part a sample of stage ``ffn``
        with its layer, the whole pass one of stage ``step``."""
        r = self.world.rank
        rows: dict[Any, dict] = {
            layer: {"stage": WHOLE_FFN, "layer": layer, "regime": Regime.STEP,
                    "live_rows": live[(r, layer)], "weight_bytes": wbytes[(r, layer)]}
            for layer in p.layers
        }  # fmt: skip
        rows["layer"] = {"stage": WHOLE_STEP, "layer": -1, "regime": Regime.STEP,
                         "live_rows": sum(live[(r, la)] for la in p.layers),
                         "weight_bytes": sum(wbytes[(r, la)] for la in p.layers)}  # fmt: skip
        return [self._probe(calls, rows)]

    def run_as_timed(self, calls, rank: int, layer: int) -> None:
        """One layer of the step pass once more, as timed (dispatch included), and wait."""
        self.settle(dict(calls)[layer])


# --------------------------------------------------------------------------- a rank's layer


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
    w13, w2 = make_weights(experts=range(rank * E, (rank + 1) * E), hidden=s.model.hidden,
                           intermediate=s.model.intermediate, seed=s.routing.seed,
                           device=dev)  # fmt: skip
    # This rank's tokens quantised as a single-process run quantises them (per token), and its
    # experts' weights; the FFN's tokens are then the rows received by dispatch.
    own = build_problem(
        x_TD=x_all[t0:t1], topk_ids_TK=ids[t0:t1], topk_weights_TK=weights[t0:t1], w13_EFD=w13,
        w2_EDF=w2, expert_offset=rank * E, experts=s.model.experts, alignment=s.shape.alignment,
        capacity_rows=p.capacity_rows, precision=s.precision, activation=s.activation,
    )  # fmt: skip
    del w13, w2
    tensors = dict(x_TD=own.x_TD, x_sf_TG4=own.x_sf_TG4, topk_ids_TK=own.topk_ids_TK,
                   topk_weights_TK=own.topk_weights_TK)  # fmt: skip
    if share is not None:
        ex = share.for_layer(**tensors)
    else:
        ex = Exchange(world, **tensors, experts_per_rank=E,
                      slots_per_rank=distributed.max_tokens(s) * s.model.top_k)  # fmt: skip
    problem = dataclasses.replace(own, x_TD=ex.x_RD, x_sf_TG4=ex.x_sf_RG4, topk_ids_TK=ex.ids_R1,
                                  topk_weights_TK=ex.ones_R1)  # fmt: skip
    return LayerCase(exchange=ex, problem=problem, x_all=x_all if world.leader else None,
                     routing_row=routing_row(p, run_id, rank))  # fmt: skip


def run_layer(c: LayerCase, ws: Workspace, local: Callable[[], None]) -> None:
    """One pass of the layer: dispatch, the local FFN, the meeting point, combine."""
    ex = c.exchange
    ex.dispatch()
    local()
    ex.sync()
    ex.combine(ws.y_TD)
