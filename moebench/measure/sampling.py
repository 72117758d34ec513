"""The one timing loop: blocks of samples, the arms in a Williams order (docs/DESIGN.md section 6).

Every regime and topology says what it times as ``Probe`` values and hands them here; nothing
else in moebench loops over blocks. A probe is one timed call of an arm and the rows its figures
become: a call timed by the ``Clock`` (``clock_probe``: one figure, e.g. the ``ffn`` graph or one
kernel stage), or a call that times its own parts (a distributed pass: ``dispatch``, ``ffn``,
``sync_wait``, ``combine_a2a`` and the whole ``layer``; a model step: the step and each layer).

Per block: the clocks and temperature once (``Clock.telemetry``), then every active arm in that
block's row of the Williams design (``rotation.block_order``), each of its probes ``iterations``
times. ``stop`` is checked after every sample, so a deadline or a signal takes effect within one
sample. An arm whose call raises leaves the rotation (``on_fail`` records why); without
``on_fail`` the exception propagates (a distributed rank, whose peers must stop at the same
point). How many blocks: ``Blocks`` (a fixed count, or a floor with the noise-based stop).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from moebench.core import faults
from moebench.core.vocabulary import Regime
from moebench.measure.clock import Clock
from moebench.measure.rotation import block_order
from moebench.results.rows import sample_row


@dataclass(frozen=True, kw_only=True)
class Probe:
    """One timed call of an arm. ``measure`` runs it once and returns {key: microseconds};
    ``rows[key]`` are the columns of the row that figure becomes (``stage``, ``regime``,
    ``weight_bytes``, and where they differ from the block's: ``rank``, ``layer``,
    ``live_rows``)."""

    measure: Callable[[], Mapping[Any, float]]
    rows: Mapping[Any, Mapping[str, Any]]


def clock_probe(
    clock: Clock, call: Callable[[], None], *, flush_l2: bool = False, **row: Any
) -> Probe:
    """A call timed by the clock (L2 flushed first with ``flush_l2``): one figure, row ``row``."""
    return Probe(measure=lambda: {0: clock.sample_us(call, flush_l2=flush_l2)}, rows={0: row})


@dataclass(frozen=True, kw_only=True)
class Blocks:
    """How many blocks: ``count`` (a fixed count), or with ``target_cv`` a floor of ``count`` and
    more until every arm's block medians vary by at most ``target_cv`` percent, up to
    ``max_blocks`` and ``time_budget_s``. ``first``: the Williams row of block 0 (the steps of a
    model step continue one rotation)."""

    count: int
    target_cv: float | None = None
    max_blocks: int | None = None
    time_budget_s: float | None = None
    first: int = 0


def sample_blocks(
    arms: Sequence[str],
    probes: Mapping[str, Sequence[Probe]],
    *,
    blocks: Blocks,
    iterations: int,
    clock: Clock,
    cols: Mapping[str, Any],
    arm_cols: Mapping[str, Mapping[str, Any]],
    out: list[dict],
    stop: faults.Stopper | None = None,
    where: str = "timing",
    on_fail: Callable[[str, Exception], None] | None = None,
    after_turn: Callable[[str, int], bool] | None = None,
) -> tuple[list[str], int]:
    """Samples of ``arms`` into ``out`` (module docstring). ``cols``: the columns every row
    carries (the case's, the rank's); ``arm_cols[arm]``: an arm's own (``mode``).
    ``after_turn(arm, block)``, after each arm's turn in a block (its inputs verified): False
    drops the arm from the rotation. Returns the arms that finished and the number of blocks
    run."""
    active = [a for a in arms if a in probes]
    # The host must have queued each timed launch before the GPU's head start runs out (the
    # clock's spin): a garbage-collector pass in between would land inside the sample, so the
    # collector runs between blocks and not during them (timeit turns it off while it times).
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return _blocks(active, probes, blocks=blocks, iterations=iterations, clock=clock,
                       cols=cols, arm_cols=arm_cols, out=out, stop=stop, where=where,
                       on_fail=on_fail, after_turn=after_turn)  # fmt: skip
    finally:
        if collecting:
            gc.enable()


def _blocks(active, probes, *, blocks, iterations, clock, cols, arm_cols, out, stop, where,
            on_fail, after_turn) -> tuple[list[str], int]:  # fmt: skip
    started = time.monotonic()
    first = len(out)
    device = "cuda" if clock.cuda else "cpu"
    block = 0
    while active and not _enough(blocks, block, started, out[first:], active):
        if block:
            gc.collect()
        telemetry = clock.telemetry()  # clocks, temperature, power: once a block
        for position, arm in enumerate(block_order(active, blocks.first + block)):
            at = {**cols, **arm_cols.get(arm, {}), "arm": arm, "block": block,
                  "position": position, "device": device, **telemetry}  # fmt: skip
            try:
                for probe in probes[arm]:
                    for it in range(iterations):
                        for key, t in probe.measure().items():
                            out.append(sample_row(at, probe.rows[key], iteration=it, time_us=t))
                        if stop is not None:
                            stop.check(where)
            except Exception as exc:
                if on_fail is None:
                    raise
                active.remove(arm)
                on_fail(arm, exc)
            if after_turn is not None and arm in active and not after_turn(arm, block):
                active.remove(arm)
        block += 1
    return active, block


def _enough(b: Blocks, done: int, started: float, rows: list[dict], arms: list[str]) -> bool:
    if done < b.count:
        return False
    if b.target_cv is None:
        return True
    return (
        (b.max_blocks is not None and done >= b.max_blocks)
        or (b.time_budget_s is not None and time.monotonic() - started > b.time_budget_s)
        or noise_reached(rows, arms, b.target_cv)
    )


def noise_reached(rows: list[dict], arms: list[str], target_pct: float) -> bool:
    """Whether every arm's block medians vary by at most ``target_pct`` (their coefficient of
    variation, in percent) in ``rows`` (one rank's samples so far): of the ``ffn`` regime, or of
    each kernel stage when there is none. The noise-based stop."""
    per: dict[tuple, dict[int, list[float]]] = {}
    regimes = {r["regime"] for r in rows}
    wanted = Regime.FFN if Regime.FFN in regimes else Regime.KERNEL
    for r in rows:
        if r["regime"] == wanted and r["arm"] in arms:
            per.setdefault((r["arm"], r["stage"]), {}).setdefault(r["block"], []).append(
                r["time_us"]
            )
    if not per:
        return True
    for by_block in per.values():
        medians = np.array([float(np.median(v)) for v in by_block.values()])
        if len(medians) < 2 or medians.std(ddof=1) / medians.mean() * 100 > target_pct:
            return False
    return True
