"""The work model over stored runs: weight bandwidth against the copy ceiling, and crossovers.

Two sections that `compare` adds below its table (reads only results, like compare):

- Weight bandwidth. Each sample row carries ``weight_bytes``: the expert weight bytes (values,
  scales, biases) its stage, or the whole FFN, reads in one step on that rank (dense decode: every
  local expert; sparse decode and the prefill GEMMs: only experts that received tokens; stages
  without weights: 0; runs older than the column: -1, unknown). For every timed row with bytes,
  GB/s is the slowest rank's bytes over that rank's median time, and the fraction is of the
  device-copy ceiling measured on the GPU the run ran on (`core.ceilings.for_gpu` of the
  manifest's ``gpu_name``: 4.27 TB/s on the H200, 2.97 on the H100 SXM, docs/PERF.md). CPU
  runs, and runs on a GPU whose ceiling moebench has not measured (or whose manifest names
  none), get no fraction: another GPU's ceiling would give a fraction it does not have.
- Crossover. Cases of one run that differ only in ``tokens_per_rank`` form a series. For every arm
  against the baseline, on the ``ffn`` regime, the crossover is the smallest token count from
  which the baseline is faster (lower median critical path) at that count and every larger one:
  with the decode arms and the default baseline, where dense overtakes sparse. Beside it, the
  byte ledger's prediction: the smallest token count at which the busiest rank's routed slots
  reach its number of local experts, since a sparse GEMV streams its expert's weights once per
  slot and a dense pass streams every local expert once. The decision-based boundary (with its
  interval, for every arm pair and the model step as well) is the policy's
  (``moebench.analysis.policy``), whose run-finding code this shares.

Undefined figures are NaN or None (rendered empty), never 0. The sections' headers, notes and
cells are text and live with the rest of the text, in ``moebench.report.sections``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from moebench.analysis import policy
from moebench.core.ceilings import Ceilings
from moebench.core.vocabulary import WHOLE_FFN, Regime

TOKENS_KEY = "shape.tokens_per_rank"


@dataclass(frozen=True, kw_only=True)
class BandwidthRow:
    run_id: str
    case_id: str
    regime: str
    stage: str
    arm: str
    device: str
    tokens_per_rank: int
    rank: int  # the slowest rank, whose bytes and time give the figure
    weight_bytes: int
    gbps: float
    copy_ceiling_gbps: float  # the run's GPU's device copy (core.ceilings); NaN: none measured
    copy_fraction: float  # gbps / copy_ceiling_gbps; NaN for CPU timings or no ceiling


@dataclass(frozen=True, kw_only=True)
class CrossoverRow:
    run_id: str
    series: str  # the sweep values the series shares (tokens_per_rank excluded)
    arm: str
    baseline: str
    tokens: tuple[int, ...]
    ratios: tuple[float, ...]  # arm median / baseline median at each token count (NaN: no data)
    crossover_tokens: int | None  # baseline faster from here on; None: never within the sweep
    ledger_tokens: int | None  # busiest rank's slots reach its local experts; None: not reached
    note: str


@dataclass(frozen=True, kw_only=True)
class WorkModel:
    bandwidth: list[BandwidthRow]
    crossover: list[CrossoverRow]

    def __bool__(self) -> bool:
        return bool(self.bandwidth or self.crossover)


def _case_table(samples: pa.Table) -> dict[tuple[str, str], dict]:
    """(run, case) -> tokens, sweep params, local experts and live rows per rank."""
    cols = ("run_id", "case_id", "rank", "tokens_per_rank", "local_experts", "live_rows", "params")
    out: dict[tuple[str, str], dict] = {}
    for run_id, case_id, rank, tokens, experts, live, params in zip(
        *(samples[c].to_pylist() for c in cols), strict=True
    ):
        c = out.setdefault((run_id, case_id), {"tokens": tokens, "experts": experts,
                                               "params": params, "live": {}})  # fmt: skip
        c["live"][rank] = live
    return out


def _weight_bytes(samples: pa.Table) -> dict[tuple, int]:
    """(run, case, regime, stage, arm, rank) -> weight bytes (one value per group)."""
    cols = ("run_id", "case_id", "regime", "stage", "arm", "rank", "weight_bytes")
    keyed = zip(*(samples[c].to_pylist() for c in cols), strict=True)
    return {tuple(k[:6]): k[6] for k in keyed}


def _bandwidth(rows, samples: pa.Table, cases: dict,
               ceilings: Mapping[str, Ceilings | None]) -> list[BandwidthRow]:  # fmt: skip
    nbytes = _weight_bytes(samples)
    out = []
    for r in rows:
        if r.status == "mismatch" or r.slowest_rank is None or math.isnan(r.rank_max_us):
            continue
        b = nbytes.get((r.run_id, r.case_id, r.regime, r.stage, r.arm, r.slowest_rank), -1)
        if b <= 0:  # no weights in this stage (0) or unknown (-1)
            continue
        gbps = b / r.rank_max_us / 1e3
        ceiling = ceilings.get(r.run_id) if r.device == "cuda" else None
        copy = ceiling.copy_gbps if ceiling else math.nan
        out.append(BandwidthRow(
            run_id=r.run_id, case_id=r.case_id, regime=r.regime, stage=r.stage, arm=r.arm,
            device=r.device, tokens_per_rank=cases[(r.run_id, r.case_id)]["tokens"],
            rank=r.slowest_rank, weight_bytes=b, gbps=gbps, copy_ceiling_gbps=copy,
            copy_fraction=gbps / copy,
        ))  # fmt: skip
    return out


def _series_key(params: str) -> str | None:
    """The sweep values other than tokens_per_rank, or None when tokens are not swept."""
    try:
        p = json.loads(params) if params else {}
    except ValueError:
        return None
    if TOKENS_KEY not in p:
        return None
    rest = {k: v for k, v in sorted(p.items()) if k != TOKENS_KEY}
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in rest.items()) or "all cases"


def _crossover(rows, cases: dict, baseline: str) -> list[CrossoverRow]:
    medians: dict[tuple, float] = {}
    for r in rows:
        if r.regime == Regime.FFN and r.stage == WHOLE_FFN and r.status != "mismatch":
            medians[(r.run_id, r.case_id, r.arm)] = r.median_us
    series: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for (run_id, case_id), c in cases.items():
        key = _series_key(c["params"])
        if key is not None:
            series[(run_id, key)][c["tokens"]] = case_id
    out = []
    for (run_id, key), by_tokens in sorted(series.items()):
        tokens = tuple(sorted(by_tokens))
        if len(tokens) < 2:
            continue
        ledger = next((t for t in tokens if max(cases[(run_id, by_tokens[t])]["live"].values())
                       >= cases[(run_id, by_tokens[t])]["experts"]), None)  # fmt: skip
        arms = sorted({a for (rid, cid, a) in medians if rid == run_id
                       and cid in by_tokens.values() and a != baseline})  # fmt: skip
        for arm in arms:
            ratios = []
            for t in tokens:
                a = medians.get((run_id, by_tokens[t], arm), math.nan)
                b = medians.get((run_id, by_tokens[t], baseline), math.nan)
                ratios.append(a / b if b > 0 else math.nan)
            known = [(t, q) for t, q in zip(tokens, ratios, strict=True) if not math.isnan(q)]
            crossover, note = None, ""
            if len(known) < 2:
                note = "fewer than two token counts with both arms timed"
            else:
                # Baseline faster (ratio > 1) from this count on: the run of such counts that
                # reaches the largest (policy.edges: the same code finds the policy's boundaries).
                runs = policy.edges([q > 1 for _, q in known])
                if runs and runs[-1][1] == len(known) - 1:
                    crossover = known[runs[-1][0]][0]
                flips = sum((i > 0) + (j < len(known) - 1) for i, j in runs)
                if flips > 1:
                    note = "not monotone in tokens"
                if len(known) < len(tokens):
                    note = (note + "; " if note else "") + "some token counts lack timings"
            out.append(CrossoverRow(
                run_id=run_id, series=key, arm=arm, baseline=baseline, tokens=tokens,
                ratios=tuple(ratios), crossover_tokens=crossover, ledger_tokens=ledger, note=note,
            ))  # fmt: skip
    return out


def analyse(rows, samples: pa.Table, baseline: str,
            ceilings: Mapping[str, Ceilings | None] | None = None) -> WorkModel:  # fmt: skip
    """The work model of compared rows (`rows.CompareRow`) and the samples they came from;
    ``ceilings``: each run's GPU's measured ceilings (None or absent: none, no fraction)."""
    if samples.num_rows == 0:
        return WorkModel(bandwidth=[], crossover=[])
    cases = _case_table(samples)
    return WorkModel(
        bandwidth=_bandwidth(rows, samples, cases, ceilings or {}),
        crossover=_crossover(rows, cases, baseline),
    )
