"""What ``validate`` and ``run`` say before a ``step`` regime scenario runs: per case its layers,
steps, token groups, the samples it records, the memory it needs against what the device has,
and on the CPU an estimate of its time (``cli.preflight``'s interpreter costs, per layer run).
"""

from __future__ import annotations

import os

from moebench.cli.preflight import GATE_RUNS, CaseCost, ffn_seconds
from moebench.core.coverage import blocks_needed, cell_alpha
from moebench.plan.cases import run_arms
from moebench.plan.steps import PlannedStep, available_memory, estimate_memory, size
from moebench.spec.build import timed_samples
from moebench.spec.schema import Scenario
from moebench.spec.sweep import expand


def step_costs(planned: list[PlannedStep], device: str, aa: bool = False) -> list[CaseCost]:
    """Per case: samples, and on the CPU the interpreter's time: every layer of every rank
    gated per token group, then per step each rank's whole step and each layer alone, and the
    check after timing."""
    out = []
    for p in planned:
        s = p.case.scenario
        arms = run_arms(s, aa)
        seconds = None
        if device == "cpu":
            seconds = 0.0
            its = s.measure.iterations * s.step.blocks
            for g in p.groups:
                live = g.tokens_per_rank * s.topology.dp * s.model.top_k // s.topology.ep
                runs = GATE_RUNS + 1 + len(g.steps) * its * 2  # gates, the check, the samples
                per = sum(ffn_seconds(s, a, g.capacity_rows, live) for a in arms.values())
                seconds += runs * per * len(p.layers) * len(p.ranks)
            if s.topology.mode == "distributed":  # one process a rank, sharing the cores
                seconds /= max(1, min(len(p.ranks), os.cpu_count() or 1))
        samples = timed_samples(s.measure, len(p.ranks), len(arms), s.step, len(p.layers))
        out.append(CaseCost(case_id=p.case.case_id, samples=samples, seconds=seconds,
                            limit_s=s.measure.case_timeout_s))  # fmt: skip
    return out


def step_notes(s: Scenario, device: str, aa: bool = False) -> list[str]:
    """The warnings of a step scenario: steps too few for a verdict at the corrected level (the
    arms are paired over steps)."""
    arms = len(s.arms) - 1 + (1 if aa or s.measure.aa else 0)
    cells = len(expand(s)) * max(arms, 0)
    need = blocks_needed(cell_alpha(0.05, cells)) if cells else 0
    if device == "cuda" and cells and s.step.steps < need:
        return [f"step.steps: {s.step.steps} steps cannot support a verdict for the {cells} "
                f"cells of this scenario at 95% corrected (each exact interval needs >= {need} "
                "paired steps): compare will say TOO FEW BLOCKS"]  # fmt: skip
    return []


def step_rows(planned: list[PlannedStep], costs: list[CaseCost], device, aa: bool = False):
    """The rows of validate's table: case, layers, steps and token groups, samples, memory."""
    import torch

    free, where = available_memory(torch.device(device))
    rows = []
    for p, cost in zip(planned, costs, strict=True):
        s = p.case.scenario
        need = estimate_memory(p, list(run_arms(s, aa).values()))
        layers = f"{len(p.layers)} of {len(s.model.moe_layers)}"
        groups = ", ".join(f"{g.tokens_per_rank} x{len(g.steps)}" for g in p.groups)
        fits = "fits" if need.total <= free else "DOES NOT FIT"
        rows.append((p.case.case_id, layers, f"{len(p.tokens)}: {groups}", str(len(p.ranks)),
                     f"{cost.samples:,}", f"{size(need.total)} of {size(free)} ({fits})",
                     cost.seconds))  # fmt: skip
    return rows, where
