"""The case loop of `topology.mode: distributed`: one process per rank (see moebench.distributed).

Per case, every rank goes through the same phases; at the end of each the ranks agree
(``distributed.phase``), so an error on one rank stops all of them at the same point and rank 0
records it in the manifest:

1. inputs: the global routing and tokens from the seed (identical on every rank), this rank's
   tokens and its experts' weights, the exchange buffers.
2. one dispatch, then ``runner.gate_rank`` on the rows this rank received: each arm's local FFN
   against the reference of those rows, poison, sentinels, cross-arm (the simulated gates).
3. the arms to time are those that every rank may time.
4. the end-to-end gate: each of them runs the whole layer once (dispatch, FFN, meeting point,
   combine); rank 0 gathers every rank's output and compares it with ``reference.moe_ffn`` over
   all experts for the same tokens and routing (``distributed_reference``) and across arms, bit
   for bit (``distributed_cross_arm``). An arm that fails is not timed (unless --allow-mismatch).
5. timing, blocks with the arms in rotating order. Regime ``ffn``: ``iterations`` passes of the
   layer per arm, each pass timed stage by stage on every rank: ``dispatch``, ``ffn`` (the arm's
   five stages; one CUDA graph on the GPU, the same figure as in simulated mode), ``sync_wait``,
   ``combine_a2a`` (return all-to-all and the weighted sum of each token's slots) and ``layer``
   (the whole pass). Ranks meet, untimed, before each pass, so iteration i of every rank is the
   same pass. Regime ``kernel``: the arm's local stages alone, as in simulated mode.
6. each arm's layer output after timing must be bitwise its gated output; rank 0 gathers every
   rank's samples, checks and routing rows (outside any timed region) and writes the case.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import signal
import time
from collections.abc import Callable
from pathlib import Path

import torch

from moebench.arm.base import run_all
from moebench.arm.prefill import Workspace
from moebench.comm import world as distributed
from moebench.comm.world import RankFailure, World, phase
from moebench.core import faults
from moebench.core.errors import MoebenchError, ScenarioError
from moebench.gates import checks as gates
from moebench.gates.checks import Check
from moebench.gates.families import family_of
from moebench.measure.clock import Clock
from moebench.plan.inputs import build_problem, make_tokens, make_weights, reference_output
from moebench.results.store import RunWriter, new_run_id
from moebench.routing import synthetic as routing
from moebench.run import provenance
from moebench.run.simulated import (
    CaseRows,
    PlannedCase,
    Progress,
    RunOptions,
    RunSummary,
    _case_columns,
    arm_module,
    arm_names,
    arm_provenance,
    gate_rank,
    plan,
    select_device,
)  # fmt: skip
from moebench.spec.scenario import Scenario, global_tokens, local_experts, to_dict


def run(s: Scenario, options: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Run every case of the scenario as one rank of the world torchrun started."""
    progress = progress or Progress()
    device_type = select_device(s).type
    world = distributed.init_world(s, device_type, options.dist_timeout_s)
    previous = signal.signal(signal.SIGTERM, _interrupted)  # torchrun stops workers with SIGTERM
    try:
        summary = _run(world, s, options, progress)
    finally:
        signal.signal(signal.SIGTERM, previous)
    # Only after success: a failed rank may leave collectives its peers never matched, and
    # tearing those down can block; the CLI ends such a process at once.
    distributed.shutdown()
    return summary


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


@dataclasses.dataclass(kw_only=True)
class _Case:
    """What one rank holds for one case."""

    exchange: distributed.Exchange
    problem: object  # arms.pipeline.Problem of the received rows
    x_all: torch.Tensor | None  # the global tokens, on rank 0 for the reference
    rank_cols: dict
    routing_row: dict


