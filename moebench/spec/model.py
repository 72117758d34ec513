"""The scenario's ``model_run`` section: what the ``model`` regime times of a whole transformers
model (docs/DESIGN.md section 14; issue 27), and the rules it sets for the other sections.

    model: {preset: gpt-oss-20b, layers: 4}  # layers: keep the model's first N layers
    measure:
      regimes: [model]          # alone
      blocks: 8                 # each block times every arm's prefill and decode steps once
    model_run:
      batch: 16                 # sequences decoded together (sweep it for goodput)
      context: 1024             # tokens in each sequence's KV cache when the timed decode starts
      prompt: 128               # tokens of each sequence's prefill (its time is the TTFT)
      decode_steps: 32          # timed decode steps a block, each a TPOT sample
      check_steps: 2            # decode steps the gates check, before timing and after
      stages: [prefill, decode] # what is timed
      routing: router           # the model's own router; trace: each layer's recorded load
      slo_tpot_ms: 50           # SLO on the measured P99 TPOT, for goodput; omitted: none
      attention: sdpa           # transformers' attention implementation; omitted: the model's
      prefill_graph: true       # the prefill one CUDA graph (on a GPU, where the decode step is)
      config: {}                # transformers config fields over the preset's (a tiny model)

What needs transformers (the preset's config, the keys of ``config``, the experts class the arms
take) is checked when the case is planned (``moebench.integrations.transformers.model``), still
before any work.
"""

from __future__ import annotations

from typing import Any

from moebench.core.models import PRESETS
from moebench.core.vocabulary import MODEL_DECODE, MODEL_PREFILL, MODEL_STAGES, Regime
from moebench.spec import fields as yf
from moebench.spec.schema import (
    MAX_TOKENS,
    MODEL_RUN_KEYS,
    MeasureSpec,
    ModelRunSpec,
    ModelSpec,
    RoutingSpec,
    TopologySpec,
)

ROUTINGS = ("router", "trace")
MAX_BATCH = 1 << 14
MAX_DECODE_STEPS = 100_000
ATTENTIONS = ("eager", "sdpa")  # the masks moebench hands the model are additive, 4-D


def model_run_section(v: Any) -> ModelRunSpec:
    """The ``model_run`` section's own fields."""
    m = yf.section({} if v is None else v, "model_run", MODEL_RUN_KEYS)
    d = ModelRunSpec()
    steps = yf.integer(m.get("decode_steps", d.decode_steps), "model_run.decode_steps", 1,
                       MAX_DECODE_STEPS)  # fmt: skip
    slo = m.get("slo_tpot_ms")
    if slo is not None:
        slo = yf.number(slo, "model_run.slo_tpot_ms")
        if not slo > 0:
            raise yf.Invalid("model_run.slo_tpot_ms", f"must be > 0 ms, got {slo:g}")
    attention = m.get("attention")
    if attention is not None:
        attention = yf.choice(attention, "model_run.attention", ATTENTIONS)
    return ModelRunSpec(
        batch=yf.integer(m.get("batch", d.batch), "model_run.batch", 1, MAX_BATCH),
        context=yf.integer(m.get("context", d.context), "model_run.context", 1, MAX_TOKENS),
        prompt=yf.integer(m.get("prompt", d.prompt), "model_run.prompt", 1, MAX_TOKENS),
        decode_steps=steps,
        check_steps=yf.integer(
            m.get("check_steps", d.check_steps), "model_run.check_steps", 1, steps
        ),  # fmt: skip
        stages=yf.choices(m.get("stages", list(d.stages)), "model_run.stages", MODEL_STAGES),
        routing=yf.choice(m.get("routing", d.routing), "model_run.routing", ROUTINGS),
        slo_tpot_ms=slo,
        attention=attention,
        prefill_graph=yf.boolean(
            m.get("prefill_graph", d.prefill_graph), "model_run.prefill_graph"
        ),
        config=_config(m.get("config", {})),
    )


