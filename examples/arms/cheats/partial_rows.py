"""Cheat: writes only the first half of the output rows ``y_TD``, betting that a gate samples
only those.

What it would gain: half the work, so about twice as fast, wherever the gates compared a subset
of rows.

Caught by ``nan_poison`` and ``reference``: the output buffer starts as NaN before the gated run
and every row is compared, so an unwritten row is a non-finite output. ``HONEST`` is the same arm
writing every row.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def _prepare(rows_written: float):
    def prepare(p, y_TD: torch.Tensor):
        T = y_TD.shape[0]
        n = int(T * rows_written)

        def run() -> None:
            y_TD[:n].copy_(reference_output(p)[:n])

        return run

    return prepare


ARM = Arm(name="partial_rows", family="prefill", contract="whole_ffn",
          summary="writes only the first half of y_TD: must fail nan_poison and reference",
          prepare=_prepare(0.5))  # fmt: skip
HONEST = Arm(name="partial_rows_honest", family="prefill", contract="whole_ffn",
             summary="the same arm, writing every row", prepare=_prepare(1.0))  # fmt: skip