def _run(world: World, s: Scenario, options: RunOptions, progress: Progress) -> RunSummary:
    def prepare():
        ranks = s.measure.ranks
        if ranks is not None and sorted(ranks) != list(range(s.topology.ep)):
            raise ScenarioError(f"{s.path or s.name}: measure.ranks: distributed mode runs every "
                                f"rank; leave it out (got {list(ranks)})")  # fmt: skip
        sources = arm_provenance(s.arms)
        drift = provenance.check_pins(s.sources, {a: v["hash"] for a, v in sources.items()},
                                      allow_drift=options.allow_source_drift)  # fmt: skip
        return sources, drift, plan(s)

    sources, drift, planned = phase(world, "while planning the run", prepare)
    names = arm_names(s, options)
    aa_arm = names[-1] if len(names) > len(s.arms) else None
    writer = phase(world, "opening the results folder", lambda: (
        _open_writer(world, s, options, planned, sources, drift, aa_arm) if world.leader else None
    ))  # fmt: skip
    run_id, run_dir, done = distributed.broadcast(world, (
        (writer.run_id, str(writer.run_dir), sorted(writer.finished_cases))
        if world.leader else None
    ))  # fmt: skip
    summary = RunSummary(run_dir=Path(run_dir), run_id=run_id)
    todo = [p for p in planned if p.case.case_id not in done]
    summary.cases_skipped = len(planned) - len(todo)
    progress.start(len(todo) * len(names))
    clock = Clock(world.device)
    resume = f"moebench run {s.path or ''} --nproc {world.size} --resume {run_dir}"
    try:
        for p in todo:
            rows = run_case(world, p, clock, run_id, options, summary, progress)
            if world.device.type == "cuda":
                torch.cuda.empty_cache()  # the case's buffers went with run_case
            phase(world, f"writing case {p.case.case_id}",
                  lambda p=p, rows=rows: writer.write_case(p.case.case_id, *rows)
                  if world.leader else None)  # fmt: skip
            summary.cases_run += 1
    except KeyboardInterrupt:
        summary.status = "interrupted"
        if world.leader:
            writer.finish("interrupted", resume=resume)
        raise
    except RankFailure as exc:
        summary.status = "failed"
        if world.leader:
            writer.finish("failed", error=exc.message, resume=resume,
                          failed_ranks=[{"rank": r, "kind": k, "error": m}
                                        for r, k, m in exc.failures])  # fmt: skip
        raise
    except BaseException as exc:
        summary.status = "failed"
        if world.leader:
            writer.finish("failed", error=f"rank 0: {distributed.describe(exc)}", resume=resume)
        raise
    summary.status = "mismatch" if summary.mismatches else "complete"
    if world.leader:
        writer.finish(summary.status, mismatches=summary.mismatches, warnings=clock.warnings())
    return summary


def _open_writer(world, s, options, planned, sources, drift, aa_arm) -> RunWriter:
    now = dt.datetime.now(dt.UTC)
    if options.resume is not None:
        writer = RunWriter.resume(options.resume)
        m = writer.manifest
        if m.get("scenario", {}).get("sha256") != s.sha256 or m.get("aa") != aa_arm:
            writer.close()
            raise MoebenchError(f"{options.resume}: --resume needs the same scenario and A/A "
                                "setting as the run")  # fmt: skip
        return writer
    run_id = new_run_id(s.name, now)
    return RunWriter.create(options.results_dir, run_id, {
        "run_id": run_id,
        "scenario": {"name": s.name, "path": s.path, "sha256": s.sha256, "text": s.text,
                     "normalised": to_dict(s)},
        "sources": sources,
        "source_drift": drift,
        "environment": provenance.environment(),
        "command": options.command,
        "started": now.isoformat(),
        "device": world.device.type,
        "cases": [p.case.case_id for p in planned],
        "aa": aa_arm,
        "distributed": {"world_size": world.size, "backend": world.backend,
                        "timeout_s": world.timeout_s, "dp": s.topology.dp, "tp": s.topology.tp,
                        "ep": s.topology.ep},
    })  # fmt: skip


# --------------------------------------------------------------------------- one case


