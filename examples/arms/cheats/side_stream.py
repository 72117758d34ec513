"""Cheat (GPU only): launches its real work on a stream of its own and returns at once, without
making the caller's stream wait for it.

What it would gain: the timer's events are recorded on the caller's stream, so they measure how
long the host took to queue the work, not the GPU's time to do it; a GPU-bound FFN looks many
times faster. It must run eagerly (``graph=False``): a CUDA graph cannot end with a stream that
was never joined.

Caught by ``host_clock``: for an eager arm on the GPU moebench also times a few calls with a host
clock around a synchronised device (every stream), which counts the work on the side stream;
the events' median far below the host clock's fails the arm. (Its timed outputs are read before
the side stream is done, so ``timed_outputs`` may fail too.) ``HONEST`` is the same arm, the
caller's stream made to wait for the side stream before it returns.
"""

from __future__ import annotations

import torch
from dense import ffn, weights

from moebench.arm.base import Arm


def _prepare(join: bool):
    def prepare(p, y_TD: torch.Tensor):
        w13, w2 = weights(p, torch.float32)  # float32 matmuls: GPU-bound at modest shapes
        side = torch.cuda.Stream(device=y_TD.device)

        def run() -> None:
            caller = torch.cuda.current_stream(y_TD.device)
            side.wait_stream(caller)  # the inputs the caller just wrote
            with torch.cuda.stream(side):
                y_TD.copy_(ffn(p, w13, w2))
            if join:
                caller.wait_stream(side)

        return run

    return prepare


ARM = Arm(name="side_stream", family="prefill", contract="whole_ffn",
          summary="its work on a side stream it never joins: must fail host_clock (GPU)",
          prepare=_prepare(False), graph=False)  # fmt: skip
HONEST = Arm(name="side_stream_honest", family="prefill", contract="whole_ffn",
             summary="the same arm, joining its side stream", prepare=_prepare(True),
             graph=False)  # fmt: skip
