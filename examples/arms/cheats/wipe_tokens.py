"""Cheat: computes its own output correctly, then zeroes the tokens ``x_TD`` it was handed.

What it would gain: the arms after it see zero tokens. Before moebench verified inputs, the
built-in ``stock`` then failed ``reference`` (its output of the real tokens against a reference
recomputed from the wiped ones), an honest baseline failed ``post_timing``, and on another rank
every arm "passed" against an all-zero reference: the culprit alone looked correct.

Caught by ``inputs_unchanged``: every input is fingerprinted and verified after each call of an
arm; the change fails this arm, the pristine tokens are written back before any other arm runs,
and nobody else is blamed. ``HONEST`` is the same arm without the wipe.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def _prepare(wipe: bool):
    def prepare(p, y_TD: torch.Tensor):
        def run() -> None:
            y_TD.copy_(reference_output(p))
            if wipe:
                p.x_TD.zero_()

        return run

    return prepare


ARM = Arm(name="wipe_tokens", family="prefill", contract="whole_ffn",
          summary="zeroes x_TD after computing its output: must fail inputs_unchanged",
          prepare=_prepare(True))  # fmt: skip
HONEST = Arm(name="wipe_tokens_honest", family="prefill", contract="whole_ffn",
             summary="the same arm, leaving x_TD alone", prepare=_prepare(False))  # fmt: skip
