"""The values a comparison is made of: one row per cell, and the comparison that holds them.

``compare_runs`` (``moebench.analysis.compare``) builds them; ``moebench.report`` renders them.
Beside the rows, a ``Comparison`` summarises itself: the A/A control (``aa``), the noise of each
regime (``noise``), the profile reconciliation (``reconciliation``) and the significant
regressions, all read off the rows, so that every renderer shows the same figures.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from moebench.analysis import critical, ledger, workmodel
from moebench.analysis.model_summary import ModelSummary
from moebench.analysis.policy import Policy
from moebench.analysis.stats import TOO_FEW
from moebench.analysis.step import StepRow, StepSummary
from moebench.core.vocabulary import REGIME_ORDER, WHOLE_FFN, Regime, aa_twin

DECISIONS = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS", TOO_FEW, "baseline", "")
NOISE_GOAL_PCT = {"ffn": 1.0}  # coefficient of variation of block medians to stay under
_NAN = math.nan


@dataclass(frozen=True, kw_only=True)
class CompareRow:
    run_id: str
    case_id: str
    regime: str
    stage: str
    arm: str
    mode: str  # eager | graph | "" when the samples do not say; "-cold" on rotated weights
    status: str  # ok | unchecked (no check rows) | mismatch (a check failed or errored)
    decision: str  # FASTER | SLOWER | SAME | AMBIGUOUS | baseline | "" (no comparison)
    reason: str
    device: str
    median_us: float
    cv_pct: float
    rank_min_us: float
    rank_median_us: float
    rank_max_us: float
    slowest_rank: int | None
    n_ranks: int | None  # None on mismatch rows: they carry no figures at all
    n_blocks: int | None
    n_samples: int | None
    baseline: str  # the arm this row is compared with (for an A/A copy, the arm it copies)
    n_paired_blocks: int
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float

    @property
    def is_aa(self) -> bool:
        return aa_twin(self.arm) is not None


@dataclass(frozen=True, kw_only=True)
class Timing:
    """What plots need beyond a row: every rank's median and every block's critical path."""

    rank_medians: dict[int, float]
    critical: dict[int, float]


@dataclass(frozen=True, kw_only=True)
class CaseInfo:
    run_id: str
    case_id: str
    routing: str
    tokens_per_rank: int
    capacity_rows: int
    live_rows: tuple[int, ...]  # per rank, in rank order
    live_fraction: float  # mean over ranks of live_rows / capacity_rows
    params: str  # the case's sweep values, JSON
    precision: str = ""  # the case's precision (w8a16 / w4a16: the decode family)


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    run_id: str
    scenario: str
    status: str
    device: str
    environment: dict
    started_at: str
    ended_at: str
    command: str


@dataclass(frozen=True, kw_only=True)
class AASummary:
    cells: int  # A/A cells with a decision
    not_same: int  # FASTER + SLOWER + AMBIGUOUS
    false_positives: int  # FASTER + SLOWER: a difference claimed where there is none
    ambiguous: int
    max_abs_change_pct: float
    max_half_width_pct: float  # widest half-interval: the smallest change the run could resolve
    rows: tuple[CompareRow | StepRow, ...]
    too_few: int = 0  # A/A cells whose blocks cannot reach the corrected level: no decision

    @property
    def rate(self) -> float:
        """The share of decided A/A cells not decided SAME (claimed differences and cells too
        noisy to decide)."""
        return self.not_same / self.cells if self.cells else _NAN

    @property
    def fp_rate(self) -> float:
        """The false-positive rate: the share of decided A/A cells that claim a difference
        (FASTER or SLOWER) where there is none; at most alpha when the intervals keep their
        coverage."""
        return self.false_positives / self.cells if self.cells else _NAN


@dataclass(frozen=True, kw_only=True)
class NoiseRow:
    run_id: str
    regime: str
    mode: str
    cells: int
    median_cv_pct: float
    max_cv_pct: float
    worst: str  # the cell with the largest coefficient of variation
    goal_pct: float  # NaN when the regime has no stated goal
    over_goal: int


@dataclass(frozen=True, kw_only=True)
class Reconciliation:
    run_id: str
    case_id: str
    mode: str
    arm: str
    stages: tuple[str, ...]
    stage_sum_us: float
    ffn_us: float

    @property
    def ratio(self) -> float:
        return self.stage_sum_us / self.ffn_us


@dataclass(frozen=True, kw_only=True)
class Comparison:
    rows: list[CompareRow]
    warnings: list[str]
    baseline: str
    threshold_pct: float
    confidence: float  # family-wise when corrected
    correction: str  # bonferroni | none
    comparisons: int  # m: cells that got an interval
    cell_confidence: float  # the level each interval is built at
    blocks_needed: int  # paired blocks an interval needs to reach cell_confidence
    devices: tuple[str, ...]
    run_ids: tuple[str, ...]
    timings: dict[tuple, Timing] = field(default_factory=dict, repr=False)
    cases: dict[tuple[str, str], CaseInfo] = field(default_factory=dict, repr=False)
    runs: tuple[RunInfo, ...] = ()
    # Weight bandwidth and token-count crossovers (moebench.analysis.workmodel); rendered below
    # the table.
    workmodel: workmodel.WorkModel | None = None
    # Distributed runs: critical path per pass, straggler, per-rank stages
    # (moebench/analysis/critical.py).
    passes: tuple[critical.PassPath, ...] = ()
    # What holds on any device (moebench/analysis/ledger.py): every arm's gates, and the work
    # ledger per stage and arm with its floor on the H200.
    gates: tuple[ledger.GateRow, ...] = ()
    ledger: tuple[ledger.LedgerRow, ...] = ()
    # The step regime (moebench/analysis/step.py): per (run, case, mode, arm) the model step's
    # percentiles, imbalance tax and TPOT share, the goodput per series; None without it.
    step: StepSummary | None = None
    # The model regime (moebench/analysis/model.py, model_summary.py): a whole model's measured
    # TTFT and TPOT per arm, its floor, the measured non-MoE time, goodput; None without it.
    model: ModelSummary | None = None
    # Over token sweeps, where each arm's advantage disappears (moebench/analysis/policy.py).
    policy: list[Policy] = field(default_factory=list)
    # What the numbers survived (moebench/analysis/integrity.py): a line per integrity check.
    integrity: tuple[str, ...] = ()

    def regressions(self, pct: float) -> list[CompareRow]:
        """Significantly SLOWER rows whose change exceeds ``pct`` percent. A/A copies are not
        regressions of code; their verdicts say how far the measurement can be trusted."""
        return [
            r for r in self.rows if r.decision == "SLOWER" and r.change_pct > pct and not r.is_aa
        ]

    def mismatches(self) -> list[CompareRow]:
        return [r for r in self.rows if r.status == "mismatch"]

    @property
    def aa(self) -> AASummary | None:
        """The A/A cells (arm ``X~aa`` against X) that got a decision, the model step's among
        them (``step.StepRow``, regime ``step``); None without any."""
        cells = [*self.rows, *(self.step.rows if self.step is not None else ())]
        undecided = sum(r.is_aa and r.decision == TOO_FEW for r in cells)
        rows = tuple(r for r in cells if r.is_aa and r.decision in DECISIONS[:4])
        if not rows and not undecided:
            return None
        faster_slower = sum(r.decision in ("FASTER", "SLOWER") for r in rows)
        ambiguous = sum(r.decision == "AMBIGUOUS" for r in rows)
        changes = [abs(r.change_pct) for r in rows if not math.isnan(r.change_pct)]
        widths = [(r.ci_high_pct - r.ci_low_pct) / 2 for r in rows if not math.isnan(r.ci_low_pct)]
        return AASummary(
            cells=len(rows), not_same=faster_slower + ambiguous, false_positives=faster_slower,
            ambiguous=ambiguous, max_abs_change_pct=max(changes, default=_NAN),
            max_half_width_pct=max(widths, default=_NAN), rows=rows, too_few=undecided,
        )  # fmt: skip

    def noise(self) -> list[NoiseRow]:
        """Per run, regime and mode: the coefficient of variation of block critical paths over
        every timed cell, with the regime's goal (``NOISE_GOAL_PCT``) where there is one."""
        cells: dict[tuple, list[CompareRow]] = defaultdict(list)
        for r in self.rows:
            if not math.isnan(r.cv_pct):
                cells[(r.run_id, r.regime, r.mode)].append(r)
        out = []
        for (run_id, regime, mode), rows in sorted(
            cells.items(), key=lambda kv: (kv[0][0], REGIME_ORDER.get(kv[0][1], 9), kv[0][1:])
        ):
            cvs = np.array([r.cv_pct for r in rows])
            worst = rows[int(cvs.argmax())]
            goal = NOISE_GOAL_PCT.get(regime, _NAN)
            out.append(NoiseRow(
                run_id=run_id, regime=regime, mode=mode, cells=len(rows),
                median_cv_pct=float(np.median(cvs)), max_cv_pct=float(cvs.max()),
                worst=f"{worst.case_id} {worst.stage} {worst.arm}", goal_pct=goal,
                over_goal=int((cvs >= goal).sum()) if not math.isnan(goal) else 0,
            ))  # fmt: skip
        return out

    def reconciliation(self) -> list[Reconciliation]:
        """Per (run, case, mode, arm) with ``profile`` rows: the sum of the profiled stages'
        medians against the ``ffn`` median of the same arm (both critical-path medians). A ratio
        below 1 is time between kernels (launch gaps, idle); above 1, stages that overlap."""
        profile: dict[tuple, list[CompareRow]] = defaultdict(list)
        ffn: dict[tuple, CompareRow] = {}
        for r in self.rows:
            key = (r.run_id, r.case_id, r.mode, r.arm)
            if math.isnan(r.median_us):
                continue
            if r.regime == Regime.PROFILE and r.stage != WHOLE_FFN:
                profile[key].append(r)
            elif r.regime == Regime.FFN and r.stage == WHOLE_FFN:
                ffn[key] = r
        return [
            Reconciliation(
                run_id=key[0],
                case_id=key[1],
                mode=key[2],
                arm=key[3],
                stages=tuple(r.stage for r in rows),
                stage_sum_us=float(sum(r.median_us for r in rows)),
                ffn_us=ffn[key].median_us,
            )  # fmt: skip
            for key, rows in profile.items()
            if key in ffn
        ]
