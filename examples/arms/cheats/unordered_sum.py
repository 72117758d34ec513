"""Not a cheat: an honest arm whose summation order varies between calls.

Each call sums every token's slots into a bf16 accumulator (each addition rounded to bf16, as a
kernel accumulating into a bf16 output with atomics would) in an order drawn afresh per call, so
two calls on the same inputs may differ in the last bits of some outputs; each is within the
precision's tolerance of the float32 reference.

moebench must let it through: a whole-FFN arm is held to the reference's tolerance, never
bitwise to itself, so ``post_timing`` passes, and its ``deterministic`` row (status ``info``,
never a failure) records that it was not bitwise the same after timing. ``HONEST`` sums in a
fixed order: its ``deterministic`` row is ``pass``.
"""

from __future__ import annotations

import dataclasses

import torch

from moebench.arm.base import Arm
from moebench.plan.inputs import reference_output


def _prepare(shuffle: bool):
    def prepare(p, y_TD: torch.Tensor):
        T, K = p.topk_ids_TK.shape
        dev = p.x_TD.device
        g = torch.Generator(device=dev).manual_seed(1234)
        slots = [dataclasses.replace(p, topk_ids_TK=p.topk_ids_TK[:, k : k + 1],
                                     topk_weights_TK=p.topk_weights_TK[:, k : k + 1])
                 for k in range(K)]  # fmt: skip
        tokens = torch.arange(T, device=dev)

        def run() -> None:
            # Each slot's contribution, float32 [T, K, D] (zero where the slot is not local).
            c_TKD = torch.stack([reference_output(s) for s in slots], dim=1)
            if shuffle:  # this call's order of every token's slots
                order_TK = torch.rand(T, K, generator=g, device=dev).argsort(dim=1)
            else:
                order_TK = torch.arange(K, device=dev).expand(T, K)
            y = torch.zeros_like(y_TD)
            for j in range(K):
                y = (y.float() + c_TKD[tokens, order_TK[:, j]]).to(torch.bfloat16)
            y_TD.copy_(y)

        return run

    return prepare


ARM = Arm(name="unordered_sum", family="prefill", contract="whole_ffn",
          summary="honest, its slot order drawn per call (bf16 accumulation): must pass, "
          "deterministic info", prepare=_prepare(True), graph=False)  # fmt: skip
HONEST = Arm(name="ordered_sum", family="prefill", contract="whole_ffn",
             summary="the same arm in a fixed slot order", prepare=_prepare(False),
             graph=False)  # fmt: skip
