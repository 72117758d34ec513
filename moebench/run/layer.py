"""The one-layer regimes (``ffn``, ``kernel``, ``profile``): each rank's FFN of one MoE layer.

A unit of the case sequence (``run.case``) is one rank: the ranks of a simulated case one after
another, in a distributed case this process's rank. Per rank:

1. inputs: the rank's problem (its experts' weights, the tokens routed to them; in a distributed
   case the rows this rank received from the first dispatch) and its float32 reference. When
   they cannot be built (out of memory), every arm of the rank gets an ``inputs`` error row.
2. gates (``gates.rank.gate_rank``): each arm on poisoned buffers, the family's gates, memory,
   graph replay and dispatch on the GPU, then the cross-arm gate; the work ledger from the
   routing. The topology's whole-layer gate follows (a distributed case gathers every arm's
   whole layer on rank 0 and checks it end to end).
3. timing (``measure.timed.time_layer``): warm-up, graphs, blocks of samples in the Williams
   order. The later ranks of a case run the first rank's block count, so that every block has
   every rank. In simulated mode the ffn samples rotate through ``measure.input_sets`` input
   sets, each timed output held to its set's reference (``timed_outputs``).
4. after timing: a staged arm's output is bitwise its gated output, a whole-FFN arm's within
   the reference's tolerance, with whether it was bitwise the same recorded beside it
   (``deterministic``, status ``info``) (``post_timing``; a distributed case also reruns the
   whole layer, ``distributed_post_timing``); then every arm runs once more on fresh inputs
   written into the same tensors (``gates.fresh``).

Every arm's inputs are verified after each of its calls (``gates.integrity``): a change is that
arm's ``inputs_unchanged`` failure, undone before another arm runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from moebench.arm.base import run_all
from moebench.core.ceilings import bound_for_gpu, for_gpu
from moebench.core.numerics import bitwise_compare
from moebench.core.vocabulary import WHOLE_FFN, Regime
from moebench.gates.checks import check_reference, reference_pending
from moebench.gates.families import family_of, ledger_rows
from moebench.gates.fresh import fresh_input_gate, fresh_inputs
from moebench.gates.integrity import (
    InputGuard,
    expects_output,
    floor_bytes,
    host_clock,
    physical_floor,
)
from moebench.gates.rank import gate_rank, post_timing
from moebench.measure.timed import Integrity, time_layer
from moebench.plan.cases import PlannedCase, case_columns, routing_row, run_arms
from moebench.results.rows import CaseRows, Check
from moebench.run.case import CaseContext

HOST_CHECK_CALLS = 5  # an eager arm's calls timed by events and by the host clock, each


@dataclass(kw_only=True)
class LayerHeld:
    """One rank's layer while the case sequence works on it."""

    rank: int
    cols: dict  # the columns of every row of this rank
    problem: Any  # the family's Problem
    ref: torch.Tensor  # float32 [T, D]
    link: Any = None  # the topology's own record of this rank's layer (a distributed exchange)
    guard: InputGuard | None = None  # the rank's inputs as built, verified after every call
    stage_sets: dict = field(default_factory=dict)  # arm -> (workspace, stages)
    captures: dict = field(default_factory=dict)  # arm -> what the gates compared
    outputs: dict = field(default_factory=dict)  # arm -> its whole layer's output (distributed)


