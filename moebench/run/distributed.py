"""The case loop of `topology.mode: distributed`: one process per rank (see moebench.comm.world).

The run opens, resumes and ends through ``run.lifecycle``, as a simulated run does (rank 0
writes). Per case, every rank goes through the same phases; at the end of each the ranks agree
(``comm.world.phase``), so an error on one rank stops all of them at the same point and rank 0
records it in the manifest:

1. inputs: the global routing and tokens from the seed (identical on every rank), this rank's
   tokens and its experts' weights, the exchange buffers.
2. one dispatch, then ``gates.rank.gate_rank`` on the rows this rank received: each arm's local
   FFN against the reference of those rows, poison, sentinels, cross-arm (the simulated gates).
   An arm that raises is an ``error`` row, as in simulated mode.
3. the arms to time are those that every rank may time.
4. the end-to-end gate: each of them runs the whole layer once (dispatch, FFN, meeting point,
   combine); rank 0 gathers every rank's output and checks it (``gates.distributed``). An arm that
   fails is not timed (unless --allow-mismatch).
5. timing (``measure.passes``), blocks with the arms in rotating order. Regime ``ffn``:
   ``iterations`` passes of the layer per arm, each pass timed stage by stage on every rank:
   ``dispatch``, ``ffn`` (the arm's five stages; one CUDA graph on the GPU, the same figure as in
   simulated mode), ``sync_wait``, ``combine_a2a`` (return all-to-all and the weighted sum of each
   token's slots) and ``layer`` (the whole pass). Regime ``kernel``: the arm's local stages alone.
6. each arm's layer output after timing must be bitwise its gated output; rank 0 gathers every
   rank's samples, checks and routing rows (outside any timed region) and writes the case.
"""

from __future__ import annotations

import signal

import torch

from moebench.arm import assemble
from moebench.arm.base import run_all
from moebench.comm import world as distributed
from moebench.comm.world import RankFailure, World, phase
from moebench.core import faults
from moebench.core.errors import ScenarioError
from moebench.core.numerics import bitwise_compare
from moebench.gates.distributed import check_layer
from moebench.gates.families import family_of, ledger_rows
from moebench.gates.fresh import fresh_input_gate
from moebench.gates.rank import gate_rank, post_timing
from moebench.measure.clock import Clock
from moebench.measure.graphs import capture_replay
from moebench.measure.passes import sample_passes
from moebench.plan.cases import PlannedCase, arm_names, plan, run_arms, select_device
from moebench.results.rows import CaseRows, Check
from moebench.run import distributed_step, lifecycle
from moebench.run.options import Progress, RunOptions, RunSummary, resume_command
from moebench.run.rank_layer import LayerCase, layer_inputs, layer_outputs, run_layer, settle
from moebench.spec.schema import Scenario


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


