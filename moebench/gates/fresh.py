"""The fresh-input gate: after timing, every arm runs once more on new tokens and new routing.

An implementation that caches its output keyed on input addresses or shapes passes every gate
that reuses the gated inputs (the post-timing check included). Here the new inputs are written
into the very tensors the arm was prepared on (same addresses, shapes and dtypes), the arm's
prepared stages run once, eagerly, and the output must match the float32 reference of the new
inputs within the precision's tolerance; then the gated inputs are put back. New tokens are
drawn from another seed; the new routing draws every token's top-k afresh (distinct experts,
another seed) where the buffers allow any routing, and otherwise, when it would not fit the
capacity or the rows are a distributed rank's received slots, deals the same slots to other
tokens: the routing changes, its per-expert counts do not.
"""

from __future__ import annotations

import torch

from moebench.arm.base import run_all
from moebench.gates.checks import check_reference
from moebench.gates.integrity import InputGuard, expects_output
from moebench.plan.inputs import prefill_tokens
from moebench.results.rows import Check
from moebench.routing.synthetic import local_counts, rows_needed


def fresh_inputs(
    p, *, experts: int, seed: int, keep_counts: bool = False
) -> tuple[dict[str, torch.Tensor], str]:
    """New values for the problem's input tensors (same shapes and dtypes), and what was done.
    ``keep_counts``: the same slots dealt to other tokens, so that every expert receives as many
    rows as before (the timing's input sets: the same work, other values)."""
    T, K = p.topk_ids_TK.shape
    D = p.x_TD.shape[1]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g).to(torch.bfloat16)
    if hasattr(p, "x_sf_TG4"):  # a prefill problem: FP8 tokens with packed scales, or bf16
        xq, xsf = prefill_tokens(x, p.precision)
    else:
        xq, xsf = x, None
    ids = p.topk_ids_TK.cpu().to(torch.int64)
    how = f"new tokens and routing (seed {seed})"
    if not keep_counts and bool((ids >= 0).all()) and 0 < K <= experts:
        new = torch.rand(T, experts, generator=g).topk(K, dim=1).indices
        if hasattr(p, "capacity_rows"):
            need = rows_needed(local_counts(new, p.expert_offset, p.local_experts), p.alignment)
            if need > p.capacity_rows:
                new = ids[torch.randperm(T, generator=g)]
                how = f"new tokens (seed {seed}), the same slots dealt to other tokens"
    elif bool((ids >= 0).all()):  # the same slots dealt to other tokens: the counts stay
        new = ids[torch.randperm(T, generator=g)]
        how = f"new tokens (seed {seed}), the same slots dealt to other tokens"
    else:  # received rows (-1: not local): the live slots dealt to other rows
        live = torch.nonzero(ids.flatten() >= 0).flatten()
        new = ids.flatten().clone()
        new[live] = new[live[torch.randperm(live.numel(), generator=g)]]
        new = new.view(T, K)
        how = f"new tokens (seed {seed}), the received slots dealt to other rows"
    w = p.topk_weights_TK.cpu()
    if not bool((w == 1).all()):
        w = torch.rand(T, K, generator=g) + 0.05
        w = w / w.sum(dim=1, keepdim=True)
    out = {"x_TD": xq, "topk_ids_TK": new.to(torch.int32), "topk_weights_TK": w.float()}
    if xsf is not None:
        out["x_sf_TG4"] = xsf
    dev = p.x_TD.device
    return {k: v.to(dev) for k, v in out.items()}, how


def fresh_input_gate(
    problem,
    timed: list[str],
    stage_sets: dict,
    reference,
    *,
    experts: int,
    seed: int,
    guard: InputGuard | None = None,
) -> dict[str, list[Check]]:
    """{arm: its ``fresh_input`` row, and an ``inputs_unchanged`` row when it changed the new
    inputs} for the ``timed`` arms (their gated stages rerun on new inputs written into the
    problem's tensors, a state of ``guard`` of their own, verified after every arm); the
    problem's inputs are back in ``guard``'s state 0 afterwards (without a guard: as they were
    before)."""
    new, how = fresh_inputs(problem, experts=experts, seed=seed)
    guard = guard if guard is not None else InputGuard(problem)
    out: dict[str, list[Check]] = {}
    try:
        guard.load(guard.add_set(new))
        ref = reference(problem)
        expect = expects_output(problem)
        for arm in timed:
            ws, stages = stage_sets[arm]
            ws.poison()
            run_all(stages)
            if problem.x_TD.is_cuda:
                torch.cuda.synchronize()
            c = check_reference(ws.y_TD, ref, problem.precision, expect_output=expect)
            out[arm] = [Check(name="fresh_input", status=c.status, error=c.error,
                              detail=f"{how}, the same prepared arm: {c.detail}")]  # fmt: skip
            changed = guard.check(arm, "the fresh-input run")
            if changed is not None:
                out[arm].append(changed)
    finally:
        guard.restore()
        if problem.x_TD.is_cuda:
            torch.cuda.synchronize()
    return out
