"""Scenarios as values: the frozen dataclasses a scenario maps onto, the words and limits its fields
take, and the normalised document written into a run's manifest.

A scenario names a model (a preset from ``models.PRESETS``, a preset with overrides, or a full
shape), the topology (docs/DESIGN.md section 7), the routing (section 10), the buffer shape
(section 2), the precision and activation, the arms and how to measure them, and an optional
sweep: a mapping of dotted field paths to lists whose product gives the cases. The arms share one
family (``prefill`` or ``decode``), which decides the valid precisions, stages, width multiple and
the default baseline.

Reading a document into these values is ``moebench.spec.load``; the checks of each section are
``moebench.spec.sections``, the sweep's cases ``moebench.spec.sweep``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from moebench.core.families import DEFAULT_BASELINE, DEFAULT_FAMILY
from moebench.core.models import PRESETS
from moebench.core.vocabulary import DEFAULT_REGIMES, MODEL_STAGES, PREFILL_STAGES

# The arms come from the registry (moebench/arm/registry.py), the shared words from the vocabulary.
# A scenario runs the arms of one family: `prefill` (the capacity-buffer pipeline) or `decode`
# (dense all-experts against the sparse top-k GEMV).
DEFAULT_ARMS = ("stock", "prefix_sum", "prefix_sum_masked")
DEVICES = ("auto", "cpu", "cuda")
MODES = ("simulated", "distributed")
CAPACITIES = ("formula", "tight")
GEMMS = ("triton", "torch")

MAX_CASES = 10_000
MAX_TEXT = 1 << 20  # characters of YAML
MAX_ROWS = 2**31 - 1  # `ends` and row indices are int32
MAX_TOKENS = 1 << 20
MAX_WIDTH = 1 << 17
MAX_EXPERTS = 1 << 14
MAX_RANKS = 1 << 12
MAX_SEED = 2**63 - 1
MAX_DRAWS = 1 << 28  # routing draws tokens_per_rank * dp * experts random numbers on the host
MAX_SAMPLES = 4_000_000  # sample rows one case holds in memory before its part is written
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_WEIGHT_COPIES = 64
MAX_INPUT_SETS = 64  # measure.input_sets
CASE_ID_MAX = 100


# --- the values that travel --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    preset: str | None
    id: str
    revision: str
    hidden: int
    intermediate: int
    experts: int
    top_k: int
    layers: int = 1  # the model's layers (the step regime times every MoE layer of them)
    dense_layers: tuple[int, ...] = ()  # layers without a routed MoE

    @property
    def moe_layers(self) -> tuple[int, ...]:
        """The model layer ids that hold a routed MoE, in order."""
        dense = set(self.dense_layers)
        return tuple(i for i in range(self.layers) if i not in dense)

    @property
    def modified(self) -> tuple[tuple[str, Any], ...]:
        """(field, value) of each field that differs from the preset's (shape fields first):
        a preset with ``hidden: 1024`` is not that model, and must not be named as if it were.
        Compared by value, so that a normalised document (every field written) is unmodified."""
        if self.preset is None or self.preset not in PRESETS:
            return ()
        p = PRESETS[self.preset]
        order = ("hidden", "intermediate", "experts", "top_k", "layers", "dense_layers", "id",
                 "revision")  # fmt: skip
        return tuple((k, getattr(self, k)) for k in order if getattr(self, k) != p[k])

    @property
    def label(self) -> str:
        """How a run names its model: the preset, ``deepseek-v4-flash (modified: hidden=1024)``
        when a field differs from it, else the model id."""
        if self.preset is None:
            return self.id
        if not self.modified:
            return self.preset
        return f"{self.preset} (modified: {', '.join(f'{k}={v}' for k, v in self.modified)})"


@dataclass(frozen=True, kw_only=True)
class TopologySpec:
    ep: int = 1
    dp: int | None = None  # None: the same as ep (filled in on construction)
    tp: int = 1
    mode: str = "simulated"

    def __post_init__(self) -> None:
        if self.dp is None:
            object.__setattr__(self, "dp", self.ep)


@dataclass(frozen=True, kw_only=True)
class RoutingSpec:
    family: str = "uniform"
    seed: int = 0
    alpha: float = 1.2
    hot_rank: int = 0
    hot_fraction: float = 0.5
    empty_fraction: float = 0.25
    path: str | None = None  # trace file, resolved against the scenario's folder
    layer: int | None = None


@dataclass(frozen=True, kw_only=True)
class ShapeSpec:
    tokens_per_rank: int
    alignment: int = 128
    capacity: str | int = "formula"


@dataclass(frozen=True, kw_only=True)
class MeasureSpec:
    regimes: tuple[str, ...] = DEFAULT_REGIMES
    stages: tuple[str, ...] = PREFILL_STAGES
    warmup: int = 2
    blocks: int = 10  # exact intervals need >= 6 blocks at 95% per cell, more when corrected
    iterations: int = 5
    ranks: tuple[int, ...] | None = None  # None: every rank
    baseline: str = DEFAULT_BASELINE
    graph: bool = True
    aa: bool = False  # also time a second copy of the baseline, "<baseline>~aa" (A/A control)
    case_timeout_s: float | None = None  # None: no limit
    # Kernel regime: evict L2 (by reading a 256 MB buffer) before each sample.
    flush_l2: bool = True
    # Rotate copies of the rank's expert weights between samples so that no weight read is an L2
    # hit (moebench/measure/cold.py); weight_copies None: as many as it takes.
    cold_weights: bool = False
    weight_copies: int | None = None
    # A noise-based stop (nvbench's --max-noise): past `blocks`, keep adding blocks until every
    # arm's block medians vary by at most target_cv percent, up to max_blocks blocks and
    # time_budget_s seconds of timing per rank (simulated mode).
    target_cv: float | None = None
    max_blocks: int | None = None
    time_budget_s: float | None = None
    # The ffn regime's samples rotate through this many input sets (the gated tokens and
    # routing, then others with the same per-expert counts), each timed output held to its set's
    # reference (docs/DESIGN.md section 15); 1: the gated inputs only. One-layer regimes in
    # simulated mode (a model step draws its own routing every step).
    input_sets: int = 4


@dataclass(frozen=True, kw_only=True)
class StepSpec:
    """The ``step`` regime (docs/DESIGN.md section 14): one model step over the MoE layers, each
    layer its own weights and routing, ``steps`` steps each its own routing draw and token
    count. ``tokens``: None (``shape.tokens_per_rank`` every step), a tuple of token counts per
    rank (cycled over the steps) or a histogram ``((tokens, weight), ...)`` the steps are drawn
    from (seeded). ``non_moe_us`` and ``slo_tpot_ms`` are givens for the derived TPOT and
    goodput, not measurements."""

    layers: tuple[int, ...] | None = None  # None: every MoE layer of the model
    steps: int = 32
    blocks: int = 1  # repetitions of each step (the arms are paired over steps)
    tokens: tuple[int, ...] | None = None
    histogram: tuple[tuple[int, float], ...] | None = None
    non_moe_us: float = 0.0
    slo_tpot_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class ModelRunSpec:
    """The ``model`` regime (``moebench.spec.model``): a whole transformers model of the preset,
    ``batch`` sequences, each decode step timed at a KV cache of ``context`` tokens and more,
    ``decode_steps`` steps a block; a prefill of ``prompt`` tokens a sequence (its TTFT).
    ``routing``: the model's own router, or each layer's recorded load (a trace). ``config``:
    transformers config fields over the preset's, as (key, value) pairs. ``slo_tpot_ms`` is a
    given SLO on the measured P99 TPOT for goodput."""

    batch: int = 1
    context: int = 256
    prompt: int = 32
    decode_steps: int = 16
    check_steps: int = 2
    stages: tuple[str, ...] = MODEL_STAGES
    routing: str = "router"
    slo_tpot_ms: float | None = None
    attention: str | None = None  # None: the model's own attention implementation
    prefill_graph: bool = True  # the prefill one CUDA graph where the decode step is one
    config: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    description: str = ""
    model: ModelSpec
    topology: TopologySpec = field(default_factory=TopologySpec)
    routing: RoutingSpec = field(default_factory=RoutingSpec)
    shape: ShapeSpec
    precision: str = "fp8"
    activation: str = "silu"
    gemm: str = "triton"  # grouped GEMMs of the prefill arms: ours, or torch._grouped_mm
    arms: tuple[str, ...] = DEFAULT_ARMS  # the arms' names (the `arm` column)
    arm_refs: tuple[str, ...] = DEFAULT_ARMS  # as the scenario names them (moebench.arm.registry)
    family: str = DEFAULT_FAMILY  # the arms' family (a key of core.families.FACTS)
    measure: MeasureSpec = field(default_factory=MeasureSpec)
    step: StepSpec | None = None  # the step regime's section (None: no step regime)
    model_run: ModelRunSpec | None = None  # the model regime's section (None: no model regime)
    sweep: tuple[tuple[str, tuple], ...] = ()
    expect_sources: tuple[tuple[str, str], ...] = ()
    device: str = "auto"
    path: str | None = None
    text: str = ""
    sha256: str = ""

    @property
    def sources(self) -> dict[str, str]:
        """Pinned source hashes, {arm: sha256}."""
        return dict(self.expect_sources)


@dataclass(frozen=True, kw_only=True)
class Case:
    case_id: str
    index: int
    scenario: Scenario  # sweep values applied, sweep emptied; text and sha256 of the file
    params: tuple[tuple[str, Any], ...]


def global_tokens(s: Scenario) -> int:
    """Tokens of one step across the data-parallel replicas."""
    return s.shape.tokens_per_rank * s.topology.dp


def local_experts(s: Scenario) -> int:
    return s.model.experts // s.topology.ep


# --- the fields a document may hold --------------------------------------------------------------

TOP_KEYS = (
    "name",
    "description",
    "model",
    "topology",
    "routing",
    "shape",
    "precision",
    "activation",
    "gemm",
    "arms",
    "measure",
    "step",
    "model_run",
    "sweep",
    "expect_sources",
    "device",
)
MODEL_FIELDS = ("id", "revision", "hidden", "intermediate", "experts", "top_k")
# Model fields with a default for a model that names no preset (one layer, no dense layer).
MODEL_LAYER_FIELDS = ("layers", "dense_layers")
STEP_KEYS = ("layers", "steps", "blocks", "tokens", "non_moe_us", "slo_tpot_ms")
MODEL_RUN_KEYS = tuple(f.name for f in fields(ModelRunSpec))
MAX_STEPS = 100_000
ROUTING_KEYS = (
    "family",
    "source",
    "seed",
    "alpha",
    "hot_rank",
    "hot_fraction",
    "empty_fraction",
    "path",
    "layer",
)
SWEEPABLE = (
    *(f"model.{k}" for k in ("preset", *MODEL_FIELDS)),
    *(f"topology.{f.name}" for f in fields(TopologySpec)),
    *(f"routing.{f.name}" for f in fields(RoutingSpec)),
    *(f"shape.{f.name}" for f in fields(ShapeSpec)),
    *(f"measure.{f.name}" for f in fields(MeasureSpec)),
    "precision",
    "activation",
    "gemm",
    "arms",
    "device",
    *(f"model_run.{k}" for k in MODEL_RUN_KEYS if k != "config"),
)


# --- the normalised document ---------------------------------------------------------------------


def to_plain(v: Any) -> Any:
    """Tuples to lists and enum members to their strings, recursively (YAML and JSON friendly)."""
    if isinstance(v, tuple | list):
        return [to_plain(x) for x in v]
    if isinstance(v, StrEnum):
        return str(v)
    return v


def _step_plain(step: StepSpec) -> dict:
    """The step section as a document writes it (a histogram as a mapping)."""
    tokens: Any = list(step.tokens) if step.tokens is not None else None
    if step.histogram is not None:
        tokens = {t: w for t, w in step.histogram}
    return {
        "layers": "all" if step.layers is None else list(step.layers),
        "steps": step.steps,
        "blocks": step.blocks,
        "tokens": tokens,
        "non_moe_us": step.non_moe_us,
        "slo_tpot_ms": step.slo_tpot_ms,
    }


def to_dict(scenario: Scenario) -> dict:
    """The normalised document (every default filled in), for the manifest."""

    def plain(spec) -> dict:
        return {f.name: to_plain(getattr(spec, f.name)) for f in fields(spec)}

    return {
        "name": scenario.name,
        "description": scenario.description,
        "model": plain(scenario.model),
        "topology": plain(scenario.topology),
        "routing": plain(scenario.routing),
        "shape": plain(scenario.shape),
        "precision": scenario.precision,
        "gemm": scenario.gemm,
        "activation": scenario.activation,
        "arms": list(scenario.arm_refs),  # as written: what parsing it again resolves
        "measure": plain(scenario.measure),
        "step": None if scenario.step is None else _step_plain(scenario.step),
        "model_run": None
        if scenario.model_run is None
        else (
            plain(scenario.model_run)
            | {"config": {k: to_plain(v) for k, v in scenario.model_run.config}}
        ),
        "sweep": {p: to_plain(v) for p, v in scenario.sweep},
        "expect_sources": dict(scenario.expect_sources),
        "device": scenario.device,
    }
