"""The ``step`` regime: a model step over every timed MoE layer (docs/DESIGN.md section 14).

A unit of the case sequence (``run.case``) is a token group (the steps that share a token count;
``plan.steps``), on every rank the topology holds. Per group:

1. Inputs. Each layer's expert weights are seeded per layer (``plan.steps.weight_seed``), so no
   layer finds the previous layer's weights in L2; the simulated ranks of a layer share one set,
   a distributed rank holds its own experts of every layer and the layers share its exchange
   (``Topology.step_inputs``). The routing of a layer is the group's first step's draw.
2. Gates, before anything is timed: the first group's first layer on the first rank through
   every gate of a one-layer case (``gates.rank.gate_rank``: graph replay and dispatch are
   properties of the arm's code, not of a layer), every other (rank, layer) through the layer
   gates (``gates.layers``: reference, poison, sentinels, cross-arm), kept as one row per
   (rank, arm, gate) with the worst layer named. A distributed case then gathers the first
   layer end to end on rank 0. An arm that fails a gate on any rank or layer is not timed in
   this or a later group (unless ``--allow-mismatch``). A staged arm's workspace is one per
   group, shared by every layer and rank, as a model's activation buffers are.
3. Steps: each step writes its own routing into the layers' tensors, then ``step.blocks`` blocks
   time every arm in the Williams order (``measure.sampling``), continuing one rotation across
   the steps. What a sample is belongs to the topology: per simulated rank the whole step (one
   graph of every layer) and each layer alone, L2 flushed before each; per distributed rank one
   pass of the whole step (dispatch, FFN, meeting point, combine per layer), no flush.
4. After the group's last step every layer of every rank runs once more as timed and is held to
   its reference for that step's routing (``post_timing``).

In simulated mode every layer's inputs are verified after each of an arm's calls: its gated
runs, its turns in a timing block, its run after timing (``gates.integrity``; the weights are
fingerprinted and restored from their seed, not copied). A distributed rank's layers share the
exchange's received rows, which every dispatch rewrites: there the gates verify nothing beyond
what a one-layer case does.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from moebench.arm import assemble
from moebench.arm.base import run_all
from moebench.core import faults
from moebench.core.vocabulary import WHOLE_FFN
from moebench.gates.checks import check_reference
from moebench.gates.families import FamilyRecord, family_of, ledger_rows
from moebench.gates.integrity import expects_output
from moebench.gates.layers import LayerGates, gate_layer
from moebench.gates.rank import gate_rank
from moebench.measure.sampling import Blocks, sample_blocks
from moebench.plan.cases import columns, run_arms
from moebench.plan.steps import PlannedStep, TokenGroup
from moebench.results.rows import CaseRows, Check
from moebench.routing.synthetic import local_counts, rank_statistics
from moebench.run.case import CaseContext
from moebench.run.layer import LayerHeld
from moebench.spec.schema import local_experts

# Gates of a one-layer case that stay per rank (the others join the per-layer record).
RANK_GATES = ("graph_replay", "dispatch", "memory")
LEDGER_SUMS = ("rows", "bytes_read", "bytes_written", "flops")


@dataclass(kw_only=True)
class StepHeld:
    """One token group while the case sequence works on it."""

    gi: int
    group: TokenGroup
    cols: dict
    links: dict[int, Any]  # layer -> the topology's record of that layer
    draws: dict[int, Any]  # layer -> the routing of the step being run
    problems: dict[tuple[int, int], Any] = field(default_factory=dict)  # (rank, layer)
    stages: dict[tuple[str, int, int], tuple] = field(default_factory=dict)  # (arm, rank, layer)
    workspaces: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    first: LayerHeld | None = None  # the layer that went through every gate (end to end)
    calls: dict[str, Any] = field(default_factory=dict)  # arm -> the topology's timed calls
    guards: dict[int, Any] = field(default_factory=dict)  # layer -> its InputGuard (simulated)


class Step:
    """The step regime of one planned case on ``topology`` (``run.case.CaseRegime``)."""

    def __init__(self, p: PlannedStep, topology, ctx: CaseContext):
        s = p.case.scenario
        self.p, self.topology, self.ctx = p, topology, ctx
        self.scenario = s
        self.arms = run_arms(s, ctx.options.aa)
        self.names = tuple(self.arms)
        self.family: FamilyRecord = family_of(s)
        self.timed = list(self.names)  # a later group does not time an arm that failed before
        self.weights: dict[int, dict] = {}  # layer -> its weight tensors, kept across groups
        self.ranks = topology.ranks(p)
        self._first_cols = self._group_cols(p.groups[0])

    def rows(self) -> CaseRows:
        return CaseRows()

    def units(self):
        for gi, group in enumerate(self.p.groups):
            if not self.timed:
                return
            yield gi, group

    def label(self, unit) -> str:
        return f"case {self.p.case.case_id} at {unit[1].tokens_per_rank} tokens per rank"

    def current_cols(self) -> dict:
        return self._first_cols

    def _group_cols(self, group: TokenGroup) -> dict:
        cols = columns(self.p.case, self.ctx.run_id, tokens_per_rank=group.tokens_per_rank,
                       capacity_rows=group.capacity_rows,
                       routing_label=self.p.router.label())  # fmt: skip
        return {**cols, "rank": self.ranks[0], "live_rows": 0}

    # ----------------------------------------------------------------- 1. inputs

    def inputs(self, unit, out: CaseRows) -> StepHeld | None:
        gi, group = unit
        cols = self._group_cols(group)
        check = lambda: self.ctx.stop.check("step inputs")  # noqa: E731
        try:
            links = self.topology.step_inputs(self.p, gi, group, self.family, self.weights, check)
        except faults.CaseTimeout:
            raise
        except Exception as exc:  # out of memory building a layer: every arm's row
            self.topology.recover(out, cols, self.names, "inputs", exc)
            self.timed = []
            return None
        T = group.tokens_per_rank * self.scenario.topology.dp
        draws = {layer: self.p.router.draw(group.steps[0], layer, T) for layer in self.p.layers}
        for r in self.ranks:
            for layer in self.p.layers:
                out.routing.append(self._routing_row(cols, draws[layer], r, layer, group))
        guards = self.topology.step_guards(self.p, group, links, self.family)
        return StepHeld(gi=gi, group=group, cols=cols, links=links, draws=draws, guards=guards)

    def _routing_row(self, cols, draw, rank: int, layer: int, group: TokenGroup) -> dict:
        s = self.scenario
        stats = rank_statistics(draw.topk_ids_TK, rank=rank, ep=s.topology.ep,
                                local_experts=local_experts(s),
                                capacity_rows=group.capacity_rows)  # fmt: skip
        return {"run_id": cols["run_id"], "case_id": cols["case_id"], "routing": draw.label,
                "tokens_per_rank": group.tokens_per_rank, "trace_sha256": draw.trace_sha256,
                "step": group.steps[0], "layer": layer, **stats}  # fmt: skip

    # ----------------------------------------------------------------- 2. gates

    def gates(self, held: StepHeld, out: CaseRows) -> list[str]:
        family, arms, opts = self.family, self.arms, self.ctx.options
        log = LayerGates()
        shared: dict = {}  # arm -> the group's workspace of a staged arm
        ledger: dict[tuple[str, int], list[dict]] = {}
        timed = list(self.timed)
        for r in self.ranks:
            rank_cols = {**held.cols, "rank": r}
            for li, layer in enumerate(self.p.layers):
                self.ctx.stop.check(f"rank {r}, layer {layer}, gates")
                problem = self.topology.step_problem(held.links[layer], r, layer)
                held.problems[(r, layer)] = problem
                ref = family.reference(problem)
                if held.gi == 0:  # the work ledger of one step: each stage summed over layers
                    for arm in timed:
                        ledger.setdefault((arm, r), []).extend(
                            ledger_rows(arms[arm], arm, problem, rank_cols)
                        )
                full = held.gi == 0 and li == 0 and r == self.ranks[0]
                guard = held.guards.get(layer)
                if full:
                    timed = self._full_gates(held, problem, ref, timed, rank_cols, layer, out, log,
                                             guard)  # fmt: skip
                sets = {}
                for arm in timed:
                    ws = group_workspace(family, arms[arm], problem, shared, arm)
                    try:
                        sets[arm] = (ws, assemble.build(arms[arm], ws))
                    except Exception as exc:
                        failed = Check(name="run", status="error", detail=faults.describe(exc))
                        log.add(r, layer, arm, [failed])
                if full:
                    for _ws, st in sets.values():  # warm the shared workspace's stages
                        run_all(st)
                else:
                    for arm, rows in gate_layer(problem, ref, arms, sets, family,
                                                self.topology.device, guard).items():  # fmt: skip
                        log.add(r, layer, arm, rows)
                for arm, (ws, st) in sets.items():
                    held.stages[(arm, r, layer)] = st
                    held.workspaces[(arm, r, layer)] = ws
                del ref
        for rows in ledger.values():
            out.ledger += sum_ledger(rows)
        for r, arm, check in log.rows(f"step {held.group.steps[0]}"):
            out.add({**held.cols, "rank": r}, arm, check)
        bad = set().union(*(log.failed(r) for r in self.ranks))
        return [a for a in timed if (opts.allow_mismatch or a not in bad)
                and all((a, r, la) in held.stages for r in self.ranks
                        for la in self.p.layers)]  # fmt: skip

    def _full_gates(self, held, problem, ref, timed, rank_cols, layer, out, log,
                    guard) -> list[str]:  # fmt: skip
        """Every gate of a one-layer case on the first layer: the rank gates as rows of their
        own, the others into the per-layer record. Returns the arms that passed."""
        scratch = CaseRows()
        sets, _, passed = gate_rank(
            problem, ref, {a: self.arms[a] for a in timed},
            allow_mismatch=self.ctx.options.allow_mismatch, device=self.topology.device,
            stop=self.ctx.stop, out=scratch, rank_cols=rank_cols, family=self.family, guard=guard,
        )  # fmt: skip
        for row in scratch.checks:
            if row["gate"].startswith(RANK_GATES):
                out.checks.append(row)
            else:
                log.add(rank_cols["rank"], layer, row["arm"], [Check(
                    name=row["gate"], status=row["status"], error=row["error"],
                    detail=row["detail"])])  # fmt: skip
        held.first = LayerHeld(rank=rank_cols["rank"], cols=rank_cols, problem=problem, ref=ref,
                               link=held.links[layer], stage_sets=sets)  # fmt: skip
        self.topology.release()
        return [a for a in timed if a in passed]

    def end_to_end(self, held: StepHeld, timed: list[str], out: CaseRows) -> list[str]:
        if held.first is not None:  # the first group's first layer: the topology's own gate
            timed = self.topology.step_end_to_end(held.first, timed, self.arms, out)
        held.first = None
        return timed

    # ----------------------------------------------------------------- 3. steps

    def time(self, held: StepHeld, timed: list[str], out: CaseRows) -> list[str]:
        s, p, topo = self.scenario, self.p, self.topology
        m = s.measure
        graph = {a: m.graph and self.ctx.clock.cuda and self.arms[a].graph for a in timed}
        on_fail = topo.on_fail(out, held.cols, "timing")
        calls = {}
        for arm in list(timed):
            try:
                calls[arm] = topo.step_calls(p, held.links, held.stages, held.workspaces, arm,
                                             graph[arm])  # fmt: skip
                self.ctx.stop.check("step graphs")
            except Exception as exc:
                timed.remove(arm)
                if on_fail is None:
                    raise
                on_fail(arm, exc)
        E = local_experts(s)
        blocks = s.step.blocks
        for si in held.group.steps:
            if si != held.group.steps[0]:  # the step's own routing, into the tensors graphs read
                held.draws = topo.step_routing(held.links, p, si, held.group)
                for guard in held.guards.values():  # the harness's own change
                    guard.accept(["topk_ids_TK", "topk_weights_TK"])
            live, wbytes = {}, {a: {} for a in timed}
            for layer in p.layers:
                ids = held.draws[layer].topk_ids_TK
                for r in self.ranks:
                    live[(r, layer)] = int(local_counts(ids, r * E, E).sum())
                    problem = topo.step_problem(held.links[layer], r, layer)  # an untimed dispatch
                    for a in timed:  # the weight bytes of the experts this step routes rows to
                        wbytes[a][(r, layer)] = self.family.weight_bytes(
                            self.arms[a], problem).get(WHOLE_FFN, 0)  # fmt: skip
            probes = {a: topo.step_probes(a, p, calls[a], live, wbytes[a]) for a in timed}
            if si == held.group.steps[0] and topo.warm_probes:
                for _ in range(m.warmup):
                    for a in timed:
                        for probe in probes[a]:
                            probe.measure()
            timed, _ = sample_blocks(
                timed, probes, blocks=Blocks(count=blocks, first=si * blocks),
                after_turn=self._after_turn(held, out) if held.guards else None,
                iterations=m.iterations, clock=self.ctx.clock,
                cols={**held.cols, "step": si, "weights": "cold",
                      "weight_copies": len(p.layers)},
                arm_cols={a: {"mode": "graph" if graph[a] else "eager"} for a in timed},
                out=out.samples, stop=self.ctx.stop, where=f"step {si}", on_fail=on_fail,
            )  # fmt: skip
            self.ctx.progress.step(f"{p.case.case_id} step {si + 1}/{len(p.tokens)}")
        held.calls = calls
        return timed

    def _after_turn(self, held: StepHeld, out: CaseRows):
        """After an arm's turn in a block: every layer's inputs verified (its failing row, the
        inputs restored, and the arm leaves the rotation when one changed)."""

        def check(arm: str, block: int) -> bool:
            changed = [c for layer, g in held.guards.items()
                       if (c := g.check(arm, f"its timed samples of block {block}, layer {layer}"))
                       is not None]  # fmt: skip
            for c in changed:
                out.add(held.cols, arm, c)
            return not changed

        return check

    # ----------------------------------------------------------------- 4. after timing

    def after_timing(self, held: StepHeld, timed: list[str], out: CaseRows) -> None:
        log = LayerGates()
        precision = self.scenario.precision
        for r in self.ranks:
            for layer in self.p.layers:
                # The rows this rank's layer receives (a distributed rank dispatches them), and
                # their reference from inputs no arm has run on since they were verified.
                problem = self.topology.step_problem(held.links[layer], r, layer)
                ref = self.family.reference(problem)
                expect = expects_output(problem)
                guard = held.guards.get(layer)
                for arm in timed:
                    try:
                        self.topology.run_as_timed(held.calls[arm], r, layer)
                        check = check_reference(held.workspaces[(arm, r, layer)].y_TD, ref,
                                                precision, expect_output=expect)  # fmt: skip
                    except Exception as exc:
                        self.topology.recover(out, {**held.cols, "rank": r}, [arm],
                                              "post_timing", exc)  # fmt: skip
                        continue
                    checks = [dataclasses.replace(check, name="post_timing")]
                    changed = guard.check(arm, "its run after timing") if guard else None
                    log.add(r, layer, arm, checks + ([changed] if changed else []))
        for r, arm, check in log.rows(f"step {held.group.steps[-1]}, after timing"):
            out.add({**held.cols, "rank": r}, arm, check)

    def finish(self, held: StepHeld, timed: list[str], out: CaseRows) -> None:
        self.timed = timed
        held.stages.clear()
        held.workspaces.clear()
        self.topology.release()


def group_workspace(family: FamilyRecord, arm, problem, shared: dict, name: str):
    """The group's workspace of a staged arm over ``problem`` (its buffers shared by every layer
    and rank); a whole-FFN arm's own per (rank, layer)."""
    if not arm.staged:
        return family.workspace(arm, problem)
    if name not in shared:
        shared[name] = family.workspace(arm, problem)
    ws = copy.copy(shared[name])
    ws.problem = problem
    return ws


def sum_ledger(rows: list[dict]) -> list[dict]:
    """One step's ledger rows of an arm on a rank: every stage's work summed over the layers."""
    total: dict[str, dict] = {}
    for row in rows:
        got = total.setdefault(row["stage"], {**row, **dict.fromkeys(LEDGER_SUMS, 0)})
        for k in LEDGER_SUMS:
            got[k] += row[k]
    return list(total.values())