def run_case(
    world: World,
    p: PlannedCase,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    summary: RunSummary,
    progress: Progress,
) -> tuple[list[dict], list[dict], list[dict]] | None:
    """The phases of one case (module docstring); the case's rows on rank 0, None elsewhere."""
    s = p.case.scenario
    cid = p.case.case_id
    names = arm_names(s, options)
    c = phase(world, f"building the inputs of case {cid}", lambda: _inputs(world, p, run_id))
    phase(world, f"in the first dispatch of case {cid}",
          lambda: _settle(world, c.exchange.dispatch))  # fmt: skip
    arm_checks, timed, stage_sets, captures = phase(
        world, f"in the gates of case {cid}", lambda: _gates(world, c, s, options)
    )
    everywhere = distributed.all_gather(world, timed)
    layer_arms = [a for a in names if all(a in t for t in everywhere)]
    outputs = phase(world, f"in the end-to-end run of case {cid}",
                    lambda: _layer_outputs(world, c, layer_arms, stage_sets))  # fmt: skip
    gathered = distributed.gather(world, {a: y.cpu() for a, y in outputs.items()})
    layer_checks = phase(
        world,
        f"checking the gathered outputs of case {cid}",
        lambda: _check_layer(world, p, c, gathered) if world.leader else None,
    )
    failed = distributed.broadcast(world, sorted({
        r["arm"] for r in layer_checks if r["status"] not in ("pass", "skip")
    }) if world.leader else None)  # fmt: skip
    timed = [a for a in layer_arms if options.allow_mismatch or a not in failed]
    samples = phase(
        world, f"timing case {cid}", lambda: _time(world, c, timed, stage_sets, s, clock, progress)
    )
    post = phase(
        world,
        f"in the check after timing case {cid}",
        lambda: _post_timing(world, c, timed, stage_sets, captures, outputs),
    )

    check_rows, mismatches = [], []
    where = f"{cid}/rank{world.rank}"
    for arm, rows in arm_checks.items():
        check_rows += [_check_row(c.rank_cols, arm, x) for x in rows]
        if any(x.failed for x in rows):
            mismatches.append(f"{where}/{arm}")
    for arm, x in post:
        check_rows.append(_check_row(c.rank_cols, arm, x))
        if x.failed:
            mismatches.append(f"{where}/{arm}/{x.name}")
    for arm in names:
        if arm not in timed:
            progress.step(f"{cid} {arm} (not timed: mismatch)")
    parts = distributed.gather(world, (samples, check_rows, c.routing_row, mismatches))
    if not world.leader:
        return None
    all_samples = [row for part in parts for row in part[0]]
    all_checks = [row for part in parts for row in part[1]] + layer_checks
    for part in parts:
        summary.mismatches += part[3]
    summary.mismatches += sorted({f"{cid}/{r['arm']}/{r['check']}" for r in layer_checks
                                  if r["status"] not in ("pass", "skip")})  # fmt: skip
    return all_samples, all_checks, [part[2] for part in parts]


def _gates(world: World, c: _Case, s: Scenario, options: RunOptions):
    """The simulated runner's gates on this rank's received rows, as (checks per arm, arms to
    time, workspaces and stages, captures). A gate failure is a row, as in simulated mode."""
    family = family_of(s)
    out = CaseRows()
    stage_sets, captures, timed = gate_rank(
        c.problem, family.reference(c.problem), s, options, world.device, faults.Stopper(), out,
        c.rank_cols, family,
    )  # fmt: skip
    arm_checks: dict[str, list[Check]] = {}
    for row in out.checks:
        arm_checks.setdefault(row["arm"], []).append(
            Check(
                name=row["check"], status=row["status"], error=row["error"], detail=row["detail"]
            )  # fmt: skip
        )
    return arm_checks, timed, stage_sets, captures


def _inputs(world: World, p: PlannedCase, run_id: str) -> _Case:
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
    ex = distributed.Exchange(
        world, x_TD=own.x_TD, x_sf_TG4=own.x_sf_TG4, topk_ids_TK=own.topk_ids_TK,
        topk_weights_TK=own.topk_weights_TK, experts_per_rank=E,
        slots_per_rank=distributed.max_tokens(s) * s.model.top_k,
    )  # fmt: skip
    problem = dataclasses.replace(own, x_TD=ex.x_RD, x_sf_TG4=ex.x_sf_RG4, topk_ids_TK=ex.ids_R1,
                                  topk_weights_TK=ex.ones_R1)  # fmt: skip
    stats = routing.rank_statistics(p.routing.topk_ids_TK, rank=rank, ep=s.topology.ep,
                                    local_experts=E, capacity_rows=p.capacity_rows)  # fmt: skip
    cols = _case_columns(p, run_id)
    return _Case(
        exchange=ex, problem=problem, x_all=x_all if world.leader else None,
        rank_cols={**cols, "rank": rank, "live_rows": stats["live_rows"]},
        routing_row={"run_id": run_id, "case_id": p.case.case_id, "routing": p.routing.label,
                     "tokens_per_rank": s.shape.tokens_per_rank,
                     "trace_sha256": p.routing.trace_sha256, **stats},
    )  # fmt: skip


