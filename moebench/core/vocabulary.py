"""The words every layer shares, written once: YAML, Parquet, reports and the arms all import them.

Arm families (docs/DESIGN.md section 3): ``prefill`` arms run the capacity-buffer pipeline
(scatter, fc1, act, fc2, combine); ``decode`` arms run a few tokens through fc1 (GLU fused), fc2
and combine. A scenario runs arms of one family; the family decides the precisions, the stages,
the width multiple of the shapes and the default baseline.

Stages have one name everywhere (kernel file, launcher, reference, test, the ``stage`` column):
the family's own stages, ``ffn`` for the whole pipeline, and in distributed runs the pass around
it (``dispatch``, ``sync_wait``, ``combine_a2a``, ``layer``); the ``model`` regime times a whole
model's ``prefill`` (its time is the TTFT) and ``decode`` steps (one step's time is a TPOT).
"""

from __future__ import annotations

from enum import StrEnum


class Family(StrEnum):
    """The arm families. A ``StrEnum``: a member is its string, in YAML, Parquet and JSON."""

    PREFILL = "prefill"
    DECODE = "decode"


class Regime(StrEnum):
    """What a sample measured (the ``regime`` column; ``measure.regimes`` in a scenario):
    ``ffn`` the whole pipeline replayed, ``profile`` per-stage device time inside ``ffn``
    replays, ``kernel`` one stage alone, ``step`` a model step over every MoE layer, ``model`` a
    whole transformers model's prefill and decode steps. Declared in the order tables and reports
    list them (``REGIME_ORDER``)."""

    FFN = "ffn"
    PROFILE = "profile"
    KERNEL = "kernel"
    STEP = "step"
    MODEL = "model"


PREFILL = Family.PREFILL
DECODE = Family.DECODE
FAMILIES = tuple(Family)

PREFILL_STAGES = ("scatter", "fc1", "act", "fc2", "combine")
DECODE_STAGES = ("fc1", "fc2", "combine")
WHOLE_FFN = "ffn"  # the stage name of the whole pipeline
# topology.mode distributed: one pass of the layer, in order (the FFN between the exchanges).
PASS_STAGES = ("dispatch", WHOLE_FFN, "sync_wait", "combine_a2a", "layer")
DISTRIBUTED_STAGES = tuple(s for s in PASS_STAGES if s != WHOLE_FFN)
# The ``step`` regime: one model step, every MoE layer of the model in order (each layer's own
# samples are ``ffn``), timed as one graph per rank.
WHOLE_STEP = "step"
# The ``model`` regime: a whole model's forward over a prompt (its time is the TTFT) and one decode
# step of every sequence (its time is a TPOT).
MODEL_PREFILL = "prefill"
MODEL_DECODE = "decode"
MODEL_STAGES = (MODEL_PREFILL, MODEL_DECODE)
# Every stage a samples row may carry, in the order of the data: the order tables and plots use.
STAGE_ORDER = (
    "dispatch", *PREFILL_STAGES, WHOLE_FFN, "sync_wait", "combine_a2a", "layer", WHOLE_STEP,
    *MODEL_STAGES,
)  # fmt: skip
# The experts backend that does no expert work (it writes zeros): the model regime times it beside
# the arms for the model's measured non-MoE time. It is a reference, never an arm compared.
NO_EXPERTS = "moebench:none"

REGIMES = tuple(Regime)
REGIME_ORDER = {r: i for i, r in enumerate(Regime)}  # the order tables and reports use
DEFAULT_REGIMES = (Regime.FFN, Regime.KERNEL)

ACTIVATIONS = ("silu", "swiglu_oai")

ROUTING_FAMILIES = (
    "uniform", "balanced", "zipf", "hot_rank", "empty_experts", "full_capacity", "trace",
)  # fmt: skip

# The A/A control: a second copy of the baseline, timed in the rotation as an arm of its own.
AA_SUFFIX = "~aa"


def aa_twin(arm: str) -> str | None:
    """The arm an A/A copy copies (``stock~aa`` -> ``stock``), None for any other arm."""
    return arm[: -len(AA_SUFFIX)] if arm.endswith(AA_SUFFIX) and len(arm) > len(AA_SUFFIX) else None
