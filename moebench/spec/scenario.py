"""Scenarios: a YAML document -> frozen dataclasses, and its sweep -> cases.

A scenario names a model (a preset from ``models.PRESETS``, a preset with overrides, or a full
shape), the topology (DESIGN section 7), the routing (section 10), the buffer shape (section 2),
the precision and activation, the arms and how to measure them, and an optional sweep: a mapping
of dotted field paths to lists whose product gives the cases. The arms share one family
(``prefill`` or ``decode``), which decides the valid precisions, stages, width multiple and the
default baseline.

Loading is safe: YAML tags that would build objects are rejected, never executed; duplicate keys
are errors. Every mistake becomes one ``ScenarioError`` on one line that names the file and the
field path, e.g. ``smoke.yaml: shape.alignment: must be a power of two >= 16, got 100``.

Sweeps apply to the document as written; the scenario itself carries each swept field's first
value (what the document says for a swept field is replaced), and every case is validated as a
whole scenario.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
import stat
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from moebench.arm import registry
from moebench.core.errors import ScenarioError, TraceError
from moebench.core.layout import capacity_rows
from moebench.core.models import PRESETS
from moebench.core.vocabulary import (
    ACTIVATIONS,
    DEFAULT_BASELINE,
    DEFAULT_REGIMES,
    FAMILY_BASELINE,
    FAMILY_PRECISIONS,
    FAMILY_STAGES,
    FAMILY_WIDTH,
    PRECISIONS,
    PREFILL_STAGES,
    REGIMES,
    ROUTING_FAMILIES,
)
from moebench.routing.traces import read_meta
from moebench.spec import fields as yf

# The arms come from the registry (moebench/arm/registry.py), the shared words from the vocabulary.
# A scenario runs the arms of one family: `prefill` (the capacity-buffer pipeline) or `decode`
# (dense all-experts against the sparse top-k GEMV).
KNOWN_ARMS = registry.builtin_names()
DEFAULT_ARMS = ("stock", "prefix_sum", "prefix_sum_masked")
FAMILIES = ROUTING_FAMILIES
STAGES = PREFILL_STAGES
DEVICES = ("auto", "cpu", "cuda")
MODES = ("simulated", "distributed")
CAPACITIES = ("formula", "tight")

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
    blocks: int = 5
    iterations: int = 5
    ranks: tuple[int, ...] | None = None  # None: every rank
    baseline: str = DEFAULT_BASELINE
    graph: bool = True
    aa: bool = False  # also time a second copy of the baseline, "<baseline>~aa" (A/A control)
    case_timeout_s: float | None = None  # None: no limit
    # Kernel regime: evict L2 (by reading a 256 MB buffer) before each sample.
    flush_l2: bool = True
    # Rotate copies of the rank's expert weights between samples so that no weight read is an L2
    # hit (moebench/cold.py); weight_copies None: as many as it takes.
    cold_weights: bool = False
    weight_copies: int | None = None


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
    arms: tuple[str, ...] = DEFAULT_ARMS
    measure: MeasureSpec = field(default_factory=MeasureSpec)
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


# --- public entry points -----------------------------------------------------------------------


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read and validate a scenario file."""
    label = str(path)
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ScenarioError(f"{label}: not a regular file")
            raw = f.read(4 * MAX_TEXT + 1)  # a bounded read: /dev/zero is not a scenario
    except OSError as exc:
        raise ScenarioError(yf.one_line(f"{label}: cannot read ({exc.strerror or exc})")) from None
    if len(raw) > 4 * MAX_TEXT:
        raise ScenarioError(f"{label}: too large ({len(raw)} bytes) for a scenario")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{label}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    return parse_scenario(text.removeprefix("\ufeff"), path=label)


