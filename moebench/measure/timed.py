"""Timing of the arms that passed their gates, on one rank: warm-up, CUDA graphs, blocks of
samples with the arms in rotating order, and the ``profile`` regime.

``time_rank`` records every sample as a row of ``CaseRows.samples`` (docs/DESIGN.md section 6): the
``ffn`` regime replays one graph of the whole pipeline per arm, the ``kernel`` regime one graph
per stage with L2 flushed before each sample (``measure.flush_l2``), and with
``measure.cold_weights`` each sample takes the next of several bit-identical weight copies, each
with its own graphs (``moebench/cold.py``). An arm that fails while being timed gets an ``error``
row and leaves the rotation; the others go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from moebench.arm import assemble
from moebench.arm.base import Arm, run_all
from moebench.core import faults
from moebench.measure import cold
from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order
from moebench.results.rows import CaseRows, record_failure
from moebench.spec.schema import Scenario


def time_rank(
    timed,
    stage_sets,
    s: Scenario,
    clock: Clock,
    rank_cols: dict,
    stop: faults.Stopper,
    device: torch.device,
    out: CaseRows,
    weight_bytes: dict[str, dict[str, int]],
    weight_fields: tuple[str, ...],
    arms: dict[str, Arm],
    blocks: int | None = None,
) -> tuple[list[str], int]:
    """Samples of the ``timed`` arms into ``out.samples``, checking ``stop`` after each one. An arm
    that fails while being timed gets a ``timing`` error row and leaves the rotation; returns the
    arms that finished. Each row carries the expert weight bytes its stage (or the whole FFN)
    reads in one step on this rank (the family's work model). ``arms``: {name: arm}.

    Returns the arms that finished and the number of blocks run: ``measure.blocks``, or with
    ``measure.target_cv`` as many as it took for every arm's block medians to vary by at most
    the target (``noise_reached``), up to ``measure.max_blocks`` and ``measure.time_budget_s``.
    ``blocks`` fixes the count (the later ranks of a case run what the first rank ran, so that
    every block has every rank)."""
    m = s.measure
    active = list(timed)
    if not active:
        return active, 0
    # Every arm replays CUDA graphs on the GPU, unless it declares that it cannot (graph=False):
    # its samples then say mode eager, and compare keeps them apart from the graph replays.
    graphs = {a: m.graph and clock.cuda and arms[a].graph for a in active}
    where = f"rank {rank_cols['rank']}, timing"

    def fail(arm: str, exc: Exception) -> None:
        active.remove(arm)
        record_failure(out, rank_cols, [arm], "timing", exc, device)

    for _ in range(m.warmup):
        for arm in list(active):
            try:
                run_all(stage_sets[arm][1])
            except Exception as exc:
                fail(arm, exc)
        stop.check(where)
    try:
        clock.synchronize()
    except Exception as exc:  # an asynchronous error: it cannot be pinned on one arm
        for arm in list(active):
            fail(arm, exc)
    ffn: dict[str, Callable[[], None]] = {}
    kernel: dict[str, list[tuple[str, Callable[[], None]]]] = {}
    problems = weight_rotation(active, stage_sets, m, weight_bytes, weight_fields, device, out)
    for arm in list(active):
        ws, gated = stage_sets[arm]
        build = lambda w, a=arms[arm]: assemble.build(a, w)  # noqa: E731
        # One stage set per weight copy: the gated stages on the gated weights, then (cold
        # weights only) the same stages over the other copies.
        pairs = [(ws, gated)] + [cold.stages_on(build, ws, p) for p in problems[1:]]
        sets = [st for _, st in pairs]
        # The kernel regime's stages of each copy: a staged arm's own, a whole-FFN arm's
        # sub-stages (none unless it names them).
        ksets = [assemble.kernel_stages(arms[arm], w, st) for w, st in pairs]
        use_graph = graphs[arm]
        try:
            # The profile regime replays the same whole-FFN graphs, with or without the ffn
            # regime's samples (a scenario may ask for [kernel, profile]).
            if "ffn" in m.regimes or "profile" in m.regimes:
                calls = [lambda st=st: run_all(st) for st in sets]
                calls = [clock.capture(c) if use_graph else c for c in calls]
                ffn[arm] = calls[0] if len(calls) == 1 else cold.Rotation(calls)
            if "kernel" in m.regimes:
                # One graph per stage: a stage of several launches is timed on the device, not at
                # the speed the host issues them. A stage that reads no weights needs one copy.
                kernel[arm] = []
                for i, st in enumerate(ksets[0]):
                    if st.name not in m.stages:
                        continue
                    rotate = weight_bytes[arm].get(st.name, 0) > 0
                    runs = [s[i].run for s in (ksets if rotate else ksets[:1])]
                    runs = [clock.capture(r) if use_graph else r for r in runs]
                    kernel[arm].append(
                        (st.name, runs[0] if len(runs) == 1 else cold.Rotation(runs))
                    )
        except Exception as exc:
            fail(arm, exc)
    weight_cols = {"weights": "cold" if m.cold_weights else "warm", "weight_copies": len(problems)}
    device_label = "cuda" if clock.cuda else "cpu"
    started = time.monotonic()
    first = len(out.samples)  # this rank's rows are the tail from here
    block = 0
    while active:
        if blocks is not None:
            if block >= blocks:
                break
        elif block >= m.blocks and (
            m.target_cv is None
            or block >= m.max_blocks
            or (m.time_budget_s is not None and time.monotonic() - started > m.time_budget_s)
            or noise_reached(out.samples[first:], rank_cols, active, m.target_cv)
        ):
            break
        order = block_order(active, block)  # a row of the Williams design
        telemetry = clock.telemetry()  # clocks, temperature, power: once a block
        for position, arm in enumerate(order):
            base = {
                **rank_cols,
                "arm": arm,
                "block": block,
                "position": position,
                "device": device_label,
                "mode": "graph" if graphs[arm] else "eager",
                **weight_cols,
                **telemetry,
            }
            try:
                if "ffn" in m.regimes:
                    for it in range(m.iterations):
                        t = clock.sample_us(ffn[arm])
                        out.samples.append(
                            {**base, "stage": "ffn", "regime": "ffn", "iteration": it,
                             "time_us": t, "weight_bytes": weight_bytes[arm]["ffn"]}
                        )  # fmt: skip
                        stop.check(where)
                if "kernel" in m.regimes:
                    for name, call in kernel.get(arm, ()):
                        for it in range(m.iterations):
                            t = clock.sample_us(call, flush_l2=m.flush_l2)
                            out.samples.append(
                                {
                                    **base,
                                    "stage": name,
                                    "regime": "kernel",
                                    "iteration": it,
                                    "time_us": t,
                                    "weight_bytes": weight_bytes[arm].get(name, 0),
                                }
                            )
                            stop.check(where)
            except Exception as exc:
                fail(arm, exc)
        block += 1
    ran = block
    profiled = [a for a in active if graphs[a]]
    if "profile" in m.regimes and profiled:
        # Per-stage device time inside the same graph replays, one profiler session per rank.
        try:
            _profile(
                profiled, stage_sets, ffn, m, {**rank_cols, **weight_cols}, device_label,
                "graph", weight_bytes, out, ran,
            )  # fmt: skip
        except Exception as exc:
            for arm in profiled:
                fail(arm, exc)
    return active, ran


def noise_reached(samples: list[dict], rank_cols: dict, arms: list[str], target_pct: float) -> bool:
    """Whether every arm's blocks on this rank vary by at most ``target_pct`` (the coefficient of
    variation of its block medians of the ``ffn`` regime, or of each kernel stage without one):
    the noise-based stop. Reads the rows this rank has recorded so far."""
    per: dict[tuple, dict[int, list[float]]] = {}
    regimes = {r["regime"] for r in samples if r["rank"] == rank_cols["rank"]}
    wanted = "ffn" if "ffn" in regimes else "kernel"
    for r in samples:
        if (r["rank"] == rank_cols["rank"] and r["case_id"] == rank_cols["case_id"]
                and r["regime"] == wanted and r["arm"] in arms):  # fmt: skip
            per.setdefault((r["arm"], r["stage"]), {}).setdefault(r["block"], []).append(
                r["time_us"]
            )
    if not per:
        return True
    for blocks in per.values():
        medians = np.array([float(np.median(v)) for v in blocks.values()])
        if len(medians) < 2 or medians.std(ddof=1) / medians.mean() * 100 > target_pct:
            return False
    return True


def weight_rotation(active, stage_sets, m, weight_bytes, weight_fields, device, out) -> list:
    """The problems whose weights the timed samples rotate through: the gated problem alone, or
    with ``measure.cold_weights`` as many bit-identical copies as moebench/cold.py plans (the
    plan's reason goes to the run's warnings when memory allows fewer)."""
    if not active:
        return []
    problem = stage_sets[active[0]][0].problem
    if not m.cold_weights:
        return [problem]
    timed = ["ffn"] * ("ffn" in m.regimes) + list(m.stages) * ("kernel" in m.regimes)
    touched = [weight_bytes[a].get(st, 0) for a in active for st in timed]
    touched = [b for b in touched if b > 0]
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    plan = cold.plan_copies(
        touched_bytes=min(touched, default=0),
        weight_bytes=cold.bytes_of(problem, weight_fields),
        l2_bytes=cold.l2_bytes(device),
        free_bytes=free,
        asked=m.weight_copies,
    )
    if plan.note:
        out.warnings.append(plan.note)
    return cold.weight_copies(problem, weight_fields, plan.copies)


def _profile(active, stage_sets, ffn, m, rank_cols, device_label, mode, weight_bytes, out, blocks):
    """Samples of the ``profile`` regime (moebench/measure/profile.py): ``blocks`` blocks in the
    rotating arm order, ``iterations`` replays each, every stage's kernels summed per replay."""
    from moebench.measure import profile as profile_regime

    counts = {a: profile_regime.stage_kernel_counts(stage_sets[a][1]) for a in active}
    plan, keys = [], []
    for block in range(blocks):
        for position, arm in enumerate(block_order(active, block)):
            for it in range(m.iterations):
                plan.append((arm, ffn[arm], counts[arm]))
                keys.append((block, position, it))
    for (block, position, it), (arm, times) in zip(
        keys, profile_regime.profile_replays(plan), strict=True
    ):
        for stage, t in times.items():
            out.samples.append({
                **rank_cols, "arm": arm, "block": block, "position": position,
                "device": device_label, "mode": mode, "sm_clock_mhz": float("nan"),
                "mem_clock_mhz": float("nan"), "temperature_c": float("nan"),
                "power_w": float("nan"), "stage": stage, "regime": "profile", "iteration": it,
                "time_us": t, "weight_bytes": weight_bytes[arm].get(stage, 0),
            })  # fmt: skip