class OneLayer:
    """The one-layer regime of one planned case on ``topology`` (``run.case.CaseRegime``)."""

    def __init__(self, p: PlannedCase, topology, ctx: CaseContext):
        s = p.case.scenario
        self.p, self.topology, self.ctx = p, topology, ctx
        self.scenario = s
        self.arms = run_arms(s, ctx.options.aa)
        self.names = tuple(self.arms)
        self.family = family_of(s)
        self.blocks: int | None = None  # the first rank's block count, which later ranks run
        self._routing = {r: routing_row(p, ctx.run_id, r) for r in topology.ranks(p)}
        first = next(iter(self._routing))
        self._cols = self._rank_cols(first)

    def rows(self) -> CaseRows:
        """The case's rows to fill: its routing rows first, written whatever else fails."""
        return CaseRows(routing=list(self._routing.values()))

    def units(self) -> tuple[int, ...]:
        return tuple(self._routing)

    def label(self, rank: int) -> str:
        # A distributed rank holds one rank: its phases are named alike on every rank.
        where = f"case {self.p.case.case_id}"
        return where if len(self._routing) == 1 else f"{where} rank {rank}"

    def current_cols(self) -> dict:
        return self._cols

    def _rank_cols(self, rank: int) -> dict:
        live = self._routing[rank]["live_rows"]
        return {**case_columns(self.p, self.ctx.run_id), "rank": rank, "live_rows": live}

    def inputs(self, rank: int, out: CaseRows) -> LayerHeld | None:
        cols = self._cols = self._rank_cols(rank)
        try:
            problem, link = self.topology.layer_inputs(self.p, rank)
            ref = self.family.reference(problem)
            guard = InputGuard(problem)
        except Exception as exc:  # out of memory while building inputs: every arm's row
            self.topology.recover(out, cols, self.names, "inputs", exc)
            self.ctx.progress.step(f"{self.p.case.case_id} rank {rank} (inputs failed)",
                                   len(self.names))  # fmt: skip
            return None
        return LayerHeld(rank=rank, cols=cols, problem=problem, ref=ref, link=link, guard=guard)

    def gates(self, held: LayerHeld, out: CaseRows) -> list[str]:
        for name, arm in self.arms.items():  # the work ledger: from the routing, on the host
            out.ledger += ledger_rows(arm, name, held.problem, held.cols)
        held.stage_sets, held.captures, timed = gate_rank(
            held.problem, held.ref, self.arms, allow_mismatch=self.ctx.options.allow_mismatch,
            device=self.topology.device, stop=self.ctx.stop, out=out, rank_cols=held.cols,
            family=self.family, guard=held.guard,
        )  # fmt: skip
        return timed

    def end_to_end(self, held: LayerHeld, timed: list[str], out: CaseRows) -> list[str]:
        return self.topology.end_to_end(self.p, held, timed, self.arms, out)

    def time(self, held: LayerHeld, timed: list[str], out: CaseRows) -> list[str]:
        family = self.family
        first = len(out.samples)
        weight_bytes = {}
        for a in timed:  # expert weight bytes each stage reads on this rank (the work model)
            weight_bytes[a] = family.weight_bytes(self.arms[a], held.problem)
        done, ran = time_layer(
            timed, held.stage_sets, self.scenario.measure, clock=self.ctx.clock, cols=held.cols,
            stop=self.ctx.stop, out=out, weight_bytes=weight_bytes,
            weight_fields=family.weight_fields, arms=self.arms,
            ffn_probe=self.topology.ffn_probe(held), capture=self.topology.capture,
            on_fail=self.topology.on_fail(out, held.cols, "timing"), blocks=self.blocks,
            warm_probes=self.topology.warm_probes, integrity=self._integrity(held),
        )  # fmt: skip
        if self.blocks is None and ran:
            self.blocks = ran
        if self.ctx.clock.cuda and self.topology.rotates_inputs:
            self._device_checks(held, done, out.samples[first:], out)
        return done

    def _device_checks(self, held: LayerHeld, done: list[str], mine: list[dict], out) -> None:
        """On the GPU: no ffn sample below the problem's physical floor (``physical_floor``), and
        an eager arm's events against a synchronised host clock (``host_clock``)."""
        clock, m = self.ctx.clock, self.scenario.measure
        gpu = torch.cuda.get_device_name(clock.device)
        ceil = bound_for_gpu(gpu)  # its own, or a faster measured GPU's (a looser bound)
        if ceil is not None and Regime.FFN in m.regimes:
            moved = floor_bytes(held.problem, self.family.weight_fields)
            floor = max(moved - ceil.l2_bytes, 0) / (ceil.copy_tbs * 1e6)
            whose = "" if for_gpu(gpu) else f", which bounds the {gpu}'s from above"
            how = (f"{moved / 1e6:.2f} MB that must move, less the {ceil.l2_bytes / 2**20:.0f} "
                   f"MiB a warm replay may find in L2, at the {ceil.name}'s "
                   f"{ceil.copy_tbs} TB/s copy ceiling{whose}")  # fmt: skip
            for arm in done:
                ffn = [s for s in mine if s["arm"] == arm and s["regime"] == Regime.FFN
                       and s["stage"] == WHOLE_FFN]  # fmt: skip
                if ffn:
                    out.add(held.cols, arm, physical_floor(ffn, floor, how))
        for arm in done:
            if m.graph and self.arms[arm].graph:
                continue
            stages = held.stage_sets[arm][1]
            call = lambda st=stages: run_all(st)  # noqa: E731
            events = [clock.sample_us(call) for _ in range(HOST_CHECK_CALLS)]
            host = [clock.host_us(call) for _ in range(HOST_CHECK_CALLS)]
            out.add(held.cols, arm, host_clock(events, host))
            changed = held.guard.check(arm, "its host-clock calls")
            if changed is not None:
                out.add(held.cols, arm, changed)

    def _integrity(self, held: LayerHeld) -> Integrity | None:
        """The input sets the ffn samples rotate through and their references (simulated
        mode: a distributed rank cannot drop an arm on its own mid-timing, so its inputs are
        verified at the gates and after timing only)."""
        if not self.topology.rotates_inputs:
            return None
        s, problem, guard = self.scenario, held.problem, held.guard
        for i in range(1, s.measure.input_sets):
            values, _ = fresh_inputs(problem, experts=s.model.experts,
                                     seed=s.routing.seed + 100 + i, keep_counts=True)  # fmt: skip
            guard.add_set(values)
        refs, expect = [held.ref], [expects_output(problem)]
        for i in range(1, guard.sets):
            guard.load(i)
            refs.append(self.family.reference(problem))
            expect.append(expects_output(problem))
        guard.load(0)
        T = problem.topk_ids_TK.shape[0]
        order = torch.Generator().manual_seed(s.routing.seed + 7919 * (held.rank + 1))

        def load(k: int):
            """Sample k: input set k mod sets, its token rows in a fresh random order."""
            rows = torch.randperm(T, generator=order).to(problem.topk_ids_TK.device)  # seeded
            i = k % guard.sets
            guard.load(i, rows)
            return i, rows

        def check_output(loaded, y_TD: torch.Tensor) -> Callable[[], str | None]:
            i, rows = loaded
            ref = refs[i][rows.to(refs[i].device)]  # the same device: no copy
            verdict = reference_pending(y_TD, ref, problem.precision, expect_output=expect[i])

            def why() -> str | None:
                c = verdict()
                return None if c.status == "pass" else c.detail

            return why

        return Integrity(sets=guard.sets, load=load, check_output=check_output,
                         reset=lambda: guard.load(0), verify=guard.check)  # fmt: skip

    def after_timing(self, held: LayerHeld, timed: list[str], out: CaseRows) -> None:
        for arm in timed:
            try:
                out.add(held.cols, arm, self._post_timing(held, arm))
            except Exception as exc:
                self.topology.recover(out, held.cols, [arm], "post_timing", exc)
                continue
            if not self.arms[arm].staged:
                same = bitwise_compare(held.stage_sets[arm][0].y_TD, held.captures[arm].y_TD)
                out.add(held.cols, arm, Check(
                    name="deterministic", status="pass" if same.equal else "info",
                    detail="bitwise the gated output after timing" if same.equal else
                    f"not bitwise deterministic across calls ({same.describe()}): a fact, not "
                    "a failure; its outputs are held to the reference's tolerance",
                ))  # fmt: skip
        self.topology.after_timing_layer(held, timed, out)
        s = self.scenario
        try:  # the same prepared arms on new inputs: a cached output cannot pass
            fresh = fresh_input_gate(held.problem, timed, held.stage_sets, self.family.reference,
                                     experts=s.model.experts, seed=s.routing.seed + 1,
                                     guard=held.guard)  # fmt: skip
        except Exception as exc:
            self.topology.recover(out, held.cols, timed, "fresh_input", exc)
            fresh = {}
        for arm, checks in fresh.items():
            for check in checks:
                out.add(held.cols, arm, check)

    def _post_timing(self, held: LayerHeld, arm: str) -> Check:
        """A staged arm's output after timing is bitwise its gated output (moebench's workspace
        and numerics); a whole-FFN arm's is held to the reference's tolerance (its summation
        order may vary between calls; whether it does is the ``deterministic`` row)."""
        y = held.stage_sets[arm][0].y_TD
        if self.arms[arm].staged:
            return post_timing(y, held.captures[arm].y_TD, "the FFN output")
        c = check_reference(y, held.ref, held.problem.precision,
                            expect_output=expects_output(held.problem))  # fmt: skip
        return Check(
            name="post_timing",
            status=c.status,
            error=c.error,
            detail=f"the FFN output after timing vs the reference: {c.detail}",
        )

    def finish(self, held: LayerHeld, timed: list[str], out: CaseRows) -> None:
        for arm in self.names:
            note = "" if arm in timed else " (not timed)"
            self.ctx.progress.step(f"{self.p.case.case_id} rank {held.rank} {arm}{note}")
        held.stage_sets.clear()
        held.captures.clear()
        self.topology.release()