def parse_scenario(text: str, *, path: str | os.PathLike | None = None) -> Scenario:
    """Validate a scenario; ``path`` names it in errors and anchors relative trace paths."""
    label = str(path) if path is not None else "<string>"
    try:
        raw = yf.load_yaml(text, MAX_TEXT)
        if not isinstance(raw, dict):
            got = "an empty document" if raw is None else yf.describe(raw)
            raise yf.Invalid("", f"expected a mapping at the top level, got {got}")
        sweep = _sweep(_optional(raw, "sweep"))
        ctx = _Ctx(path=path, text=text)
        if not sweep:
            return _build(raw, ctx)
        first = _first_case(raw, sweep)
        try:
            base = _build({**first, "sweep": raw["sweep"]}, ctx)
        except yf.Invalid as exc:  # case 0 is the scenario itself
            blame = _swept_path(exc.path, [p for p, _ in sweep])
            if blame is not None:
                raise yf.Invalid(f"sweep.{blame}[0]", f"{exc.path}: {exc.message}") from None
            raise
        for _ in _cases(base, raw, ctx):  # every case is validated as a whole scenario
            pass
        return base
    except yf.Invalid as exc:
        raise ScenarioError(yf.format_error(label, exc)) from None


def expand(scenario: Scenario) -> list[Case]:
    """The cases of a scenario: the product of its sweep lists, first key varying slowest."""
    if not scenario.sweep:
        return [Case(case_id="c000", index=0, scenario=scenario, params=())]
    label = scenario.path or "<string>"
    try:
        raw = yf.load_yaml(scenario.text, MAX_TEXT)
        return list(_cases(scenario, raw, _Ctx(path=scenario.path, text=scenario.text)))
    except yf.Invalid as exc:
        raise ScenarioError(yf.format_error(label, exc)) from None


def scenario_with(scenario: Scenario, **changes: Any) -> Scenario:
    """A validated copy with fields changed by dotted path (``**{"shape.tokens_per_rank": 4}``;
    ``shape__tokens_per_rank=4`` also works). A changed field leaves the sweep. The result's text is
    the changed document, so its sha256 differs from the file's."""
    label = scenario.path or "<string>"
    try:
        raw = yf.load_yaml(scenario.text, MAX_TEXT)
        if not isinstance(raw, dict):
            raise yf.Invalid("", "the scenario's text is not a mapping")
        for key, value in changes.items():
            dotted = key.replace("__", ".")
            if dotted not in SWEEPABLE:
                raise yf.Invalid(
                    dotted,
                    f"not a field that can be changed; expected one of {', '.join(SWEEPABLE)}",
                )
            raw = _apply(raw, dotted, _plain(value))
            if isinstance(raw.get("sweep"), dict):
                raw["sweep"] = {k: v for k, v in raw["sweep"].items() if k != dotted}
                if not raw["sweep"]:
                    del raw["sweep"]
    except yf.Invalid as exc:
        raise ScenarioError(yf.format_error(label, exc)) from None
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    return parse_scenario(text, path=scenario.path)


def to_dict(scenario: Scenario) -> dict:
    """The normalised document (every default filled in), for the manifest."""

    def plain(spec) -> dict:
        return {f.name: _plain(getattr(spec, f.name)) for f in fields(spec)}

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
        "arms": list(scenario.arms),
        "measure": plain(scenario.measure),
        "sweep": {p: _plain(v) for p, v in scenario.sweep},
        "expect_sources": dict(scenario.expect_sources),
        "device": scenario.device,
    }


# --- sections ----------------------------------------------------------------------------------

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
    "sweep",
    "expect_sources",
    "device",
)
MODEL_FIELDS = ("id", "revision", "hidden", "intermediate", "experts", "top_k")
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
)
GEMMS = ("triton", "torch")


@dataclass(frozen=True)
class _Ctx:
    path: str | os.PathLike | None
    text: str

    @property
    def folder(self) -> Path:
        return Path(self.path).parent if self.path is not None else Path.cwd()


