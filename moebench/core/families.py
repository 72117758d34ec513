"""One record per arm family: what every layer below the gates asks of it (docs/DESIGN.md 3).

A scenario runs arms of one family (``core.vocabulary.Family``): ``prefill`` arms run the
capacity-buffer pipeline (scatter, fc1, act, fc2, combine), ``decode`` arms a decode step (fc1
with the GLU fused, fc2, combine). Everything that depends on the family and that the scenario,
the arm interface, the planning, the preflight and the reports need is a field of its
``FamilyFacts`` here: stages, precisions, the width multiple of the shapes, the default baseline
and arms, the memory and interpreter-time models. What only the gates and the runs need (how a
rank's problem, workspace, reference and gates are built) is the family's ``gates.families``
record, which holds these facts as ``facts``: it needs the plan and the gates, which sit above
the scenario that needs the facts, so the record is split at that layer and nowhere else.

Adding a family: a ``Family`` member, its ``FamilyFacts`` here, its record in
``gates/families.py`` and its arms; no other module names a family (``tests/core/
test_families.py`` checks that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from moebench.core.vocabulary import DECODE_STAGES, PREFILL_STAGES, Family

# Bytes a weight value takes in memory at each precision (MXFP4: half a byte and an e8m0 scale
# for every 32 values).
WEIGHT_BYTES = {"fp8": 1.0, "bf16": 2.0, "w8a16": 1.0, "w4a16": 0.5 + 1 / 32}


@dataclass(frozen=True, kw_only=True)
class FamilyFacts:
    name: str  # a ``Family`` member for the built-in families
    stages: tuple[str, ...]  # in the order of the data; the ``stage`` column's values
    precisions: tuple[str, ...]  # first: the default
    width: int  # hidden and intermediate must be multiples of it
    width_why: str
    baseline: str  # the default ``measure.baseline``
    default_arms: tuple[str, ...]  # the built-in arms of the family
    capacity_buffer: bool  # rows live in an aligned capacity buffer with endpoints (section 2)
    staged_layouts: tuple[str, ...] = ()  # a staged arm names one (the workspace's row layout)
    torch_gemm: tuple[str, ...] = ()  # the precisions that may run ``gemm: torch``
    # (hidden D, intermediate F, local experts E, precision) -> bytes of one layer's expert
    # weights on a rank (values, scales, biases)
    expert_bytes: Callable[[int, int, int, str], float]
    # (tokens T, top-k K, D, F, E, capacity rows M) -> bytes of one arm's workspace
    workspace_bytes: Callable[[int, int, int, int, int, int], float]
    # (D, F, E, M, live rows S, staged layout) -> interpreter seconds of one whole-FFN run on a
    # two-core CPU (``cli.preflight``)
    cpu_seconds: Callable[[int, int, int, int, int, str], float]


def _prefill_expert_bytes(D: int, F: int, E: int, precision: str) -> float:
    scales = 3 * (D // 128) * (F // 128) * E * 4 if precision == "fp8" else 0
    return 3 * D * F * E * WEIGHT_BYTES[precision] + scales


def _decode_expert_bytes(D: int, F: int, E: int, precision: str) -> float:
    return 3 * D * F * E * WEIGHT_BYTES[precision] + (2 * F + D) * E * 2  # and the bf16 biases


# Interpreter costs, from ffn samples measured on 2026-12-01 on this project's 2-core AMD EPYC
# (shared, so within about a factor of two). The interpreter's cost follows the programs it
# steps through, not the flops: a prefill pass costs per capacity row and width (the three
# prefill arms within 20 % of each other: their padding tiles still launch), a dense decode pass
# per weight element it dequantises, a sparse decode pass per (token, slot) program row.
# prefill, M capacity rows, S live rows: PREFILL_MDF * M*D*F + PREFILL_MW * M*(D+F) +
# PREFILL_SD * S*D (measured 0.30 s at M 80, D = F = 128; 6.98 s at M 640, S 512, D = F = 256)
PREFILL_MDF = 1.3e-8
PREFILL_MW = 1.16e-5
PREFILL_SD = 5.0e-6
# decode, every local expert (layout ETD): DENSE_W * E * 3*D*F (measured 0.73 s at E 8,
# D = F = 256; 5.64 s at E 32, D 256, F 512)
DENSE_W = 4.4e-7
# decode, one GEMV per local slot (layout TKD): slots * (SPARSE_SLOT + SPARSE_W * 3*D*F) (fc1
# alone measured 7.7 s for 4 slots at D = F = 128, 23.2 s for 4 slots at D 512, F 256)
SPARSE_SLOT = 2.0
SPARSE_W = 1.8e-5


def _prefill_cpu(D: int, F: int, E: int, M: int, S: int, layout: str) -> float:
    return PREFILL_MDF * M * D * F + PREFILL_MW * M * (D + F) + PREFILL_SD * S * D


def _decode_cpu(D: int, F: int, E: int, M: int, S: int, layout: str) -> float:
    if layout == "TKD":
        return S * (SPARSE_SLOT + SPARSE_W * 3 * D * F)
    return DENSE_W * E * 3 * D * F


FACTS: dict[str, FamilyFacts] = {
    Family.PREFILL: FamilyFacts(
        name=Family.PREFILL,
        stages=PREFILL_STAGES,
        precisions=("fp8", "bf16"),
        width=128,
        width_why="FP8 128x128 block scales",
        baseline="stock",
        default_arms=("stock", "prefix_sum", "prefix_sum_masked"),
        capacity_buffer=True,
        torch_gemm=("bf16",),
        expert_bytes=_prefill_expert_bytes,
        # the capacity buffer's rows (tokens, fc1 out, act out, fc2 out), the output, routing
        workspace_bytes=lambda T, K, D, F, E, M: (
            M * (D + 2 * F * 2 + F * 2 + D * 2) + T * D * 2 + T * K * 16
        ),
        cpu_seconds=_prefill_cpu,
    ),
    Family.DECODE: FamilyFacts(
        name=Family.DECODE,
        stages=DECODE_STAGES,
        precisions=("w8a16", "w4a16"),
        width=32,
        width_why="MXFP4 blocks of 32 values",
        baseline="dense_decode",
        default_arms=("dense_decode", "sparse_decode", "grouped_decode"),
        capacity_buffer=False,
        staged_layouts=("TKD", "ETD"),
        expert_bytes=_decode_expert_bytes,
        # the larger of the two row layouts (a row per slot, or per expert and token) of fc1's
        # and fc2's outputs, and the output
        workspace_bytes=lambda T, K, D, F, E, M: max(T * K, E * T) * (F + D) * 2 + T * D * 2,
        cpu_seconds=_decode_cpu,
    ),
}


def facts(family: str) -> FamilyFacts:
    """The record of ``family`` (a ``Family`` or its string: a member hashes as its string, so
    the records are keyed by name, and a family is known exactly when it has a record)."""
    return FACTS[family]


PRECISIONS = tuple(p for f in FACTS.values() for p in f.precisions)
DEFAULT_FAMILY = Family.PREFILL  # a scenario that names no arms runs its default arms
DEFAULT_BASELINE = FACTS[DEFAULT_FAMILY].baseline
