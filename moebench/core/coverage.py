"""How many blocks an exact interval needs (docs/DESIGN.md section 6): shared by the planner, which
warns before a run whose blocks cannot support a verdict, and by the statistics that build it.

The widest order-statistic interval for the median of n paired block ratios, ``[min, max]``,
covers with probability ``1 - 2^(1-n)``; a verdict at confidence ``1 - alpha`` per cell needs
at least ``log2(2 / alpha)`` blocks.
"""

from __future__ import annotations

import math


def blocks_needed(alpha: float) -> int:
    """The fewest paired blocks whose order-statistic interval reaches confidence ``1 - alpha``."""
    return max(2, math.ceil(math.log2(2 / alpha) - 1e-12))


def cell_alpha(alpha: float, cells: int, correction: str = "bonferroni") -> float:
    """The error rate one cell's interval is built at so that ``cells`` intervals hold together.

    ``bonferroni``: alpha / m. With probability at least 1 - alpha every one of the m intervals
    covers its true change, whatever the dependence between cells (they share blocks, clocks and
    machines, so independence cannot be assumed). ``none``: alpha per cell.
    """
    if correction == "none" or cells <= 1:
        return alpha
    if correction == "bonferroni":
        return alpha / cells
    raise ValueError(f"unknown correction {correction!r}")
