"""What ``validate`` and ``run`` say before a ``model`` regime scenario runs: per case the model as
it will be built (the layers kept, batch, context, prompt, decode steps), the samples it records,
the memory it needs against what the device has, and on the CPU an estimate of its time.
"""

from __future__ import annotations

import torch

from moebench.cli.preflight import CaseCost, duration, ffn_seconds, slow_cases
from moebench.core.coverage import blocks_needed, cell_alpha
from moebench.core.errors import MoebenchError
from moebench.core.models import PRESETS
from moebench.core.vocabulary import MODEL_DECODE, MODEL_PREFILL
from moebench.plan.cases import arm_names, run_arms
from moebench.plan.steps import available_memory, size
from moebench.spec.model import model_samples
from moebench.spec.schema import Scenario
from moebench.spec.sweep import expand

# Seconds of one layer of the model around its experts (attention, norms, router) on this
# project's two-core CPU, eagerly: measured 2026-12-01 on smoke-model's tiny gpt-oss (0.04 s a
# layer and call).
MODEL_LAYER_S = 0.04


def model_costs(s: Scenario, device: str, aa: bool = False) -> list[CaseCost]:
    """Per case: the samples it records and, on the CPU, its time: every backend's calls (the
    gates' prefill and check steps, each block's prefill and decode steps, the fresh check), the
    reference's (the context, in chunks, and two checks), each call a model forward."""
    out = []
    for case in expand(s):
        cs = case.scenario
        run, m = cs.model_run, cs.measure
        arms = run_arms(cs, aa)
        seconds = None
        if device == "cpu":
            layers = cs.model.layers
            moe = len(cs.model.moe_layers)
            timed = m.blocks * ((MODEL_PREFILL in run.stages)
                                + run.decode_steps * (MODEL_DECODE in run.stages))  # fmt: skip
            calls = 2 * (1 + run.check_steps) + timed
            forward = layers * MODEL_LAYER_S
            seconds = (calls * forward * (len(arms) + 1)
                       + (run.context + 2 * (1 + run.check_steps)) * forward)  # fmt: skip
            for arm in arms.values():
                if arm.staged:  # moebench's arms run Triton kernels in the interpreter
                    T = run.batch
                    one = ffn_seconds(cs, arm, T * cs.model.top_k, T * cs.model.top_k)
                    seconds += calls * one * moe
        out.append(CaseCost(case_id=case.case_id, samples=model_samples(run, m, len(arms)),
                            seconds=seconds, limit_s=m.case_timeout_s))  # fmt: skip
    return out


def model_notes(s: Scenario, device: str, aa: bool = False) -> list[str]:
    """The warnings of a model scenario: blocks too few for a TTFT verdict, and on the CPU the
    cases that cannot finish in time."""
    out = []
    arms = len(s.arms) - 1 + (1 if aa or s.measure.aa else 0)
    cells = 2 * len(expand(s)) * max(arms, 0)
    need = blocks_needed(cell_alpha(0.05, cells)) if cells else 0
    if device == "cuda" and MODEL_PREFILL in s.model_run.stages and s.measure.blocks < need:
        out.append(f"measure.blocks: {s.measure.blocks} prefill samples cannot support a TTFT "
                   f"verdict for the {cells} cells of this scenario at 95% corrected (each needs "
                   f">= {need} paired blocks): compare will say TOO FEW BLOCKS")  # fmt: skip
    if device == "cpu":
        slow = slow_cases(model_costs(s, device, aa))
        out += [slow] if slow else []
    return out


def validate_model(s: Scenario, out, err) -> None:
    """``validate`` of a model regime scenario: per case its model, memory, samples, time."""
    from rich.table import Table

    from moebench.run.model_plan import check_model_memory, model_need, plan_model_case

    device = "cuda" if s.device == "cuda" or (s.device == "auto" and torch.cuda.is_available()) \
        else "cpu"  # fmt: skip
    planned = [plan_model_case(c) for c in expand(s)]
    free, where = available_memory(torch.device(device))
    costs = model_costs(s, device)
    t = Table(title=f"{s.name}: {len(planned)} case(s) of the model regime, arms "
                    f"{', '.join(arm_names(s))} and the non-MoE backend")  # fmt: skip
    for col in ("case", "model", "batch", "context + steps / prompt", "samples", "memory",
                "est. time"):  # fmt: skip
        t.add_column(col, overflow="fold")
    for p, cost in zip(planned, costs, strict=True):
        run = p.case.scenario.model_run
        need = model_need(p.memory)
        fits = "fits" if need <= free else "DOES NOT FIT"
        m = p.case.scenario.model
        changed = ", modified" if [k for k, _ in m.modified if k != "layers"] else ""
        kept = f"{m.preset} ({m.layers} of {PRESETS[m.preset]['layers']} layers{changed})"
        t.add_row(p.case.case_id, kept,
                  str(run.batch), f"{run.context} + {run.decode_steps} / {run.prompt}",
                  f"{cost.samples:,}", f"{size(need)} of {size(free)} ({fits})",
                  "-" if cost.seconds is None else f"~{duration(cost.seconds)}")  # fmt: skip
    t.caption = ("samples: (arms + the non-MoE backend) x blocks x (the prefill and each decode "
                 f"step); memory: the estimate against {where}")  # fmt: skip
    out.print(t)
    for w in model_notes(s, device):
        err.print(f"moebench: warning: {w}", markup=False)
    try:
        check_model_memory(planned, torch.device(device))
    except MoebenchError as exc:
        err.print(f"moebench: warning: {exc}; run refuses it on this device", markup=False)