def _model(v: Any, family: str) -> ModelSpec:
    if isinstance(v, str):
        m, preset_path = {"preset": v}, "model"
    else:
        m, preset_path = yf.section(v, "model", ("preset", *MODEL_FIELDS)), "model.preset"
    preset = m.get("preset")
    if preset is not None:
        preset = yf.string(preset, preset_path)
        if preset not in PRESETS:
            raise yf.Invalid(
                preset_path,
                f"unknown preset {yf.show(preset)}; expected one of {', '.join(PRESETS)}",
            )
        merged = {k: PRESETS[preset][k] for k in MODEL_FIELDS}
    else:
        for k in MODEL_FIELDS:
            if k not in m and k != "revision":
                raise yf.Invalid(f"model.{k}", "required when the model names no preset")
        merged = {"revision": "unpinned"}
    merged.update({k: m[k] for k in MODEL_FIELDS if k in m})
    hidden = yf.integer(merged["hidden"], "model.hidden", 1, MAX_WIDTH)
    intermediate = yf.integer(merged["intermediate"], "model.intermediate", 1, MAX_WIDTH)
    multiple, why = FAMILY_WIDTH[family]
    for name, width in (("hidden", hidden), ("intermediate", intermediate)):
        if width % multiple:
            origin = f" (preset {preset!r}: override it)" if preset and name not in m else ""
            raise yf.Invalid(
                f"model.{name}",
                f"must be a multiple of {multiple} for the {family} arms ({why}), "
                f"got {width}{origin}",
            )
    experts = yf.integer(merged["experts"], "model.experts", 1, MAX_EXPERTS)
    top_k = yf.integer(merged["top_k"], "model.top_k", 1, MAX_EXPERTS)
    if top_k > experts:
        raise yf.Invalid("model.top_k", f"must be <= model.experts ({experts}), got {top_k}")
    return ModelSpec(
        preset=preset,
        id=yf.text(merged["id"], "model.id"),
        revision=yf.text(merged["revision"], "model.revision"),
        hidden=hidden,
        intermediate=intermediate,
        experts=experts,
        top_k=top_k,
    )


def _topology(v: Any) -> TopologySpec:
    t = yf.section(v, "topology", tuple(f.name for f in fields(TopologySpec)))
    ep = yf.integer(t.get("ep", 1), "topology.ep", 1, MAX_RANKS)
    dp = yf.integer(t.get("dp", ep), "topology.dp", 1, MAX_RANKS)
    tp = yf.integer(t.get("tp", 1), "topology.tp", 1, MAX_RANKS)
    mode = yf.choice(t.get("mode", "simulated"), "topology.mode", MODES)
    if ep != dp * tp:
        hint = "" if "dp" in t else " (dp defaults to ep: set dp)"
        raise yf.Invalid(
            "topology.ep",
            f"must equal dp * tp: the expert-parallel group spans every "
            f"data-parallel replica's tensor-parallel ranks; got ep={ep},"
            f" dp={dp}, tp={tp}{hint}",
        )
    return TopologySpec(ep=ep, dp=dp, tp=tp, mode=mode)


def _routing(v: Any, ctx: _Ctx) -> RoutingSpec:
    r = {"family": v} if isinstance(v, str) else yf.section(v, "routing", ROUTING_KEYS)
    family = yf.choice(r.get("family", "uniform"), "routing.family", FAMILIES)
    if "source" in r:
        source = yf.choice(r["source"], "routing.source", ("trace", "synthetic"))
        if source == "trace":
            if "family" in r and family != "trace":
                raise yf.Invalid(
                    "routing.source", f"'trace' conflicts with routing.family {family!r}"
                )
            family = "trace"
        elif family == "trace":
            raise yf.Invalid("routing.source", "'synthetic' conflicts with routing.family 'trace'")
    path = r.get("path")
    layer = r.get("layer")
    if family == "trace":
        if path is None:
            raise yf.Invalid("routing.path", "required for a trace routing")
        path = yf.string(path, "routing.path")
        if not path:
            raise yf.Invalid("routing.path", "must be a non-empty file path")
        resolved = ctx.folder / path
        if not os.path.exists(resolved):
            raise yf.Invalid("routing.path", f"trace file not found: {resolved}")
        path = os.path.abspath(resolved)
        if layer is not None:
            layer = yf.integer(layer, "routing.layer", 0, 1 << 16)
    else:
        if path is not None:
            raise yf.Invalid("routing.path", f"only read by family trace, not {family!r}")
        if layer is not None:
            raise yf.Invalid("routing.layer", f"only read by family trace, not {family!r}")
    alpha = yf.number(r.get("alpha", 1.2), "routing.alpha")
    if alpha <= 0:
        raise yf.Invalid("routing.alpha", f"must be > 0, got {yf.show(r['alpha'])}")
    fractions = {}
    for k in ("hot_fraction", "empty_fraction"):
        fractions[k] = yf.number(
            r.get(k, RoutingSpec.__dataclass_fields__[k].default), f"routing.{k}"
        )
        if not 0 <= fractions[k] <= 1:
            raise yf.Invalid(f"routing.{k}", f"must be in [0, 1], got {yf.show(r[k])}")
    return RoutingSpec(
        family=family,
        seed=yf.integer(r.get("seed", 0), "routing.seed", 0, MAX_SEED),
        alpha=alpha,
        hot_rank=yf.integer(r.get("hot_rank", 0), "routing.hot_rank", 0, MAX_RANKS),
        path=path,
        layer=layer,
        **fractions,
    )


