"""What every arm hands the harness: named stages, run in order (docs/DESIGN.md section 3).

An arm's ``build(workspace)`` returns its stages as argument-free closures over the workspace
(nothing allocated inside), so that the harness can time each one alone, the whole pipeline as
one CUDA graph, and replay it with other routing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    run: Callable[[], None]


def run_all(stages: tuple[Stage, ...]) -> None:
    for s in stages:
        s.run()
