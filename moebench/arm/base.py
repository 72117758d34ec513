"""The arm interface: what every arm hands the harness, built-in or a user's (docs/DESIGN.md 3, 13).

An ``Arm`` is one frozen value: its name and family, how to prepare and run it, its stages, its
weight-byte model, the kernels it must and must not launch. moebench's own five arms are defined
with it (``arms/``); a user's arm is the same object in the user's file, named in a scenario by
an import string or a path (``moebench.arm.registry``). Two contracts:

- ``staged``: ``build(workspace) -> stages``. The arm gets moebench's workspace for its family
  (``moebench.arm.prefill.Workspace``: capacity buffer, endpoints, packed UE8M0 scales; or
  ``moebench.arm.decode.Workspace``) and writes into it, so every gate applies, bitwise
  cross-arm equality included. Its stages are argument-free closures over the workspace (nothing
  allocated inside), timed alone in the kernel regime and together as one CUDA graph.
- ``whole_ffn``: ``prepare(problem, y_TD) -> run`` (or a ``Prepared`` with named sub-stages). The
  arm gets the problem (tokens, routing, weights in moebench's layout: see the prefill and decode
  ``Problem``), prepares whatever untimed state it needs (weight re-layout, workspaces), and
  returns an argument-free callable that computes ``y_TD`` (bf16 [T, D]: the sum over the token's
  local top-k slots, zero for a token with none) into the buffer it was given. A callable that
  returns a tensor instead has it copied into ``y_TD``, and the copy is timed with it. Its
  numerics are its own, so it is held to the float32 reference within the precision's tolerance,
  never bitwise to other arms.

Every arm, either contract, also passes the fresh-input gate after timing: the same prepared
arm runs once more on new tokens and new routing written into the same input tensors, and must
match the reference again, so an output cached on input addresses or shapes cannot pass.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moebench.core.families import FACTS, facts

STAGED = "staged"
WHOLE_FFN = "whole_ffn"
CONTRACTS = (STAGED, WHOLE_FFN)


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    run: Callable[[], None]


def run_all(stages: tuple[Stage, ...]) -> None:
    for s in stages:
        s.run()


@dataclass(frozen=True, kw_only=True)
class Work:
    """What one stage (or the whole FFN) does in one step on a rank, by the arm's own model:
    rows it computes (padding and capacity tail included where it visits them), bytes it reads
    and writes in device memory (each once: the DRAM minimum of that work), and matrix FLOPs.
    The work ledger puts these beside the floor they would have on a GPU, on any device."""

    rows: int
    bytes_read: int
    bytes_written: int
    flops: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(rows=self.rows + other.rows, bytes_read=self.bytes_read + other.bytes_read,
                    bytes_written=self.bytes_written + other.bytes_written,
                    flops=self.flops + other.flops)  # fmt: skip

    @staticmethod
    def total(works: Iterable[Work], *, rows: int) -> Work:
        """The whole FFN's work: the stages' bytes and FLOPs summed, with its own ``rows`` (the
        rows the FFN computes, not the sum of what each stage visits)."""
        out = Work(rows=0, bytes_read=0, bytes_written=0)
        for w in works:
            out = out + w
        return dataclasses.replace(out, rows=rows)


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What a whole-FFN arm's ``prepare`` may return instead of a bare callable: the callable that
    computes the whole FFN, and optional named sub-stages (names from the family's stages, e.g.
    ``fc1``, ``act``) that the kernel regime times one by one."""

    run: Callable[[], Any]
    stages: tuple[Stage, ...] = ()