def _run(world: World, s: Scenario, options: RunOptions, progress: Progress) -> RunSummary:
    def prepare():
        ranks = s.measure.ranks
        if ranks is not None and sorted(ranks) != list(range(s.topology.ep)):
            raise ScenarioError(f"{s.path or s.name}: measure.ranks: distributed mode runs every "
                                f"rank; leave it out (got {list(ranks)})")  # fmt: skip
        sources, drift = lifecycle.sources_and_pins(s, options)
        if s.step is not None:  # the model step: every case every MoE layer (run.distributed_step)
            return sources, drift, distributed_step.plan(s, len(names), world.device)
        return sources, drift, plan(s)

    names = arm_names(s, options.aa)
    sources, drift, planned = phase(world, "while planning the run", prepare)
    extra = {"distributed": {"world_size": world.size, "backend": world.backend,
                             "timeout_s": world.timeout_s, "dp": s.topology.dp,
                             "tp": s.topology.tp, "ep": s.topology.ep}}  # fmt: skip
    if s.step is not None:
        extra["step"] = distributed_step.manifest(s, planned)
    run_one = distributed_step.run_step_case if s.step is not None else run_case
    writer = phase(world, "opening the results folder", lambda: (
        lifecycle.open_run(s, options, planned, sources, drift, world.device.type, extra)
        if world.leader else None
    ))  # fmt: skip
    summary, done = distributed.broadcast(world, (
        (lifecycle.new_summary(writer, planned), sorted(writer.finished_cases))
        if world.leader else None
    ))  # fmt: skip
    todo = [p for p in planned if p.case.case_id not in done]
    progress.start(len(todo) * (s.step.steps if s.step is not None else len(names)))
    clock = Clock(world.device)
    resume = resume_command(s, options, summary.run_dir, world.size)
    try:
        for p in todo:
            rows = run_one(world, p, clock, summary.run_id, options, progress)
            if world.device.type == "cuda":
                torch.cuda.empty_cache()  # the case's buffers went with run_case
            phase(world, f"writing case {p.case.case_id}",
                  lambda p=p, rows=rows: writer.write_case(
                      p.case.case_id, rows.samples, rows.checks, rows.routing, rows.ledger)
                  if world.leader else None)  # fmt: skip
            if world.leader:
                lifecycle.tally(summary, p.case.case_id, rows)
            else:
                summary.cases_run += 1
    except KeyboardInterrupt:
        lifecycle.finish_stopped(writer, summary, "interrupted", resume=resume)
        raise
    except RankFailure as exc:
        lifecycle.finish_stopped(writer, summary, "failed", error=exc.message, resume=resume,
                                 failed_ranks=[{"rank": r, "kind": k, "error": m}
                                               for r, k, m in exc.failures])  # fmt: skip
        raise
    except BaseException as exc:
        lifecycle.finish_stopped(writer, summary, "failed",
                                 error=f"rank 0: {distributed.describe(exc)}",
                                 resume=resume)  # fmt: skip
        raise
    summary.warnings += clock.warnings()
    lifecycle.finish(writer, summary)
    # Every rank exits with the run's code: rank 0's verdict goes to all of them.
    verdict = distributed.broadcast(world, (summary.status, summary.mismatches, summary.errors))
    summary.status, summary.mismatches, summary.errors = verdict
    return summary


# --------------------------------------------------------------------------- one case


def run_case(
    world: World,
    p: PlannedCase,
    clock: Clock,
    run_id: str,
    options: RunOptions,
    progress: Progress,
) -> CaseRows | None:
    """The phases of one case (module docstring); the case's rows on rank 0, None elsewhere."""
    s = p.case.scenario
    cid = p.case.case_id
    arms = run_arms(s, options.aa)
    names = tuple(arms)
    c = phase(world, f"building the inputs of case {cid}", lambda: layer_inputs(world, p, run_id))
    phase(world, f"in the first dispatch of case {cid}",
          lambda: settle(world, c.exchange.dispatch))  # fmt: skip
    out = CaseRows()
    timed, stage_sets, captures = phase(
        world, f"in the gates of case {cid}", lambda: _gates(world, c, s, options, arms, out)
    )
    everywhere = distributed.all_gather(world, timed)
    layer_arms = [a for a in names if all(a in t for t in everywhere)]
    outputs = phase(world, f"in the end-to-end run of case {cid}",
                    lambda: layer_outputs(world, c, layer_arms, stage_sets))  # fmt: skip
    gathered = distributed.gather(world, {a: y.cpu() for a, y in outputs.items()})
    ranges = [distributed.token_range(s, r) for r in range(world.size)]
    layer_checks = phase(
        world,
        f"checking the gathered outputs of case {cid}",
        lambda: check_layer(p, c.x_all, gathered, ranges, c.rank_cols, world.device,
                            {a for a, arm in arms.items() if arm.staged})
        if world.leader else None,
    )  # fmt: skip
    failed = distributed.broadcast(world, sorted({
        r["arm"] for r in layer_checks if r["status"] not in ("pass", "skip")
    }) if world.leader else None)  # fmt: skip
    timed = [a for a in layer_arms if options.allow_mismatch or a not in failed]
    samples = phase(
        world, f"timing case {cid}", lambda: _time(world, c, timed, stage_sets, s, clock, arms)
    )
    phase(
        world,
        f"in the check after timing case {cid}",
        lambda: _post_timing(world, c, s, timed, stage_sets, captures, outputs, out),
    )
    for arm in names:
        progress.step(f"{cid} {arm}" + ("" if arm in timed else " (not timed)"))
    ledger = [row for name, arm in arms.items()
              for row in ledger_rows(arm, name, c.problem, c.rank_cols)]  # fmt: skip
    parts = distributed.gather(world, (samples, out.checks, c.routing_row, ledger))
    if not world.leader:
        return None
    return CaseRows(
        samples=[row for part in parts for row in part[0]],
        checks=[row for part in parts for row in part[1]] + layer_checks,
        routing=[part[2] for part in parts],
        ledger=[row for part in parts for row in part[3]],
    )


