"""One case of the ``step`` regime: every timed MoE layer of the model, on every simulated rank,
for each of the case's steps (docs/DESIGN.md section 14).

Per token group (the steps that share a token count; ``plan.steps``):

1. Inputs. Each layer's expert weights are built once for the run (seeded per layer; the ranks
   of a layer share them, ``plan.steps``), the group's tokens once, and one routing tensor pair
   per layer, shared by the ranks (every simulated rank sees every token).
2. Gates, before anything is timed: the first rank's first layer through every gate of a
   one-layer case (``gates.rank.gate_rank``), then every other (rank, layer) through the
   layer gates (``gates.layers``). An arm that fails a gate on any rank is not timed (unless
   ``--allow-mismatch``). Each arm's workspace is one per group, shared by every layer and rank
   as a model's activation buffers are.
3. Graphs: per (arm, rank) one graph of every layer in order (the rank's whole step) and one per
   layer (what a layer costs alone); eager calls on the CPU.
4. Steps: each step writes its own routing into the layers' tensors, then ``step.blocks`` blocks
   time every arm in a Williams order: per rank the whole step, then each layer alone, L2
   flushed before each sample (no layer finds its weights in L2 in a real model: the other
   layers' weights passed through it).
5. After the group's last step every layer of every rank is replayed once more and held to its
   reference for that step's routing: the replays with changed routing computed the right thing.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch

from moebench.arm import assemble
from moebench.arm.base import run_all
from moebench.core import faults
from moebench.core.vocabulary import WHOLE_FFN, WHOLE_STEP
from moebench.gates import checks as gate_checks
from moebench.gates.families import family_of, ledger_rows
from moebench.gates.layers import LayerGates, gate_layer
from moebench.gates.rank import gate_rank
from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order
from moebench.plan.cases import columns, run_arms
from moebench.plan.inputs import make_tokens
from moebench.plan.steps import PlannedStep, TokenGroup
from moebench.results.rows import CaseRows, Check, DeviceLost, record_failure
from moebench.routing.synthetic import rank_statistics
from moebench.run.options import Progress, RunOptions
from moebench.spec.schema import local_experts

# Gates of a single-layer case that stay per rank (the others join the per-layer record).
RANK_GATES = ("graph_replay", "dispatch", "memory")


def weight_seed(seed: int, layer: int) -> int:
    """The seed of one layer's expert weights: every layer its own."""
    return seed + 1_000 * (layer + 1)


def run_step_case(
    p: PlannedStep,
    device: torch.device,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    stop: faults.Stopper,
    limit_s: float | None = None,
    progress: Progress | None = None,
) -> CaseRows:
    """Every step of the case (module docstring); failures become rows. Raises only
    ``faults.Interrupted`` (the case is then not finished)."""
    progress = progress or Progress()
    s = p.case.scenario
    arms = run_arms(s, options.aa)
    names = tuple(arms)
    out = CaseRows()
    first_cols = {**step_columns(p, run_id, p.groups[0]), "rank": p.ranks[0], "live_rows": 0}
    stop.start_case(limit_s)
    try:
        weights: dict[int, dict] = {}
        timed = list(names)
        for gi, group in enumerate(p.groups):
            timed = _run_group(
                p,
                gi,
                group,
                weights,
                arms,
                timed,
                device,
                clock,
                run_id,
                options,
                stop,
                out,
                progress,
            )
            faults.release(device)
    except faults.CaseTimeout as timeout:
        for arm in names:
            out.add(
                first_cols, arm, Check(name="timeout", status="error", detail=f"timeout: {timeout}")
            )
    except DeviceLost as lost:
        out.fault = str(lost)
        hit = {c["arm"] for c in out.checks if c["status"] == "error"}
        for arm in names:
            if arm not in hit:
                out.add(
                    first_cols,
                    arm,
                    Check(name="aborted", status="error", detail=f"not finished: {lost}"),
                )
    finally:
        stop.end_case()
        out.warnings += clock.warnings() if clock is not None else []
    return out


