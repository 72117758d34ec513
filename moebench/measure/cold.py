"""Cold weights: rotate copies of a rank's expert weights so that no timed weight read hits L2.

Back-to-back replays of a small step (a decode token, a few hundred prefill rows on a small model)
read the same weights each time; once those fit in L2 (60 MB on the H200), every replay after the
first is timed on cache hits, and the figure says nothing about a real step, whose weights were
evicted by the other layers. ``measure.cold_weights: true`` keeps N bit-identical copies of the
rank's weights and gives each sample the next copy, each copy with its own CUDA graph (a graph
holds the addresses it was captured with). Between two uses of one copy the other N - 1 copies
stream at least ``COLD_FACTOR`` times the L2 size through it, so what the sample reads was
evicted long before. Activations are untouched: in the ``ffn`` regime they stay as warm as the
pipeline leaves them, which is the point of rotating weights rather than flushing the whole cache
(the ``kernel`` regime's flush, ``measure.flush_l2``, evicts both).

The gates run on the original weights; the copies are clones, and the ``post_timing`` gate
compares the output the timed copies left with the gated output bit for bit.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from moebench.spec.schema import MAX_WEIGHT_COPIES

COLD_FACTOR = 4  # distinct weight bytes streamed between two uses of a copy, in L2 sizes
# The copies may take at most this share of the device memory free when they are made.
MEMORY_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class Plan:
    copies: int  # 1: the weights alone already stream COLD_FACTOR x L2 per sample
    note: str  # why that many, for the run's warnings when it is fewer than asked or needed


def plan_copies(
    *,
    touched_bytes: int,
    weight_bytes: int,
    l2_bytes: int,
    free_bytes: int | None,
    asked: int | None,
) -> Plan:
    """How many copies to rotate: ``asked`` if given, else enough that the other copies stream
    ``COLD_FACTOR`` x L2 between two uses of one, capped by memory. ``touched_bytes``: the
    fewest expert weight bytes one timed sample reads (over arms and timed stages);
    ``weight_bytes``: one whole copy of the rank's weights; ``free_bytes``: device memory free
    (None on the CPU: no cap)."""
    if asked is not None:
        want = asked
    elif touched_bytes <= 0 or touched_bytes >= COLD_FACTOR * l2_bytes:
        want = 1  # nothing to rotate, or one sample already streams COLD_FACTOR x L2
    else:
        want = min(1 + math.ceil(COLD_FACTOR * l2_bytes / touched_bytes), MAX_WEIGHT_COPIES)
    if free_bytes is None or want == 1 or weight_bytes <= 0:
        return Plan(want, "")
    fit = 1 + int(MEMORY_SHARE * free_bytes // weight_bytes)
    if fit >= want:
        return Plan(want, "")
    return Plan(
        max(fit, 1),
        f"cold weights: {want} copies of {weight_bytes / 2**20:,.0f} MiB wanted, memory allows "
        f"{max(fit, 1)}; weight reads may hit L2",
    )


def weight_copies(problem: Any, fields: Sequence[str], n: int) -> list[Any]:
    """``problem`` itself and ``n - 1`` problems whose weight ``fields`` are fresh clones."""
    out = [problem]
    for _ in range(n - 1):
        cloned = {
            f: getattr(problem, f).clone()
            for f in fields
            if isinstance(getattr(problem, f), torch.Tensor)
        }
        out.append(dataclasses.replace(problem, **cloned))
    return out


def stages_on(build: Callable[[Any], tuple], ws: Any, problem: Any) -> tuple[Any, tuple]:
    """(workspace, stages): the arm's stages over ``ws``'s buffers but ``problem``'s weights,
    built on a shallow copy of the workspace (same tensors) that points at the other problem."""
    other = copy.copy(ws)
    other.problem = problem
    return other, build(other)


def bytes_of(problem: Any, fields: Sequence[str]) -> int:
    """Bytes of one copy of the weight ``fields``."""
    total = 0
    for f in fields:
        t = getattr(problem, f)
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    return total


class Rotation:
    """An argument-free callable that calls the next of ``calls`` each time."""

    def __init__(self, calls: Sequence[Callable[[], None]]):
        self.calls = list(calls)
        self.next = 0

    def __call__(self) -> None:
        call = self.calls[self.next]
        self.next = (self.next + 1) % len(self.calls)
        call()


def l2_bytes(device: torch.device) -> int:
    """The device's L2 size (0 on the CPU: nothing to rotate against unless copies are asked)."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.get_device_properties(device).L2_cache_size)
