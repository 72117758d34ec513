"""Planning of a ``step`` regime case: the layers, the steps' token counts grouped by count, the
routing of every (step, layer) and the memory the case needs, before anything is allocated
(docs/DESIGN.md section 14).

A model step holds every timed layer's own expert weights at once (no layer may find another's
weights in L2, as in a real model): at EP8 DeepSeek-V3 that is about 1.4 GB of FP8 weights per
layer and rank, 82 GB for its 58 MoE layers. The simulated ranks of a layer share one weight
tensor (rank 0's experts' values; the bytes each rank reads are the same, and every gate compares
a rank with a reference built from the weights it read), so the weights count once per layer,
not once per rank; the copies of them an arm's build makes for its kernels (the grouped decode
arm's tile layouts, the sparse GEMV's rotated MXFP4: `Arm.layout_bytes`) likewise, once per layer
and arm. In ``topology.mode: distributed`` each rank holds its own experts of every
layer (the same bytes a layer) and one set of exchange buffers its layers share: the estimate is
one rank's, and every rank checks it against its own device. ``check_memory`` refuses a case
that cannot fit, naming the bytes needed and free, before the first allocation.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from moebench.arm.base import Arm, LayoutShapes
from moebench.core.errors import ScenarioError
from moebench.core.families import facts
from moebench.core.layout import capacity_rows
from moebench.routing.step_draws import StepRouting, trace_layer_map
from moebench.spec.schema import Case, Scenario, local_experts
from moebench.spec.step import describe_tokens, step_layers, token_counts

# Set to a number of GB to cap the memory a step case may use (tests; a shared device).
MEMORY_LIMIT_ENV = "MOEBENCH_MEMORY_LIMIT_GB"
GB = 1e9


@dataclass(frozen=True, kw_only=True)
class TokenGroup:
    """The steps of one token count: they share one set of problems and graphs, and each step
    writes its own routing into them before it is timed."""

    tokens_per_rank: int
    steps: tuple[int, ...]
    capacity_rows: int


@dataclass(frozen=True, kw_only=True)
class PlannedStep:
    case: Case
    layers: tuple[int, ...]  # model layer ids, in order
    tokens: tuple[int, ...]  # tokens per rank of each step
    groups: tuple[TokenGroup, ...]
    router: StepRouting
    ranks: tuple[int, ...]


def weight_seed(seed: int, layer: int) -> int:
    """The seed of one layer's expert weights (and, in a distributed step, its tokens): every
    layer its own, so that no layer finds the previous layer's weights in L2."""
    return seed + 1_000 * (layer + 1)


def layer_scenario(s: Scenario, layer: int, tokens_per_rank: int | None = None) -> Scenario:
    """The scenario of one MoE layer of a step: seeded by ``weight_seed`` (and at a token
    group's count, for a distributed layer built as a one-layer case)."""
    out = dataclasses.replace(
        s, routing=dataclasses.replace(s.routing, seed=weight_seed(s.routing.seed, layer))
    )
    if tokens_per_rank is not None:
        out = dataclasses.replace(
            out, shape=dataclasses.replace(s.shape, tokens_per_rank=tokens_per_rank)
        )
    return out


def plan_step_case(case: Case) -> PlannedStep:
    """The case's layers, token groups and router; a ScenarioError names what cannot be."""
    s = case.scenario
    step = s.step
    layers = step_layers(step, s.model)
    r = s.routing
    layer_map = None
    if r.family == "trace":
        layer_map = trace_layer_map(r.path, s.model.moe_layers)
    router = StepRouting(
        family=r.family, seed=r.seed, experts=s.model.experts, top_k=s.model.top_k,
        ep=s.topology.ep, alignment=s.shape.alignment, trace_path=r.path, layer_map=layer_map,
        options={k: getattr(r, k) for k in ("alpha", "hot_rank", "hot_fraction",
                                            "empty_fraction")},
    )  # fmt: skip
    tokens = token_counts(step, s.shape.tokens_per_rank, r.seed)
    groups = []
    for t in sorted(set(tokens)):
        rows = _capacity(s, t)
        steps = tuple(i for i, x in enumerate(tokens) if x == t)
        groups.append(TokenGroup(tokens_per_rank=t, capacity_rows=rows, steps=steps))
    ranks = tuple(s.measure.ranks) if s.measure.ranks is not None else tuple(range(s.topology.ep))
    return PlannedStep(case=case, layers=layers, tokens=tokens, groups=tuple(groups),
                       router=router, ranks=ranks)  # fmt: skip


def _capacity(s: Scenario, tokens_per_rank: int) -> int:
    """Capacity rows at this token count: the formula (the worst case any routing can need, so
    every step's draw fits), or the scenario's number, checked against the worst case."""
    E, A, ep = local_experts(s), s.shape.alignment, s.topology.ep
    worst = capacity_rows(tokens_per_rank, ep, s.model.top_k, E, A)
    if s.shape.capacity == "formula":
        return worst
    rows = int(s.shape.capacity)
    if rows < worst:
        raise ScenarioError(
            f"{s.path or s.name}: shape.capacity: {rows} rows can be too few for a step's draw "
            f"at {tokens_per_rank} tokens per rank (the worst case needs {worst}); the step "
            "regime draws new routing every step: use formula"
        )
    return rows


