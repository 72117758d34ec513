"""Planning: every case of a scenario with its routing, capacity and ranks, before any work.

``plan`` turns a scenario into ``PlannedCase`` values on the host: the sweep expanded, each case's
routing built (synthetic or replayed from a trace), its capacity checked against the rank that
needs the most rows. Any impossibility is a ``ScenarioError`` naming the case and field, raised
before a results folder exists (docs/DESIGN.md sections 2, 7 and 10). The columns every row of a
case carries and the case's ``routing`` rows are computed here too, from the plan alone, so that
a case that fails later still gets them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from moebench.arm import registry
from moebench.arm.base import Arm
from moebench.core.errors import MoebenchError, ScenarioError
from moebench.core.layout import align_up, capacity_rows
from moebench.core.vocabulary import AA_SUFFIX, aa_twin
from moebench.routing import synthetic as routing
from moebench.spec.schema import Case, Scenario, global_tokens, local_experts
from moebench.spec.sweep import expand


@dataclass(frozen=True, kw_only=True)
class PlannedCase:
    case: Case
    routing: routing.Routing
    capacity_rows: int
    ranks: tuple[int, ...]
    counts_RE: torch.Tensor  # int64 [ep, local experts]: rows each expert of each rank receives


def run_arms(s: Scenario, aa: bool = False) -> dict[str, Arm]:
    """{name: arm} of the arms a run gates and times, in the scenario's order, then for the A/A
    control its copy of the baseline (``arm_names``). The scenario's references are resolved
    again (the loader checked them): a child process or a torchrun rank finds the same arms."""
    folder = Path(s.path).parent if s.path is not None else Path.cwd()
    arms = {
        name: registry.resolve(ref, folder) for name, ref in zip(s.arms, s.arm_refs, strict=True)
    }
    for name in arm_names(s, aa)[len(s.arms) :]:
        arms[name] = arms[aa_twin(name)]
    return arms


def arm_names(s: Scenario, aa: bool = False) -> tuple[str, ...]:
    """The arms a run gates and times: the scenario's, then for the A/A control (``aa`` or
    ``measure.aa``) a second copy of the baseline, ``<baseline>~aa`` (same code, its own
    workspace, same inputs)."""
    return (*s.arms, s.measure.baseline + AA_SUFFIX) if aa or s.measure.aa else s.arms


def select_device(s: Scenario) -> torch.device:
    want = s.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda" and not torch.cuda.is_available():
        raise ScenarioError(f"{s.path or s.name}: device: cuda requested but no GPU is visible")
    if want == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise MoebenchError(
            "CPU runs need TRITON_INTERPRET=1 in the environment before start "
            "(the moebench command sets it when no GPU is visible)"
        )
    return torch.device(want)


def plan_case(case: Case) -> PlannedCase:
    """Build the case's routing and capacity on the host; any impossibility is a ScenarioError."""
    s = case.scenario
    where = f"{s.path or s.name}: case {case.case_id}"
    E_loc = local_experts(s)
    ep = s.topology.ep
    r = s.routing
    try:
        rt = routing.synthesize(
            family=r.family,
            tokens=global_tokens(s),
            experts=s.model.experts,
            top_k=s.model.top_k,
            ep=ep,
            seed=r.seed,
            alpha=r.alpha,
            hot_rank=r.hot_rank,
            hot_fraction=r.hot_fraction,
            empty_fraction=r.empty_fraction,
            alignment=s.shape.alignment,
            trace_path=r.path,
            trace_layer=r.layer,
        )
    except ValueError as exc:
        raise ScenarioError(f"{where}: routing.family: {exc}") from None
    A = s.shape.alignment
    # One pass over the routing for every rank (ep can be large).
    counts = torch.bincount(rt.topk_ids_TK.flatten().to(torch.int64), minlength=s.model.experts)
    counts_RE = counts.view(ep, E_loc)
    needed = [routing.rows_needed(counts_RE[rank], A) for rank in range(ep)]
    cap = s.shape.capacity
    if cap == "formula":
        rows = capacity_rows(s.shape.tokens_per_rank, ep, s.model.top_k, E_loc, A)
    elif cap == "tight":
        rows = max(align_up(max(needed), A), A)
    else:
        rows = int(cap)
    worst = max(range(ep), key=lambda k: needed[k])
    if needed[worst] > rows:
        raise ScenarioError(
            f"{where}: shape.capacity: rank {worst} needs {needed[worst]} rows, capacity is {rows}"
        )
    ranks = tuple(s.measure.ranks) if s.measure.ranks is not None else tuple(range(ep))
    return PlannedCase(case=case, routing=rt, capacity_rows=rows, ranks=ranks, counts_RE=counts_RE)


def plan(s: Scenario) -> list[PlannedCase]:
    """Every case of ``s``, planned (module docstring)."""
    return [plan_case(c) for c in expand(s)]


def case_columns(p: PlannedCase, run_id: str) -> dict:
    """The columns every samples row of the case carries (the case's parameters)."""
    return columns(p.case, run_id, tokens_per_rank=p.case.scenario.shape.tokens_per_rank,
                   capacity_rows=p.capacity_rows, routing_label=p.routing.label)  # fmt: skip


def columns(
    case: Case, run_id: str, *, tokens_per_rank: int, capacity_rows: int, routing_label: str
) -> dict:
    """The columns of a case's samples rows, with the token count, capacity and routing label
    of what they time (a step regime case has a token count and capacity per step group)."""
    s = case.scenario
    return {
        "run_id": run_id,
        "case_id": case.case_id,
        "tokens_per_rank": tokens_per_rank,
        "capacity_rows": capacity_rows,
        "local_experts": local_experts(s),
        "hidden": s.model.hidden,
        "intermediate": s.model.intermediate,
        "top_k": s.model.top_k,
        "precision": s.precision,
        "activation": s.activation,
        "routing": routing_label,
        "gemm": s.gemm,
        "params": json.dumps(dict(case.params), sort_keys=True, default=str),
        "step": -1,  # the step regime's rows set these (moebench.results.schema)
        "layer": -1,
        # Each swept key its own column as well (moebench.results.schema.SWEEP_PREFIX).
        **{f"sweep.{key}": ("" if value is None else value) for key, value in case.params},
    }


def routing_row(p: PlannedCase, run_id: str, rank: int) -> dict:
    """One rank's `routing` row (host statistics of the case's routing on that rank)."""
    s = p.case.scenario
    stats = routing.rank_statistics(
        p.routing.topk_ids_TK,
        rank=rank,
        ep=s.topology.ep,
        local_experts=local_experts(s),
        capacity_rows=p.capacity_rows,
    )
    return {
        "run_id": run_id,
        "case_id": p.case.case_id,
        "routing": p.routing.label,
        "tokens_per_rank": s.shape.tokens_per_rank,
        "trace_sha256": p.routing.trace_sha256,
        "step": -1,  # a step regime case's rows name their step and layer
        "layer": -1,
        **stats,
    }


def routing_rows(p: PlannedCase, run_id: str) -> list[dict]:
    """The case's `routing` rows, one per rank it runs; written whatever else fails."""
    return [routing_row(p, run_id, rank) for rank in p.ranks]
