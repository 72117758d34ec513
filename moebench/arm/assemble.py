"""How the harness turns an arm and a rank's problem into something it can gate and time.

Either contract (``moebench.arm.base``) ends as the same pair: a workspace (the buffers the arm
writes, with ``poison()``, ``buffers()`` and ``y_TD``) and a tuple of stages whose run in order
is the whole FFN. A staged arm gets its family's workspace and builds its own stages; a
whole-FFN arm gets a ``WholeFfnWorkspace`` (just ``y_TD``) and one stage, ``ffn``, around the
callable its ``prepare`` returned. ``kernel_stages`` are what the kernel regime times alone: a
staged arm's own stages, a whole-FFN arm's optional sub-stages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from moebench.arm.base import Arm, Prepared, Stage, stage_names
from moebench.core.vocabulary import WHOLE_FFN


class WholeFfnWorkspace:
    """What moebench allocates for a whole-FFN arm: the output y_TD (bf16 [T, D]), poisoned with
    NaN before a gated run so that an unwritten row cannot pass. Everything else is the arm's."""

    def __init__(self, problem: Any):
        self.problem = problem
        T, D = problem.topk_ids_TK.shape[0], problem.x_TD.shape[1]
        self.y_TD = torch.empty(T, D, dtype=torch.bfloat16, device=problem.x_TD.device)
        self.kernel_stages: tuple[Stage, ...] = ()

    def buffers(self) -> dict[str, torch.Tensor]:
        return {"y_TD": self.y_TD}

    def poison(self) -> None:
        self.y_TD.fill_(float("nan"))


def workspace(arm: Arm, problem: Any, staged_workspace: Callable[[Arm, Any], Any]) -> Any:
    """A fresh workspace of ``arm`` for ``problem`` (``staged_workspace``: the family's)."""
    return staged_workspace(arm, problem) if arm.staged else WholeFfnWorkspace(problem)


def build(arm: Arm, ws: Any) -> tuple[Stage, ...]:
    """The arm's stages over ``ws``: run in order they compute the whole FFN into ``ws.y_TD``."""
    if arm.staged:
        return tuple(arm.build(ws))
    out = arm.prepare(ws.problem, ws.y_TD)
    prepared = out if isinstance(out, Prepared) else Prepared(run=out)
    if not callable(prepared.run):
        raise TypeError(f"arm {arm.name!r}: prepare returned {type(out).__name__}, not a callable")
    allowed = stage_names(arm)
    seen = set()
    for st in prepared.stages:
        if st.name not in allowed:
            raise ValueError(
                f"arm {arm.name!r}: sub-stage {st.name!r} is not a {arm.family} stage "
                f"({', '.join(allowed)})"
            )
        if st.name in seen:
            raise ValueError(f"arm {arm.name!r}: sub-stage {st.name!r} is named twice")
        seen.add(st.name)
    ws.kernel_stages = tuple(prepared.stages)
    y, run = ws.y_TD, prepared.run

    def ffn() -> None:
        r = run()
        if isinstance(r, torch.Tensor) and r is not y:
            if r.shape != y.shape or r.dtype != y.dtype or r.device != y.device:
                raise ValueError(wrong_output(arm, r, y))
            y.copy_(r)  # an arm that returns its output pays this copy in its timing

    return (Stage(name=WHOLE_FFN, run=ffn),)


def wrong_output(arm: Arm, r: torch.Tensor, y_TD: torch.Tensor) -> str:
    """One line for a whole-FFN arm whose callable returned a tensor that is not its output:
    what it returned beside what ``y_TD`` is (bf16 [T, D], on the problem's device)."""
    where = f" on {r.device}" if r.device != y_TD.device else ""
    want = f" on {y_TD.device}" if where else ""
    return (
        f"arm {arm.name!r}: its callable returned {_dtype(r.dtype)} {list(r.shape)}{where}; "
        f"the output is {_dtype(y_TD.dtype)} [T, D] = {list(y_TD.shape)}{want} "
        "(write y_TD, or return a tensor of that shape and dtype)"
    )


def _dtype(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(
        dtype, str(dtype).removeprefix("torch.")
    )


def kernel_stages(arm: Arm, ws: Any, stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The stages the kernel regime times one by one."""
    return stages if arm.staged else tuple(getattr(ws, "kernel_stages", ()))
