"""The order arms take within a block: rotated by one each block (ABC, BCA, CAB, ...).

Every arm then runs first, second and last equally often over the blocks, so that whatever
drifts during a run (clocks, temperature, caches warmed by the previous arm) falls on all arms
alike, and a block pairs them: ``compare`` takes each arm's ratio to the baseline inside a block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def block_order(arms: Sequence[T], block: int) -> list[T]:
    """The arms in the order block ``block`` times them."""
    arms = list(arms)
    if not arms:
        return arms
    k = block % len(arms)
    return arms[k:] + arms[:k]