def step_columns(p: PlannedStep, run_id: str, group: TokenGroup) -> dict:
    return columns(
        p.case,
        run_id,
        tokens_per_rank=group.tokens_per_rank,
        capacity_rows=group.capacity_rows,
        routing_label=p.router.label(),
    )


def _run_group(
    p, gi, group, weights, arms, timed, device, clock, run_id, options, stop, out, progress
) -> list[str]:
    """One token group: inputs, gates, graphs, its steps, the last check. Returns the arms that
    are still timed (a later group does not time an arm that failed in an earlier one)."""
    s = p.case.scenario
    family = family_of(s)
    cols = step_columns(p, run_id, group)
    T = group.tokens_per_rank * s.topology.dp
    E = local_experts(s)
    first = group.steps[0]
    stop.check("step inputs")
    try:
        x = make_tokens(
            tokens=T, hidden=s.model.hidden, seed=s.routing.seed + 7 * gi, device=device
        )
        draws = {layer: p.router.draw(first, layer, T) for layer in p.layers}
        layer_problem = {}
        for layer in p.layers:
            layer_s = dataclasses.replace(
                s, routing=dataclasses.replace(s.routing, seed=weight_seed(s.routing.seed, layer))
            )
            built = family.problem(layer_s, draws[layer], group.capacity_rows, x, 0, device)
            if layer in weights:  # built in an earlier group: keep one copy of the layer's weights
                built = dataclasses.replace(built, **weights[layer])
            else:
                weights[layer] = {f: getattr(built, f) for f in family.weight_fields}
            layer_problem[layer] = built
            stop.check("step inputs")
        problems = {
            (r, layer): layer_problem[layer]
            if r == 0
            else dataclasses.replace(layer_problem[layer], expert_offset=r * E)
            for r in p.ranks
            for layer in p.layers
        }
    except faults.CaseTimeout:
        raise
    except Exception as exc:  # out of memory building a layer: every arm's row
        record_failure(
            out, {**cols, "rank": p.ranks[0], "live_rows": 0}, list(arms), "inputs", exc, device
        )
        return []
    for r in p.ranks:
        for layer in p.layers:
            out.routing.append(_routing_row(p, cols, draws[layer], r, layer, first, group))
    log = LayerGates()
    shared = {}  # arm -> the group's workspace of a staged arm
    stages: dict[tuple[str, int, int], tuple] = {}
    workspaces: dict[tuple[str, int, int], object] = {}
    for r in p.ranks:
        rank_cols = {**cols, "rank": r, "live_rows": 0}
        for li, layer in enumerate(p.layers):
            stop.check(f"rank {r}, layer {layer}, gates")
            problem = problems[(r, layer)]
            ref = family.reference(problem)
            full = gi == 0 and li == 0 and r == p.ranks[0]
            if full:  # the full gates of a one-layer case, once: graph replay and dispatch
                # are properties of the arm's code, not of a rank's experts
                scratch = CaseRows()
                _, _, passed = gate_rank(
                    problem,
                    ref,
                    {a: arms[a] for a in timed},
                    allow_mismatch=options.allow_mismatch,
                    device=device,
                    stop=stop,
                    out=scratch,
                    rank_cols=rank_cols,
                    family=family,
                )
                for row in scratch.checks:
                    if row["gate"].startswith(RANK_GATES):
                        out.checks.append(row)
                    else:
                        log.add(
                            r,
                            layer,
                            row["arm"],
                            [
                                Check(
                                    name=row["gate"],
                                    status=row["status"],
                                    error=row["error"],
                                    detail=row["detail"],
                                )
                            ],
                        )
                timed = [a for a in timed if a in passed]
                faults.release(device)
            sets = {}
            for arm in timed:
                ws = group_workspace(family, arms[arm], problem, shared, arm)
                try:
                    sets[arm] = (ws, assemble.build(arms[arm], ws))
                except Exception as exc:
                    log.add(
                        r,
                        layer,
                        arm,
                        [Check(name="run", status="error", detail=faults.describe(exc))],
                    )
            if not full:
                for arm, rows in gate_layer(problem, ref, arms, sets, family, device).items():
                    log.add(r, layer, arm, rows)
            else:
                for _ws, st in sets.values():  # warm the shared workspace's stages
                    run_all(st)
            for arm, (ws, st) in sets.items():
                stages[(arm, r, layer)] = st
                workspaces[(arm, r, layer)] = ws
            del ref
        if gi == 0:
            for arm in timed:  # the work ledger of one step: each stage summed over the layers
                out.ledger += step_ledger(
                    arms[arm], arm, [problems[(r, la)] for la in p.layers], rank_cols
                )
    for r, arm, check in log.rows(f"step {first}"):
        out.add({**cols, "rank": r}, arm, check)
    bad = set().union(*(log.failed(r) for r in p.ranks))
    timed = [a for a in timed if options.allow_mismatch or a not in bad]
    timed = [a for a in timed if all((a, r, la) in stages for r in p.ranks for la in p.layers)]
    if not timed:
        return timed
    timed = _time_group(
        p,
        group,
        problems,
        draws,
        stages,
        arms,
        timed,
        family,
        clock,
        cols,
        device,
        stop,
        out,
        progress,
    )
    _post_timing(p, group, problems, stages, workspaces, timed, family, cols, device, out)
    return timed


