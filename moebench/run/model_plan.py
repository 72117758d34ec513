"""Planning a ``model`` regime case before anything is allocated (issue 27): the model as
transformers will build it, the memory it needs against what the device has (refused with the
bytes when it cannot fit), and the manifest's ``model`` section the analysis reads (each case's
batch, context and the rest of its decode step's floor).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moebench.core.errors import ScenarioError
from moebench.core.models import PRESETS
from moebench.core.vocabulary import NO_EXPERTS
from moebench.integrations.transformers import model as hf_model
from moebench.plan.cases import run_arms
from moebench.plan.steps import available_memory, size
from moebench.spec.schema import Case, Scenario


@dataclass(frozen=True, kw_only=True)
class PlannedModel:
    case: Case
    plan: hf_model.ModelPlan
    memory: dict[str, int]
    ranks: tuple[int, ...] = (0,)


def plan_model_case(case: Case, aa: bool = False) -> PlannedModel:
    """The case's model and the memory it needs; a ScenarioError names what cannot be."""
    s = case.scenario
    p = hf_model.plan(s)
    return PlannedModel(
        case=case, plan=p, memory=hf_model.memory(p, s, list(run_arms(s, aa).values()))
    )


def check_model_memory(planned: list[PlannedModel], device: torch.device) -> None:
    """A ScenarioError (exit 2, nothing allocated) when a case cannot fit, with the bytes."""
    free, where = available_memory(device)
    for p in planned:
        need = model_need(p.memory)
        if need > free:
            s = p.case.scenario
            parts = ", ".join(f"{size(v)} {k}" for k, v in p.memory.items() if v)
            raise ScenarioError(
                f"{s.path or s.name}: case {p.case.case_id}: the model ({p.plan.label}, "
                f"{s.model.layers} layers) needs about {size(need)} ({parts}), {size(free)} "
                f"{where}: keep fewer layers with model.layers, or a smaller model_run.batch"
            )


def model_need(memory: dict[str, int]) -> int:
    """Bytes a case needs: its parts and a tenth more (allocator slack, the graphs' pools)."""
    return int(1.1 * sum(memory.values()))


def model_manifest(s: Scenario, planned: list[PlannedModel]) -> dict:
    """The run manifest's ``model`` section: what the analysis needs to read the rows (the rest of
    each case's floor, its batch and context), and what was built."""
    import transformers

    cases = {}
    for p in planned:
        cs, run = p.case.scenario, p.case.scenario.model_run
        cases[p.case.case_id] = {
            "batch": run.batch, "context": run.context, "prompt": run.prompt,
            "decode_steps": run.decode_steps, "check_steps": run.check_steps,
            "stages": list(run.stages), "layers": cs.model.layers,
            "model_layers": PRESETS[cs.model.preset]["layers"],
            "moe_layers": list(p.plan.moe_layers), "label": p.plan.label,
            "step_bytes": p.plan.step_bytes, "row_bytes": p.plan.row_bytes,
            "kv": [{"kind": k, "bytes_per_token": b,
                    "slots": (min(p.plan.window, run.context + run.decode_steps)
                              if k == "sliding_attention" else None)}
                   for k, b in zip(p.plan.kinds, p.plan.kv_token_bytes, strict=True)],
            "attention": p.plan.attention, "config": p.plan.overrides,
            "memory": p.memory, "precision": cs.precision, "slo_tpot_ms": run.slo_tpot_ms,
        }  # fmt: skip
    return {"cases": cases, "transformers": transformers.__version__, "non_moe": NO_EXPERTS,
            "routing": planned[0].case.scenario.model_run.routing}  # fmt: skip
