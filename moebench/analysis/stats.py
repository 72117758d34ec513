"""The numbers behind a decision: intervals whose coverage holds at the number of blocks, the
multiple-comparison correction, the decision rule and the noise figure. Plain numpy, no tables.

A block is the unit of pairing: arms interleave inside a block, so block b of one arm and block b
of its baseline saw the same clocks and the same neighbours. A change is therefore read off the
per-block ratios ``arm[b] / base[b]``: whatever a block shares between the arms cancels before
blocks are compared. (A ratio of the two arms' medians would let block drift back in: on
synthetic A/A cells with 3% shared block drift, corrected over 200 cells, it left a third of them
AMBIGUOUS at +-2%, the paired ratio none.)

Intervals are distribution-free and exact, so that the printed confidence is true at the block
count used, not only asymptotically:

- paired (two arms of one run): the interval for the median of the block ratios between two of
  their order statistics, ``[r_(l), r_(n+1-l)]``, covers the true median with probability
  ``1 - 2 P(Bin(n, 1/2) <= l - 1)`` for any continuous distribution of independent blocks. With n
  blocks the best coverage is ``1 - 2^(1-n)``: 3 blocks reach 75%, 5 reach 93.75%, 10 reach
  99.8%. A percentile bootstrap over 3 to 5 values cannot do better than that, whatever it
  prints, which is why there is none here.
- unpaired (one arm in two runs, not interleaved): the Hodges-Lehmann interval for the shift of
  log block times, between order statistics of all ``n * m`` pairwise differences, with the exact
  Mann-Whitney distribution (coverage exact under a shift of the log times).
- a quantile (the model step's P50, P90, P99 over steps): the equal-tailed interval between two
  order statistics, each tail at most ``alpha / 2`` under ``Bin(n, q)``; a tail quantile needs
  many values for one (``quantile_needed``: P99 at 95% needs 368), and below that there is none.

When n cannot reach the corrected level the cell says so (``TOO FEW BLOCKS``) instead of printing
a verdict.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from moebench.core.coverage import blocks_needed, cell_alpha

TOO_FEW = "TOO FEW BLOCKS"
__all__ = [
    "TOO_FEW",
    "blocks_needed",
    "cell_alpha",
    "decide",
    "median_interval",
    "paired_change",
    "quantile_interval",
    "quantile_needed",
    "unpaired_change",
    "cv_pct",
]


@lru_cache(maxsize=256)
def _binom_half_cdf(n: int) -> tuple[float, ...]:
    """P(Bin(n, 1/2) <= k) for k = 0..n."""
    pmf = np.array([math.comb(n, k) for k in range(n + 1)], dtype=float) / 2.0**n
    return tuple(np.cumsum(pmf))


def median_interval(values: np.ndarray, alpha: float) -> tuple[float, float, float] | None:
    """(low, high, coverage) of the order-statistic interval for the median of ``values`` with
    coverage at least ``1 - alpha`` (the narrowest such), or None when ``len(values)`` is too
    small for that level."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    cdf = _binom_half_cdf(n)
    # The largest rank r (1-based) with 2 P(B <= r - 1) <= alpha.
    r = 0
    while r < n // 2 and 2 * cdf[r] <= alpha:
        r += 1
    if r == 0:
        return None
    coverage = 1 - 2 * cdf[r - 1]
    return float(x[r - 1]), float(x[n - r]), float(coverage)


@lru_cache(maxsize=256)
def _binom_cdf(n: int, q: float) -> tuple[float, ...]:
    """P(Bin(n, q) <= k) for k = 0..n, from log-probabilities (no overflow at thousands)."""
    lq, lp = math.log(q), math.log1p(-q)
    logs = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lq
            + (n - k) * lp for k in range(n + 1)]  # fmt: skip
    return tuple(np.minimum(np.cumsum(np.exp(logs)), 1.0))


def quantile_interval(
    values: np.ndarray, q: float, alpha: float
) -> tuple[float, float, float] | None:
    """(low, high, coverage) of the equal-tailed order-statistic interval for the ``q``-quantile
    of the distribution ``values`` were drawn from, or None when ``len(values)`` is too small for
    ``1 - alpha`` (``quantile_needed``).

    With B = Bin(n, q) the number of values at or below the true quantile, ``[x_(l), x_(u)]``
    misses it low with probability P(B <= l - 1) and high with P(B >= u), for any continuous
    distribution of independent values; l is the largest and u the smallest rank that keep each
    tail within ``alpha / 2``, and the coverage is P(l <= B < u), exact. At q = 1/2 it is
    ``median_interval``. A tail quantile needs many values: the interval exists only when
    ``q^n`` and ``(1 - q)^n`` are both at most ``alpha / 2`` (P99 at 95%: 368 values).
    """
    if not 0 < q < 1:
        raise ValueError(f"quantile {q} outside (0, 1)")
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return None
    cdf = _binom_cdf(n, q)
    tail = alpha / 2 * (1 + 1e-12)  # the log-space sum rounds: 0.125 must read as 0.125
    lows = [k for k in range(1, n + 1) if cdf[k - 1] <= tail]
    highs = [k for k in range(1, n + 1) if 1 - cdf[k - 1] <= tail]
    if not lows or not highs:
        return None
    low, high = lows[-1], highs[0]
    return float(x[low - 1]), float(x[high - 1]), float(cdf[high - 1] - cdf[low - 1])


