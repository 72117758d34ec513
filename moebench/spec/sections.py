"""The checks of each section of a scenario document: each reads one section (``model``,
``topology``, ``routing``, ``shape``, ``measure``, ``expect_sources``, ``sweep``) and returns its
value or raises ``fields.Invalid`` naming the field path. The checks that span sections (an arm
family's precisions, ep dividing the experts, the size of a case) are ``moebench.spec.build``'s.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from moebench.arm import registry
from moebench.arm.base import Arm
from moebench.core.errors import TraceError
from moebench.core.families import facts
from moebench.core.models import PRESETS
from moebench.core.vocabulary import DEFAULT_REGIMES, REGIMES, ROUTING_FAMILIES
from moebench.routing.traces import read_meta, replay_hint
from moebench.spec import fields as yf
from moebench.spec.schema import (
    CAPACITIES,
    MAX_CASES,
    MAX_EXPERTS,
    MAX_INPUT_SETS,
    MAX_RANKS,
    MAX_ROWS,
    MAX_SEED,
    MAX_TIMEOUT_S,
    MAX_TOKENS,
    MAX_WEIGHT_COPIES,
    MAX_WIDTH,
    MODEL_FIELDS,
    MODEL_LAYER_FIELDS,
    MODES,
    ROUTING_KEYS,
    SWEEPABLE,
    MeasureSpec,
    ModelSpec,
    RoutingSpec,
    ShapeSpec,
    TopologySpec,
)


@dataclass(frozen=True)
class Origin:
    """Where a document came from: ``path`` names it in errors and anchors relative trace paths
    (None: a string, anchored at the working directory); ``text`` is the document as written."""

    path: str | os.PathLike | None
    text: str

    @property
    def folder(self) -> Path:
        return Path(self.path).parent if self.path is not None else Path.cwd()


def model_section(v: Any, family: str) -> ModelSpec:
    """The model: a preset name, a preset with fields overridden, or every field. The value keeps
    the preset's name; ``ModelSpec.label`` marks it modified wherever a field differs."""
    if isinstance(v, str):
        m, preset_path = {"preset": v}, "model"
    else:
        keys = ("preset", *MODEL_FIELDS, *MODEL_LAYER_FIELDS)
        m, preset_path = yf.section(v, "model", keys), "model.preset"
    preset = m.get("preset")
    if preset is not None:
        preset = yf.string(preset, preset_path)
        if preset not in PRESETS:
            raise yf.Invalid(
                preset_path,
                f"unknown preset {yf.show(preset)}; expected one of {', '.join(PRESETS)}",
            )
        merged = {k: PRESETS[preset][k] for k in (*MODEL_FIELDS, *MODEL_LAYER_FIELDS)}
    else:
        for k in MODEL_FIELDS:
            if k not in m and k != "revision":
                raise yf.Invalid(f"model.{k}", "required when the model names no preset")
        merged = {"revision": "unpinned", "layers": 1, "dense_layers": ()}
    merged.update({k: m[k] for k in (*MODEL_FIELDS, *MODEL_LAYER_FIELDS) if k in m})
    layers = yf.integer(merged["layers"], "model.layers", 1, 10_000)
    dense = []
    raw = merged["dense_layers"]
    listed = (
        [] if isinstance(raw, list | tuple) and not raw else yf.sequence(raw, "model.dense_layers")
    )
    for i, d in enumerate(listed):
        d = yf.integer(d, f"model.dense_layers[{i}]", 0, layers - 1)
        if d in dense:
            raise yf.Invalid(f"model.dense_layers[{i}]", f"layer {d} is listed twice")
        dense.append(d)
    if len(dense) == layers:
        raise yf.Invalid("model.dense_layers", f"leaves none of the {layers} layers with an MoE")
    hidden = yf.integer(merged["hidden"], "model.hidden", 1, MAX_WIDTH)
    intermediate = yf.integer(merged["intermediate"], "model.intermediate", 1, MAX_WIDTH)
    multiple, why = facts(family).width, facts(family).width_why
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
        layers=layers,
        dense_layers=tuple(sorted(dense)),
    )


def topology_section(v: Any) -> TopologySpec:
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


