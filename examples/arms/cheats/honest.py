"""The shared honest arm of the red-team corpus: moebench's own float32 reference, rounded to bf16,
computed afresh on every call from the inputs as they are now.

It is what every cheat here would be without its cheat, and the counterpart of the memoising arm
(``examples/arms/cheating.py``): it passes every gate, so a gate that fails it would be blaming an
innocent arm.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def prepare(p, y_TD: torch.Tensor):
    def run() -> None:
        y_TD.copy_(reference_output(p))

    return run


ARM = Arm(
    name="honest_reference",
    family="prefill",
    contract="whole_ffn",
    summary="the float32 reference on every call: the honest counterpart of the cheats",
    prepare=prepare,
)
