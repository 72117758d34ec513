"""Rows of the result store's four tables, for the result store's tests."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path

from moebench.results.writer import RunWriter

NOW = dt.datetime(2026, 11, 29, 13, 5, 9, tzinfo=dt.UTC)
RUN = "20261129-130509-test-abc123"


def sample_row(case_id: str, run_id: str = RUN, **kw) -> dict:
    row = dict(
        run_id=run_id,
        case_id=case_id,
        arm="stock",
        rank=0,
        stage="ffn",
        regime="ffn",
        block=0,
        position=0,
        iteration=0,
        time_us=12.5,
        device="cpu",
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
        params='{"tokens_per_rank": 16}',
        weight_bytes=1_000_000,
    )
    return row | kw


def check_row(case_id: str, run_id: str = RUN, **kw) -> dict:
    row = dict(
        run_id=run_id,
        case_id=case_id,
        arm="stock",
        rank=0,
        gate="reference",
        status="pass",
        error=1e-6,
        detail="",
    )
    return row | kw


def routing_row(case_id: str, run_id: str = RUN, **kw) -> dict:
    row = dict(
        run_id=run_id,
        case_id=case_id,
        rank=0,
        routing="uniform",
        tokens_per_rank=16,
        local_experts=4,
        live_rows=32,
        capacity_rows=256,
        live_fraction=0.125,
        empty_experts=0,
        max_load=10.0,
        mean_load=8.0,
        overload=1.25,
        entropy=1.98,
        trace_sha256="",
        step=-1,
        layer=-1,
    )
    return row | kw


def write(writer: RunWriter, case_id: str, n: int = 3) -> None:
    samples = [sample_row(case_id, iteration=i, time_us=10.0 + i) for i in range(n)]
    writer.write_case(case_id, samples, [check_row(case_id)], [routing_row(case_id)])


def open_writer(tmp_path: Path) -> Iterator[RunWriter]:
    """A writer of run RUN under tmp_path/results, closed after the test (a fixture's body)."""
    w = RunWriter.create(tmp_path / "results", RUN, {"sources": {"stock": "ab"}})
    yield w
    w.close()
