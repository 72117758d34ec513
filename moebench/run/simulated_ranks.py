"""The simulated topology: every rank of a case in this process, on one device, one after another.

What the regimes (``run.layer``, ``run.step``) ask of a topology, for ranks that share a process:
a phase is a plain call (nobody to agree with), every arm that passed here may be timed, there is
no whole-layer gate beyond the rank's own, an arm's failure becomes its ``error`` row and the
others go on, and a timed call is timed by the clock (the ``ffn`` graph; a model step's graphs
with L2 flushed before each sample, since no layer finds its weights in L2 in a real model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from moebench.arm.base import run_all
from moebench.core import faults
from moebench.core.vocabulary import WHOLE_FFN, WHOLE_STEP, Regime
from moebench.gates.families import family_of
from moebench.gates.integrity import InputGuard
from moebench.measure.clock import Clock
from moebench.measure.sampling import Probe, clock_probe
from moebench.measure.timed import ffn_clock_probe
from moebench.plan.cases import PlannedCase
from moebench.plan.inputs import make_tokens
from moebench.plan.steps import layer_scenario
from moebench.results.rows import CaseRows, record_failure
from moebench.spec.schema import global_tokens


class SimulatedRanks:
    """Every rank in this process (module docstring)."""

    leader = True
    warm_probes = False  # the eager warm-up before capture is enough: no collectives to warm
    rotates_inputs = True  # the ffn samples rotate input sets (measure.input_sets)

    def __init__(self, device: torch.device, clock: Clock):
        self.device = device
        self.clock = clock
        self._tokens: tuple[str, torch.Tensor] | None = None  # (case id, its global tokens)

    # ----------------------------------------------------------------- the case sequence's

    def ranks(self, p: PlannedCase) -> tuple[int, ...]:
        return p.ranks

    def phase(self, what: str, fn: Callable[[], Any]) -> Any:
        return fn()

    def agree(self, arms: list[str]) -> list[str]:
        return arms

    def collect(self, out: CaseRows) -> CaseRows:
        self._tokens = None
        return out

    def release(self) -> None:
        faults.release(self.device)

    def recover(self, out: CaseRows, cols: dict, arms, gate: str, exc: Exception) -> None:
        """An arm's failure is its ``error`` row; the others go on (DeviceLost when the CUDA
        context is gone)."""
        record_failure(out, cols, list(arms), gate, exc, self.device)
        if gate == "inputs":
            faults.release(self.device)

    def on_fail(self, out: CaseRows, cols: dict, gate: str) -> Callable[[str, Exception], None]:
        return lambda arm, exc: self.recover(out, cols, [arm], gate, exc)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        return self.clock.capture(fn)

    # ----------------------------------------------------------------- one layer

    def layer_inputs(self, p: PlannedCase, rank: int):
        """(the rank's problem, None): the tokens are the case's global tokens, built once."""
        s = p.case.scenario
        if self._tokens is None or self._tokens[0] != p.case.case_id:
            x = make_tokens(tokens=global_tokens(s), hidden=s.model.hidden, seed=s.routing.seed,
                            device=self.device)  # fmt: skip
            self._tokens = (p.case.case_id, x)
        problem = family_of(s).problem(s, p.routing, p.capacity_rows, self._tokens[1], rank,
                                       self.device)  # fmt: skip
        return problem, None

    def end_to_end(self, p, held, timed: list[str], arms, out: CaseRows) -> list[str]:
        return timed

    def ffn_probe(self, held):
        return ffn_clock_probe(self.clock)

    def after_timing_layer(self, held, timed: list[str], out: CaseRows) -> None:
        pass

    # ----------------------------------------------------------------- a model step

    def step_inputs(self, p, gi: int, group, family, weights: dict, check) -> dict:
        """{layer: its problem on the first rank} of a token group: the group's tokens, each
        layer's own weights (``weights``: built once per layer for the run and kept there), the
        group's first step's routing. The other ranks share these tensors (every simulated rank
        sees every token and each layer's one weight set)."""
        s = p.case.scenario
        T = group.tokens_per_rank * s.topology.dp
        x = make_tokens(tokens=T, hidden=s.model.hidden, seed=s.routing.seed + 7 * gi,
                        device=self.device)  # fmt: skip
        out = {}
        for layer in p.layers:
            draw = p.router.draw(group.steps[0], layer, T)
            built = family.problem(layer_scenario(s, layer), draw, group.capacity_rows, x, 0,
                                   self.device)  # fmt: skip
            if layer in weights:  # built in an earlier group: one copy of the layer's weights
                built = dataclasses.replace(built, **weights[layer])
            else:
                weights[layer] = {f: getattr(built, f) for f in family.weight_fields}
            out[layer] = built
            check()
        return out

    def step_end_to_end(self, first, timed: list[str], arms, out: CaseRows) -> list[str]:
        return timed

    def step_guards(self, p, group, links: dict, family) -> dict:
        """{layer: its InputGuard}: tokens and routing copied to the host, the weights
        fingerprinted and, when an arm changed them, made again from the layer's seed."""
        s = p.case.scenario
        out = {}
        for layer, problem in links.items():

            def rebuild(layer=layer):
                x = make_tokens(tokens=1, hidden=s.model.hidden, seed=0, device=self.device)
                return family.problem(layer_scenario(s, layer), p.router.draw(0, layer, 1),
                                      group.capacity_rows, x, 0, self.device)  # fmt: skip

            out[layer] = InputGuard(problem, rebuild=rebuild, rebuilt=family.weight_fields)
        return out

    def step_problem(self, link, rank: int, layer: int):
        """A rank's problem of a layer: the layer's tensors with the rank's expert offset."""
        if rank == 0:
            return link
        return dataclasses.replace(link, expert_offset=rank * link.local_experts)

    def step_routing(self, links: dict, p, si: int, group) -> dict:
        """Write step ``si``'s routing into every layer's tensors (which the ranks of a layer
        share and its graphs read); returns {layer: the draw}."""
        T = group.tokens_per_rank * p.case.scenario.topology.dp
        draws = {}
        for layer, problem in links.items():
            draw = p.router.draw(si, layer, T)
            problem.topk_ids_TK.copy_(draw.topk_ids_TK)
            problem.topk_weights_TK.copy_(draw.topk_weights_TK)
            draws[layer] = draw
        return draws

    def step_calls(self, p, links: dict, stages: dict, workspaces: dict, arm: str,
                   graph: bool) -> dict:  # fmt: skip
        """{rank: (the whole step's call, {layer: that layer's call})}: CUDA graphs with
        ``graph``, eager calls otherwise."""
        wrap = self.clock.capture if graph else (lambda f: f)
        out = {}
        for r in p.ranks:
            seq = [stages[(arm, r, layer)] for layer in p.layers]
            whole = wrap(lambda seq=seq: [run_all(st) for st in seq])
            per = {la: wrap(lambda st=st: run_all(st))
                   for la, st in zip(p.layers, seq, strict=True)}  # fmt: skip
            out[r] = (whole, per)
        return out

    def step_probes(self, arm: str, p, calls: dict, live: dict, wbytes: dict) -> list[Probe]:
        """Per rank the whole step (one graph of every layer in order), then each layer alone,
        L2 flushed before each sample: no layer finds its weights in L2 in a real model."""
        probes = []
        for r in p.ranks:
            step_call, layer_calls = calls[r]
            probes.append(clock_probe(
                self.clock, step_call, flush_l2=True, rank=r, stage=WHOLE_STEP, layer=-1,
                regime=Regime.STEP, live_rows=sum(live[(r, la)] for la in p.layers),
                weight_bytes=sum(wbytes[(r, la)] for la in p.layers),
            ))  # fmt: skip
            for layer in p.layers:
                probes.append(clock_probe(
                    self.clock, layer_calls[layer], flush_l2=True, rank=r, stage=WHOLE_FFN,
                    layer=layer, regime=Regime.STEP, live_rows=live[(r, layer)],
                    weight_bytes=wbytes[(r, layer)],
                ))  # fmt: skip
        return probes

    def run_as_timed(self, calls: dict, rank: int, layer: int) -> None:
        """A rank's layer once more, as timed (its graph replayed), and wait for it."""
        calls[rank][1][layer]()
        self.clock.synchronize()
