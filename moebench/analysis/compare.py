"""Statistics and decisions over stored runs; reads only results (DESIGN sections 6, 7, 9).

What one row says, for a (run, case, regime, stage, mode, arm):

- ``median_us``: the case-level figure. For each block b and rank r, ``m[b, r]`` is the median of
  that rank's iterations in that block; the block's critical path is ``c[b] = max_r m[b, r]``
  (ranks run in parallel, the slowest one sets the time); ``median_us = median_b c[b]``. A block
  where some rank of the arm has no samples is left out (its critical path is unknown).
- ``cv_pct``: the noise of the cell, the coefficient of variation of ``c[b]`` over blocks.
- ``rank_min_us / rank_median_us / rank_max_us``: spread of the per-rank medians, each the median
  of all that rank's samples, with ``slowest_rank``, ``n_ranks``, ``n_blocks``, ``n_samples``.
- ``change_pct [ci_low_pct, ci_high_pct]``: ``median_b (c_arm[b] / c_base[b]) - 1`` over the
  blocks both arms have, with a percentile bootstrap that resamples block indices. Arms interleave
  inside a block, so blocks pair them: the ratio is taken inside each block, where whatever the
  block shares between arms (clocks, temperature) cancels, and only then summarised. It can
  differ slightly from the ratio of the two ``median_us``.
- ``decision``: the CI excludes 0 -> FASTER / SLOWER, or SAME when ``|change| < threshold``; the CI
  includes 0 -> SAME when the whole CI lies within +-threshold, else AMBIGUOUS; fewer than 2 paired
  blocks -> AMBIGUOUS. The baseline's own rows say ``baseline``; no decision ("") when there is
  nothing honest to compare against, with the reason.

Many cells, one verdict: a sweep asks the same question of every (case, regime, stage, arm), and
at 95% per cell one cell in twenty would be "significant" by chance. By default every interval is
built at ``1 - alpha / m`` for the m comparisons that get one (Bonferroni), so all of them hold
together with probability ``1 - alpha``; this protects the SAME decisions as well as FASTER and
SLOWER, since all three are read off the same interval. ``correction="none"`` turns it off.

The A/A control: an arm ``X~aa`` is a second copy of arm X timed in the same rotation; it is
compared with X (not with the baseline), and the share of those cells not decided SAME is the
false-positive rate of the whole procedure on this machine (``Comparison.aa``).

Samples that carry an optional ``mode`` column (``eager`` / ``graph``) are keyed by it: the two
modes are never pooled and each arm is compared with the baseline in the same mode (samples on
rotated weight copies, ``weights`` cold, are a mode of their own: ``graph-cold``). Several
samples for one (rank, block, iteration) of a stage, as the per-kernel rows of the ``profile``
regime are, are summed first: a stage's time in one replay is the sum of its kernels.

Several runs: rows are keyed by run_id as well, and changes are only computed inside one run.
Pooling runs would break the pairing (block 3 of one run has nothing to do with block 3 of
another) and mix machines; put two runs side by side to compare them. Runs that do not belong in
one table are refused unless ``force``: runs that share no case, and a case id that names
different shapes in two runs (different scenarios reuse ``c000``). Milder differences are warned
about: manifests that differ in ``sources``, ``environment`` or scenario sha256, cases or arms
only some runs have, and runs that did not finish (both in ``moebench/belonging.py``).

Correctness first: an arm with a ``fail`` or ``error`` check for a case is ``mismatch`` and its
row carries no timing figure at all. Undefined figures are NaN (empty when rendered), never 0.
Rendering lives in ``moebench.report``, figures in ``moebench.plots``. Below the rows,
`moebench.workmodel` adds weight bandwidth against the copy ceiling and, for runs that sweep
tokens_per_rank, the token count at which the baseline overtakes each arm.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moebench.analysis import critical, stats, workmodel
from moebench.analysis.belonging import belonging, distinct, provenance_warnings
from moebench.core.errors import MoebenchError
from moebench.core.vocabulary import aa_twin
from moebench.results.store import Run

DECISIONS = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS", "baseline", "")
CORRECTIONS = ("bonferroni", "none")
NOISE_GOAL_PCT = {"ffn": 1.0}  # coefficient of variation of block medians to stay under
_NAN = math.nan
_STAGE_ORDER = {s: i for i, s in enumerate(
    ("dispatch", "scatter", "fc1", "act", "fc2", "combine", "ffn", "sync_wait", "combine_a2a",
     "layer")  # the distributed stages (moebench/critical.py) around the local ones
)}  # fmt: skip
_REGIME_ORDER = {"ffn": 0, "profile": 1, "kernel": 2}
_KEY = ("run_id", "case_id", "regime", "stage", "mode", "arm")


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
    rows: tuple[CompareRow, ...]

    @property
    def rate(self) -> float:
        return self.not_same / self.cells if self.cells else _NAN


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
    resamples: int  # bootstrap resamples actually drawn per interval
    devices: tuple[str, ...]
    run_ids: tuple[str, ...]
    timings: dict[tuple, Timing] = field(default_factory=dict, repr=False)
    cases: dict[tuple[str, str], CaseInfo] = field(default_factory=dict, repr=False)
    runs: tuple[RunInfo, ...] = ()
    # Weight bandwidth and token-count crossovers (moebench.workmodel); rendered below the table.
    workmodel: workmodel.WorkModel | None = None
    # Distributed runs: critical path per pass, straggler, per-rank stages (moebench/critical.py).
    passes: tuple[critical.PassPath, ...] = ()

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
        """The A/A cells (arm ``X~aa`` against X) that got a decision; None without any."""
        rows = tuple(r for r in self.rows if r.is_aa and r.decision in DECISIONS[:4])
        if not rows:
            return None
        faster_slower = sum(r.decision in ("FASTER", "SLOWER") for r in rows)
        ambiguous = sum(r.decision == "AMBIGUOUS" for r in rows)
        changes = [abs(r.change_pct) for r in rows if not math.isnan(r.change_pct)]
        widths = [(r.ci_high_pct - r.ci_low_pct) / 2 for r in rows if not math.isnan(r.ci_low_pct)]
        return AASummary(
            cells=len(rows), not_same=faster_slower + ambiguous, false_positives=faster_slower,
            ambiguous=ambiguous, max_abs_change_pct=max(changes, default=_NAN),
            max_half_width_pct=max(widths, default=_NAN), rows=rows,
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
            cells.items(), key=lambda kv: (kv[0][0], _REGIME_ORDER.get(kv[0][1], 9), kv[0][1:])
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
            if r.regime == "profile" and r.stage != "ffn":
                profile[key].append(r)
            elif r.regime == "ffn" and r.stage == "ffn":
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

    @property
    def title(self) -> str:
        pct = f"{self.confidence * 100:g}%"
        m = self.comparisons
        if m <= 1:
            ci = f"{pct} CI ({m} comparison, nothing to correct)"
        elif self.correction == "none":
            ci = f"{pct} CI per comparison, uncorrected ({m} comparisons)"
        else:
            ci = (
                f"{pct} CIs Bonferroni-corrected for {m} comparisons "
                f"(each {_pct_text(self.cell_confidence)})"
            )
        head = (
            f"moebench compare vs '{self.baseline}': {ci}, {self.resamples} block-bootstrap "
            f"resamples, SAME within +-{self.threshold_pct:g}%"
        )
        if "cpu" in self.devices:
            mixed = " mixed with GPU runs," if "cuda" in self.devices else ""
            return f"{head}. CPU timings (Triton interpreter),{mixed} not comparable with GPU"
        if self.devices == ("cuda",):
            return f"{head}. GPU timings (device events)"
        return head


def _pct_text(level: float) -> str:
    """99.583% rather than 99.58333333%: enough digits to tell the level from 100%."""
    miss = (1 - level) * 100
    digits = max(0, -math.floor(math.log10(miss))) if miss > 0 else 0
    return f"{level * 100:.{digits}f}%"


# ---------------------------------------------------------------------------------------------
# Grouping samples


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """Integer codes and the values they stand for, for one string column."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def _segment_medians(key: np.ndarray, values: np.ndarray):
    """Median of ``values`` per distinct int64 ``key``: (sorted keys, medians, counts)."""
    order = np.lexsort((values, key))
    key, values = key[order], values[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(values)])
    medians = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2
    return key[starts], medians, counts