def quantile_needed(q: float, alpha: float) -> int:
    """The fewest values whose ``quantile_interval`` for ``q`` reaches ``1 - alpha``."""
    n = max(1, math.ceil(math.log(alpha / 2) / math.log(max(q, 1 - q))) - 1)
    while max(q, 1 - q) ** n > alpha / 2:
        n += 1
    return n


def paired_change(
    arm: np.ndarray, base: np.ndarray, alpha: float
) -> tuple[float, float, float, float] | None:
    """The change of ``arm`` against ``base``: the median over blocks of ``arm[b] / base[b]``
    minus 1, and its order-statistic interval. Returns (change, low, high, coverage) as
    fractions, or None when the blocks are too few for ``1 - alpha``."""
    arm = np.asarray(arm, dtype=float)
    base = np.asarray(base, dtype=float)
    if len(arm) != len(base) or len(arm) < 1:
        raise ValueError(f"paired blocks needed, got {len(arm)} and {len(base)}")
    ratio = arm / base
    ci = median_interval(ratio, alpha)
    if ci is None:
        return None
    low, high, coverage = ci
    return float(np.median(ratio) - 1), low - 1, high - 1, coverage


EXACT_PAIRS = 40_000  # n * m up to which the Mann-Whitney distribution is counted exactly


@lru_cache(maxsize=256)
def _mann_whitney_cdf(n: int, m: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0..n*m under H0 (no shift), U the Mann-Whitney count of (x, y) pairs
    with x > y. Counted exactly by the recursion on the largest value, f(i, j, u) =
    f(i - 1, j, u - j) + f(i, j - 1, u), rolling over i; above ``EXACT_PAIRS`` pairs the normal
    approximation (with continuity correction), which is accurate at that size."""
    if n * m > EXACT_PAIRS:
        mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        return tuple(0.5 * math.erfc(-(u + 0.5 - mean) / (sd * math.sqrt(2)))
                     for u in range(n * m + 1))  # fmt: skip
    prev = [np.ones(1) for _ in range(m + 1)]  # i = 0: U = 0 whatever j
    for i in range(1, n + 1):
        row = [np.ones(1)]  # j = 0
        for j in range(1, m + 1):
            arr = np.zeros(i * j + 1)
            a = prev[j]  # the largest value is an x: it beats all j y-values
            arr[j : j + len(a)] += a
            b = row[j - 1]  # the largest value is a y
            arr[: len(b)] += b
            row.append(arr)
        prev = row
    return tuple(np.cumsum(prev[m]) / math.comb(n + m, n))


def unpaired_change(
    new: np.ndarray, base: np.ndarray, alpha: float
) -> tuple[float, float, float, float] | None:
    """The change of ``new`` against ``base`` from two independent samples (blocks of two runs):
    the Hodges-Lehmann estimate of the shift of log times, exp() - 1, and its exact interval.
    Returns (change, low, high, coverage) as fractions, or None when the samples are too small
    for ``1 - alpha``."""
    x = np.log(np.asarray(new, dtype=float))
    y = np.log(np.asarray(base, dtype=float))
    n, m = len(x), len(y)
    if n < 1 or m < 1:
        raise ValueError("both samples need at least one block")
    d = np.sort((x[:, None] - y[None, :]).ravel())
    cdf = _mann_whitney_cdf(n, m)
    k = 0
    while k < (n * m) // 2 and 2 * cdf[k] <= alpha:
        k += 1
    if k == 0:
        return None
    coverage = 1 - 2 * cdf[k - 1]
    low, high = d[k - 1], d[n * m - k]
    return (
        float(math.expm1(np.median(d))),
        float(math.expm1(low)),
        float(math.expm1(high)),
        float(coverage),
    )


def unpaired_blocks_needed(alpha: float, limit: int = 64) -> int | None:
    """The fewest blocks per run (equal sizes) whose unpaired interval reaches ``1 - alpha``."""
    for n in range(1, limit + 1):
        if 2 / math.comb(2 * n, n) <= alpha:
            return n
    return None


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