def routing_section(v: Any, origin: Origin) -> RoutingSpec:
    r = {"family": v} if isinstance(v, str) else yf.section(v, "routing", ROUTING_KEYS)
    family = yf.choice(r.get("family", "uniform"), "routing.family", ROUTING_FAMILIES)
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
        resolved = origin.folder / path
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


def check_trace_model(path: str, model: ModelSpec) -> None:
    """A moebench Parquet trace is pinned to a model id and revision: they must be the scenario's.
    Raw files (SGLang JSON, count matrices) carry no model and replay as the scenario's."""
    if not path.lower().endswith(".parquet"):
        return
    try:
        meta = read_meta(path)
    except TraceError as exc:
        raise yf.Invalid("routing.path", str(exc)) from None
    if (meta["model_id"], meta["revision"]) != (model.id, model.revision):
        # Same model, another revision: legitimate (a trace recorded on another commit), and
        # fixed by naming that revision, in the words of `trace import`'s warning.
        hint = (
            f"; {replay_hint(model.id, meta['revision'])}" if meta["model_id"] == model.id else ""
        )
        named = f" (preset {model.preset}{', modified' if model.modified else ''})"
        named = named if model.preset else ""
        raise yf.Invalid(
            "routing.path",
            f"trace {Path(path).name} is pinned to {meta['model_id']} at revision "
            f"{meta['revision']}, the scenario's model is {model.id} at revision "
            f"{model.revision}{named}{hint}",
        )
    if meta["experts"] != model.experts:
        raise yf.Invalid(
            "routing.path",
            f"trace {Path(path).name} has {meta['experts']} experts, model.experts is "
            f"{model.experts}",
        )


def shape_section(v: Any) -> ShapeSpec:
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


def measure_section(v: Any, family: str) -> MeasureSpec:
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
    blocks = yf.integer(m.get("blocks", MeasureSpec.blocks), "measure.blocks", 1, 10_000)
    target = m.get("target_cv")
    if target is not None:
        target = yf.number(target, "measure.target_cv")
        if not 0 < target <= 100:
            raise yf.Invalid("measure.target_cv", f"must be a percent in (0, 100], got {target:g}")
    most = m.get("max_blocks")
    if most is not None:
        most = yf.integer(most, "measure.max_blocks", blocks, 10_000)
        if target is None:
            raise yf.Invalid("measure.max_blocks", "needs measure.target_cv")
    budget = m.get("time_budget_s")
    if budget is not None:
        budget = yf.number(budget, "measure.time_budget_s")
        if not 0 < budget <= MAX_TIMEOUT_S:
            raise yf.Invalid("measure.time_budget_s", f"must be > 0 seconds, got {budget:g}")
        if target is None:
            raise yf.Invalid("measure.time_budget_s", "needs measure.target_cv")
    if target is not None and most is None:
        most = min(10 * blocks, 10_000)
    return MeasureSpec(
        regimes=yf.choices(m.get("regimes", DEFAULT_REGIMES), "measure.regimes", REGIMES),
        stages=yf.choices(
            m.get("stages", facts(family).stages), "measure.stages", facts(family).stages
        ),
        warmup=yf.integer(m.get("warmup", 2), "measure.warmup", 0, 10_000),
        blocks=blocks,
        iterations=yf.integer(m.get("iterations", 5), "measure.iterations", 1, 100_000),
        ranks=ranks,
        baseline=yf.string(m.get("baseline", facts(family).baseline), "measure.baseline"),
        graph=yf.boolean(m.get("graph", True), "measure.graph"),
        aa=yf.boolean(m.get("aa", False), "measure.aa"),
        case_timeout_s=timeout,
        flush_l2=yf.boolean(m.get("flush_l2", True), "measure.flush_l2"),
        cold_weights=cold,
        weight_copies=copies,
        target_cv=target,
        max_blocks=most,
        time_budget_s=budget,
        input_sets=yf.integer(
            m.get("input_sets", MeasureSpec.input_sets), "measure.input_sets", 1, MAX_INPUT_SETS
        ),  # fmt: skip
    )


