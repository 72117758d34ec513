"""Before and after: the same (case, regime, stage, mode, arm) in a run against a baseline run.

A kernel engineer's first question is "did my commit make it faster?": the same arm, timed in two
runs. The runs were not interleaved, so no block pairs them: clocks, temperature and whatever
else drifted between the runs stays in the comparison. The interval is therefore unpaired, the
exact Hodges-Lehmann interval for the shift of log block critical paths (``stats.unpaired_change``:
distribution-free, its coverage true at the block counts), which is wider than a paired one, and
the report says so. Cells are corrected for their number (Bonferroni), as arm comparisons are.

Cells are refused, unless ``force``, when they would compare different things: another device or
environment (GPU, driver, torch, triton, CUDA) or another shape under the same case id. Sources
differ by design (that is the change under test) and are only reported. A regression is a cell
decided SLOWER beyond the threshold against the baseline run: never an arm-against-arm
difference, which is what the arms are for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from moebench.analysis import stats
from moebench.analysis.belonging import case_shapes
from moebench.analysis.blocks import concat_samples, timing_groups
from moebench.core.errors import MoebenchError
from moebench.results.reader import Run

ENVIRONMENT_KEYS = ("device", "gpu_name", "gpu_count", "driver", "torch", "triton", "cuda")


@dataclass(frozen=True, kw_only=True)
class AgainstRow:
    run_id: str
    case_id: str
    regime: str
    stage: str
    mode: str
    arm: str
    base_us: float  # median of the baseline run's block critical paths
    new_us: float
    n_base: int  # blocks
    n_new: int
    change_pct: float = math.nan
    ci_low_pct: float = math.nan
    ci_high_pct: float = math.nan
    decision: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Against:
    base_run: str
    rows: list[AgainstRow]
    warnings: list[str]
    threshold_pct: float
    confidence: float
    cell_confidence: float
    comparisons: int
    blocks_needed: int | None  # blocks per run an interval needs at cell_confidence

    def regressions(self, pct: float) -> list[AgainstRow]:
        """Cells significantly slower than the baseline run by more than ``pct`` percent."""
        return [r for r in self.rows if r.decision == "SLOWER" and r.change_pct > pct]


def _environment(run: Run) -> dict:
    env = run.manifest.get("environment")
    env = env if isinstance(env, dict) else {}
    return {k: env.get(k) for k in ENVIRONMENT_KEYS} | {"device": run.manifest.get("device")}


def _failed_arms(run: Run) -> set[tuple[str, str]]:
    bad = set()
    for c in run.checks.to_pylist():
        if c["status"] in ("fail", "error"):
            bad.add((c["case_id"], c["arm"]))
    return bad


def compare_against(
    runs: list[Run],
    base: Run,
    *,
    threshold_pct: float = 2.0,
    confidence: float = 0.95,
    correction: str = "bonferroni",
    force: bool = False,
) -> Against:
    """Every cell of ``runs`` that ``base`` also has, against ``base`` (module docstring)."""
    others = [r for r in runs if r.run_id != base.run_id]
    if not others:
        raise MoebenchError("--against needs another run to compare with the baseline run")
    warnings: list[str] = []
    env_base, shapes_base = _environment(base), case_shapes(base)
    for r in others:
        env = _environment(r)
        diff = [k for k in ENVIRONMENT_KEYS if env.get(k) != env_base.get(k)]
        if diff:
            what = ", ".join(f"{k} {env_base.get(k)!r} -> {env.get(k)!r}" for k in diff)
            if not force:
                raise MoebenchError(
                    f"run {r.run_id} ran in another environment than {base.run_id} ({what}); "
                    "timings of the two do not compare (--force to compare anyway)"
                )
            warnings.append(f"forced: {r.run_id} vs {base.run_id} differ in {what}")
        shapes = case_shapes(r)
        for case in sorted(shapes.keys() & shapes_base.keys()):
            if shapes[case] != shapes_base[case]:
                if not force:
                    raise MoebenchError(
                        f"case {case!r} has other shapes in {r.run_id} than in {base.run_id}; "
                        "the same case id names different work (--force to compare anyway)"
                    )
                warnings.append(f"forced: case {case!r} differs in shape between the runs")
        if r.manifest.get("sources") != base.manifest.get("sources"):
            warnings.append(
                f"{r.run_id} and {base.run_id} ran other sources (expected: the change)"
            )
    groups = timing_groups(concat_samples([base, *others]), warnings)
    failed = {(run.run_id, *k) for run in (base, *others) for k in _failed_arms(run)}
    pairs = []
    for key, g in sorted(groups.items()):
        run_id, case_id, regime, stage, mode, arm = key
        if run_id == base.run_id:
            continue
        b = groups.get((base.run_id, case_id, regime, stage, mode, arm))
        if b is None or not g.critical or not b.critical:
            continue
        pairs.append(
            (key, np.array(list(g.critical.values())), np.array(list(b.critical.values())))
        )
    m = len(pairs)
    alpha = stats.cell_alpha(1 - confidence, m, correction)
    rows = []
    for (run_id, case_id, regime, stage, mode, arm), new, old in pairs:
        ident = dict(run_id=run_id, case_id=case_id, regime=regime, stage=stage, mode=mode,
                     arm=arm, base_us=float(np.median(old)), new_us=float(np.median(new)),
                     n_base=len(old), n_new=len(new))  # fmt: skip
        if (run_id, case_id, arm) in failed or (base.run_id, case_id, arm) in failed:
            where = "this run" if (run_id, case_id, arm) in failed else "the baseline run"
            rows.append(AgainstRow(**ident, decision="mismatch",
                                   reason=f"the arm failed a gate in {where}"))  # fmt: skip
            continue
        found = stats.unpaired_change(new, old, alpha)
        if found is None:
            rows.append(AgainstRow(**ident, decision=stats.TOO_FEW,
                                   change_pct=(ident["new_us"] / ident["base_us"] - 1) * 100,
                                   reason=f"{len(new)} and {len(old)} blocks, unpaired: too few "
                                   f"for {(1 - alpha) * 100:.4g}% per cell"))  # fmt: skip
            continue
        point, low, high, _ = (x * 100 for x in found)
        decision, reason = stats.decide(point, low, high, threshold_pct)
        rows.append(AgainstRow(**ident, change_pct=point, ci_low_pct=low, ci_high_pct=high,
                               decision=decision, reason=reason))  # fmt: skip
    if not rows:
        raise MoebenchError(f"no cell of the runs is also in the baseline run {base.run_id}")
    need = stats.unpaired_blocks_needed(alpha)
    return Against(
        base_run=base.run_id, rows=rows, warnings=warnings, threshold_pct=threshold_pct,
        confidence=confidence, cell_confidence=1 - alpha, comparisons=m, blocks_needed=need,
    )  # fmt: skip
