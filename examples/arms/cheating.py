"""A cheating arm, kept to show that moebench catches it: it memoises its output keyed on the
input tensors' addresses and shapes.

Its first call computes the right answer (moebench's own float32 reference, rounded to bf16);
every later call on the same tensors copies the cached answer, so it passes every gate that
reuses the gated inputs (reference, post-timing) and times as fast as a copy. The fresh-input
gate writes new tokens and new routing into those same tensors and runs it again: it returns
the stale answer, fails, and the arm is reported as a mismatch, never as faster.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def prepare(p, y_TD: torch.Tensor):
    cache: dict[tuple, torch.Tensor] = {}

    def run() -> None:
        key = (p.x_TD.data_ptr(), tuple(p.x_TD.shape), p.topk_ids_TK.data_ptr())
        if key not in cache:
            cache[key] = reference_output(p).to(torch.bfloat16)
        y_TD.copy_(cache[key])

    return run


ARM = Arm(
    name="memoised",
    family="prefill",
    contract="whole_ffn",
    summary="returns a cached output for inputs it has seen (by address): must fail the gates",
    prepare=prepare,
)
