"""The warp-state sampling of Nsight Compute's source page (call4's srcN.csv.gz: `ncu -i REP
--page source --print-source sass --csv`) summed: each stall reason's share of all samples, and
the instructions holding the most samples with their main reason. Writes one line a figure, read
by tools/perf_specs_confirm.py.

Usage (in the records' folder): python3 scratch/stall_summary.py call4/src4.csv.gz:fc1
call4/src5.csv.gz:fc2 > call4/stall_summary.txt
"""

from __future__ import annotations

import collections
import csv
import gzip
import sys


def summary(path: str, name: str) -> list[str]:
    rows = list(csv.reader(gzip.open(path, "rt")))
    head, data = rows[1], rows[2:]
    at = {h: i for i, h in enumerate(head)}
    all_samples = "Warp Stall Sampling (All Samples)"
    count = lambda r, h: int(r[at[h]] or 0)  # noqa: E731
    total = sum(count(r, all_samples) for r in data)
    reasons = [h for h in head if h.startswith("stall_") and "(Not" not in h]
    by_reason = collections.Counter({h[6:]: sum(count(r, h) for r in data) for h in reasons})
    out = [f"{name} samples={total} instructions={len(data)}"]
    out += [f"{name} reason={k} share={100 * v / total:.1f}" for k, v in by_reason.most_common(6)]
    top = sorted(data, key=lambda r: -count(r, all_samples))[:5]
    for rank, r in enumerate(top, 1):
        main = max(reasons, key=lambda h: count(r, h))
        text = " ".join(r[at["Source"]].split()).replace("0x", "")[:40].replace(" ", "_")
        out.append(f"{name} top={rank} share={100 * count(r, all_samples) / total:.1f} "
                   f"reason={main[6:]} instruction={text}")  # fmt: skip
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        path, name = arg.rsplit(":", 1)
        print("\n".join(summary(path, name)))
