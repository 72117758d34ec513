"""The gates of every layer of a model step (docs/DESIGN.md sections 5 and 14).

A step regime case gates each rank's first layer with every gate of a single-layer case
(``gates.rank.gate_rank``: graph replay with changed routing and the dispatch record included),
then every other layer of every rank with the gates that depend on that layer's weights and
routing: one eager run over the shared, poisoned workspace, the family's own checks (reference
within tolerance, NaN poison, sentinels) and the cross-arm gate. The steps after the first then
replay the same graphs with new routing written into the same tensors, which is what the graph
replay gate proved each arm survives; ``post_timing`` checks the last step's outputs against
their own references.

A model of 58 layers and 8 ranks would give thousands of rows a gate; ``LayerGates`` keeps one
row per (rank, arm, gate): the worst error over the layers and, on a failure, which layers failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from moebench.arm.base import Arm, run_all
from moebench.core import faults
from moebench.gates.families import FamilyRecord
from moebench.gates.integrity import InputGuard
from moebench.results.rows import Check, DeviceLost

_RANK = {"pass": 0, "skip": 1, "fail": 2, "error": 3}


def gate_layer(
    problem,
    ref: torch.Tensor,
    arms: dict[str, Arm],
    stage_sets: dict,
    family: FamilyRecord,
    device: torch.device,
    guard: InputGuard | None = None,
) -> dict[str, list[Check]]:
    """One layer of one rank: {arm: its checks}. ``stage_sets``: {arm: (workspace, stages)} over
    this layer's problem. An arm that raises gets a ``run`` error check; DeviceLost when the
    CUDA context is gone. ``guard``: the layer's inputs, verified after each arm's run (a change
    is that arm's ``inputs_unchanged`` failure, undone before the next arm runs)."""
    out: dict[str, list[Check]] = {}
    caps = {}
    for name, (ws, stages) in stage_sets.items():
        try:
            ws.poison()
            run_all(stages)
            if problem.x_TD.is_cuda:
                torch.cuda.synchronize()
            cap = family.capture(arms[name], ws)
            out[name] = family.checks(arms[name], ws, cap, ref, problem)
            changed = guard.check(name, "its gated run") if guard is not None else None
            if changed is not None:
                out[name].append(changed)
        except Exception as exc:
            kind = faults.classify(exc)
            if kind != "fatal" and not faults.device_healthy(device):
                kind = "fatal"
            text = faults.describe(exc, kind)
            if kind == "fatal":
                raise DeviceLost(text) from None
            out[name] = [Check(name="run", status="error", detail=text)]
            continue
        if arms[name].staged:
            caps[name] = cap
    if len(caps) > 1:
        base = next(iter(caps))
        for name, rows in family.cross_arm(base, caps, problem).items():
            out[name] += rows
    return out


@dataclass
class LayerGates:
    """Checks of every (rank, layer, arm), kept as one row per (rank, arm, gate)."""

    _seen: dict[tuple[int, str, str], list[tuple[int, Check]]] = field(default_factory=dict)

    def add(self, rank: int, layer: int, arm: str, checks: list[Check]) -> None:
        for c in checks:
            self._seen.setdefault((rank, arm, c.name), []).append((layer, c))

    def failed(self, rank: int) -> set[str]:
        """Arms with a failed or raised gate on ``rank``."""
        return {arm for (r, arm, _), got in self._seen.items() if r == rank
                and any(c.failed for _, c in got)}  # fmt: skip

    def rows(self, what: str) -> list[tuple[int, str, Check]]:
        """(rank, arm, check) per (rank, arm, gate); ``what`` says which step's layers."""
        out = []
        for (rank, arm, name), got in self._seen.items():
            worst_layer, worst = max(got, key=lambda lc: (_RANK[lc[1].status], _nan0(lc[1])))
            bad = [layer for layer, c in got if c.failed]
            errors = [c.error for _, c in got if c.error == c.error]
            if bad:
                detail = (f"failed in {len(bad)} of {len(got)} layers ({_layers(bad)}) of "
                          f"{what}; layer {worst_layer}: {worst.detail}")  # fmt: skip
            else:
                detail = (f"{len(got)} layers of {what}; worst layer {worst_layer}: "
                          f"{worst.detail}")  # fmt: skip
            out.append((rank, arm, Check(name=name, status=worst.status,
                                         error=max(errors) if errors else worst.error,
                                         detail=detail)))  # fmt: skip
        return out


def _nan0(c: Check) -> float:
    return c.error if c.error == c.error else 0.0


def _layers(layers: list[int], most: int = 8) -> str:
    shown = ", ".join(map(str, layers[:most]))
    return f"layers {shown}" + (f" and {len(layers) - most} more" if len(layers) > most else "")
