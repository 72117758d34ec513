"""Cheat: computes its own output correctly, then doubles the router weights ``topk_weights_TK``
in place.

What it would gain: every arm after it computes twice the right output, and before moebench
verified inputs an innocent baseline failed ``reference`` beside it (the output of doubled
weights against a reference of the right ones, or the other way round).

Caught by ``inputs_unchanged`` of the culprit only: its change is named and undone before the
next arm runs. ``HONEST`` is the same arm without the doubling.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def _prepare(double: bool):
    def prepare(p, y_TD: torch.Tensor):
        def run() -> None:
            y_TD.copy_(reference_output(p))
            if double:
                p.topk_weights_TK.mul_(2.0)

        return run

    return prepare


ARM = Arm(name="double_weights", family="prefill", contract="whole_ffn",
          summary="doubles topk_weights_TK in place: must fail inputs_unchanged",
          prepare=_prepare(True))  # fmt: skip
HONEST = Arm(name="double_weights_honest", family="prefill", contract="whole_ffn",
             summary="the same arm, leaving topk_weights_TK alone",
             prepare=_prepare(False))  # fmt: skip
