"""Distributed runs, pass by pass: critical path, straggler, rank spread (docs/DESIGN.md section 7).

In `topology.mode: distributed` every rank times the same passes of the layer: the ranks meet
before each pass, so the ``ffn``-regime samples of one (case, arm, block, iteration) on all ranks
belong to one pass. Per pass:

- critical path = max over ranks of ``layer`` (the whole pass as each rank saw it);
- straggler = the rank that waited least at the meeting point (smallest ``sync_wait``): the other
  ranks waited for it. Ties go to the lower rank.

Per (run, case, mode, arm): the critical path's median, min and max over passes, the rank most
often the straggler, and every rank's median of each stage of the pass, so a reader sees who is
slow (``ffn``) and who waits (``sync_wait``). A pass that misses some rank is left out. Simulated
runs have no ``layer`` stage and give nothing here. Reads only samples.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moebench.core.vocabulary import PASS_STAGES, Regime


@dataclass(frozen=True, kw_only=True)
class PassPath:
    run_id: str
    case_id: str
    mode: str
    arm: str
    ranks: int
    passes: int  # (block, iteration) pairs with a sample from every rank
    critical_median_us: float
    critical_min_us: float
    critical_max_us: float
    straggler_rank: int
    straggler_passes: int  # passes in which it was the straggler
    rank_medians: dict[str, list[float]]  # stage -> median us of each rank, in rank order


def pass_paths(samples: pa.Table, skip: set[tuple[str, str, str]] = frozenset()) -> list[PassPath]:
    """Per (run, case, mode, arm) of a distributed run; ``skip`` holds (run, case, arm) keys that
    carry no figures (arms that failed a gate). ``samples`` has a ``mode`` column."""
    if samples.num_rows == 0 or "layer" not in set(pc.unique(samples["stage"]).to_pylist()):
        return []
    keep = pc.and_(pc.equal(samples["regime"], str(Regime.FFN)),
                   pc.is_in(samples["stage"], pa.array(PASS_STAGES)))  # fmt: skip
    rows = samples.filter(keep)
    cols = ("run_id", "case_id", "mode", "arm", "block", "iteration", "rank", "stage", "time_us")
    # (run, case, mode, arm) -> (block, iteration) -> stage -> rank -> time
    passes: dict[tuple, dict[tuple, dict[str, dict[int, float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for run_id, case_id, mode, arm, block, it, rank, stage, t in zip(
        *(rows[c].to_pylist() for c in cols), strict=True
    ):
        if (run_id, case_id, arm) not in skip:
            passes[(run_id, case_id, mode or "", arm)][(block, it)][stage][rank] = t
    out = []
    for key in sorted(passes):
        by_pass = passes[key]
        ranks = sorted({r for p in by_pass.values() for r in p.get("layer", {})})
        complete = [
            p
            for p in by_pass.values()
            if all(len(p.get(s, {})) == len(ranks) for s in ("layer", "sync_wait"))
        ]
        if not ranks or not complete:
            continue
        crit = np.array([max(p["layer"].values()) for p in complete])
        # The straggler of a pass waited least; ties go to the lower rank.
        stragglers = Counter(
            min(ranks, key=lambda r, w=p["sync_wait"]: (w[r], r)) for p in complete
        )
        slow, count = min(stragglers.items(), key=lambda kv: (-kv[1], kv[0]))
        medians = {
            stage: [float(np.median([p[stage][r] for p in by_pass.values() if r in p.get(stage, {})]
                                    or [np.nan])) for r in ranks]
            for stage in PASS_STAGES
        }  # fmt: skip
        out.append(PassPath(
            run_id=key[0], case_id=key[1], mode=key[2], arm=key[3], ranks=len(ranks),
            passes=len(complete), critical_median_us=float(np.median(crit)),
            critical_min_us=float(crit.min()), critical_max_us=float(crit.max()),
            straggler_rank=int(slow), straggler_passes=int(count), rank_medians=medians,
        ))  # fmt: skip
    return out