@dataclass(frozen=True, kw_only=True)
class LayoutShapes:
    """What an arm's ``layout_bytes`` is asked about, before anything is allocated: a precision,
    the token counts a rank's stages are built for, the top-k, the local experts, the model's
    hidden and expert (intermediate) widths, and whether the stages run on a GPU (a kernel may
    read another layout there: the Gluon tiles)."""

    precision: str
    tokens: tuple[int, ...]
    top_k: int
    experts: int
    hidden: int
    intermediate: int
    gpu: bool = True


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One arm of a comparison. ``origin`` and ``module`` are set by the registry when it resolves
    the arm (where it came from, and the module that defines it: its sources start there)."""

    name: str
    family: str  # prefill | decode
    summary: str  # one line: what this arm does differently
    contract: str = STAGED
    # staged: workspace -> stages (argument-free closures over the workspace)
    build: Callable[[Any], tuple[Stage, ...]] | None = None
    # whole_ffn: (problem, y_TD) -> a callable computing y_TD, or a Prepared
    prepare: Callable[[Any, Any], Any] | None = None
    # problem -> {stage: expert weight bytes read in one step on the rank}, "ffn" included
    weight_bytes: Callable[[Any], dict[str, int]] | None = None
    # problem -> {stage: Work} of one step on the rank, "ffn" included (the work ledger)
    work: Callable[[Any], dict[str, Work]] | None = None
    # LayoutShapes -> bytes of the copies of a layer's expert weights (and scales) its build makes
    # for its kernels to read (layouts), beyond the problem's own tensors: the memory estimates
    # count them (None: none)
    layout_bytes: Callable[[LayoutShapes], int] | None = None
    kernels: tuple[str, ...] = ()  # for people: what it launches
    # {precision: Triton (or other) kernel function names that must launch}; checked on the GPU
    launches: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    forbidden: tuple[str, ...] = ()  # kernel names that must not launch
    precisions: tuple[str, ...] = ()  # the precisions it runs; empty: all of its family's
    precision_note: str = ""  # why it runs only those (the scenario's precision error adds it)
    layout: str = ""  # decode, staged: the workspace's row layout (TKD or ETD)
    masked_act: bool = False  # prefill, staged: padding rows must keep their poison
    graph: bool = True  # its FFN may be captured in a CUDA graph (whole_ffn may say False)
    # files it reads (a tuned config JSON): relative to its module's folder, or absolute; hashed
    # into its sources and pins beside its code (moebench.run.closure), so a change is drift
    data_files: tuple[str | os.PathLike, ...] = ()
    origin: str = "builtin"  # builtin | import | file | entry point
    module: str = ""

    def __post_init__(self) -> None:
        problems = arm_problems(self)
        if problems:
            raise ValueError(f"arm {self.name!r}: {problems[0]}")

    @property
    def staged(self) -> bool:
        return self.contract == STAGED

    def runs(self, precision: str) -> bool:
        return not self.precisions or precision in self.precisions

    def with_origin(self, origin: str, module: str) -> Arm:
        return dataclasses.replace(self, origin=origin, module=module)


def arm_problems(arm: Arm) -> list[str]:
    """What is wrong with an arm's declaration (empty when nothing): a user's arm is checked
    when it is defined, so a mistake is one line naming the field, not a failure mid-run."""
    out = []
    if not isinstance(arm.name, str) or not arm.name or "~" in arm.name or "/" in arm.name:
        out.append(f"name must be a non-empty string without '~' or '/', got {arm.name!r}")
    if arm.family not in FACTS:
        out.append(f"family must be one of {', '.join(FACTS)}, got {arm.family!r}")
        return out
    if arm.contract not in CONTRACTS:
        out.append(f"contract must be one of {', '.join(CONTRACTS)}, got {arm.contract!r}")
    elif arm.contract == STAGED and not callable(arm.build):
        out.append("a staged arm needs build(workspace) -> stages")
    elif arm.contract == WHOLE_FFN and not callable(arm.prepare):
        out.append("a whole_ffn arm needs prepare(problem, y_TD) -> callable")
    if not isinstance(arm.data_files, tuple | list) or not all(
        isinstance(f, str | os.PathLike) and str(f) for f in arm.data_files
    ):
        out.append(f"data_files must be a tuple of paths, got {arm.data_files!r}")
    if arm.weight_bytes is not None and not callable(arm.weight_bytes):
        out.append("weight_bytes must be a callable problem -> {stage: bytes}")
    if arm.layout_bytes is not None and not callable(arm.layout_bytes):
        out.append("layout_bytes must be a callable LayoutShapes -> bytes")
    precisions = facts(arm.family).precisions
    bad = [p for p in arm.precisions if p not in precisions]
    if bad:
        out.append(f"precisions {bad} are not {arm.family} precisions ({', '.join(precisions)})")
    unknown = [p for p in arm.launches if p not in precisions]
    if unknown:
        out.append(f"launches names precisions {unknown} that are not {arm.family} precisions")
    layouts = facts(arm.family).staged_layouts
    if layouts and arm.contract == STAGED and arm.layout not in layouts:
        want = " or ".join(repr(x) for x in layouts)
        out.append(f"a staged {arm.family} arm needs layout {want}, got {arm.layout!r}")
    return out


def stage_names(arm: Arm) -> tuple[str, ...]:
    """The stage names an arm of this family may report in the kernel regime."""
    return facts(arm.family).stages