def _config(v: Any) -> tuple[tuple[str, Any], ...]:
    """transformers config fields: names, each a scalar or a list of scalars (the names are
    checked against the config class when the case is planned)."""
    if not isinstance(v, dict):
        raise yf.Invalid("model_run.config", f"expected a mapping, got {yf.describe(v)}")
    out = []
    for key, value in v.items():
        if not isinstance(key, str):
            raise yf.Invalid("model_run.config", f"keys must be strings, got {yf.describe(key)}")
        path = yf.join("model_run.config", key)
        for item in value if isinstance(value, list) else [value]:
            if not (item is None or isinstance(item, bool | int | float | str)):
                raise yf.Invalid(path, "expected a scalar or a list of scalars, got "
                                       f"{yf.describe(item)}")  # fmt: skip
        out.append((key, tuple(value) if isinstance(value, list) else value))
    return tuple(sorted(out))


def check_model_regime(
    doc: dict,
    run: ModelRunSpec,
    *,
    model: ModelSpec,
    topology: TopologySpec,
    routing: RoutingSpec,
    measure: MeasureSpec,
) -> None:
    """The rules the model regime sets for the other sections, one ``Invalid`` line each."""
    if Regime.MODEL not in measure.regimes:
        raise yf.Invalid("measure.regimes", "model_run is read by the model regime: write "
                         "measure.regimes: [model]")  # fmt: skip
    if tuple(measure.regimes) != (Regime.MODEL,):
        raise yf.Invalid("measure.regimes", "model runs alone: it times a whole model (ffn, "
                         "kernel, profile and step time MoE layers: give them their own "
                         "scenario)")  # fmt: skip
    if topology.mode != "simulated" or (topology.ep, topology.dp, topology.tp) != (1, 1, 1):
        raise yf.Invalid(
            "topology",
            "the model regime runs a whole model on one device (ep, dp "
            "and tp 1, mode simulated); a distributed model is not measured here",
        )
    if model.preset is None:
        raise yf.Invalid("model.preset", "the model regime builds a preset's transformers model; "
                         f"name one of {', '.join(PRESETS)}")  # fmt: skip
    most = PRESETS[model.preset]["layers"]
    if model.layers > most:
        raise yf.Invalid("model.layers", f"keeps the first N of {model.preset}'s {most} layers; "
                         f"got {model.layers}")  # fmt: skip
    if routing.layer is not None:
        raise yf.Invalid("routing.layer", "the model regime replays each model layer's own row "
                         "of the trace; leave it out")  # fmt: skip
    written = doc.get("routing")
    if run.routing == "trace" and routing.family != "trace":
        raise yf.Invalid("model_run.routing", "trace needs the load file: routing: {source: "
                         "trace, path: ...}")  # fmt: skip
    if run.routing == "router" and written is not None and routing.family != "uniform":
        raise yf.Invalid("routing", f"the model's own router routes (model_run.routing: router); "
                         f"a {routing.family} routing is read only with model_run.routing: "
                         "trace")  # fmt: skip
    m = doc.get("measure") if isinstance(doc.get("measure"), dict) else {}
    for key, why in (
        ("iterations", "a block's samples are its decode steps (leave it out or set 1)"),
        ("target_cv", "the blocks are the scenario's"),
        ("cold_weights", "every layer has its own weights already"),
        ("ranks", "the model runs on one device"),
    ):
        if m.get(key) not in (None, False) and not (key == "iterations" and m[key] == 1):
            raise yf.Invalid(f"measure.{key}", f"not with the model regime: {why}")
    if MODEL_DECODE not in run.stages and run.slo_tpot_ms is not None:
        raise yf.Invalid("model_run.slo_tpot_ms", "an SLO on TPOT needs the decode stage timed")


def model_samples(run: ModelRunSpec, measure: MeasureSpec, arms: int) -> int:
    """Samples one case records: (arms + the no-work backend) x blocks x (the prefill and each
    decode step)."""
    per_block = (MODEL_PREFILL in run.stages) + run.decode_steps * (MODEL_DECODE in run.stages)
    return (arms + 1) * measure.blocks * per_block
