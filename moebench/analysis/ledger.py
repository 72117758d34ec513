"""What holds on any device: the gates each arm passed, and the work ledger (docs/DESIGN.md 6).

A run on the CPU times the Triton interpreter, which says nothing about a GPU; what it does show
is true everywhere: whether every arm computed the right thing (the gates), and how much work
each arm's layout makes each stage do (the ledger, written by the run from every case's routing:
rows computed, bytes read and written, matrix FLOPs), with the time that work would take at
least on a GPU whose ceilings were measured (``core.ceilings``: the H200's device copy and its fp8
and bf16 matrix rates). The per-stage figures are the slowest rank's, as a step waits for it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from moebench.core.ceilings import H200
from moebench.core.vocabulary import STAGE_ORDER
from moebench.results.reader import Run

_STAGE_ORDER = {s: i for i, s in enumerate(STAGE_ORDER)}


@dataclass(frozen=True, kw_only=True)
class GateRow:
    run_id: str
    case_id: str
    arm: str
    passed: int
    failed: int  # fail and error rows
    skipped: int
    worst_error: float  # largest scale-free error of the reference checks (NaN: none)
    first_failure: str  # "check (rank r): detail" of the first failed row, "" when none

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0


@dataclass(frozen=True, kw_only=True)
class LedgerRow:
    run_id: str
    case_id: str
    stage: str
    arm: str
    rows: int  # of the slowest rank
    bytes_moved: int  # read + written
    flops: int
    floor_us: float  # on the H200: the larger of bytes over copy and FLOPs over the matrix rate
    ranks: int
    precision: str


def gate_rows(runs: list[Run]) -> list[GateRow]:
    out = []
    for run in runs:
        acc: dict[tuple, dict] = defaultdict(lambda: {"pass": 0, "fail": 0, "skip": 0,
                                                      "worst": math.nan, "first": ""})  # fmt: skip
        for c in run.checks.to_pylist():
            a = acc[(c["case_id"], c["arm"])]
            status = "fail" if c["status"] in ("fail", "error") else c["status"]
            a[status] = a.get(status, 0) + 1
            if c["gate"] == "reference" and not math.isnan(c["error"]):
                a["worst"] = c["error"] if math.isnan(a["worst"]) else max(a["worst"], c["error"])
            if status == "fail" and not a["first"]:
                a["first"] = f"{c['gate']} (rank {c['rank']}): {c['detail']}"
        for (case_id, arm), a in sorted(acc.items()):
            out.append(GateRow(run_id=run.run_id, case_id=case_id, arm=arm, passed=a["pass"],
                               failed=a["fail"], skipped=a["skip"], worst_error=a["worst"],
                               first_failure=a["first"]))  # fmt: skip
    return out


def floor_us(bytes_moved: int, flops: int, precision: str) -> float:
    """The least time of that work on the H200: bytes at the copy ceiling or FLOPs at the matrix
    rate of the precision (fp8 for the fp8 pipeline, bf16 otherwise), whichever is larger."""
    return H200.floor_us(bytes_moved, flops, precision)


def ledger_rows(runs: list[Run]) -> list[LedgerRow]:
    out = []
    for run in runs:
        precision = {}
        if run.samples.num_rows:
            for case, prec in zip(run.samples["case_id"].to_pylist(),
                                  run.samples["precision"].to_pylist(), strict=True):  # fmt: skip
                precision.setdefault(case, prec)
        worst: dict[tuple, dict] = {}
        ranks: dict[tuple, set] = defaultdict(set)
        for r in run.ledger.to_pylist():
            key = (r["case_id"], r["stage"], r["arm"])
            ranks[key].add(r["rank"])
            moved = r["bytes_read"] + r["bytes_written"]
            if key not in worst or moved > worst[key]["moved"]:
                worst[key] = {"rows": r["rows"], "moved": moved, "flops": r["flops"]}
        for key, w in worst.items():
            case_id, stage, arm = key
            prec = precision.get(case_id, "")
            out.append(LedgerRow(run_id=run.run_id, case_id=case_id, stage=stage, arm=arm,
                                 rows=w["rows"], bytes_moved=w["moved"], flops=w["flops"],
                                 floor_us=floor_us(w["moved"], w["flops"], prec),
                                 ranks=len(ranks[key]), precision=prec))  # fmt: skip
    out.sort(key=lambda r: (r.run_id, r.case_id, _STAGE_ORDER.get(r.stage, 99), r.stage, r.arm))
    return out
