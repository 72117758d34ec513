"""One case of the ``step`` regime in ``topology.mode: distributed``: every timed MoE layer of the
model, with the real exchange in every layer, on this rank (docs/DESIGN.md section 14).

The case loop around it (opening, resume, interrupts, rank 0 writing) is ``run.distributed``'s.
Per token group (the steps that share a token count; ``plan.steps``), on every rank:

1. Inputs. Each MoE layer is a one-layer distributed case of its own (``run.rank_layer``): the
   layer's scenario seeded as the simulated step seeds the layer's weights
   (``run.step.weight_seed``), so each layer has its own experts (this rank's only) and its own
   tokens; the layers share one set of exchange buffers (``Exchange.for_layer``), as a model's
   layers share their all-to-all buffers; its routing is the group's first step's draw for that
   layer (``routing.step_draws``, the same on every rank: the global routing, of which this rank
   dispatches its own tokens).
2. Gates, before anything is timed: every layer's first dispatch, then on the first group's
   first layer every gate of a one-layer distributed case (``gates.rank.gate_rank`` on the
   received rows, then each arm's whole layer gathered on rank 0 and checked end to end,
   ``gates.distributed.check_layer``), and on every other layer the layer gates of the
   simulated step (``gates.layers.gate_layer``: reference, poison, sentinels, cross-arm on the
   received rows). The arms timed are those that passed on every rank (unless
   ``--allow-mismatch``). A staged arm's workspace is one per group, shared by the layers.
3. Steps: each step writes its own routing into every layer's exchange, then ``step.blocks``
   blocks time every arm in a Williams order (``measure.rotation``): per iteration one pass of
   the whole step, every layer in order (dispatch, the arm's FFN, the meeting point, combine),
   the ranks meeting before it (``measure.passes.timed_pass``). Each layer's part of the pass is
   a sample of stage ``ffn`` with its model layer id, the whole pass one of stage ``step`` with
   layer -1 (what ``analysis.step_paths`` reads). On the GPU the FFN of each layer replays a
   CUDA graph and the collectives run eagerly, as in a one-layer distributed case (untested on
   a GPU so far). No L2 flush: inside a step every layer follows the others' weights, as in a
   model.
4. After the group's last step every layer of every arm runs once more as timed and its local
   FFN output is held to its reference for that step's routing (``post_timing``).

Every phase ends with the ranks agreeing (``comm.world.phase``), so an error on one rank stops
all of them at the same point; rank 0 gathers every rank's rows at the end of the case.
"""

from __future__ import annotations

import dataclasses

import torch

from moebench.arm import assemble
from moebench.arm.base import run_all
from moebench.comm import world as distributed
from moebench.comm.world import World, phase
from moebench.core import faults
from moebench.core.vocabulary import WHOLE_FFN, WHOLE_STEP
from moebench.gates.checks import check_reference
from moebench.gates.distributed import check_layer
from moebench.gates.families import family_of
from moebench.gates.layers import LayerGates, gate_layer
from moebench.gates.rank import gate_rank
from moebench.measure.clock import Clock
from moebench.measure.graphs import capture_replay
from moebench.measure.passes import timed_pass
from moebench.measure.rotation import block_order
from moebench.plan.cases import PlannedCase, run_arms
from moebench.plan.steps import PlannedStep, TokenGroup, check_memory, plan_step_case
from moebench.plan.steps import step_manifest as simulated_manifest
from moebench.results.rows import CaseRows, Check
from moebench.run.options import Progress, RunOptions
from moebench.run.rank_layer import LayerCase, layer_inputs, layer_outputs, run_layer, settle
from moebench.run.step import RANK_GATES, group_workspace, step_columns, step_ledger, weight_seed
from moebench.spec.schema import Scenario, local_experts
from moebench.spec.sweep import expand


def plan(s: Scenario, arms: int, device: torch.device) -> list[PlannedStep]:
    """Every case planned, and refused before anything is allocated when this rank's share (its
    experts of every layer and every layer's exchange: ``plan.steps.estimate_memory``) cannot
    fit on its device."""
    planned = [plan_step_case(c) for c in expand(s)]
    check_memory(planned, arms, device)
    return planned


def manifest(s: Scenario, planned: list[PlannedStep]) -> dict:
    """The run manifest's ``step`` key (``plan.steps.step_manifest``), with how weights are held."""
    return {**simulated_manifest(s, planned),
            "weights": "one set per layer and rank: each rank holds its own experts of every "
                       "layer"}  # fmt: skip