def step_manifest(s: Scenario, planned: list[PlannedStep]) -> dict:
    """The run manifest's ``step`` key: what the analysis needs to read the rows."""
    p = planned[0]
    return {
        "layers": list(p.layers),
        "model_layers": len(s.model.moe_layers),
        "subset": s.step.layers is not None,
        "steps": s.step.steps,
        "blocks": s.step.blocks,
        "data_ranks": s.topology.dp,
        "non_moe_us": s.step.non_moe_us,
        "slo_tpot_ms": s.step.slo_tpot_ms,
        "tokens": describe_tokens(s.step, s.shape.tokens_per_rank),
        "routing": p.router.label(),
        "weights": "one set per layer, shared by the simulated ranks of that layer",
    }


# --------------------------------------------------------------------------- memory


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    weights: int  # every timed layer's expert weights, with scales and biases
    transient: int  # one layer's generation and its float32 reference
    workspaces: int  # one workspace per arm and token group, shared by layers and ranks
    routing: int  # every (rank, layer) problem's routing and tokens
    exchange: int = 0  # topology.mode distributed: the layers' dispatch and combine buffers
    layouts: int = 0  # every timed layer's copies of its expert weights the arms' builds make

    @property
    def total(self) -> int:
        # A margin for graph pools and allocator slack.
        parts = (self.weights + self.transient + self.workspaces + self.routing + self.exchange
                 + self.layouts)  # fmt: skip
        return int(1.1 * parts)


def estimate_memory(p: PlannedStep, arms: Sequence[Arm]) -> MemoryEstimate:
    """Bytes a step case allocates on its device (module docstring), for ``arms`` (one workspace
    each, and the copies of the expert weights their builds make: `Arm.layout_bytes`);
    whole-FFN arms' own buffers (their ``prepare``) are not counted."""
    s = p.case.scenario
    D, F, E, K = s.model.hidden, s.model.intermediate, local_experts(s), s.model.top_k
    family = facts(s.family)
    per_layer = family.expert_bytes(D, F, E, s.precision)
    transient = 3 * D * F * E * (2 + 4 + 4)  # bf16 generation, float32 quantisation, reference
    ws = 0
    data_ranks = s.topology.dp
    for g in p.groups:
        T = g.tokens_per_rank * data_ranks
        ws += family.workspace_bytes(T, K, D, F, E, g.capacity_rows)
    routing = sum(g.tokens_per_rank * data_ranks * (K * 8 + D) for g in p.groups)
    distributed = s.topology.mode == "distributed"
    # A distributed rank holds its own problems only, and one exchange its layers share.
    routing *= len(p.layers) * (1 if distributed else len(p.ranks))
    exchange = max(_exchange_bytes(s, g) for g in p.groups) if distributed else 0
    shapes = LayoutShapes(precision=s.precision,
                          tokens=tuple(g.tokens_per_rank * data_ranks for g in p.groups),
                          top_k=K, experts=E, hidden=D, intermediate=F)  # fmt: skip
    layouts = sum(a.layout_bytes(shapes) for a in arms if a.layout_bytes is not None)
    return MemoryEstimate(weights=int(per_layer * len(p.layers)), transient=int(transient),
                          workspaces=int(ws * len(arms)), routing=int(routing),
                          exchange=int(exchange),
                          layouts=int(layouts * len(p.layers)))  # fmt: skip


def _exchange_bytes(s: Scenario, g: TokenGroup) -> int:
    """The ``comm.exchange.Exchange`` buffers of one rank at this token count, shared by the
    layers (send and receive payloads, the returned rows, this rank's tokens packed and
    combined), and the global tokens rank 0 keeps for the end-to-end reference."""
    D, K, W = s.model.hidden, s.model.top_k, s.topology.dp * s.topology.tp
    T = -(-g.tokens_per_rank // s.topology.tp)  # the most tokens a rank dispatches
    x = D * (1 if s.precision == "fp8" else 2)
    row = x + (4 * -(-D // 512) if s.precision == "fp8" else 0) + 4  # tokens, scales, expert id
    R = W * T * K
    return (
        2 * R * row
        + R * D * 2
        + T * K * row
        + T * D * 2 * 2
        + g.tokens_per_rank * s.topology.dp * D * 2
    )


def size(n: float) -> str:
    """Bytes for a reader: ``82.1 GB``, ``3.4 MB``, ``512 kB``."""
    for unit, scale in (("GB", GB), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def available_memory(device: torch.device) -> tuple[int, str]:
    """Bytes the case may use and where that figure comes from."""
    limit = os.environ.get(MEMORY_LIMIT_ENV)
    if limit:
        try:
            return int(float(limit) * GB), f"{MEMORY_LIMIT_ENV}={limit}"
        except ValueError:
            raise ScenarioError(
                f"{MEMORY_LIMIT_ENV}: expected a number of GB, got {limit!r}"
            ) from None
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free), f"free on {torch.cuda.get_device_name(device)}"
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62, "host memory (unknown)"
    return int(pages), "available host memory"


def check_memory(planned: list[PlannedStep], arms: Sequence[Arm], device: torch.device) -> None:
    """A ScenarioError (exit 2, nothing written or allocated) when a case cannot fit."""
    free, where = available_memory(device)
    for p in planned:
        need = estimate_memory(p, arms)
        if need.total > free:
            s = p.case.scenario
            raise ScenarioError(
                f"{s.path or s.name}: case {p.case.case_id}: a step of {len(p.layers)} layers "
                f"needs about {size(need.total)} ({size(need.weights)} of expert weights, "
                f"{len(p.layers)} layers x {size(need.weights / len(p.layers))}), "
                f"{size(free)} {where}: name fewer layers in step.layers"
            )