def group_workspace(family, arm, problem, shared: dict, name: str):
    """The group's workspace of a staged arm over ``problem`` (its buffers shared by every layer
    and rank); a whole-FFN arm's own per (rank, layer)."""
    if not arm.staged:
        return family.workspace(arm, problem)
    if name not in shared:
        shared[name] = family.workspace(arm, problem)
    ws = copy.copy(shared[name])
    ws.problem = problem
    return ws


def _time_group(
    p, group, problems, draws, stages, arms, timed, family, clock, cols, device, stop, out, progress
) -> list[str]:
    """The group's steps: graphs, then per step its routing and its samples."""
    s = p.case.scenario
    use_graph = {a: s.measure.graph and clock.cuda and arms[a].graph for a in timed}
    layer_call, step_call = {}, {}
    for arm in list(timed):
        try:
            for r in p.ranks:
                seq = [stages[(arm, r, layer)] for layer in p.layers]
                whole = lambda seq=seq: [run_all(st) for st in seq]  # noqa: E731
                step_call[(arm, r)] = clock.capture(whole) if use_graph[arm] else whole
                for layer, st in zip(p.layers, seq, strict=True):
                    call = lambda st=st: run_all(st)  # noqa: E731
                    layer_call[(arm, r, layer)] = clock.capture(call) if use_graph[arm] else call
                stop.check("step graphs")
        except faults.CaseTimeout:
            raise
        except Exception as exc:
            timed.remove(arm)
            record_failure(
                out, {**cols, "rank": p.ranks[0], "live_rows": 0}, [arm], "timing", exc, device
            )
    T = group.tokens_per_rank * s.topology.dp
    E = local_experts(s)
    blocks = s.step.blocks
    device_label = "cuda" if clock.cuda else "cpu"
    for si in group.steps:
        if si != group.steps[0]:
            for layer in p.layers:  # the step's own routing, into the tensors the graphs read
                draws[layer] = p.router.draw(si, layer, T)
                problem = problems[(p.ranks[0], layer)]
                problem.topk_ids_TK.copy_(draws[layer].topk_ids_TK)
                problem.topk_weights_TK.copy_(draws[layer].topk_weights_TK)
        live = {}
        for layer in p.layers:
            counts = np.bincount(
                draws[layer].topk_ids_TK.flatten().numpy(), minlength=E * s.topology.ep
            )
            for r in p.ranks:
                live[(r, layer)] = int(counts[r * E : (r + 1) * E].sum())
        wbytes = {
            (a, r, la): family.weight_bytes(arms[a], problems[(r, la)])[WHOLE_FFN]
            for a in timed
            for r in p.ranks
            for la in p.layers
        }
        for b in range(blocks):
            telemetry = clock.telemetry()
            for position, arm in enumerate(block_order(timed, si * blocks + b)):
                base = {
                    **cols,
                    "arm": arm,
                    "block": b,
                    "position": position,
                    "step": si,
                    "device": device_label,
                    "regime": "step",
                    "weights": "cold",
                    "weight_copies": len(p.layers),
                    "mode": "graph" if use_graph[arm] else "eager",
                    **telemetry,
                }
                try:
                    for r in p.ranks:
                        _sample_rank(
                            p,
                            arm,
                            r,
                            base,
                            live,
                            wbytes,
                            step_call,
                            layer_call,
                            clock,
                            s.measure.iterations,
                            out,
                        )
                        stop.check(f"step {si}, rank {r}")
                except (faults.CaseTimeout, faults.Interrupted):
                    raise
                except Exception as exc:
                    timed.remove(arm)
                    record_failure(
                        out,
                        {**cols, "rank": p.ranks[0], "live_rows": 0},
                        [arm],
                        "timing",
                        exc,
                        device,
                    )
        progress.step(f"{p.case.case_id} step {si + 1}/{len(p.tokens)}")
    return timed


