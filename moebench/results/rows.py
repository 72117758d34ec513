"""What one case produced on one run, and how a failure becomes rows of it.

Shared by the case sequence (``run.case``), the timing loop (``measure.sampling``) and the
isolated child: a ``CaseRows`` collects the samples, checks, routing and ledger rows of a case;
``sample_row`` is the one factory of a ``samples`` row; ``record_failure`` turns an exception
into an ``error`` check row per arm, and raises ``DeviceLost`` when the CUDA context is gone, so
that the case stops where it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from moebench.core import faults
from moebench.results.schema import SAMPLES_SCHEMA

SAMPLE_COLUMNS = frozenset(SAMPLES_SCHEMA.names)


@dataclass(frozen=True, kw_only=True)
class Check:
    """One gate's verdict on one arm: a row of the ``checks`` table once the rank is known."""

    name: str
    status: str  # pass | fail | error | skip | info (a recorded fact, never a failure)
    error: float = math.nan
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status not in ("pass", "skip", "info")


@dataclass(kw_only=True)
class CaseRows:
    """What one case produced: rows of the three tables, and the device fault that stopped it
    (empty when none)."""

    samples: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    routing: list[dict] = field(default_factory=list)
    ledger: list[dict] = field(default_factory=list)  # the work model's rows (results.schema)
    fault: str = ""
    # clocks that looked throttled; cold weights that memory could not fully rotate
    warnings: list[str] = field(default_factory=list)

    def add(self, rank_cols: dict, arm: str, c: Check) -> None:
        self.checks.append(
            {
                "run_id": rank_cols["run_id"],
                "case_id": rank_cols["case_id"],
                "rank": rank_cols["rank"],
                "arm": arm,
                "gate": c.name,
                "status": c.status,
                "error": c.error,
                "detail": c.detail,
            }
        )


class DeviceLost(Exception):
    """A failure lost the CUDA context; the case stops where it is."""


def record_failure(
    out: CaseRows, rank_cols: dict, arms, check: str, exc: Exception, device: torch.device
) -> None:
    """An ``error`` row per arm for ``exc``; raises DeviceLost when the CUDA context is gone."""
    kind = faults.classify(exc)
    if kind != "fatal" and not faults.device_healthy(device):
        kind = "fatal"
    text = faults.describe(exc, kind)
    for arm in arms:
        out.add(rank_cols, arm, Check(name=check, status="error", detail=text))
    if kind == "fatal":
        raise DeviceLost(text)


def sample_row(*parts: Mapping[str, Any], iteration: int, time_us: float) -> dict:
    """One ``samples`` row: the columns of ``parts`` (the case's, the block's, what was timed),
    later ones winning, and the figure. Every column of the table must be there: a row that
    lacks one is a bug in the code that built it, caught here rather than as a null in Parquet."""
    row: dict[str, Any] = {}
    for part in parts:
        row.update(part)
    row["iteration"] = iteration
    row["time_us"] = time_us
    missing = SAMPLE_COLUMNS - row.keys()
    if missing:
        raise KeyError(f"a samples row lacks {sorted(missing)}")
    return row
