"""The scenario's ``step`` section: which MoE layers a model step times, how many steps, their
token counts, and the givens of the derived TPOT and goodput (docs/DESIGN.md section 14).

    step:
      layers: all              # or a list of model layer ids: a named subset, said in every table
      steps: 64                # each step its own routing draw (and token count)
      blocks: 1                # repetitions of each step; the arms are paired over the steps
      tokens: [64, 128]        # tokens per rank: omitted (shape.tokens_per_rank), a number, a
                               # list cycled over the steps, or {64: 3, 128: 1}: drawn, seeded
      non_moe_us: 0            # the rest of a step (attention, norms...), given: 0 is MoE alone
      slo_tpot_ms: 50          # the SLO on P99 TPOT for goodput; omitted: no goodput
"""

from __future__ import annotations

from typing import Any

from moebench.spec import fields as yf
from moebench.spec.schema import MAX_STEPS, MAX_TOKENS, STEP_KEYS, ModelSpec, StepSpec


def step_section(v: Any, model: ModelSpec) -> StepSpec:
    """The ``step`` section checked against the model's MoE layers."""
    s = yf.section({} if v is None else v, "step", STEP_KEYS)
    layers = _layers(s.get("layers", "all"), model)
    tokens, histogram = _tokens(s.get("tokens"))
    slo = s.get("slo_tpot_ms")
    if slo is not None:
        slo = yf.number(slo, "step.slo_tpot_ms")
        if not slo > 0:
            raise yf.Invalid("step.slo_tpot_ms", f"must be > 0 ms, got {slo:g}")
    non_moe = yf.number(s.get("non_moe_us", 0.0), "step.non_moe_us")
    if non_moe < 0:
        raise yf.Invalid("step.non_moe_us", f"must be >= 0 us, got {non_moe:g}")
    return StepSpec(
        layers=layers,
        steps=yf.integer(s.get("steps", StepSpec.steps), "step.steps", 1, MAX_STEPS),
        blocks=yf.integer(s.get("blocks", StepSpec.blocks), "step.blocks", 1, 1000),
        tokens=tokens,
        histogram=histogram,
        non_moe_us=non_moe,
        slo_tpot_ms=slo,
    )


def _layers(v: Any, model: ModelSpec) -> tuple[int, ...] | None:
    if v == "all":
        return None
    moe = model.moe_layers
    out: list[int] = []
    for i, layer in enumerate(yf.sequence(v, "step.layers")):
        path = f"step.layers[{i}]"
        layer = yf.integer(layer, path, 0, model.layers - 1)
        if layer not in moe:
            raise yf.Invalid(path, f"layer {layer} of {model.label} is dense (no routed MoE)")
        if layer in out:
            raise yf.Invalid(path, f"layer {layer} is listed twice")
        out.append(layer)
    if not out:
        raise yf.Invalid("step.layers", "lists no layer; write `all` for every MoE layer")
    return tuple(sorted(out))  # a step runs its layers in the model's order


def _tokens(v: Any) -> tuple[tuple[int, ...] | None, tuple[tuple[int, float], ...] | None]:
    if v is None:
        return None, None
    if isinstance(v, dict):
        hist = []
        for key, weight in v.items():
            path = f"step.tokens.{key}"
            t = yf.integer(key, path, 1, MAX_TOKENS)
            w = yf.number(weight, path)
            if not w > 0:
                raise yf.Invalid(path, f"weight must be > 0, got {w:g}")
            hist.append((t, w))
        if not hist:
            raise yf.Invalid("step.tokens", "an empty histogram")
        return None, tuple(sorted(hist))
    if isinstance(v, list | tuple):
        tokens = tuple(yf.integer(t, f"step.tokens[{i}]", 1, MAX_TOKENS) for i, t in enumerate(v))
        if not tokens:
            raise yf.Invalid("step.tokens", "an empty list")
        return tokens, None
    return (yf.integer(v, "step.tokens", 1, MAX_TOKENS),), None


def step_layers(step: StepSpec, model: ModelSpec) -> tuple[int, ...]:
    """The model layer ids a step times, in order."""
    return model.moe_layers if step.layers is None else step.layers


def token_counts(step: StepSpec, tokens_per_rank: int, seed: int) -> tuple[int, ...]:
    """Tokens per rank of each step: the case's shape, the list cycled, or drawn from the
    histogram with a generator of its own (deterministic in the routing seed)."""
    import random

    if step.histogram is not None:
        rng = random.Random(seed * 1_000_003 + 7)
        values, weights = zip(*step.histogram, strict=True)
        return tuple(rng.choices(values, weights=weights, k=step.steps))
    if step.tokens is not None:
        return tuple(step.tokens[i % len(step.tokens)] for i in range(step.steps))
    return (tokens_per_rank,) * step.steps


def describe_tokens(step: StepSpec, tokens_per_rank: int) -> str:
    """How the steps' token counts were chosen, for the manifest and the report."""
    if step.histogram is not None:
        return "histogram {" + ", ".join(f"{t}: {w:g}" for t, w in step.histogram) + "}"
    if step.tokens is not None:
        return "[" + ", ".join(map(str, step.tokens)) + "] cycled"
    return str(tokens_per_rank)
