"""Load statistics of routing traces: how unevenly one layer's tokens fall on its experts (and,
split over ``ep`` ranks, on the ranks), and a summary over the layers. ``moebench trace stats``
prints them.
"""

from __future__ import annotations

import math

import numpy as np

from moebench.core.errors import TraceError


def layer_stats(counts_E: np.ndarray, ep: int | None = None) -> dict:
    """Load statistics of one layer's expert histogram.

    max_mean and min_mean are the busiest and quietest expert over the mean expert; entropy is in
    bits over the experts' shares (log2 E when balanced). With ``ep`` ranks (experts split evenly,
    rank r owning [r * E/ep, (r+1) * E/ep)): each rank's rows and the overload factor, the busiest
    rank's rows over the mean rank's (1.0 when balanced), as the ``routing`` table defines it.
    """
    c = np.asarray(counts_E, dtype=np.float64)
    total = float(c.sum())
    mean = total / c.size
    share = c / total if total else c
    nz = share[share > 0]
    out = {
        "rows": total,
        "max_mean": float(c.max()) / mean if mean else math.nan,
        "min_mean": float(c.min()) / mean if mean else math.nan,
        "empty_experts": int((c == 0).sum()),
        "entropy": float(-(nz * np.log2(nz)).sum()) if total else math.nan,
    }
    if ep is not None:
        if ep < 1 or c.size % ep:
            raise TraceError(f"--ep {ep} does not divide the {c.size} experts")
        ranks = c.reshape(ep, -1).sum(axis=1)
        out["rank_rows"] = ranks.tolist()
        out["overload"] = float(ranks.max() / ranks.mean()) if total else math.nan
    return out


def summary(rows: list[dict]) -> dict:
    """Over the layers that routed anything: mean and range of max/mean and min/mean."""
    live = [r for r in rows if r["rows"] > 0]
    if not live:
        return {}
    mx = np.array([r["max_mean"] for r in live])
    mn = np.array([r["min_mean"] for r in live])
    out = {
        "layers": len(live),
        "max_mean_avg": float(mx.mean()), "max_mean_max": float(mx.max()),
        "max_mean_layer": live[int(mx.argmax())].get("layer"),
        "min_mean_avg": float(mn.mean()), "min_mean_min": float(mn.min()),
        "min_mean_max": float(mn.max()),
    }  # fmt: skip
    if "overload" in live[0]:
        ov = np.array([r["overload"] for r in live])
        out["overload_avg"], out["overload_max"] = float(ov.mean()), float(ov.max())
    return out