def _combine(codes: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 per tuple of small non-negative codes (mixed radix)."""
    out = np.zeros(len(codes[0]), dtype=np.int64)
    for c, n in zip(codes, sizes, strict=True):
        out = out * n + c
    return out


def _with_mode(table: pa.Table) -> pa.Table:
    """The samples with a ``mode`` column: as stored, or "" for a run that does not record it.
    Samples timed on rotated weight copies (``weights`` cold) get ``-cold`` on their mode, so
    that cold and warm figures are never pooled into one cell."""
    if "mode" in table.column_names:
        mode = pc.fill_null(table["mode"], "")
        table = table.drop_columns(["mode"])
    else:
        mode = pa.array([""] * table.num_rows, pa.string())
    if "weights" in table.column_names:
        is_cold = pc.equal(pc.fill_null(table["weights"], ""), "cold")
        mode = pc.if_else(is_cold, pc.binary_join_element_wise(mode, "cold", "-"), mode)
    return table.append_column("mode", mode)


def _concat_samples(runs: list[Run]) -> pa.Table:
    tables = [_with_mode(r.samples) for r in runs]
    return pa.concat_tables(tables, promote_options="permissive")


@dataclass(frozen=True, kw_only=True)
class _Group:
    """Timing of one (run, case, regime, stage, mode, arm)."""

    device: str
    n_samples: int
    rank_medians: dict[int, float]
    critical: dict[int, float]  # block -> critical path over ranks
    incomplete_blocks: int


def _sum_duplicates(group, rank, block, iteration, time, sizes):
    """Sum samples that share (group, rank, block, iteration); returns the reduced arrays and
    the groups where that happened."""
    its, it = np.unique(iteration, return_inverse=True)
    key = _combine([group, rank, block, it], [*sizes, len(its)])
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(uniq) == len(key):
        return group, rank, block, time, set()
    summed = np.bincount(inverse, weights=time, minlength=len(uniq))
    counts = np.bincount(inverse, minlength=len(uniq))
    doubled = set(group[first[counts > 1]].tolist())
    return group[first], rank[first], block[first], summed, doubled


def _timing_groups(samples: pa.Table, warnings: list[str]) -> dict[tuple, _Group]:
    if samples.num_rows == 0:
        return {}
    time = samples["time_us"].to_numpy()
    bad = ~np.isfinite(time) | (time <= 0)
    if bad.any():
        warnings.append(f"{int(bad.sum())} samples with a non-finite or non-positive time ignored")
        samples = samples.filter(pa.array(~bad))
        time = time[~bad]
    names = (*_KEY, "device")
    k = len(_KEY)
    encoded = [_codes(samples[n]) for n in names]
    codes = [c.astype(np.int64) for c, _ in encoded]
    sizes = [len(values) for _, values in encoded]
    # Dense integers: one per (run, case, regime, stage, mode, arm), per rank, per block.
    first, group = np.unique(_combine(codes[:k], sizes[:k]), return_index=True,
                             return_inverse=True)[1:]  # fmt: skip
    ranks, rank = np.unique(samples["rank"].to_numpy(), return_inverse=True)
    blocks, block = np.unique(samples["block"].to_numpy(), return_inverse=True)
    n_groups, n_ranks, n_blocks = len(first), len(ranks), len(blocks)

    label = [tuple(encoded[j][1][codes[j][i]] for j in range(k)) for i in first]
    devices = defaultdict(set)
    for gd in np.unique(_combine([group, codes[k]], [n_groups, sizes[k]])).tolist():
        devices[gd // sizes[k]].add(encoded[k][1][gd % sizes[k]])

    n_raw = np.bincount(group, minlength=n_groups)
    group, rank, block, time, doubled = _sum_duplicates(
        group, rank, block, samples["iteration"].to_numpy(), time, [n_groups, n_ranks, n_blocks]
    )
    odd = sorted({label[g] for g in doubled if label[g][2] != "profile"})
    if odd:
        shown = ", ".join(f"{c} {r}/{s} {a}" for _, c, r, s, _, a in odd[:3])
        warnings.append(
            f"{len(odd)} cell(s) hold several samples for one (rank, block, iteration) outside "
            f"the profile regime; summed as kernels of one stage: {shown}"
        )

    key_r, rank_med, _ = _segment_medians(_combine([group, rank], [n_groups, n_ranks]), time)
    key_b, block_med, _ = _segment_medians(
        _combine([group, block, rank], [n_groups, n_blocks, n_ranks]), time
    )
    g_r, r_r = key_r // n_ranks, ranks[key_r % n_ranks]
    g_b, b_b = key_b // (n_blocks * n_ranks), blocks[key_b // n_ranks % n_blocks]
    # Segments come out sorted by group first, so each group's segments are one slice.
    at_r = np.searchsorted(g_r, np.arange(n_groups + 1))
    at_b = np.searchsorted(g_b, np.arange(n_groups + 1))

    out = {}
    for g in range(n_groups):
        sr, sb = slice(at_r[g], at_r[g + 1]), slice(at_b[g], at_b[g + 1])
        rank_medians = dict(zip(r_r[sr].tolist(), rank_med[sr].tolist(), strict=True))
        per_block: dict[int, list[float]] = defaultdict(list)
        for b, m in zip(b_b[sb].tolist(), block_med[sb].tolist(), strict=True):
            per_block[b].append(m)
        # A block is complete when every rank that this arm has anywhere has samples in it.
        complete = {b: max(ms) for b, ms in per_block.items() if len(ms) == len(rank_medians)}
        dev = devices[g]
        out[label[g]] = _Group(
            device=dev.pop() if len(dev) == 1 else "mixed",
            n_samples=int(n_raw[g]),
            rank_medians=rank_medians,
            critical=complete,
            incomplete_blocks=len(per_block) - len(complete),
        )
    return out


# ---------------------------------------------------------------------------------------------
# Checks, cases and provenance


def _check_status(checks: pa.Table) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(run, case, arm) -> (ok | mismatch, reason). ``skip`` counts as no objection; ``fail`` or
    ``error`` on any rank makes the arm a mismatch for the whole case. The reason names each
    failed check with its ranks, worst error and first detail."""
    failed: dict[tuple, dict[tuple, list]] = defaultdict(dict)
    seen = set()
    cols = ("run_id", "case_id", "arm", "rank", "check", "status", "error", "detail")
    for run_id, case_id, arm, rank, check, status, error, detail in zip(
        *(checks[c].to_pylist() for c in cols), strict=True
    ):
        key = (run_id, case_id, arm)
        seen.add(key)
        if status in ("fail", "error"):
            ranks, errors, details = failed[key].setdefault((check, status), [[], [], []])
            ranks.append(rank)
            errors.append(error)
            details.append(detail)
    out = {}
    for key in sorted(seen):
        parts = []
        for (check, status), (ranks, errors, details) in failed[key].items():
            worst = max((e for e in errors if not math.isnan(e)), default=_NAN)
            err = "" if math.isnan(worst) else f", error {worst:.3g}"
            which = ",".join(str(r) for r in sorted(set(ranks)))
            first = next((d for d in details if d), "")
            detail = f": {first[:160]}" if first else ""
            parts.append(f"{check} {status} (rank {which}{err}){detail}")
        out[key] = ("mismatch", "; ".join(parts)) if parts else ("ok", "")
    return out


def _case_infos(runs: list[Run], samples: pa.Table) -> dict[tuple[str, str], CaseInfo]:
    """Live rows and capacity per case and rank: from the routing table where a run has one,
    else from the samples (which carry the same columns)."""
    per_rank: dict[tuple[str, str], dict[int, tuple]] = defaultdict(dict)
    meta: dict[tuple[str, str], tuple] = {}
    agg = [("live_rows", "max"), ("capacity_rows", "max"), ("tokens_per_rank", "max"),
           ("routing", "min"), ("params", "min")]  # fmt: skip
    if samples.num_rows:
        table = samples.group_by(["run_id", "case_id", "rank"], use_threads=False).aggregate(agg)
        for row in table.to_pylist():
            key = (row["run_id"], row["case_id"])
            per_rank[key][row["rank"]] = (row["live_rows_max"], row["capacity_rows_max"])
            meta[key] = (row["routing_min"], row["tokens_per_rank_max"], row["params_min"])
    for run in runs:
        cols = ("case_id", "rank", "live_rows", "capacity_rows", "routing", "tokens_per_rank")
        if run.routing.num_rows == 0:
            continue
        routed: dict[tuple[str, str], dict[int, tuple]] = defaultdict(dict)
        for case_id, rank, live, cap, label, tokens in zip(
            *(run.routing[c].to_pylist() for c in cols), strict=True
        ):
            key = (run.run_id, case_id)
            routed[key][rank] = (live, cap)
            params = meta.get(key, ("", 0, "{}"))[2]
            meta[key] = (label, tokens, params)
        per_rank.update(routed)
    out = {}
    for key, ranks in per_rank.items():
        live = tuple(ranks[r][0] for r in sorted(ranks))
        caps = [ranks[r][1] for r in sorted(ranks)]
        label, tokens, params = meta[key]
        fraction = (
            float(np.mean([v / c for v, c in zip(live, caps, strict=True)]))
            if all(c > 0 for c in caps)
            else _NAN
        )
        out[key] = CaseInfo(
            run_id=key[0], case_id=key[1], routing=label, tokens_per_rank=int(tokens),
            capacity_rows=int(max(caps)), live_rows=live, live_fraction=fraction, params=params,
        )  # fmt: skip
    return out


def _run_info(run: Run) -> RunInfo:
    m = run.manifest
    scenario = m.get("scenario")
    env = m.get("environment")
    return RunInfo(
        run_id=run.run_id,
        scenario=str(scenario.get("name", "")) if isinstance(scenario, dict) else "",
        status=str(m.get("status") or ""),
        device=str(m.get("device") or ""),
        environment=env if isinstance(env, dict) else {},
        started_at=str(m.get("started_at") or ""),
        ended_at=str(m.get("ended_at") or ""),
        command=str(m.get("command") or ""),
    )


# ---------------------------------------------------------------------------------------------
# Comparison


def _empty_row(**kw: Any) -> CompareRow:
    base = dict(
        mode="", decision="", reason="", device="", median_us=_NAN, cv_pct=_NAN,
        rank_min_us=_NAN, rank_median_us=_NAN, rank_max_us=_NAN, slowest_rank=None,
        n_ranks=None, n_blocks=None, n_samples=None, n_paired_blocks=0, change_pct=_NAN,
        ci_low_pct=_NAN, ci_high_pct=_NAN,
    )  # fmt: skip
    return CompareRow(**(base | kw))


@dataclass(frozen=True)
class _Paired:
    """A cell waiting for its interval: the paired critical paths and a note on the pairing."""

    arm: np.ndarray
    base: np.ndarray
    note: str


def compare_runs(
    runs: list[Run],
    *,
    baseline: str = "stock",
    threshold_pct: float = 2.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    correction: str = "bonferroni",
    force: bool = False,
) -> Comparison:
    """Compare every arm against ``baseline`` (an A/A copy against the arm it copies) inside
    each run; see the module docstring. ``resamples`` is a floor: a corrected interval far in
    the tails gets more (``stats.resamples_for``). ``force`` turns the refusal of runs that do
    not belong together into a warning."""
    if not runs:
        raise MoebenchError("compare needs at least one run")
    if not (threshold_pct >= 0 and 0 < confidence < 1 and resamples >= 100):
        raise MoebenchError(
            f"bad compare settings: threshold {threshold_pct}% (>= 0), confidence {confidence} "
            f"(0..1), resamples {resamples} (>= 100)"
        )
    if correction not in CORRECTIONS:
        raise MoebenchError(f"unknown correction {correction!r}; choose {' or '.join(CORRECTIONS)}")
    run_ids = [r.run_id for r in runs]
    dupes = sorted({r for r in run_ids if run_ids.count(r) > 1})
    if dupes:
        raise MoebenchError(f"run {dupes[0]} given more than once")

    warnings = belonging(runs, force) + provenance_warnings(runs)
    samples = _concat_samples(runs)
    checks = pa.concat_tables([r.checks for r in runs])
    arms_seen = distinct(samples["arm"]) | distinct(checks["arm"])
    if baseline not in arms_seen:
        arms = ", ".join(sorted(arms_seen)) or "none"
        raise MoebenchError(f"baseline arm {baseline!r} is in none of the runs (arms: {arms})")

    groups = _timing_groups(samples, warnings)
    status = _check_status(checks)
    cells: list[tuple[dict, dict, _Paired | None]] = []  # (identity and timing, change, pairing)
    missing_ref = []
    unchecked: set[str] = set()
    for key in sorted(groups, key=_sort_key):
        run_id, case_id, regime, stage, mode, arm = key
        g = groups[key]
        ref = aa_twin(arm) or baseline
        st, why = status.get((run_id, case_id, arm), ("unchecked", "no correctness checks"))
        ident = dict(run_id=run_id, case_id=case_id, regime=regime, stage=stage, mode=mode,
                     arm=arm, status=st, baseline=ref, device=g.device)  # fmt: skip
        if st == "mismatch":
            cells.append((ident | {"reason": why}, {}, None))
            continue
        if st == "unchecked":
            unchecked.add(f"{run_id}/{case_id} arm {arm}")
        if g.incomplete_blocks:
            warnings.append(
                f"{run_id}/{case_id} {regime}/{stage} arm {arm}: {g.incomplete_blocks} block(s) "
                "miss some rank and are left out of the critical path"
            )
        ranks = np.array(list(g.rank_medians.values()))
        crit = np.array(list(g.critical.values()))
        timing = dict(
            n_samples=g.n_samples, n_ranks=len(ranks), n_blocks=len(crit),
            median_us=float(np.median(crit)) if len(crit) else _NAN, cv_pct=stats.cv_pct(crit),
            rank_min_us=float(ranks.min()), rank_median_us=float(np.median(ranks)),
            rank_max_us=float(ranks.max()),
            slowest_rank=int(max(g.rank_medians, key=g.rank_medians.get)),
        )  # fmt: skip
        change, paired = _pair(g, groups.get((*key[:5], ref)), arm, ref,
                               status.get((run_id, case_id, ref), ("unchecked", "")))  # fmt: skip
        if change.get("reason", "").startswith("no baseline"):
            missing_ref.append(f"{run_id}/{case_id} {regime}/{stage}{f' {mode}' if mode else ''}")
        cells.append((ident | timing, change, paired))

    m = sum(paired is not None for _, _, paired in cells)
    alpha = stats.cell_alpha(1 - confidence, m, correction)
    drawn = stats.resamples_for(alpha, resamples)
    rows = []
    for ident, change, paired in cells:
        if paired is not None:
            change = _interval(paired, alpha, drawn, seed, threshold_pct)
        rows.append(_empty_row(**ident, **change))

    # Mismatched arms that were never timed still get a row: the failure must be visible.
    timed = {(k[0], k[1], k[5]) for k in groups}
    for (run_id, case_id, arm), (st, why) in sorted(status.items()):
        if st == "mismatch" and (run_id, case_id, arm) not in timed:
            ref = aa_twin(arm) or baseline
            rows.append(_empty_row(run_id=run_id, case_id=case_id, regime="", stage="", arm=arm,
                                   status=st, reason=why, baseline=ref))  # fmt: skip
    rows.sort(key=lambda r: _sort_key((r.run_id, r.case_id, r.regime, r.stage, r.mode, r.arm)))
    for (run_id, case_id, arm), (st, why) in sorted(status.items()):
        if arm == baseline and st == "mismatch":
            warnings.append(
                f"{run_id}/{case_id}: baseline {baseline!r} failed its checks ({why}); "
                "no change computed for this case"
            )
    if unchecked:
        shown = ", ".join(sorted(unchecked)[:5]) + (" ..." if len(unchecked) > 5 else "")
        warnings.append(
            f"{len(unchecked)} arm(s) have no correctness checks, timings unverified: {shown}"
        )
    if missing_ref:
        shown = ", ".join(missing_ref[:5]) + (" ..." if missing_ref[5:] else "")
        warnings.append(
            f"baseline arm {baseline!r} (or an A/A copy's arm) has no samples in "
            f"{len(missing_ref)} (case, stage) group(s): {shown}"
        )
    devices = tuple(sorted(distinct(samples["device"])))
    if len(devices) > 1:
        warnings.append("runs mix CPU and GPU timings; never compare figures across devices")
    comparison = Comparison(
        rows=rows, warnings=warnings, baseline=baseline, threshold_pct=threshold_pct,
        confidence=confidence, correction=correction, comparisons=m, cell_confidence=1 - alpha,
        resamples=drawn, devices=devices, run_ids=tuple(run_ids),
        timings={k: Timing(rank_medians=g.rank_medians, critical=g.critical)
                 for k, g in groups.items()},
        cases=_case_infos(runs, samples), runs=tuple(_run_info(r) for r in runs),
        workmodel=workmodel.analyse(rows, samples, baseline),
        passes=tuple(critical.pass_paths(
            samples, {k for k, (st, _) in status.items() if st == "mismatch"}
        )),
    )  # fmt: skip
    aa = comparison.aa
    if aa is not None and aa.not_same:
        warnings.append(
            f"A/A control: {aa.not_same} of {aa.cells} cell(s) not SAME ({aa.false_positives} "
            f"FASTER/SLOWER, {aa.ambiguous} AMBIGUOUS): this measurement cannot resolve changes "
            f"of about +-{aa.max_half_width_pct:.1f}%; read the other decisions with that in mind"
        )
    return comparison


def _sort_key(key: tuple) -> tuple:
    run_id, case_id, regime, stage, mode, arm = key
    return (run_id, case_id, _REGIME_ORDER.get(regime, 9), regime, _STAGE_ORDER.get(stage, 99),
            stage, mode, arm)  # fmt: skip


def _pair(
    g: _Group, base: _Group | None, arm: str, ref: str, ref_status: tuple[str, str]
) -> tuple[dict[str, Any], _Paired | None]:
    """The change fields decided without an interval, or the paired blocks that need one."""
    if arm == ref:
        return {"decision": "baseline"}, None
    if ref_status[0] == "mismatch":
        return {"reason": f"baseline {ref!r} failed its checks: {ref_status[1]}"}, None
    if base is None:
        return {"reason": f"no baseline {ref!r} samples for this case, stage and mode"}, None
    blocks = sorted(g.critical.keys() & base.critical.keys())
    n = len(blocks)
    if n < 2:
        return {
            "decision": "AMBIGUOUS",
            "n_paired_blocks": n,
            "reason": f"{n} block(s) paired with {ref!r}; need at least 2",
        }, None
    most = max(len(g.critical), len(base.critical))
    return {}, _Paired(
        arm=np.array([g.critical[b] for b in blocks]),
        base=np.array([base.critical[b] for b in blocks]),
        note=f"paired on {n} of {most} blocks" if n < most else "",
    )


def _interval(p: _Paired, alpha: float, resamples: int, seed: int, threshold: float) -> dict:
    point, low, high = (
        x * 100
        for x in stats.bootstrap_paired_change(
            p.arm, p.base, resamples=resamples, seed=seed, alpha=alpha
        )
    )
    decision, reason = stats.decide(point, low, high, threshold)
    if p.note:
        reason = f"{reason}; {p.note}" if reason else p.note
    return {
        "decision": decision,
        "reason": reason,
        "n_paired_blocks": len(p.arm),
        "change_pct": float(point),
        "ci_low_pct": low,
        "ci_high_pct": high,
    }