def _check_trace_model(path: str, model: ModelSpec) -> None:
    """A moebench Parquet trace is pinned to a model id and revision: they must be the scenario's.
    Raw files (SGLang JSON, count matrices) carry no model and replay as the scenario's."""
    if not path.lower().endswith(".parquet"):
        return
    try:
        meta = read_meta(path)
    except TraceError as exc:
        raise yf.Invalid("routing.path", str(exc)) from None
    if (meta["model_id"], meta["revision"]) != (model.id, model.revision):
        raise yf.Invalid(
            "routing.path",
            f"trace {Path(path).name} is pinned to {meta['model_id']} at revision "
            f"{meta['revision']}, the scenario's model is {model.id} at revision {model.revision}",
        )
    if meta["experts"] != model.experts:
        raise yf.Invalid(
            "routing.path",
            f"trace {Path(path).name} has {meta['experts']} experts, model.experts is "
            f"{model.experts}",
        )


def _shape(v: Any) -> ShapeSpec:
    s = yf.section(v, "shape", tuple(f.name for f in fields(ShapeSpec)))
    if "tokens_per_rank" not in s:
        raise yf.Invalid("shape.tokens_per_rank", "required")
    tokens = yf.integer(s["tokens_per_rank"], "shape.tokens_per_rank", 1, MAX_TOKENS)
    alignment = s.get("alignment", 128)
    if isinstance(alignment, bool) or not isinstance(alignment, int):
        raise yf.Invalid("shape.alignment", f"expected an integer, got {yf.describe(alignment)}")
    if alignment < 16 or alignment > 1 << 16 or alignment & (alignment - 1):
        raise yf.Invalid(
            "shape.alignment", f"must be a power of two >= 16, got {yf.show(alignment)}"
        )
    capacity = s.get("capacity", "formula")
    if isinstance(capacity, str):
        yf.choice(capacity, "shape.capacity", CAPACITIES)
    elif isinstance(capacity, bool) or not isinstance(capacity, int):
        raise yf.Invalid(
            "shape.capacity",
            f"expected 'formula', 'tight' or an integer, got {yf.describe(capacity)}",
        )
    elif not 0 < capacity <= MAX_ROWS or capacity % alignment:
        raise yf.Invalid(
            "shape.capacity",
            f"must be a positive multiple of shape.alignment "
            f"({alignment}) up to {MAX_ROWS}, got {yf.show(capacity)}",
        )
    return ShapeSpec(tokens_per_rank=tokens, alignment=alignment, capacity=capacity)


