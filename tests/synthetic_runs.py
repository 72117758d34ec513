"""Synthetic runs for the analysis and report tests: sample and check rows of known distributions,
assembled into a ``Run`` as load_run returns one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from moebench.analysis.rows import CompareRow
from moebench.results.reader import Run
from moebench.results.schema import SCHEMAS, rows_to_table

CASE = "t16-uniform"
ENV = {"torch": "2.13.0", "triton": "3.9.0", "gpu": "none"}
SOURCES = {"stock": "aa", "prefix_sum": "bb", "prefix_sum_masked": "cc"}


def samples(
    run_id: str,
    arm: str,
    times,
    *,
    case_id: str = CASE,
    stage: str = "ffn",
    regime: str = "ffn",
    device: str = "cpu",
    weight_bytes: int = 1_000_000,
) -> list[dict]:
    """Rows for ``times[block, rank, iteration]`` (microseconds)."""
    times = np.asarray(times, dtype=float)
    rows = []
    for (b, r, i), t in np.ndenumerate(times):
        rows.append(
            dict(
                run_id=run_id,
                case_id=case_id,
                arm=arm,
                rank=r,
                stage=stage,
                regime=regime,
                block=b,
                position=0,
                iteration=i,
                time_us=float(t),
                device=device,
                sm_clock_mhz=math.nan,
                mem_clock_mhz=math.nan,
                temperature_c=math.nan,
                power_w=math.nan,
                mode="eager",
                weights="warm",
                weight_copies=1,
                step=-1,
                layer=-1,
                tokens_per_rank=16,
                live_rows=40,
                capacity_rows=256,
                local_experts=4,
                hidden=64,
                intermediate=128,
                top_k=2,
                precision="bf16",
                activation="silu",
                routing="uniform",
                gemm="triton",
                params="{}",
                weight_bytes=weight_bytes,
            )
        )
    return rows


def checks(run_id: str, arm: str, status: str = "pass", *, case_id: str = CASE) -> list[dict]:
    error = 0.25 if status == "fail" else 1e-6
    return [
        dict(
            run_id=run_id,
            case_id=case_id,
            arm=arm,
            rank=0,
            gate="reference",
            status=status,
            error=error,
            detail="",
        )
    ]


def make_run(run_id: str, sample_rows, check_rows, **manifest) -> Run:
    full = {"run_id": run_id, "finished_cases": [CASE], "sources": SOURCES, "environment": ENV}
    return Run(
        run_dir=Path("/nonexistent") / run_id,
        manifest=full | manifest,
        samples=rows_to_table("samples", sample_rows),
        checks=rows_to_table("checks", check_rows),
        routing=SCHEMAS["routing"].empty_table(),
    )


def noisy(
    factor: float,
    *,
    seed: int,
    blocks: int = 20,
    ranks: int = 1,
    iters: int = 5,
    noise: float = 0.01,
    base: float = 100.0,
) -> np.ndarray:
    """base * factor, times a block drift shared by every arm (seed 0), times per-sample noise."""
    drift = 1 + 0.03 * np.random.default_rng(0).standard_normal(blocks)
    jitter = 1 + noise * np.random.default_rng(seed).standard_normal((blocks, ranks, iters))
    return base * factor * drift[:, None, None] * jitter


def two_arm_run(
    arm_times,
    base_times=None,
    *,
    arm: str = "prefix_sum_masked",
    arm_status: str = "pass",
    run_id: str = "run-a",
    **manifest,
) -> Run:
    base_times = noisy(1.0, seed=1) if base_times is None else base_times
    rows = samples(run_id, "stock", base_times) + samples(run_id, arm, arm_times)
    return make_run(
        run_id, rows, checks(run_id, "stock") + checks(run_id, arm, arm_status), **manifest
    )


def row_of(comparison, arm: str, **key) -> CompareRow:
    found = [
        r
        for r in comparison.rows
        if r.arm == arm and all(getattr(r, k) == v for k, v in key.items())
    ]
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------- decisions
