"""What a run's numbers survived: the integrity checks it made, for the report (DESIGN 15).

Every run records its integrity gates as check rows (``gates.integrity``, ``measure.timed``):
inputs verified after every call of every arm, the ffn samples rotated through input sets with
every timed output held to its reference, whole-FFN outputs after timing within tolerance and
whether they were bitwise deterministic, the physical floor and the host clock on the GPU. This
module counts them per run, so that a reader sees in a few lines what the figures were checked
against, and which arms a check caught; ``impossible`` names the cells whose only failure is a
time below the physical floor (shown IMPOSSIBLE, never FASTER).
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

# (gate, what it means when it ran) in the order the report lists them
CHECKS = (
    ("inputs_unchanged", "inputs verified unchanged after every call of every arm"),
    (
        "timed_outputs",
        "input sets rotated through the timed samples, every timed output held to its reference",
    ),  # fmt: skip
    (
        "post_timing",
        "outputs after timing held to the gated output (staged: bitwise) or the "
        "reference (whole-FFN)",
    ),  # fmt: skip
    ("fresh_input", "new inputs in the same tensors after timing: no cached output passes"),
    ("physical_floor", "no time below the bytes that must move over the GPU's copy ceiling"),
    ("host_clock", "eager arms' device events against a synchronised host clock"),
)


def integrity_lines(checks: pa.Table) -> list[str]:
    """One line per integrity check (``CHECKS``): how many (arm, rank) rows it has in these
    runs, how many failed and which arms; a check that never ran says so. Then the arms that are
    not bitwise deterministic across calls (a fact, not a failure)."""
    rows = checks.select(["arm", "rank", "gate", "status"]).to_pylist() if checks.num_rows else []
    seen: dict[str, int] = defaultdict(int)
    failed: dict[str, set[str]] = defaultdict(set)
    not_det: set[str] = set()
    for r in rows:
        seen[r["gate"]] += 1
        if r["status"] in ("fail", "error"):
            failed[r["gate"]].add(r["arm"])
        if r["gate"] == "deterministic" and r["status"] == "info":
            not_det.add(r["arm"])
    out = []
    for gate, what in CHECKS:
        n = seen.get(gate, 0)
        if not n:
            out.append(f"{gate}: not run here ({what})")
            continue
        bad = failed.get(gate, set())
        verdict = f"caught {', '.join(sorted(bad))}" if bad else "all passed"
        out.append(f"{gate}: {what}; {n} check(s), {verdict}")
    if seen.get("deterministic"):
        out.append("deterministic: " + (f"not bitwise deterministic across calls (within "
                                         f"tolerance): {', '.join(sorted(not_det))}"
                                         if not_det else "every whole-FFN arm bitwise the same "
                                         "across calls"))  # fmt: skip
    return out


def impossible(checks: pa.Table) -> set[tuple[str, str, str]]:
    """(run, case, arm) whose only failed checks are ``physical_floor``: an impossible time."""
    if not checks.num_rows:
        return set()
    fails: dict[tuple, set[str]] = defaultdict(set)
    cols = ("run_id", "case_id", "arm", "gate", "status")
    for run_id, case_id, arm, gate, status in zip(*(checks[c].to_pylist() for c in cols),
                                                  strict=True):  # fmt: skip
        if status in ("fail", "error"):
            fails[(run_id, case_id, arm)].add(gate)
    return {k for k, gates in fails.items() if gates == {"physical_floor"}}