def _settle(world: World, fn: Callable[[], None] | None = None) -> None:
    """Run ``fn`` and wait until the device has finished it (with World.wait's deadline)."""
    if fn is not None:
        fn()
    if world.device.type == "cuda":
        done = torch.cuda.Event()
        done.record()
        world.wait(done)


def _layer(c: _Case, ws: Workspace, local: Callable[[], None]) -> None:
    ex = c.exchange
    ex.dispatch()
    local()
    ex.sync()
    ex.combine(ws.y_TD)


def _layer_outputs(world, c: _Case, arms, stage_sets) -> dict[str, torch.Tensor]:
    out = {}
    for arm in arms:
        ws, stages = stage_sets[arm]
        _settle(world, lambda ws=ws, stages=stages: _layer(c, ws, lambda: run_all(stages)))
        out[arm] = c.exchange.y_TD.clone()
    return out


def _check_row(rank_cols: dict, arm: str, x: gates.Check) -> dict:
    return {"run_id": rank_cols["run_id"], "case_id": rank_cols["case_id"],
            "rank": rank_cols["rank"], "arm": arm, "check": x.name, "status": x.status,
            "error": x.error, "detail": x.detail}  # fmt: skip


def _reference_all(world: World, p: PlannedCase, x_all: torch.Tensor) -> torch.Tensor:
    """float32 [T, D]: reference.moe_ffn over every expert for the whole step, built one rank's
    experts at a time (moe_ffn skips slots of other experts, so the parts add up)."""
    s = p.case.scenario
    E = local_experts(s)
    ids = p.routing.topk_ids_TK.to(world.device)
    weights = p.routing.topk_weights_TK.to(world.device)
    y = None
    for r in range(s.topology.ep):
        w13, w2 = make_weights(experts=range(r * E, (r + 1) * E), hidden=s.model.hidden,
                               intermediate=s.model.intermediate, seed=s.routing.seed,
                               device=world.device)  # fmt: skip
        part = reference_output(build_problem(
            x_TD=x_all, topk_ids_TK=ids, topk_weights_TK=weights, w13_EFD=w13, w2_EDF=w2,
            expert_offset=r * E, alignment=s.shape.alignment, capacity_rows=p.capacity_rows,
            precision=s.precision, activation=s.activation,
        ))  # fmt: skip
        y = part if y is None else y + part
    return y


def _check_layer(world: World, p: PlannedCase, c: _Case, gathered: list[dict]) -> list[dict]:
    """Rank 0: every rank's layer output against the single-process reference, and across arms."""
    s = p.case.scenario
    arms = list(gathered[0])
    if not arms:
        return []
    ref = _reference_all(world, p, c.x_all)
    rows = []
    for rank in range(world.size):
        t0, t1 = distributed.token_range(s, rank)
        cols = {**c.rank_cols, "rank": rank}
        for arm in arms:
            y = gathered[rank][arm].to(world.device)
            x = gates.check_reference(y, ref[t0:t1], s.precision)
            rows.append(_check_row(cols, arm, dataclasses.replace(
                x, name="distributed_reference",
                detail=f"tokens [{t0}, {t1}) after dispatch and combine vs reference.moe_ffn "
                       f"over all experts: {x.detail}",
            )))  # fmt: skip
            if arm != arms[0]:
                same = gates.bitwise_compare(y, gathered[rank][arms[0]].to(world.device))
                rows.append(_check_row(cols, arm, gates.Check(
                    name="distributed_cross_arm", status="pass" if same.equal else "fail",
                    detail=f"layer output vs {arms[0]}: {same.describe()}",
                )))  # fmt: skip
    return rows


# --------------------------------------------------------------------------- timing


def _capture(fn: Callable[[], None]) -> Callable[[], None]:
    """A CUDA graph of ``fn`` and its replay. As Clock.capture, but in thread-local capture mode:
    NCCL's watchdog thread queries events while this thread captures."""
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def _timed_pass(world: World, steps) -> dict[str, float]:
    """One pass of the layer, every step timed on this rank (us), plus ``layer``, the whole."""
    if world.device.type == "cuda":
        torch.cuda._sleep(distributed.SPIN_CYCLES)  # the host queues the pass meanwhile
        world.align()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(steps) + 1)]
        events[0].record()
        for (_, fn), ev in zip(steps, events[1:], strict=True):
            fn()
            ev.record()
        world.wait(events[-1])
        out = {name: events[i].elapsed_time(events[i + 1]) * 1e3
               for i, (name, _) in enumerate(steps)}  # fmt: skip
        out["layer"] = events[0].elapsed_time(events[-1]) * 1e3
        return out
    world.align()
    stamps = [time.perf_counter()]
    for _, fn in steps:
        fn()
        stamps.append(time.perf_counter())
    out = {name: (stamps[i + 1] - stamps[i]) * 1e6 for i, (name, _) in enumerate(steps)}
    out["layer"] = (stamps[-1] - stamps[0]) * 1e6
    return out