@dataclasses.dataclass(kw_only=True)
class _Layer:
    """One MoE layer of one token group on this rank."""

    layer: int  # the model layer id
    case: LayerCase  # its inputs and exchange
    planned: PlannedCase  # the layer as a one-layer case: the end-to-end reference's inputs
    tokens: tuple[int, int]  # this rank's [start, end) of the global tokens


def run_step_case(
    world: World,
    p: PlannedStep,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    progress: Progress,
) -> CaseRows | None:
    """Every token group of the case (module docstring); the case's rows on rank 0, None
    elsewhere. An arm that fails a gate on some rank is not timed in this or a later group."""
    arms = run_arms(p.case.scenario, options.aa)
    out = CaseRows()
    timed = list(arms)
    for gi, group in enumerate(p.groups):
        timed = _run_group(world, p, gi, group, arms, timed, clock, run_id, options, out,
                           progress)  # fmt: skip
        if world.device.type == "cuda":
            torch.cuda.empty_cache()  # the group's layers went with _run_group
    parts = distributed.gather(world, (out.samples, out.checks, out.routing, out.ledger))
    if not world.leader:
        return None
    return CaseRows(
        samples=[row for part in parts for row in part[0]],
        checks=[row for part in parts for row in part[1]],
        routing=[row for part in parts for row in part[2]],
        ledger=[row for part in parts for row in part[3]],
    )


def _run_group(world, p, gi, group, arms, timed, clock, run_id, options, out, progress):
    """One token group: inputs, gates, its steps, the check after timing. Returns the arms still
    timed."""
    s = p.case.scenario
    where = f"case {p.case.case_id} at {group.tokens_per_rank} tokens per rank"
    cols = {**step_columns(p, run_id, group), "rank": world.rank, "live_rows": 0}
    first = group.steps[0]
    layers = phase(world, f"building the layers of {where}",
                   lambda: _layers(world, p, gi, group, run_id, cols))  # fmt: skip
    for lay in layers:
        out.routing.append({**lay.case.routing_row, "step": first, "layer": lay.layer})
    log = LayerGates()
    mine, sets, full_sets, received = phase(world, f"in the gates of {where}",
                                  lambda: _gates(world, gi, layers, arms, timed, options, cols,
                                                 out, log))  # fmt: skip
    for r, arm, check in log.rows(f"step {first}"):
        out.add({**cols, "rank": r}, arm, check)
    everywhere = distributed.all_gather(world, mine)
    timed = [a for a in timed if all(a in t for t in everywhere)]
    if gi == 0:
        timed = _end_to_end(world, layers[0], arms, timed, full_sets, options, cols, out, where)
        for arm in timed:  # the work ledger of one step: each stage summed over the layers
            out.ledger += step_ledger(arms[arm], arm, received, cols)
    if not timed:
        return timed
    passes = phase(world, f"preparing the timing of {where}",
                   lambda: _passes(layers, sets, arms, timed, s, clock))  # fmt: skip
    for si in group.steps:
        out.samples += phase(world, f"timing step {si} of {where}",
                             lambda si=si: _time_step(world, p, group, si, layers, passes, sets,
                                                      arms, timed, clock, cols))  # fmt: skip
        progress.step(f"{p.case.case_id} step {si + 1}/{len(p.tokens)}")
    phase(world, f"in the check after timing {where}",
          lambda: _post_timing(world, layers, passes, sets, timed, s, cols, group,
                               out))  # fmt: skip
    return timed


def _layers(world, p: PlannedStep, gi: int, group: TokenGroup, run_id: str, cols: dict):
    """Every MoE layer as a one-layer distributed case of its own seed, routed as the group's
    first step routes it (module docstring)."""
    s = p.case.scenario
    T = group.tokens_per_rank * s.topology.dp
    out = []
    for li, layer in enumerate(p.layers):
        layer_s = dataclasses.replace(
            s,
            routing=dataclasses.replace(s.routing, seed=weight_seed(s.routing.seed, layer)),
            shape=dataclasses.replace(s.shape, tokens_per_rank=group.tokens_per_rank),
        )
        draw = p.router.draw(group.steps[0], layer, T)
        counts = torch.bincount(draw.topk_ids_TK.flatten().to(torch.int64),
                                minlength=s.model.experts)  # fmt: skip
        planned = PlannedCase(case=dataclasses.replace(p.case, scenario=layer_s), routing=draw,
                              capacity_rows=group.capacity_rows, ranks=p.ranks,
                              counts_RE=counts.view(s.topology.ep, local_experts(s)))  # fmt: skip
        c = layer_inputs(world, planned, run_id, share=out[0].case.exchange if out else None)
        # Only the first group's first layer is checked end to end: the others' global tokens
        # need not stay on rank 0.
        keep = gi == 0 and li == 0
        live = c.routing_row["live_rows"]
        c = dataclasses.replace(c, x_all=c.x_all if keep else None,
                                rank_cols={**cols, "live_rows": live})  # fmt: skip
        out.append(_Layer(layer=layer, case=c, planned=planned,
                          tokens=distributed.token_range(layer_s, world.rank)))  # fmt: skip
    return out


