"""The numbers behind a decision: paired block bootstrap, the multiple-comparison correction,
the decision rule and the noise figure. Plain numpy, no tables; ``compare`` feeds it blocks.

A block is the unit of pairing: arms interleave inside a block, so block b of one arm and block b
of its baseline saw the same clocks and the same neighbours. Everything here therefore takes one
value per block (the block's critical path) and resamples block indices, the same indices for
both arms.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

# Resamples beyond the requested count when the corrected tail needs them, and the ceiling.
TAIL_RESAMPLES = 10  # resamples expected beyond each end of the interval
MAX_RESAMPLES = 100_000
_CHUNK_ELEMENTS = 8_000_000  # blocks x resamples held at once
_CACHE_ELEMENTS = 16_000_000  # resample counts kept between calls when at most this big


def cell_alpha(alpha: float, cells: int, correction: str) -> float:
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


def resamples_for(alpha: float, requested: int) -> int:
    """Enough resamples that about ``TAIL_RESAMPLES`` fall beyond each end of a ``1 - alpha``
    interval (a percentile interval at 0.01% from 2,000 resamples would be the sample extremes),
    at least ``requested``, at most ``MAX_RESAMPLES``."""
    need = math.ceil(2 * TAIL_RESAMPLES / alpha)
    return max(requested, min(need, MAX_RESAMPLES))


@lru_cache(maxsize=8)
def _cached_counts(n: int, resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    return tuple(_counts(n, resamples, seed))


def _counts(n: int, resamples: int, seed: int):
    """How often each block is drawn, ``[n, chunk]`` arrays over the resamples.

    The draws are ``default_rng(seed).integers(0, n, (resamples, n))``, taken in chunks; a
    resample's median is then read off the counts (see ``_medians``) instead of sorting the drawn
    values, which is several times faster and needs a byte per block and resample.
    """
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if n < 2**8 else np.uint16 if n < 2**16 else np.uint32
    chunk = max(1, min(resamples, _CHUNK_ELEMENTS // n))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        flat = (np.arange(size)[:, None] * n + idx).ravel()
        yield np.bincount(flat, minlength=size * n).reshape(size, n).T.astype(dtype)


def _medians(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of every resample given as counts ``[n, R]`` of the n ``values``."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    cum = np.cumsum(counts[order], axis=0, dtype=counts.dtype)
    # The k-th smallest drawn value is ordered[#positions whose running count is below k].
    low = (cum < (n + 1) // 2).sum(axis=0)
    high = (cum < n // 2 + 1).sum(axis=0)
    return (ordered[low] + ordered[high]) / 2


def bootstrap_paired_change(
    arm: np.ndarray, base: np.ndarray, *, resamples: int, seed: int, alpha: float
) -> tuple[float, float, float]:
    """The change of ``arm`` against ``base`` as the median over blocks of ``arm[b] / base[b]``
    minus 1, with a percentile interval over block resamples. Returns (change, low, high) as
    fractions.

    ``arm[b]`` and ``base[b]`` are block b's critical paths. Taking the ratio inside each block
    first is what makes the pairing pay: whatever a block shares between the arms (clocks,
    temperature, a busy neighbour) cancels before blocks are compared. A ratio of the two arms'
    medians would let that drift back into the interval: on synthetic A/A cells with 3% shared
    block drift, corrected over 200 cells, it left a third of them AMBIGUOUS at +-2%, the paired
    ratio none.
    """
    arm = np.asarray(arm, dtype=float)
    base = np.asarray(base, dtype=float)
    n = len(arm)
    if n != len(base) or n < 1:
        raise ValueError(f"paired blocks needed, got {len(arm)} and {len(base)}")
    ratio = arm / base
    if n * resamples <= _CACHE_ELEMENTS:
        chunks = _cached_counts(n, resamples, seed)
    else:
        chunks = _counts(n, resamples, seed)
    medians = np.concatenate([_medians(ratio, c) for c in chunks])
    low, high = np.quantile(medians, [alpha / 2, 1 - alpha / 2])
    return float(np.median(ratio) - 1), float(low - 1), float(high - 1)


def decide(point: float, low: float, high: float, threshold: float) -> tuple[str, str]:
    """FASTER / SLOWER / SAME / AMBIGUOUS from a change and its interval, all in percent.

    The interval excludes 0: FASTER or SLOWER, or SAME when the change is within +-threshold.
    It includes 0: SAME when the whole interval lies within +-threshold, else AMBIGUOUS.
    """
    if low > 0 or high < 0:
        if abs(point) < threshold:
            return "SAME", f"significant but within +-{threshold:g}%"
        if (point < 0) != (high < 0):
            return "AMBIGUOUS", "point estimate lies outside its own CI"
        return ("FASTER", "") if point < 0 else ("SLOWER", "")
    if -threshold <= low and high <= threshold:
        return "SAME", ""
    return "AMBIGUOUS", f"CI includes 0 and reaches beyond +-{threshold:g}%"


def cv_pct(values: np.ndarray) -> float:
    """Coefficient of variation in percent (sample standard deviation over the mean); NaN for
    fewer than two values or a non-positive mean."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return math.nan
    mean = float(values.mean())
    if not mean > 0:
        return math.nan
    return float(values.std(ddof=1) / mean * 100)
