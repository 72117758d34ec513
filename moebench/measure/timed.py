"""Timing one MoE layer of one rank: the ``ffn``, ``kernel`` and ``profile`` regimes.

``time_layer`` turns the gated arms' stages into probes and hands them to the one timing loop
(``measure.sampling``): the ``ffn`` regime replays one graph of the whole pipeline per arm (or,
on a distributed rank, a pass of the layer around it: the topology's ``ffn_probe``), the
``kernel`` regime one graph per stage with L2 flushed before each sample
(``measure.flush_l2``), and with ``measure.cold_weights`` each sample takes the next of several
bit-identical weight copies, each with its own graphs (``measure.cold``). The ``profile`` regime
replays the same whole-FFN graphs under the profiler afterwards, in the same block order. An arm
that fails while being timed gets a ``timing`` error row (``on_fail``) and leaves the rotation;
the others go on.

Integrity (``Integrity``, docs/DESIGN.md section 15): each ffn sample first loads inputs of its
own, the next of the input sets the regime made (other tokens and routing with the same
per-expert counts, so the same work) with its tokens in a new order, and its output is held to
that set's reference in that order afterwards: no two samples in a row see the same inputs, so
an arm that recognises its inputs and replays an old output gains nothing, and one whose timed
output is wrong fails ``timed_outputs`` and its numbers are not shown.
After each arm's turn in a block its inputs are verified (``inputs_unchanged``). When the
blocks are done, input set 0 (the gated one) is loaded and every arm's timed call runs once
more, so that the checks after timing compare like with like.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from moebench.arm import assemble
from moebench.arm.base import Arm, run_all
from moebench.core import faults
from moebench.core.vocabulary import WHOLE_FFN, Regime
from moebench.measure import cold
from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order
from moebench.measure.sampling import Blocks, Probe, clock_probe, sample_blocks
from moebench.results.rows import CaseRows, Check, sample_row
from moebench.spec.schema import MeasureSpec

# (arm, its whole-FFN call, its weight bytes per stage) -> the probe of the ffn regime
FfnProbe = Callable[[str, Callable[[], None], Mapping[str, int]], Probe]


@dataclass(kw_only=True)
class Integrity:
    """What the timing verifies around the arms' calls (the regime builds it from
    ``gates.integrity``). ``sets``: the input sets the ffn samples rotate through;
    ``load(k)`` writes sample k's inputs into the problem's tensors and returns what
    ``check_output(loaded, y)`` needs: it queues the check of ``y`` against their output on the
    device and returns the call that later says why ``y`` was not it (None when it was), read
    after the arm's turn so that no sample waits for the host;
    ``reset()`` loads the gated inputs again; ``verify(arm, during)`` is None or the arm's
    failing ``inputs_unchanged`` row (the inputs already restored)."""

    sets: int
    load: Callable[[int], Any]
    check_output: Callable[[Any, torch.Tensor], Callable[[], str | None]]
    reset: Callable[[], None]
    verify: Callable[[str, str], Check | None]


def time_layer(
    timed: list[str],
    stage_sets: dict,
    m: MeasureSpec,
    *,
    clock: Clock,
    cols: dict,
    stop: faults.Stopper,
    out: CaseRows,
    weight_bytes: dict[str, dict[str, int]],
    weight_fields: tuple[str, ...],
    arms: dict[str, Arm],
    ffn_probe: FfnProbe,
    capture: Callable[[Callable[[], None]], Callable[[], None]],
    on_fail: Callable[[str, Exception], None] | None,
    blocks: int | None = None,
    warm_probes: bool = False,
    integrity: Integrity | None = None,
) -> tuple[list[str], int]:
    """Samples of the ``timed`` arms into ``out.samples`` (module docstring). Returns the arms
    that finished and the number of blocks run: ``measure.blocks``, or with
    ``measure.target_cv`` as many as it took, up to ``measure.max_blocks`` and
    ``measure.time_budget_s``. ``blocks`` fixes the count (the later ranks of a case run what
    the first rank ran, so that every block has every rank). ``warm_probes``: the warm-up also
    runs each ffn probe (a distributed pass, whose collectives warm up too)."""
    active = list(timed)
    if not active:
        return active, 0
    where = f"rank {cols['rank']}, timing"

    def fail(arm: str, exc: Exception) -> None:
        if arm in active:
            active.remove(arm)
        if on_fail is None:
            raise exc
        on_fail(arm, exc)

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
    # Every arm replays CUDA graphs on the GPU, unless it declares that it cannot (graph=False):
    # its samples then say mode eager, and compare keeps them apart from the graph replays.
    graphs = {a: m.graph and clock.cuda and arms[a].graph for a in active}
    copies = weight_rotation(active, stage_sets, m, weight_bytes, weight_fields, clock, out)
    ffn: dict[str, Callable[[], None]] = {}
    probes: dict[str, list[Probe]] = {}
    for arm in list(active):
        try:
            ffn[arm], probes[arm] = _arm_probes(
                arm, arms[arm], stage_sets[arm], copies, m, clock, weight_bytes[arm],
                ffn_probe, capture if graphs[arm] else (lambda f: f),
            )  # fmt: skip
        except Exception as exc:
            fail(arm, exc)
    if warm_probes:
        for _ in range(m.warmup):
            for arm in list(active):
                for probe in probes[arm][:1] if Regime.FFN in m.regimes else ():
                    probe.measure()
    wrong: dict[str, list[str]] = {a: [] for a in active}
    pending: dict[str, list] = {a: [] for a in active}
    counted: dict[str, int] = dict.fromkeys(active, 0)
    if integrity is not None and Regime.FFN in m.regimes:
        for arm in active:
            probes[arm][0] = _rotating(probes[arm][0], integrity, stage_sets[arm][0].y_TD,
                                       pending[arm], counted, arm)  # fmt: skip

    def after_turn(arm: str, block: int) -> bool:
        _settle(pending[arm], wrong[arm], integrity.sets)
        changed = integrity.verify(arm, f"its timed samples of block {block}")
        if changed is None:
            return True
        out.add(cols, arm, changed)
        return False

    weight_cols = {"weights": "cold" if m.cold_weights else "warm", "weight_copies": len(copies)}
    active, ran = sample_blocks(
        active, probes,
        blocks=Blocks(count=blocks if blocks is not None else m.blocks,
                      target_cv=None if blocks is not None else m.target_cv,
                      max_blocks=m.max_blocks, time_budget_s=m.time_budget_s),
        iterations=m.iterations, clock=clock, cols={**cols, **weight_cols},
        arm_cols={a: {"mode": "graph" if graphs[a] else "eager"} for a in active},
        out=out.samples, stop=stop, where=where, on_fail=fail,
        after_turn=after_turn if integrity is not None else None,
    )  # fmt: skip
    if integrity is not None:
        active = _after_blocks(active, ffn, stage_sets, integrity, wrong, pending, counted, cols,
                               out, fail)  # fmt: skip
    profiled = [a for a in active if graphs[a]]
    if Regime.PROFILE in m.regimes and profiled:
        # Per-stage device time inside the same graph replays, one profiler session per rank.
        try:
            _profile(profiled, stage_sets, ffn, m, {**cols, **weight_cols}, clock, weight_bytes,
                     out, ran)  # fmt: skip
        except Exception:  # one arm's replays did not split: profile each alone, charge it
            for arm in profiled:
                try:
                    _profile([arm], stage_sets, ffn, m, {**cols, **weight_cols}, clock,
                             weight_bytes, out, ran)  # fmt: skip
                except Exception as exc:
                    fail(arm, exc)
    return active, ran


def _rotating(probe: Probe, integrity: Integrity, y_TD, pending: list, counted: dict, arm: str):
    """The ffn probe of ``arm`` with the input sets rotated through and each output's check
    queued (``pending``: (sample, verdict), read by ``_settle`` after the arm's turn)."""

    def measure():
        k = counted[arm]
        loaded = integrity.load(k)
        times = probe.measure()
        pending.append((k, integrity.check_output(loaded, y_TD)))
        counted[arm] += 1
        return times

    return Probe(measure=measure, rows=probe.rows)


def _settle(pending: list, wrong: list, sets: int) -> None:
    """The queued checks' verdicts (one synchronisation each), the wrong ones into ``wrong``."""
    for k, verdict in pending:
        why = verdict()
        if why is not None:
            wrong.append(f"sample {k} (input set {k % sets}): {why}")
    pending.clear()


def _after_blocks(active, ffn, stage_sets, integrity, wrong, pending, counted, cols, out, fail):
    """Each arm's ``timed_outputs`` row; then input set 0 loaded and every arm's timed call once
    more (its inputs verified), so that the checks after timing compare the gated inputs'
    outputs. Returns the arms still timed."""
    for arm in list(active):
        _settle(pending.get(arm, []), wrong.setdefault(arm, []), integrity.sets)
        n, bad = counted.get(arm, 0), wrong.get(arm, [])
        if n:
            out.add(cols, arm, Check(
                name="timed_outputs", status="fail" if bad else "pass",
                detail=(f"{len(bad)} of {n} timed outputs wrong; first: {bad[0]}" if bad else
                        f"all {n} timed outputs within tolerance of their references: "
                        f"{min(n, integrity.sets)} input sets, each sample's tokens in an order "
                        "of its own"),
            ))  # fmt: skip
    integrity.reset()
    for arm in list(active):
        try:
            call = ffn.get(arm)
            call() if call is not None else run_all(stage_sets[arm][1])
            changed = integrity.verify(arm, "its last timed call")
        except Exception as exc:
            fail(arm, exc)
            continue
        if changed is not None:
            out.add(cols, arm, changed)
            active.remove(arm)
    return active


def _arm_probes(arm, spec: Arm, stage_set, copies, m: MeasureSpec, clock, wbytes, ffn_probe,
                capture):  # fmt: skip
    """(the arm's whole-FFN call, its probes): the ffn regime's, then one per kernel stage."""
    ws, gated = stage_set
    build = lambda w: assemble.build(spec, w)  # noqa: E731
    # One stage set per weight copy: the gated stages on the gated weights, then (cold weights
    # only) the same stages over the other copies.
    pairs = [(ws, gated)] + [cold.stages_on(build, ws, p) for p in copies[1:]]
    probes = []
    whole = None
    # The profile regime replays the same whole-FFN graphs, with or without the ffn regime's
    # samples (a scenario may ask for [kernel, profile]).
    if Regime.FFN in m.regimes or Regime.PROFILE in m.regimes:
        calls = [capture(lambda st=st: run_all(st)) for _, st in pairs]
        whole = calls[0] if len(calls) == 1 else cold.Rotation(calls)
        if Regime.FFN in m.regimes:
            probes.append(ffn_probe(arm, whole, wbytes))
    if Regime.KERNEL in m.regimes:
        # One graph per stage: a stage of several launches is timed on the device, not at the
        # speed the host issues them. A stage that reads no weights needs one copy. The kernel
        # regime's stages: a staged arm's own, a whole-FFN arm's sub-stages (none unless named).
        ksets = [assemble.kernel_stages(spec, w, st) for w, st in pairs]
        for i, st in enumerate(ksets[0]):
            if st.name not in m.stages:
                continue
            rotate = wbytes.get(st.name, 0) > 0
            runs = [capture(s[i].run) for s in (ksets if rotate else ksets[:1])]
            call = runs[0] if len(runs) == 1 else cold.Rotation(runs)
            probes.append(clock_probe(clock, call, flush_l2=m.flush_l2, stage=st.name,
                                      regime=Regime.KERNEL,
                                      weight_bytes=wbytes.get(st.name, 0)))  # fmt: skip
    return whole, probes


def ffn_clock_probe(clock: Clock) -> FfnProbe:
    """The ffn regime of one process's rank: the whole-FFN call timed by the clock."""
    return lambda arm, call, wbytes: clock_probe(
        clock, call, stage=WHOLE_FFN, regime=Regime.FFN, weight_bytes=wbytes[WHOLE_FFN]
    )


def weight_rotation(active, stage_sets, m, weight_bytes, weight_fields, clock, out) -> list:
    """The problems whose weights the timed samples rotate through: the gated problem alone, or
    with ``measure.cold_weights`` as many bit-identical copies as ``measure.cold`` plans (the
    plan's reason goes to the run's warnings when memory allows fewer)."""
    if not active:
        return []
    problem = stage_sets[active[0]][0].problem
    if not m.cold_weights:
        return [problem]
    timed = [WHOLE_FFN] * (Regime.FFN in m.regimes) + list(m.stages) * (Regime.KERNEL in m.regimes)
    touched = [weight_bytes[a].get(st, 0) for a in active for st in timed]
    touched = [b for b in touched if b > 0]
    device = clock.device
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


def _profile(active, stage_sets, ffn, m, cols, clock, weight_bytes, out: CaseRows, blocks: int):
    """Samples of the ``profile`` regime (``measure.profile``): ``blocks`` blocks in the rotating
    arm order, ``iterations`` replays each, every stage's kernels summed per replay. Device time
    from the profiler: no clocks are read (NaN)."""
    from moebench.measure import profile as profile_regime

    counts = {a: profile_regime.stage_kernel_counts(stage_sets[a][1]) for a in active}
    plan, keys = [], []
    for block in range(blocks):
        for position, arm in enumerate(block_order(active, block)):
            for it in range(m.iterations):
                plan.append((arm, ffn[arm], counts[arm]))
                keys.append((block, position, it))
    nan = float("nan")
    device = "cuda" if clock.cuda else "cpu"
    for (block, position, it), (arm, times) in zip(
        keys, profile_regime.profile_replays(plan), strict=True
    ):
        at: dict[str, Any] = {
            **cols, "arm": arm, "block": block, "position": position, "device": device,
            "mode": "graph", "sm_clock_mhz": nan, "mem_clock_mhz": nan, "temperature_c": nan,
            "power_w": nan, "regime": Regime.PROFILE,
        }  # fmt: skip
        for stage, t in times.items():
            row = {"stage": stage, "weight_bytes": weight_bytes[arm].get(stage, 0)}
            out.samples.append(sample_row(at, row, iteration=it, time_us=t))
