"""One scenario from one document: every section checked (``moebench.spec.sections``), then the
checks that span sections (the arms' family decides the precisions and GEMMs; ep divides the
experts; a trace is pinned to the scenario's model; a case's samples, capacity rows and routing
draws stay within bounds).

A document with a sweep is built once per case by ``moebench.spec.sweep``; reading a file or a
string is ``moebench.spec.load``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

from moebench.core.families import PRECISIONS, facts
from moebench.core.layout import capacity_rows
from moebench.core.vocabulary import ACTIVATIONS, Regime
from moebench.spec import fields as yf
from moebench.spec.model import check_model_regime, model_run_section, model_samples
from moebench.spec.schema import (
    DEFAULT_ARMS,
    DEVICES,
    GEMMS,
    MAX_DRAWS,
    MAX_ROWS,
    MAX_SAMPLES,
    TOP_KEYS,
    MeasureSpec,
    ModelRunSpec,
    Scenario,
    StepSpec,
)
from moebench.spec.sections import (
    Origin,
    arms_section,
    check_trace_model,
    expect_sources_section,
    measure_section,
    model_section,
    optional_section,
    routing_section,
    shape_section,
    sweep_section,
    topology_section,
)
from moebench.spec.step import step_layers, step_section


def timed_samples(
    measure: MeasureSpec,
    ranks: int,
    arms: int,
    step: StepSpec | None = None,
    layers: int = 0,
    *,
    whole_ffn: int = 0,
) -> int:
    """Samples one case records: ranks x blocks x iterations x the stages each arm times (``ffn``,
    and in the kernel regime each of ``measure.stages`` that the arm has). A staged arm has every
    stage of its family; a whole-FFN arm only the sub-stages its ``prepare`` names, which are
    known when it runs, not before: ``whole_ffn`` of the ``arms`` are counted with their ``ffn``
    samples alone (what ``moebench validate`` shows, saying "plus any sub-stages it names").
    Left 0, every arm counts every stage: a bound (a whole-FFN arm names a stage at most once),
    which the limit below and the free-space check use. With ``measure.target_cv``, at most
    ``max_blocks`` blocks. The step regime: ranks x arms x steps x step blocks x iterations x
    (each layer, and the whole step)."""
    if step is not None:
        return ranks * arms * step.steps * step.blocks * measure.iterations * (layers + 1)
    ffn = Regime.FFN in measure.regimes
    kernel = len(measure.stages) * (Regime.KERNEL in measure.regimes)
    blocks = max(measure.blocks, measure.max_blocks or 0)
    return ranks * blocks * measure.iterations * (arms * ffn + (arms - whole_ffn) * kernel)


def build_scenario(doc: dict, origin: Origin) -> Scenario:
    """One scenario from a document (its sweep parsed, not expanded)."""
    yf.section(doc, "", TOP_KEYS)
    model_run = model_run_section(doc["model_run"]) if doc.get("model_run") is not None else None
    for k in ("name", "model", *(("shape",) if model_run is None else ())):
        if k not in doc:
            raise yf.Invalid(k, "required")
    # The activation before the arms: an hf: arm builds an experts class that computes it.
    activation = yf.choice(doc.get("activation", "silu"), "activation", ACTIVATIONS)
    resolved, arm_refs, family = arms_section(
        doc.get("arms", DEFAULT_ARMS), origin, model=doc["model"], activation=activation
    )
    arms = tuple(a.name for a in resolved)
    model = model_section(doc["model"], family)
    topology = topology_section(optional_section(doc, "topology"))
    routing = routing_section(optional_section(doc, "routing"), origin)
    shape = _shape(doc, model_run)
    measure_doc = optional_section(doc, "measure")
    measure = measure_section(measure_doc, family)
    step_doc = doc.get("step")
    step = _step(doc, model, routing, shape, measure)
    if model_run is not None or Regime.MODEL in measure.regimes:
        if model_run is None:
            raise yf.Invalid("model_run", "required by measure.regimes: [model]")
        check_model_regime(doc, model_run, model=model, topology=topology, routing=routing,
                           measure=measure)  # fmt: skip
        measure = dataclasses.replace(measure, iterations=1)
    precision = yf.choice(
        doc.get("precision", facts(family).precisions[0]), "precision", PRECISIONS
    )
    if precision not in facts(family).precisions:
        raise yf.Invalid(
            "precision",
            f"{precision!r} is not a precision of the {family} arms ({', '.join(arms)}); "
            f"they take {', '.join(facts(family).precisions)}",
        )
    for i, arm in enumerate(resolved):
        if not arm.runs(precision):
            why = f": {arm.precision_note}" if arm.precision_note else ""
            raise yf.Invalid(
                f"arms[{i}]",
                f"{arm.name!r} runs precision {', '.join(arm.precisions)} only, not "
                f"{precision!r}{why}",
            )
    gemm = yf.choice(doc.get("gemm", "triton"), "gemm", GEMMS)
    if gemm == "torch" and precision not in facts(family).torch_gemm:
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
        check_trace_model(routing.path, model)
    if measure.cold_weights and topology.mode == "distributed":
        raise yf.Invalid(
            "measure.cold_weights", "rotates weights in simulated mode only, not distributed"
        )
    if measure.input_sets > 1 and (topology.mode == "distributed" or step_doc is not None):
        if "input_sets" in measure_doc:
            raise yf.Invalid(
                "measure.input_sets",
                "rotates input sets in the one-layer regimes in simulated mode only (a model step "
                "draws its own routing every step; the ranks of a distributed run would have to "
                "rotate together); leave it out or set 1",
            )
        measure = dataclasses.replace(measure, input_sets=1)
    if measure.target_cv is not None and topology.mode == "distributed":
        raise yf.Invalid(
            "measure.target_cv",
            "adds blocks in simulated mode only (the ranks of a distributed run would have to "
            "agree on every extra block); set measure.blocks",
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
    n_layers = len(step_layers(step, model)) if step is not None else 0
    n_samples = (timed_samples(measure, n_ranks, len(arms), step, n_layers) if model_run is None
                 else model_samples(model_run, measure, len(arms)))  # fmt: skip
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
        activation=activation,
        gemm=gemm,
        arms=arms,
        arm_refs=arm_refs,
        family=family,
        measure=measure,
        step=step,
        model_run=model_run,
        sweep=sweep_section(optional_section(doc, "sweep")),
        expect_sources=expect_sources_section(optional_section(doc, "expect_sources"), arms),
        device=yf.choice(doc.get("device", "auto"), "device", DEVICES),
        path=str(origin.path) if origin.path is not None else None,
        text=origin.text,
        sha256=hashlib.sha256(origin.text.encode("utf-8", "surrogatepass")).hexdigest(),
    )


def _shape(doc: dict, model_run: ModelRunSpec | None):
    """The shape section; in the model regime its tokens are the batch (a prefill arm's
    capacity alignment may be written)."""
    if model_run is None:
        return shape_section(doc["shape"])
    written = optional_section(doc, "shape")
    if isinstance(written, dict) and written.get("tokens_per_rank", model_run.batch) != (
        model_run.batch
    ):
        raise yf.Invalid("shape.tokens_per_rank", "the model regime's tokens per step are "
                         "model_run.batch; leave it out")  # fmt: skip
    return shape_section({**yf.section(written, "shape", ("alignment", "capacity",
                                                          "tokens_per_rank")),
                          "tokens_per_rank": model_run.batch})  # fmt: skip


def _step(doc, model, routing, shape, measure) -> StepSpec | None:
    """The step section, when the step regime runs, and the rules it sets for the others."""
    regime = Regime.STEP in measure.regimes
    if not regime:
        if doc.get("step") is not None:
            raise yf.Invalid("step", "needs measure.regimes: [step]")
        return None
    if tuple(measure.regimes) != (Regime.STEP,):
        raise yf.Invalid(
            "measure.regimes",
            "step runs alone: it times whole model steps (ffn, kernel and profile time one "
            "layer: give them their own scenario)",
        )
    if routing.layer is not None:
        raise yf.Invalid(
            "routing.layer",
            "the step regime replays each model layer's own row of the trace; leave it out",
        )
    if shape.capacity == "tight":
        raise yf.Invalid(
            "shape.capacity",
            "tight fits one routing; every step draws its own: use formula or a number of rows",
        )
    for key, why in (("target_cv", "steps, not blocks, are the step regime's samples"),
                     ("cold_weights", "every layer has its own weights already")):  # fmt: skip
        if getattr(measure, key):
            raise yf.Invalid(f"measure.{key}", f"not with the step regime: {why}")
    return step_section(doc.get("step"), model)