def _gates(world, gi, layers, arms, timed, options, cols, out, log: LayerGates):
    """Every layer's first dispatch, then this rank's gates on the rows it received (module
    docstring), rows into ``out`` and ``log``. Returns (the arms this rank may time,
    {(arm, layer): (workspace, stages)}, the first layer's gate_rank stage sets for the
    end-to-end run or None, each layer's received problem as dispatched for its ledger)."""
    family = family_of(layers[0].planned.case.scenario)
    rank = world.rank
    shared: dict = {}
    sets: dict[tuple[str, int], tuple] = {}
    full_sets = None
    received = []
    for li, lay in enumerate(layers):
        # The layers share the exchange's buffers: a layer's received rows are there until the
        # next layer's dispatch, so each layer is dispatched and gated in turn.
        settle(world, lay.case.exchange.dispatch)
        problem = lay.case.problem
        received.append(_as_received(problem))
        ref = family.reference(problem)
        full = gi == 0 and li == 0
        if full:  # every gate of a one-layer case, once: graph replay, dispatch and memory are
            # properties of the arm's code (run.step does the same)
            scratch = CaseRows()
            full_sets, _, passed = gate_rank(
                problem, ref, {a: arms[a] for a in timed}, allow_mismatch=options.allow_mismatch,
                device=world.device, stop=faults.Stopper(), out=scratch, rank_cols=cols,
                family=family,
            )  # fmt: skip
            for row in scratch.checks:
                if row["gate"].startswith(RANK_GATES):
                    out.checks.append(row)
                else:
                    log.add(rank, lay.layer, row["arm"], [Check(
                        name=row["gate"], status=row["status"], error=row["error"],
                        detail=row["detail"])])  # fmt: skip
            timed = [a for a in timed if a in passed]
            faults.release(world.device)
        layer_sets = {}
        for arm in timed:
            ws = group_workspace(family, arms[arm], problem, shared, arm)
            try:
                layer_sets[arm] = (ws, assemble.build(arms[arm], ws))
            except Exception as exc:
                failed = Check(name="run", status="error", detail=faults.describe(exc))
                log.add(rank, lay.layer, arm, [failed])
        if full:
            for _ws, st in layer_sets.values():  # warm the shared workspace's stages
                run_all(st)
        else:
            for arm, rows in gate_layer(problem, ref, arms, layer_sets, family,
                                        world.device).items():  # fmt: skip
                log.add(rank, lay.layer, arm, rows)
        for arm, st in layer_sets.items():
            sets[(arm, lay.layer)] = st
        del ref
    bad = log.failed(rank)
    mine = [a for a in timed if (options.allow_mismatch or a not in bad)
            and all((a, lay.layer) in sets for lay in layers)]  # fmt: skip
    return mine, sets, full_sets, received


def _as_received(problem):
    """The problem with the experts of the rows it holds now (``ids_R1``), for what is counted
    from them (work ledger, weight bytes) once the next layer's dispatch has overwritten them."""
    return dataclasses.replace(problem, topk_ids_TK=problem.topk_ids_TK.clone())


def _end_to_end(world, lay: _Layer, arms, timed, full_sets, options, cols, out, where):
    """The first layer's end-to-end gate, as a one-layer distributed case runs it: every arm's
    whole layer, gathered on rank 0 and checked there. Returns the arms still timed."""
    outputs = phase(world, f"in the end-to-end run of {where}",
                    lambda: layer_outputs(world, lay.case, timed, full_sets))  # fmt: skip
    gathered = distributed.gather(world, {a: y.cpu() for a, y in outputs.items()})
    s = lay.planned.case.scenario
    ranges = [distributed.token_range(s, r) for r in range(world.size)]
    checks = phase(
        world,
        f"checking the gathered outputs of {where}",
        lambda: check_layer(lay.planned, lay.case.x_all, gathered, ranges, cols, world.device,
                            {a for a, arm in arms.items() if arm.staged})
        if world.leader else None,
    )  # fmt: skip
    if world.leader:
        out.checks += checks
    failed = distributed.broadcast(world, sorted({
        r["arm"] for r in checks if r["status"] not in ("pass", "skip")
    }) if world.leader else None)  # fmt: skip
    return [a for a in timed if options.allow_mismatch or a not in failed]


