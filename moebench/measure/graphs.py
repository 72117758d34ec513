"""CUDA graph capture, written once for the clock, the graph-replay gate and the distributed pass.

A graph is captured after one warm call of ``fn`` on a side stream, as PyTorch recommends, so
that lazy initialisation (a Triton compile, a cuBLAS handle) happens outside the capture.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def capture_graph(fn: Callable[[], None], *, thread_local: bool = False) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``fn``. ``thread_local``: capture in thread-local mode, needed when another
    thread queries events meanwhile (NCCL's watchdog in a distributed rank)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    mode = "thread_local" if thread_local else "global"
    with torch.cuda.graph(graph, capture_error_mode=mode):
        fn()
    torch.cuda.synchronize()
    return graph


def capture_replay(fn: Callable[[], None], *, thread_local: bool = False) -> Callable[[], None]:
    """The replay of a CUDA graph of ``fn``."""
    return capture_graph(fn, thread_local=thread_local).replay