def expect_sources_section(v: Any, arms: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pins = yf.section(v, "expect_sources", tuple(dict.fromkeys((*arms, *registry.BUILTIN))))
    for arm in pins:
        if not isinstance(arm, str) or arm not in arms:
            raise yf.Invalid(
                f"expect_sources.{arm}",
                f"pins an arm this scenario does not run ({', '.join(arms)})",
            )
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


def arms_section(
    v: Any, origin: Origin, *, model: Any = None, activation: str = ""
) -> tuple[tuple[Arm, ...], tuple[str, ...], str]:
    """(arms, references, family) of the scenario's arms. An entry is a built-in name, an import
    string ``module:ATTR``, a file ``path.py:ATTR`` relative to the scenario, an installed entry
    point or ``hf:<backend>`` (moebench/arm/registry.py); each is resolved now, so that a bad
    reference is one line naming ``arms[i]`` before any work. The arms share one family (arms of
    two families need two scenarios: their inputs, precisions and stages differ).

    An ``hf:`` arm depends on its scenario, so it is resolved last, bound (``registry.bind``) to
    what the scenario knows by then: the family of the other arms, the model's preset
    (``model``: the document's model section, read here for its preset only) and the activation
    (``activation``: the scenario's, checked); the references returned are the bound
    ones, which every later resolution reads (``plan.cases.run_arms``). Alone in a scenario, the
    ``hf:`` arms take their family from the preset's transformers family."""
    refs = yf.sequence(v, "arms")
    if not refs:
        raise yf.Invalid("arms", "lists no arm")
    written = []
    for i, ref in enumerate(refs):
        ref = yf.string(ref, f"arms[{i}]")
        if "~" in ref:
            raise yf.Invalid(
                f"arms[{i}]", f"{ref!r}: '~' is reserved for the A/A copy (measure.aa)"
            )
        written.append(ref)
    # The arms that do not depend on the scenario first: their family is the hf: arms' context.
    # A failure is kept, to be raised at its own index, so that the first bad entry is named.
    found: dict[int, Arm | registry.ArmError] = {}
    for i, ref in enumerate(written):
        if registry.kind_of(ref) != "transformers":
            try:
                found[i] = registry.resolve(ref, origin.folder)
            except registry.ArmError as exc:
                found[i] = exc
    others = [a.family for a in found.values() if isinstance(a, Arm)]
    context = registry.Context(
        family=str(facts(others[0]).name) if others else "",
        model=_preset_of(model),
        activation=activation,
    )
    arms, names, bound, family = [], [], [], None
    for i, ref in enumerate(written):
        path = f"arms[{i}]"
        try:
            if i in found and isinstance(found[i], registry.ArmError):
                raise found[i]
            bound.append(registry.bind(ref, context))
            arm = found.get(i) or registry.resolve(bound[-1], origin.folder)
        except registry.ArmError as exc:
            raise yf.Invalid(path, str(exc)) from None
        if arm.name in names:
            raise yf.Invalid(path, f"{ref!r}: an arm named {arm.name!r} is listed twice")
        if family is None:
            family = facts(arm.family).name
        elif arm.family != family:
            raise yf.Invalid(
                path,
                f"{arm.name!r} is a {arm.family} arm but {names[0]!r} is a {family} arm; "
                "a scenario runs arms of one family",
            )
        names.append(arm.name)
        arms.append(arm)
    return tuple(arms), tuple(bound), family


def _preset_of(model: Any) -> str:
    """The preset a model section names (a name, or ``preset:`` in a mapping); empty when it names
    none or one that does not exist (``model_section`` says so, after the arms)."""
    preset = model.get("preset") if isinstance(model, dict) else model
    return preset if isinstance(preset, str) and preset in PRESETS else ""


def optional_section(doc: dict, key: str) -> Any:
    """An optional section; written empty (``topology:``) it means all defaults."""
    v = doc.get(key)
    return {} if v is None else v


# --- the sweep ---------------------------------------------------------------------------------


def _sweep_value(v: Any, path: str) -> Any:
    scalar = (type(None), bool, int, float, str)
    if isinstance(v, scalar):
        return v
    if isinstance(v, list | tuple) and all(isinstance(x, scalar) for x in v):
        return tuple(v)
    raise yf.Invalid(path, f"expected a scalar or a list of scalars, got {yf.describe(v)}")


def sweep_section(v: Any) -> tuple[tuple[str, tuple], ...]:
    """The ``sweep`` section: (field path, values) pairs in the document's order, parsed, not
    expanded (``moebench.spec.sweep`` expands them)."""
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