def _measure(v: Any, family: str) -> MeasureSpec:
    m = yf.section(v, "measure", tuple(f.name for f in fields(MeasureSpec)))
    ranks = m.get("ranks")
    if ranks is not None:
        checked = []
        for i, r in enumerate(yf.sequence(ranks, "measure.ranks")):
            r = yf.integer(r, f"measure.ranks[{i}]", 0, MAX_RANKS)
            if r in checked:
                raise yf.Invalid(f"measure.ranks[{i}]", f"rank {r} is listed twice")
            checked.append(r)
        ranks = tuple(checked)
    timeout = m.get("case_timeout_s")
    if timeout is not None:
        timeout = yf.number(timeout, "measure.case_timeout_s")
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise yf.Invalid(
                "measure.case_timeout_s",
                f"must be > 0 and at most {MAX_TIMEOUT_S:g} seconds (or null), got {timeout:g}",
            )
    cold = yf.boolean(m.get("cold_weights", False), "measure.cold_weights")
    copies = m.get("weight_copies")
    if copies is not None:
        copies = yf.integer(copies, "measure.weight_copies", 2, MAX_WEIGHT_COPIES)
        if not cold:
            raise yf.Invalid("measure.weight_copies", "needs measure.cold_weights: true")
    return MeasureSpec(
        regimes=yf.choices(m.get("regimes", DEFAULT_REGIMES), "measure.regimes", REGIMES),
        stages=yf.choices(
            m.get("stages", FAMILY_STAGES[family]), "measure.stages", FAMILY_STAGES[family]
        ),
        warmup=yf.integer(m.get("warmup", 2), "measure.warmup", 0, 10_000),
        blocks=yf.integer(m.get("blocks", 5), "measure.blocks", 1, 10_000),
        iterations=yf.integer(m.get("iterations", 5), "measure.iterations", 1, 100_000),
        ranks=ranks,
        baseline=yf.string(m.get("baseline", FAMILY_BASELINE[family]), "measure.baseline"),
        graph=yf.boolean(m.get("graph", True), "measure.graph"),
        aa=yf.boolean(m.get("aa", False), "measure.aa"),
        case_timeout_s=timeout,
        flush_l2=yf.boolean(m.get("flush_l2", True), "measure.flush_l2"),
        cold_weights=cold,
        weight_copies=copies,
    )


