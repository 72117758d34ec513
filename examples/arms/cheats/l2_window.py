"""Cheat (GPU only): pins the first of its weights in L2 with a persisting access-policy window
on its stream, so that what one call reads is still in L2 when the next call starts.

torch exposes no stream attributes, so it calls the CUDA runtime through ctypes: it sets
``cudaLimitPersistingL2CacheSize`` to the most the GPU allows and puts a
``cudaAccessPolicyWindow`` (hits persisting, misses streaming) over the start of its w13 on its
own stream, which it joins, so it is otherwise an honest arm. Its weights are several times the
L2, so without the window each call streams them all from HBM; with it, the lines of the window
survive the rest of the weights streaming past them.

What it would gain: the window's bytes are L2 hits instead of HBM reads in every timed call after
the first, while an arm without the window streams all of its weights.

Caught by (meant to be) the reset before every sample: moebench's clock calls
``cudaCtxResetPersistingL2Cache`` before each sample, so the lines pinned by the previous call
are normal lines again. tests/arms/test_cheats_gpu.py compares the ffn medians of this arm and
of ``HONEST`` (the same arm without the window) in one run, after checking that the window pays
off at all outside moebench's timer. It is an expected failure: on the H200 (2026-12-01) the
window paid off nowhere, even with nothing resetting it, so that check fails; and by CUDA's
description the reset makes persisting lines normal without evicting them, so in the ffn regime
(no flush) what a window kept would still be in L2 at the next sample's start. It runs eagerly
(``graph=False``), where a stream attribute applies to every kernel launched on the stream.
"""

from __future__ import annotations

import ctypes
import glob
import os

import torch
from dense import ffn, weights

from moebench.arm.base import Arm

# CUDA runtime enums (driver_types.h)
DEV_ATTR_MAX_PERSISTING_L2 = 108  # cudaDevAttrMaxPersistingL2CacheSize
DEV_ATTR_MAX_WINDOW = 109  # cudaDevAttrMaxAccessPolicyWindowSize
LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
STREAM_ATTR_WINDOW = 1  # cudaStreamAttributeAccessPolicyWindow
STREAMING, PERSISTING = 1, 2  # cudaAccessProperty


class AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hitRatio", ctypes.c_float), ("hitProp", ctypes.c_int),
                ("missProp", ctypes.c_int)]  # fmt: skip


class StreamAttrValue(ctypes.Union):  # cudaStreamAttrValue (cudaLaunchAttributeValue): 64 bytes
    _fields_ = [("accessPolicyWindow", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def cudart() -> ctypes.CDLL:
    """The CUDA runtime torch loaded (from this process's mappings), else one beside torch."""
    torch.cuda.init()
    with open("/proc/self/maps") as f:
        loaded = sorted({ln.split()[-1] for ln in f if "libcudart" in ln})
    here = os.path.dirname(torch.__file__)
    beside = [os.path.join(here, "lib", "libcudart*.so*"),
              os.path.join(here, "..", "nvidia", "*", "lib", "libcudart.so*")]  # fmt: skip
    for name in [*loaded, "libcudart.so", *(f for pat in beside for f in glob.glob(pat))]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise RuntimeError("no CUDA runtime library found")


def _check(err: int, what: str) -> None:
    if err:
        raise RuntimeError(f"{what} returned cudaError {err}")


def set_window(stream: torch.cuda.Stream, t: torch.Tensor) -> dict:
    """Persist as much of ``t`` as the GPU allows in L2 for kernels on ``stream``; what it set."""
    rt, dev = cudart(), t.device.index
    persist, window = ctypes.c_int(), ctypes.c_int()
    _check(rt.cudaDeviceGetAttribute(ctypes.byref(persist), DEV_ATTR_MAX_PERSISTING_L2, dev),
           "cudaDeviceGetAttribute")  # fmt: skip
    _check(rt.cudaDeviceGetAttribute(ctypes.byref(window), DEV_ATTR_MAX_WINDOW, dev),
           "cudaDeviceGetAttribute")  # fmt: skip
    _check(rt.cudaDeviceSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(persist.value)),
           "cudaDeviceSetLimit")  # fmt: skip
    nbytes = min(t.numel() * t.element_size(), window.value)
    value = StreamAttrValue()
    value.accessPolicyWindow = AccessPolicyWindow(
        t.data_ptr(), nbytes, min(1.0, persist.value / nbytes), PERSISTING, STREAMING
    )
    _check(rt.cudaStreamSetAttribute(ctypes.c_void_p(stream.cuda_stream), STREAM_ATTR_WINDOW,
                                     ctypes.byref(value)), "cudaStreamSetAttribute")  # fmt: skip
    return {"persisting_bytes": persist.value, "window_bytes": nbytes}


def _prepare(pin: bool):
    def prepare(p, y_TD: torch.Tensor):
        w13, w2 = weights(p, torch.bfloat16)
        own = torch.cuda.Stream(device=y_TD.device)
        if pin:
            set_window(own, w13)

        def run() -> None:
            caller = torch.cuda.current_stream(y_TD.device)
            own.wait_stream(caller)
            with torch.cuda.stream(own):
                y_TD.copy_(ffn(p, w13, w2))
            caller.wait_stream(own)  # joined: the only cheat is the window

        return run

    return prepare


ARM = Arm(name="l2_window", family="prefill", contract="whole_ffn",
          summary="a persisting L2 window over its weights: no faster than its twin once "
          "moebench resets persisting lines before each sample (GPU)",
          prepare=_prepare(True), graph=False)  # fmt: skip
HONEST = Arm(name="l2_window_honest", family="prefill", contract="whole_ffn",
             summary="the same arm without the window", prepare=_prepare(False),
             graph=False)  # fmt: skip
