"""Cheat: replays its last output while a fingerprint of its inputs is unchanged, and computes
honestly when the fingerprint changes.

The fingerprint is cheap and blind to the order of the tokens: the sum of all token values
(float64, exact for FP8 and bf16 values) and the sorted expert ids. It changes whenever the
tokens or the routing really change, so a fresh-input gate sees an honest arm, and the gates
that rerun the gated inputs get the right output back.

What it would gain: every timed call after the first is a copy. Before timed outputs were
checked this passed every gate and timed 24x faster than the arm it wraps (issue 25).

Caught by ``timed_outputs``: each ffn sample loads an input set with its token rows in a fresh
random order. The fingerprint stays (same values, same ids), the right output does not (its rows
move with the tokens), so the replayed output is held to the permuted reference and fails.
``HONEST`` is the same arm without the replay.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def fingerprint(p) -> tuple:
    """Order-blind: the sum of every token value and the sorted expert ids."""
    total = float(p.x_TD.to(torch.float32).to(torch.float64).sum())
    ids = tuple(p.topk_ids_TK.flatten().sort().values.tolist())
    return total, ids


def _prepare(replay: bool):
    def prepare(p, y_TD: torch.Tensor):
        last: dict = {}

        def run() -> None:
            key = fingerprint(p) if replay else None
            if not replay or last.get("key") != key:
                last["key"], last["y"] = key, reference_output(p).to(torch.bfloat16)
            y_TD.copy_(last["y"])

        return run

    return prepare


ARM = Arm(name="fingerprint_replay", family="prefill", contract="whole_ffn",
          summary="replays its last output while an order-blind fingerprint of its inputs "
          "holds: must fail timed_outputs", prepare=_prepare(True))  # fmt: skip
HONEST = Arm(name="fingerprint_replay_honest", family="prefill", contract="whole_ffn",
             summary="the same arm, computing on every call", prepare=_prepare(False))  # fmt: skip