def _time(world, c: _Case, timed, stage_sets, s: Scenario, clock: Clock, progress) -> list[dict]:
    # Expert weight bytes each stage reads on this rank (the family's work model); the whole pass
    # (`layer`) reads what the local FFN reads, the exchanges read no weights.
    family = family_of(s)
    wbytes = {}
    for arm in timed:
        per_stage = dict(family.weight_bytes(arm_module(arm), c.problem))
        per_stage["layer"] = per_stage.get("ffn", 0)
        wbytes[arm] = per_stage
    m = s.measure
    samples: list[dict] = []
    if not timed:
        return samples
    use_graph = m.graph and clock.cuda
    ex = c.exchange
    passes, kernel = {}, {}
    for arm in timed:
        ws, stages = stage_sets[arm]
        if "ffn" in m.regimes:
            local = lambda st=stages: run_all(st)
            ffn = _capture(local) if use_graph else local
            passes[arm] = (("dispatch", ex.dispatch), ("ffn", ffn), ("sync_wait", ex.sync),
                           ("combine_a2a", lambda y=ws.y_TD: ex.combine(y)))  # fmt: skip
        if "kernel" in m.regimes:
            kernel[arm] = [(st.name, _capture(st.run) if use_graph else st.run)
                           for st in stages if st.name in m.stages]  # fmt: skip
    for _ in range(m.warmup):
        for arm in passes:
            _timed_pass(world, passes[arm])
    _settle(world)
    device = "cuda" if clock.cuda else "cpu"
    for block in range(m.blocks):
        k = block % len(timed)
        order = timed[k:] + timed[:k]  # ABC, BCA, CAB, ...
        telemetry = clock.telemetry()  # clocks, temperature, power: once a block
        for position, arm in enumerate(order):
            base = {**c.rank_cols, "arm": arm, "block": block, "position": position,
                    "device": device, "mode": "graph" if use_graph else "eager",
                    "weights": "warm", "weight_copies": 1, **telemetry}  # fmt: skip
            for it in range(m.iterations if arm in passes else 0):
                for stage, t in _timed_pass(world, passes[arm]).items():
                    samples.append({**base, "stage": stage, "regime": "ffn", "iteration": it,
                                    "time_us": t,
                                    "weight_bytes": wbytes[arm].get(stage, 0)})  # fmt: skip
            for name, call in kernel.get(arm, ()):
                for it in range(m.iterations):
                    t = clock.sample_us(call, flush_l2=m.flush_l2)
                    samples.append({**base, "stage": name, "regime": "kernel", "iteration": it,
                                    "time_us": t,
                                    "weight_bytes": wbytes[arm].get(name, 0)})  # fmt: skip
    for arm in timed:
        progress.step(f"{c.rank_cols['case_id']} {arm}")
    return samples


def _post_timing(world, c: _Case, timed, stage_sets, captures, outputs) -> list[tuple]:
    """After timing: the local FFN output and the whole layer's output are the gated ones."""
    out = []
    for arm in timed:
        ws, stages = stage_sets[arm]
        same = gates.bitwise_compare(ws.y_TD, captures[arm].y_TD)
        out.append(
            (
                arm,
                gates.Check(
                    name="post_timing",
                    status="pass" if same.equal else "fail",
                    detail=f"local FFN output after timing vs gated run: {same.describe()}",
                ),
            )
        )
        _settle(world, lambda ws=ws, stages=stages: _layer(c, ws, lambda: run_all(stages)))
        same = gates.bitwise_compare(c.exchange.y_TD, outputs[arm])
        out.append(
            (
                arm,
                gates.Check(
                    name="distributed_post_timing",
                    status="pass" if same.equal else "fail",
                    detail=f"layer output after timing vs gated run: {same.describe()}",
                ),
            )
        )
    return out