def _expect_sources(v: Any, arms: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pins = yf.section(v, "expect_sources", KNOWN_ARMS)
    out = []
    for arm, digest in pins.items():
        path = f"expect_sources.{arm}"
        if arm not in arms:
            raise yf.Invalid(path, f"pins an arm this scenario does not run ({', '.join(arms)})")
        digest = yf.string(digest, path)
        if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
            raise yf.Invalid(path, f"expected a sha256 (64 hex digits), got {yf.show(digest)}")
        out.append((arm, digest.lower()))
    return tuple(sorted(out))


def _family(arms: tuple[str, ...]) -> str:
    """The one family of the scenario's arms (arms of two families need two scenarios: their
    inputs, precisions and stages differ)."""
    family = registry.family(arms[0])
    for i, arm in enumerate(arms):
        if registry.family(arm) != family:
            raise yf.Invalid(
                f"arms[{i}]",
                f"{arm!r} is a {registry.family(arm)} arm but {arms[0]!r} is a {family} arm; "
                "a scenario runs arms of one family",
            )
    return family


def _optional(doc: dict, key: str) -> Any:
    """An optional section; written empty (``topology:``) it means all defaults."""
    v = doc.get(key)
    return {} if v is None else v


def _build(doc: dict, ctx: _Ctx) -> Scenario:
    """One scenario from a document (its sweep parsed, not expanded)."""
    yf.section(doc, "", TOP_KEYS)
    for k in ("name", "model", "shape"):
        if k not in doc:
            raise yf.Invalid(k, "required")
    arms = yf.choices(doc.get("arms", DEFAULT_ARMS), "arms", KNOWN_ARMS)
    family = _family(arms)
    model = _model(doc["model"], family)
    topology = _topology(_optional(doc, "topology"))
    routing = _routing(_optional(doc, "routing"), ctx)
    shape = _shape(doc["shape"])
    measure = _measure(_optional(doc, "measure"), family)
    precision = yf.choice(
        doc.get("precision", FAMILY_PRECISIONS[family][0]), "precision", PRECISIONS
    )
    if precision not in FAMILY_PRECISIONS[family]:
        raise yf.Invalid(
            "precision",
            f"{precision!r} is not a precision of the {family} arms ({', '.join(arms)}); "
            f"they take {', '.join(FAMILY_PRECISIONS[family])}",
        )
    gemm = yf.choice(doc.get("gemm", "triton"), "gemm", GEMMS)
    if gemm == "torch" and (family != "prefill" or precision != "bf16"):
        raise yf.Invalid(
            "gemm",
            "torch runs the prefill arms' GEMMs through torch._grouped_mm, with precision bf16 "
            "only: torch._scaled_grouped_mm on SM90 takes tensorwise or rowwise fp8 scales, not "
            "the 128-column UE8M0 groups this pipeline quantises to",
        )
    ep, local = topology.ep, model.experts // topology.ep
    if model.experts % ep:
        raise yf.Invalid("topology.ep", f"must divide model.experts ({model.experts}), got {ep}")
    if routing.family == "trace":
        _check_trace_model(routing.path, model)
    if measure.cold_weights and topology.mode == "distributed":
        raise yf.Invalid(
            "measure.cold_weights", "rotates weights in simulated mode only, not distributed"
        )
    if routing.hot_rank >= ep:
        raise yf.Invalid(
            "routing.hot_rank", f"must be < topology.ep ({ep}), got {routing.hot_rank}"
        )
    for i, r in enumerate(measure.ranks or ()):
        if r >= ep:
            raise yf.Invalid(f"measure.ranks[{i}]", f"must be in [0, topology.ep = {ep}), got {r}")
    if measure.baseline not in arms:
        raise yf.Invalid(
            "measure.baseline",
            f"must be one of the scenario's arms ({', '.join(arms)}); "
            f"got {yf.show(measure.baseline)}",
        )
    if routing.family == "empty_experts":
        left = model.experts - int(round(routing.empty_fraction * model.experts))
        if left < model.top_k:
            raise yf.Invalid(
                "routing.empty_fraction",
                f"{routing.empty_fraction:g} leaves {left} of {model.experts} experts, "
                f"fewer than model.top_k ({model.top_k})",
            )
    tokens = shape.tokens_per_rank * topology.dp
    n_ranks = len(measure.ranks) if measure.ranks is not None else ep
    n_timed = ("ffn" in measure.regimes) + len(measure.stages) * ("kernel" in measure.regimes)
    n_samples = n_ranks * len(arms) * measure.blocks * measure.iterations * n_timed
    if n_samples > MAX_SAMPLES:
        raise yf.Invalid(
            "measure.iterations",
            f"a case would record {n_samples:,} samples (ranks x arms x blocks x iterations x "
            f"timed stages); at most {MAX_SAMPLES:,}",
        )
    if routing.family == "full_capacity":
        slots = tokens * model.top_k
        if slots % model.experts or (slots // model.experts) % shape.alignment:
            step = (
                model.experts
                * shape.alignment
                // math.gcd(model.experts * shape.alignment, model.top_k)
            )
            raise yf.Invalid(
                "shape.tokens_per_rank",
                f"full_capacity routing needs tokens_per_rank * dp * top_k / experts to"
                f" be a multiple of shape.alignment: tokens_per_rank * dp must be a "
                f"multiple of {step}, got {shape.tokens_per_rank} * {topology.dp}",
            )
    if isinstance(shape.capacity, str):  # 'tight' never exceeds the formula
        rows = capacity_rows(shape.tokens_per_rank, ep, model.top_k, local, shape.alignment)
        if rows > MAX_ROWS:
            raise yf.Invalid(
                "shape.tokens_per_rank",
                f"the capacity buffer would need {rows} rows (tokens_per_rank * ep * "
                f"top_k + local_experts * alignment); row indices are int32",
            )
    if tokens * model.experts > MAX_DRAWS:
        raise yf.Invalid(
            "shape.tokens_per_rank",
            f"the routing would draw tokens_per_rank * dp * experts = {tokens * model.experts:,} "
            f"random numbers on the host; at most {MAX_DRAWS:,}",
        )
    return Scenario(
        name=yf.text(doc["name"], "name"),
        description=yf.string(doc.get("description", ""), "description"),
        model=model,
        topology=topology,
        routing=routing,
        shape=shape,
        precision=precision,
        activation=yf.choice(doc.get("activation", "silu"), "activation", ACTIVATIONS),
        gemm=gemm,
        arms=arms,
        measure=measure,
        sweep=_sweep(_optional(doc, "sweep")),
        expect_sources=_expect_sources(_optional(doc, "expect_sources"), arms),
        device=yf.choice(doc.get("device", "auto"), "device", DEVICES),
        path=str(ctx.path) if ctx.path is not None else None,
        text=ctx.text,
        sha256=hashlib.sha256(ctx.text.encode("utf-8", "surrogatepass")).hexdigest(),
    )


# --- the sweep ---------------------------------------------------------------------------------


def _plain(v: Any) -> Any:
    """Tuples to lists, recursively (YAML and JSON friendly)."""
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    return v


def _sweep_value(v: Any, path: str) -> Any:
    scalar = (type(None), bool, int, float, str)
    if isinstance(v, scalar):
        return v
    if isinstance(v, list | tuple) and all(isinstance(x, scalar) for x in v):
        return tuple(v)
    raise yf.Invalid(path, f"expected a scalar or a list of scalars, got {yf.describe(v)}")


def _sweep(v: Any) -> tuple[tuple[str, tuple], ...]:
    s = yf.section(v, "sweep", SWEEPABLE) if isinstance(v, dict) else None
    if s is None:
        raise yf.Invalid(
            "sweep", f"expected a mapping of field paths to lists, got {yf.describe(v)}"
        )
    out, cases = [], 1
    for key, values in s.items():
        path = f"sweep.{key}"
        values = yf.sequence(values, path)
        cases *= len(values)
        if cases > MAX_CASES:
            raise yf.Invalid("sweep", f"the product of the lists exceeds {MAX_CASES:,} cases")
        out.append((key, tuple(_sweep_value(x, f"{path}[{i}]") for i, x in enumerate(values))))
    return tuple(out)


def _apply(doc: dict, dotted: str, value: Any) -> dict:
    """A copy of the document with one field set (sections copied, never mutated in place)."""
    doc = dict(doc)
    if "." not in dotted:
        doc[dotted] = _plain(value)
        return doc
    section, key = dotted.split(".")
    current = doc.get(section)
    if isinstance(current, str) and section in ("model", "routing"):
        current = {"preset" if section == "model" else "family": current}
    current = dict(current) if isinstance(current, dict) else {}
    current[key] = _plain(value)
    doc[section] = current
    return doc


def _id_value(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple | list):
        return "_".join(_id_value(x) for x in v)
    return repr(v) if isinstance(v, float) else str(v)


def _case_id(index: int, n: int, params: tuple[tuple[str, Any], ...]) -> str:
    width = max(3, len(str(n - 1)))
    parts = [f"c{index:0{width}d}"]
    parts += [f"{p.rsplit('.', 1)[-1]}={_id_value(v)}" for p, v in params]
    return re.sub(r"[^A-Za-z0-9._=-]", "_", "-".join(parts))[:CASE_ID_MAX]


def _first_case(raw: dict, sweep: tuple[tuple[str, tuple], ...]) -> dict:
    """The document with every swept field set to its sweep's first value, sweep removed."""
    doc = dict(raw)
    doc.pop("sweep", None)
    for dotted, values in sweep:
        doc = _apply(doc, dotted, values[0])
    return doc


def _swept_path(field_path: str, swept: list[str]) -> str | None:
    """The swept path a failing field belongs to (``measure.ranks[1]`` -> ``measure.ranks``)."""
    for p in swept:
        if field_path == p or field_path.startswith((f"{p}[", f"{p}.")):
            return p
    return None


def _cases(scenario: Scenario, raw: dict, ctx: _Ctx):
    """Yield the validated cases of a swept scenario, built from its document as written.

    A failing case is blamed on the swept value at the failing field's path, or on the only swept
    field when there is one (case 0 is the scenario itself and was validated already).
    """
    base = _first_case(raw, scenario.sweep)
    paths = [p for p, _ in scenario.sweep]
    sizes = [len(values) for _, values in scenario.sweep]
    n = math.prod(sizes)
    for index, picks in enumerate(itertools.product(*(range(k) for k in sizes))):
        params = tuple((p, values[i]) for (p, values), i in zip(scenario.sweep, picks, strict=True))
        doc = base
        for p, v in params:
            doc = _apply(doc, p, v)
        case_id = _case_id(index, n, params)
        try:
            s = _build(doc, ctx)
        except yf.Invalid as exc:
            inner = f"{exc.path}: {exc.message}"
            blame = _swept_path(exc.path, paths) or (paths[0] if len(paths) == 1 else None)
            if blame is not None:
                i = picks[paths.index(blame)]
                raise yf.Invalid(f"sweep.{blame}[{i}]", f"{inner} (case {case_id})") from None
            where = ", ".join(f"{p}={_id_value(v)}" for p, v in params)
            raise yf.Invalid("sweep", f"case {case_id} ({where}): {inner}") from None
        yield Case(case_id=case_id, index=index, scenario=s, params=params)