def _gates(world: World, c: LayerCase, s: Scenario, options: RunOptions, arms, out: CaseRows):
    """The simulated runner's gates on this rank's received rows, rows into ``out``; returns
    (arms to time, workspaces and stages, captures). A gate failure or an arm that raises is a
    row, as in simulated mode."""
    family = family_of(s)
    stage_sets, captures, timed = gate_rank(
        c.problem, family.reference(c.problem), arms, allow_mismatch=options.allow_mismatch,
        device=world.device, stop=faults.Stopper(), out=out, rank_cols=c.rank_cols, family=family,
    )  # fmt: skip
    return timed, stage_sets, captures


def _time(world, c: LayerCase, timed, stage_sets, s: Scenario, clock: Clock, arms) -> list[dict]:
    """The samples of this rank: the layer's passes and the local stages of every timed arm."""
    # Expert weight bytes each stage reads on this rank (the family's work model); the whole pass
    # (`layer`) reads what the local FFN reads, the exchanges read no weights.
    family = family_of(s)
    wbytes = {}
    for arm in timed:
        per_stage = family.weight_bytes(arms[arm], c.problem)
        per_stage["layer"] = per_stage.get("ffn", 0)
        wbytes[arm] = per_stage
    m = s.measure
    use_graph = m.graph and clock.cuda and all(arms[a].graph for a in timed)
    # NCCL's watchdog thread queries events while this thread captures: thread-local capture.
    capture = (lambda fn: capture_replay(fn, thread_local=True)) if use_graph else (lambda fn: fn)
    ex = c.exchange
    passes, kernel = {}, {}
    for arm in timed:
        ws, stages = stage_sets[arm]
        if "ffn" in m.regimes:
            ffn = capture(lambda st=stages: run_all(st))
            passes[arm] = (("dispatch", ex.dispatch), ("ffn", ffn), ("sync_wait", ex.sync),
                           ("combine_a2a", lambda y=ws.y_TD: ex.combine(y)))  # fmt: skip
        if "kernel" in m.regimes:
            kernel[arm] = [(st.name, capture(st.run))
                           for st in assemble.kernel_stages(arms[arm], ws, stages)
                           if st.name in m.stages]  # fmt: skip
    return sample_passes(
        timed, passes, kernel, blocks=m.blocks, iterations=m.iterations, warmup=m.warmup,
        flush_l2=m.flush_l2, graph=use_graph, clock=clock, rank_cols=c.rank_cols,
        weight_bytes=wbytes, align=world.align,
        wait=world.wait if world.device.type == "cuda" else None,
        spin_cycles=distributed.SPIN_CYCLES, settle=lambda: settle(world),
    )  # fmt: skip


def _post_timing(world, c: LayerCase, s: Scenario, timed, stage_sets, captures, outputs,
                 out: CaseRows) -> None:  # fmt: skip
    """After timing: the local FFN output and the whole layer's output are the gated ones; then
    every arm's local FFN on fresh received rows (``gates.fresh``)."""
    for arm in timed:
        ws, stages = stage_sets[arm]
        out.add(c.rank_cols, arm, post_timing(ws.y_TD, captures[arm].y_TD, "local FFN output"))
        settle(world, lambda ws=ws, stages=stages: run_layer(c, ws, lambda: run_all(stages)))
        same = bitwise_compare(c.exchange.y_TD, outputs[arm])
        out.add(c.rank_cols, arm, Check(
            name="distributed_post_timing", status="pass" if same.equal else "fail",
            detail=f"layer output after timing vs gated run: {same.describe()}",
        ))  # fmt: skip
    fresh = fresh_input_gate(c.problem, timed, stage_sets, family_of(s).reference,
                             experts=s.model.experts, seed=s.routing.seed + 1)  # fmt: skip
    for arm, check in fresh.items():
        out.add(c.rank_cols, arm, check)
