"""Synthetic runs of the ``step`` regime: every layer on every rank of every step, timed alone
(stage ``ffn``, ``layer`` >= 0), and each rank's whole step as one graph (stage ``step``), with
known per-layer times, assembled into a ``Run`` as load_run returns one."""

from __future__ import annotations

import json
import math

import numpy as np
from synthetic_runs import checks, make_run

# A model of 3 MoE layers (model layer ids 3, 4, 5) on 2 ranks: rank 1 is slow on the first
# layer, rank 0 on the last. Per step S = 20 + 10 + 30 = 60, the slowest rank's own sum
# R = max(10 + 10 + 30, 20 + 10 + 10) = 50: the imbalance tax is 10 us, 1/6 of S.
LAYERS = (3, 4, 5)
LAYER_US = np.array([[10.0, 20.0], [10.0, 10.0], [30.0, 10.0]])  # [layer, rank]
S_US, R_US = 60.0, 50.0
GRAPH = 0.9  # the whole-step graph runs 10% under the sum of its layers (no flush between them)


def step_manifest(**kw) -> dict:
    """The run manifest's ``step`` section, as the runner writes it."""
    return {
        "layers": list(LAYERS), "model_layers": 3, "subset": False, "steps": 64, "blocks": 1,
        "data_ranks": 2, "non_moe_us": 0.0, "slo_tpot_ms": None, "tokens": "16",
        "routing": "uniform, a seed per layer",
    } | kw  # fmt: skip


def _row(run_id, case_id, arm, **kw) -> dict:
    return dict(
        run_id=run_id, case_id=case_id, arm=arm, regime="step", position=0, device="cpu",
        sm_clock_mhz=math.nan, mem_clock_mhz=math.nan, temperature_c=math.nan, power_w=math.nan,
        mode="graph", weights="warm", weight_copies=1, capacity_rows=256, local_experts=4,
        hidden=64, intermediate=128, top_k=2, precision="bf16", activation="silu",
        routing="uniform", gemm="triton", weight_bytes=1_000_000,
    ) | kw  # fmt: skip


def step_samples(
    run_id: str,
    case_id: str,
    arm: str,
    factors,
    *,
    tokens: int = 16,
    layer_us: np.ndarray = LAYER_US,
    blocks: int = 1,
    iters: int = 3,
    graph: float | None = GRAPH,
    swept: bool = True,
    device: str = "cpu",
) -> list[dict]:
    """Rows for one arm in one case: step s scales every layer by ``factors[s]``; the three
    iterations are 0.99, 1 and 1.01 of the time, so that their median is exact."""
    params = json.dumps({"shape.tokens_per_rank": tokens} if swept else {}, sort_keys=True)
    common = dict(tokens_per_rank=tokens, params=params, device=device)
    if swept:
        common["sweep.shape.tokens_per_rank"] = tokens
    out = []
    jitter = (0.99, 1.0, 1.01)[:iters] if iters <= 3 else np.linspace(0.99, 1.01, iters)
    for s, f in enumerate(factors):
        for b in range(blocks):
            for rank in range(layer_us.shape[1]):
                for i, j in enumerate(jitter):
                    for k, layer in enumerate(LAYERS[: layer_us.shape[0]]):
                        out.append(_row(run_id, case_id, arm, stage="ffn", layer=layer, step=s,
                                        block=b, rank=rank, iteration=i,
                                        time_us=float(layer_us[k, rank] * f * j),
                                        live_rows=40 + k, **common))  # fmt: skip
                    if graph is not None:
                        whole = float(layer_us[:, rank].sum() * f * j * graph)
                        out.append(_row(run_id, case_id, arm, stage="step", layer=-1, step=s,
                                        block=b, rank=rank, iteration=i, time_us=whole,
                                        live_rows=40, **common))  # fmt: skip
    return out


def step_run(
    arms: dict[str, np.ndarray],
    *,
    run_id: str = "run-s",
    cases: dict[str, int] | None = None,
    scale: dict[tuple[str, str], float] | None = None,
    step: dict | None = None,
    failed: tuple[tuple[str, str], ...] = (),
    **kw,
):
    """One run: each arm's per-step factors, in each case (case id -> tokens per rank), times
    ``scale[(case, arm)]``; ``failed`` (case, arm) pairs get a failed check."""
    cases = cases or {"c000": 16}
    rows, check_rows = [], []
    for case_id, tokens in cases.items():
        for arm, factors in arms.items():
            f = np.asarray(factors, dtype=float) * (scale or {}).get((case_id, arm), 1.0)
            rows += step_samples(run_id, case_id, arm, f, tokens=tokens, **kw)
            status = "fail" if (case_id, arm) in failed else "pass"
            check_rows += checks(run_id, arm, status, case_id=case_id)
    manifest = {"finished_cases": list(cases), "scenario": {"name": "synthetic-step"}}
    if step is not False:
        manifest["step"] = step_manifest(**(step or {}))
    return make_run(run_id, rows, check_rows, **manifest)


def drift(steps: int, seed: int = 0, spread: float = 0.05) -> np.ndarray:
    """Per-step factors around 1: each step its own routing draw, shared by every arm."""
    return 1 + spread * np.random.default_rng(seed).standard_normal(steps)
