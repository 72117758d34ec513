"""Cheat: computes the output once, in ``prepare`` (for the routing it was prepared on), and
returns that tensor on every call.

What it would gain: the timed call is a copy. Its output is right for the gated inputs, so the
gates that rerun them (``reference``, ``post_timing``) pass.

Caught by ``timed_outputs`` (each ffn sample sees other tokens or the same tokens in another
order, and its output is checked) and by ``fresh_input`` (new tokens and routing written into the
same tensors after timing). ``HONEST`` is the same arm computing on every call.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def _prepare(stale: bool):
    def prepare(p, y_TD: torch.Tensor):
        once = reference_output(p).to(torch.bfloat16) if stale else None

        def run() -> None:
            y_TD.copy_(once if stale else reference_output(p))

        return run

    return prepare


ARM = Arm(name="stale_output", family="prefill", contract="whole_ffn",
          summary="returns the output computed at prepare: must fail timed_outputs and "
          "fresh_input", prepare=_prepare(True))  # fmt: skip
HONEST = Arm(name="stale_output_honest", family="prefill", contract="whole_ffn",
             summary="the same arm, computing on every call", prepare=_prepare(False))  # fmt: skip
