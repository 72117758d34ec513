"""The order arms take within a block: a Williams design over the blocks.

Each block times every arm once, in one row of a Williams square: over a full cycle of blocks
(n rows for n arms when n is even, 2n when odd: the square and its mirror) every arm runs in
every position equally often, and every arm follows every other arm equally often. The first
balances what drifts during a run (clocks, temperature); the second balances carry-over, what
the previous arm leaves behind (its output in L2, a warm clock, a queue): a cyclic rotation (ABC,
BCA, CAB) puts C after B in two of three blocks and never after A, so an arm whose time depends on
its predecessor reads as a difference. An A/A copy on the H200 was claimed SLOWER once in 56 cells
under the cyclic rotation (docs/perf/HISTORY.md, 2026-12-01, issue 18). A block pairs the arms:
``compare`` takes each arm's ratio to the baseline inside a block.

For up to three arms the first rows equal the cyclic rotation (ABC, BCA, CAB, then the mirrors
CBA, ACB, BAC), so short runs keep their old order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def williams_rows(n: int) -> list[list[int]]:
    """The rows of a Williams design for ``n`` treatments: ``n`` rows when ``n`` is even, ``2n``
    (the square, then each row reversed) when it is odd."""
    if n <= 0:
        return []
    first, low, high = [0], 1, n - 1
    while len(first) < n:  # 0, 1, n-1, 2, n-2, ...
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return rows


def block_order(arms: Sequence[T], block: int) -> list[T]:
    """The arms in the order block ``block`` times them."""
    arms = list(arms)
    if not arms:
        return arms
    rows = williams_rows(len(arms))
    return [arms[i] for i in rows[block % len(rows)]]
