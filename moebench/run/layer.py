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
   every rank.
4. after timing: each timed arm's output is bitwise its gated output (``post_timing``; a
   distributed case also reruns the whole layer, ``distributed_post_timing``), then every arm
   runs once more on fresh inputs written into the same tensors (``gates.fresh``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from moebench.gates.families import family_of, ledger_rows
from moebench.gates.fresh import fresh_input_gate
from moebench.gates.rank import gate_rank, post_timing
from moebench.measure.timed import time_layer
from moebench.plan.cases import PlannedCase, case_columns, routing_row, run_arms
from moebench.results.rows import CaseRows
from moebench.run.case import CaseContext


@dataclass(kw_only=True)
class LayerHeld:
    """One rank's layer while the case sequence works on it."""

    rank: int
    cols: dict  # the columns of every row of this rank
    problem: Any  # the family's Problem
    ref: torch.Tensor  # float32 [T, D]
    link: Any = None  # the topology's own record of this rank's layer (a distributed exchange)
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
        except Exception as exc:  # out of memory while building inputs: every arm's row
            self.topology.recover(out, cols, self.names, "inputs", exc)
            self.ctx.progress.step(f"{self.p.case.case_id} rank {rank} (inputs failed)",
                                   len(self.names))  # fmt: skip
            return None
        return LayerHeld(rank=rank, cols=cols, problem=problem, ref=ref, link=link)

    def gates(self, held: LayerHeld, out: CaseRows) -> list[str]:
        for name, arm in self.arms.items():  # the work ledger: from the routing, on the host
            out.ledger += ledger_rows(arm, name, held.problem, held.cols)
        held.stage_sets, held.captures, timed = gate_rank(
            held.problem, held.ref, self.arms, allow_mismatch=self.ctx.options.allow_mismatch,
            device=self.topology.device, stop=self.ctx.stop, out=out, rank_cols=held.cols,
            family=self.family,
        )  # fmt: skip
        return timed

    def end_to_end(self, held: LayerHeld, timed: list[str], out: CaseRows) -> list[str]:
        return self.topology.end_to_end(self.p, held, timed, self.arms, out)

    def time(self, held: LayerHeld, timed: list[str], out: CaseRows) -> list[str]:
        family = self.family
        weight_bytes = {}
        for a in timed:  # expert weight bytes each stage reads on this rank (the work model)
            weight_bytes[a] = family.weight_bytes(self.arms[a], held.problem)
        done, ran = time_layer(
            timed, held.stage_sets, self.scenario.measure, clock=self.ctx.clock, cols=held.cols,
            stop=self.ctx.stop, out=out, weight_bytes=weight_bytes,
            weight_fields=family.weight_fields, arms=self.arms,
            ffn_probe=self.topology.ffn_probe(held), capture=self.topology.capture,
            on_fail=self.topology.on_fail(out, held.cols, "timing"), blocks=self.blocks,
            warm_probes=self.topology.warm_probes,
        )  # fmt: skip
        if self.blocks is None and ran:
            self.blocks = ran
        return done

    def after_timing(self, held: LayerHeld, timed: list[str], out: CaseRows) -> None:
        for arm in timed:
            try:
                check = post_timing(held.stage_sets[arm][0].y_TD, held.captures[arm].y_TD,
                                    "the FFN output")  # fmt: skip
            except Exception as exc:
                self.topology.recover(out, held.cols, [arm], "post_timing", exc)
                continue
            out.add(held.cols, arm, check)
        self.topology.after_timing_layer(held, timed, out)
        s = self.scenario
        try:  # the same prepared arms on new inputs: a cached output cannot pass
            fresh = fresh_input_gate(held.problem, timed, held.stage_sets, self.family.reference,
                                     experts=s.model.experts, seed=s.routing.seed + 1)  # fmt: skip
        except Exception as exc:
            self.topology.recover(out, held.cols, timed, "fresh_input", exc)
            fresh = {}
        for arm, check in fresh.items():
            out.add(held.cols, arm, check)

    def finish(self, held: LayerHeld, timed: list[str], out: CaseRows) -> None:
        for arm in self.names:
            note = "" if arm in timed else " (not timed)"
            self.ctx.progress.step(f"{self.p.case.case_id} rank {held.rank} {arm}{note}")
        held.stage_sets.clear()
        held.captures.clear()
        self.topology.release()
