"""Where the kernel tests launch: the GPU when the Triton interpreter is off (``make test-gpu``),
the CPU under the interpreter. Inputs and references stay on the CPU; ``on_device`` moves a
launch's tensor arguments to the device and copies them back in place afterwards (the kernels
write their outputs in place)."""

from __future__ import annotations

import os

import torch

DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


def on_device(launch):
    """``launch`` run on DEVICE with CPU tensors in and out (module docstring)."""
    if DEVICE == "cpu":
        return launch

    def run(*args, **kw):
        moved = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
        moved_kw = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        out = launch(*moved, **moved_kw)
        for a, m in zip([*args, *kw.values()], [*moved, *moved_kw.values()], strict=True):
            if isinstance(a, torch.Tensor) and m is not a:
                a.copy_(m.cpu())
        return out

    return run