def _sample_rank(p, arm, r, base, live, wbytes, step_call, layer_call, clock, iterations, out):
    rank_base = {**base, "rank": r}
    for it in range(iterations):
        t = clock.sample_us(step_call[(arm, r)], flush_l2=True)
        out.samples.append(
            {
                **rank_base,
                "stage": WHOLE_STEP,
                "layer": -1,
                "iteration": it,
                "time_us": t,
                "live_rows": sum(live[(r, la)] for la in p.layers),
                "weight_bytes": sum(wbytes[(arm, r, la)] for la in p.layers),
            }
        )
    for layer in p.layers:
        for it in range(iterations):
            t = clock.sample_us(layer_call[(arm, r, layer)], flush_l2=True)
            out.samples.append(
                {
                    **rank_base,
                    "stage": WHOLE_FFN,
                    "layer": layer,
                    "iteration": it,
                    "time_us": t,
                    "live_rows": live[(r, layer)],
                    "weight_bytes": wbytes[(arm, r, layer)],
                }
            )


def _post_timing(p, group, problems, stages, workspaces, timed, family, cols, device, out):
    """The last step's routing, every layer of every rank, each arm held to its reference."""
    log = LayerGates()
    for r in p.ranks:
        for layer in p.layers:
            problem = problems[(r, layer)]
            ref = family.reference(problem)
            for arm in timed:
                try:
                    run_all(stages[(arm, r, layer)])
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    check = gate_checks.check_reference(
                        workspaces[(arm, r, layer)].y_TD, ref, problem.precision
                    )
                except Exception as exc:
                    check = Check(name="reference", status="error", detail=faults.describe(exc))
                log.add(r, layer, arm, [dataclasses.replace(check, name="post_timing")])
    for r, arm, check in log.rows(f"step {group.steps[-1]}, after timing"):
        out.add({**cols, "rank": r}, arm, check)


def _routing_row(p, cols, draw, rank, layer, step, group) -> dict:
    s = p.case.scenario
    stats = rank_statistics(
        draw.topk_ids_TK,
        rank=rank,
        ep=s.topology.ep,
        local_experts=local_experts(s),
        capacity_rows=group.capacity_rows,
    )
    return {
        "run_id": cols["run_id"],
        "case_id": cols["case_id"],
        "routing": draw.label,
        "tokens_per_rank": group.tokens_per_rank,
        "trace_sha256": draw.trace_sha256,
        "step": step,
        "layer": layer,
        **stats,
    }


def step_ledger(arm, name, problems, rank_cols) -> list[dict]:
    """One step's ledger rows of an arm on a rank: every stage's work summed over the layers."""
    total: dict[str, dict] = {}
    for problem in problems:
        for row in ledger_rows(arm, name, problem, rank_cols):
            got = total.setdefault(
                row["stage"], {**row, "rows": 0, "bytes_read": 0, "bytes_written": 0, "flops": 0}
            )
            for k in ("rows", "bytes_read", "bytes_written", "flops"):
                got[k] += row[k]
    return list(total.values())