def _passes(layers, sets, arms, timed, s: Scenario, clock: Clock) -> dict[str, list]:
    """Per arm the step's pass: (model layer id, one layer's dispatch, FFN, meeting point and
    combine) for every layer in order. The FFN a CUDA graph on the GPU, as in a one-layer case."""
    use_graph = s.measure.graph and clock.cuda and all(arms[a].graph for a in timed)
    # NCCL's watchdog thread queries events while this thread captures: thread-local capture.
    capture = (lambda fn: capture_replay(fn, thread_local=True)) if use_graph else (lambda fn: fn)
    passes = {}
    for arm in timed:
        steps = []
        for lay in layers:
            ws, stages = sets[(arm, lay.layer)]
            ffn = capture(lambda st=stages: run_all(st))
            steps.append((lay.layer, lambda c=lay.case, ws=ws, ffn=ffn: run_layer(c, ws, ffn)))
        passes[arm] = steps
    return passes


def _time_step(world, p, group, si, layers, passes, sets, arms, timed, clock, cols):
    """One step: its routing into every layer's exchange, then its blocks of samples."""
    s = p.case.scenario
    family = family_of(s)
    E, rank = local_experts(s), world.rank
    live, wbytes = {}, {}
    for lay in layers:
        ids = lay.planned.routing.topk_ids_TK
        if si != group.steps[0]:  # the step's own routing, into the tensors the layer reads
            draw = p.router.draw(si, lay.layer, group.tokens_per_rank * s.topology.dp)
            ids = draw.topk_ids_TK
            t0, t1 = lay.tokens
            ex = lay.case.exchange
            ex.ids_TK.copy_(ids[t0:t1])
            ex.topk_weights_TK.copy_(draw.topk_weights_TK[t0:t1])
        live[lay.layer] = int((ids.to(torch.int64) // E == rank).sum())
        # An untimed dispatch: the weight bytes of the experts this step routes rows to.
        settle(world, lay.case.exchange.dispatch)
        for a in timed:
            wbytes[(a, lay.layer)] = family.weight_bytes(arms[a], lay.case.problem).get(
                WHOLE_FFN, 0
            )
    m = s.measure
    wait = world.wait if world.device.type == "cuda" else None
    run_pass = lambda arm: timed_pass(passes[arm], align=world.align, wait=wait,  # noqa: E731
                                      spin_cycles=distributed.SPIN_CYCLES)  # fmt: skip
    if si == group.steps[0]:
        for _ in range(m.warmup):
            for arm in timed:
                run_pass(arm)
        settle(world)
    blocks = s.step.blocks
    device = "cuda" if clock.cuda else "cpu"
    use_graph = m.graph and clock.cuda and all(arms[a].graph for a in timed)
    samples = []
    for b in range(blocks):
        telemetry = clock.telemetry()
        for position, arm in enumerate(block_order(timed, si * blocks + b)):
            base = {**cols, "arm": arm, "block": b, "position": position, "step": si,
                    "device": device, "regime": "step", "weights": "cold",
                    "weight_copies": len(layers), "mode": "graph" if use_graph else "eager",
                    **telemetry}  # fmt: skip
            for it in range(m.iterations):
                times = run_pass(arm)
                step_bytes = sum(wbytes[(arm, la.layer)] for la in layers)
                samples.append({**base, "stage": WHOLE_STEP, "layer": -1, "iteration": it,
                                "time_us": times["layer"], "live_rows": sum(live.values()),
                                "weight_bytes": step_bytes})  # fmt: skip
                for lay in layers:
                    samples.append({**base, "stage": WHOLE_FFN, "layer": lay.layer,
                                    "iteration": it, "time_us": times[lay.layer],
                                    "live_rows": live[lay.layer],
                                    "weight_bytes": wbytes[(arm, lay.layer)]})  # fmt: skip
    settle(world)
    return samples


def _post_timing(world, layers, passes, sets, timed, s: Scenario, cols, group, out) -> None:
    """The last step's routing, every layer of every arm once more as timed (graph replays on
    the GPU), its local FFN output held to the reference of the rows it received."""
    family = family_of(s)
    log = LayerGates()
    for i, lay in enumerate(layers):
        ref = None
        for arm in timed:
            ws, _ = sets[(arm, lay.layer)]
            settle(world, passes[arm][i][1])
            if ref is None:  # every arm receives the same rows
                ref = family.reference(lay.case.problem)
            check = check_reference(ws.y_TD, ref, s.precision)
            log.add(world.rank, lay.layer, arm, [dataclasses.replace(check, name="post_timing")])
    for r, arm, check in log.rows(f"step {group.steps[-1]}, after timing"):
        out.add({**cols, "rank": r}, arm, check)
