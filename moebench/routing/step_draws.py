"""The routing of one model layer in one step of the ``step`` regime (docs/DESIGN.md section 14).

Every (step, layer) gets its own routing, on the host, deterministic in the scenario's seed:

- A load trace: model layer i (the i-th MoE layer of the model) replays the i-th trace layer that
  routed anything (wrapping round when the model has more MoE layers than the trace), so the
  DeepSeek-V3 files' layers 3-60 land on DeepSeek-V3's layers 3-60, and on V4-Flash's 0-42 as
  V3's loads on V4's shapes. A trace with per-step records replays step s from record s (mod the
  records), exactly apportioned as a single-layer replay is (``routing.replay``). A trace of
  one record (counts summed over a benchmark, as SGLang's ``stat`` dump) holds the expected
  load, not a step's: each step then draws its tokens' experts from the recorded shares (a
  Gumbel top-k over log shares, distinct experts per token), so steps differ as real steps do
  around the layer's load while the layer keeps its own hot experts.
- A per-token trace: the layer's recorded tokens, every step (as recorded).
- A synthetic family: the family's draw with a seed of its own per (step, layer).
"""

from __future__ import annotations

import numpy as np
import torch

from moebench.core.errors import TraceError
from moebench.routing import replay as trace_replay
from moebench.routing.raw_files import load_any
from moebench.routing.synthetic import Routing, gumbel_topk, router_weights, synthesize


def step_seed(seed: int, step: int, layer: int) -> int:
    """The seed of one (step, layer) draw: distinct for every pair, stable across runs."""
    return (seed * 1_000_003 + step * 10_007 + layer * 101 + 12_345) % (2**63 - 1)


def trace_layer_map(path: str, moe_layers: tuple[int, ...]) -> dict[int, int]:
    """{model layer: trace layer} for every MoE layer of the model (module docstring)."""
    trace = load_any(path)
    loaded = [layer for layer, row in zip(trace.layers, trace.all_counts(), strict=True)
              if row.sum() > 0]  # fmt: skip
    if not loaded:
        raise TraceError(f"{path}: every layer is empty")
    return {m: loaded[i % len(loaded)] for i, m in enumerate(moe_layers)}


class StepRouting:
    """Draws the routing of (step, layer) pairs for one scenario; the trace is read once."""

    def __init__(self, *, family: str, seed: int, experts: int, top_k: int, ep: int,
                 alignment: int, options: dict, trace_path: str | None,
                 layer_map: dict[int, int] | None):  # fmt: skip
        self.family, self.seed, self.experts, self.top_k, self.ep = family, seed, experts, top_k, ep
        self.alignment, self.options = alignment, options
        self.trace = load_any(trace_path) if family == "trace" else None
        self.trace_path = trace_path
        self.layer_map = layer_map or {}

    def label(self) -> str:
        """How the steps' routing was made, once for the run."""
        if self.trace is None:
            return f"{self.family}, a seeded draw per (step, layer)"
        name = str(self.trace_path).rsplit("/", 1)[-1]
        first, last = min(self.layer_map.values()), max(self.layer_map.values())
        if self.trace.kind != "load":
            how = "each layer's recorded tokens every step"
        elif self.trace.steps > 1:
            how = f"step s replays record s mod {self.trace.steps}"
        else:
            how = "each step a draw from the layer's recorded shares"
        return f"trace({name}, trace layers {first}..{last}: {how})"

    def draw(self, step: int, layer: int, tokens: int) -> Routing:
        """The routing of ``tokens`` (global) tokens in model layer ``layer`` of step ``step``."""
        seed = step_seed(self.seed, step, layer)
        if self.trace is None:
            return synthesize(family=self.family, tokens=tokens, experts=self.experts,
                              top_k=self.top_k, ep=self.ep, seed=seed, alignment=self.alignment,
                              **self.options)  # fmt: skip
        t, where = self.trace, str(self.trace_path)
        trace_layer = self.layer_map[layer]
        g = torch.Generator().manual_seed(seed)
        if t.kind == "load" and t.steps > 1:
            counts = t.counts_SLE[step % t.steps, t.position(trace_layer, where), :]
            if counts.sum() <= 0:  # a record without this layer's load: the layer's total
                counts = t.layer_counts(trace_layer, where)
            ids = trace_replay.replay_load(counts, tokens, self.top_k, g)
        elif t.kind == "load":
            ids = _draw_from_shares(t.layer_counts(trace_layer, where), tokens, self.top_k, g,
                                    f"{where}: layer {trace_layer}")  # fmt: skip
        else:
            ids, recorded, _, _ = trace_replay.replay(
                t, layer=trace_layer, tokens=tokens, experts=self.experts, top_k=self.top_k,
                g=g, where=where,
            )  # fmt: skip
            weights = (
                recorded.float() if recorded is not None else router_weights(tokens, self.top_k, g)
            )
            return Routing(
                topk_ids_TK=ids.to(torch.int32).contiguous(),
                topk_weights_TK=weights,
                label=self.label(),
                trace_sha256=t.sha256,
            )
        return Routing(
            topk_ids_TK=ids.to(torch.int32).contiguous(),
            topk_weights_TK=router_weights(tokens, self.top_k, g),
            label=self.label(),
            trace_sha256=t.sha256,
        )


def _draw_from_shares(counts_E, tokens: int, top_k: int, g: torch.Generator, where: str):
    """int64 [T, K]: distinct experts per token drawn in proportion to the recorded counts."""
    counts = np.asarray(counts_E, dtype=np.float64)
    if (counts > 0).sum() < top_k:
        raise TraceError(f"{where}: only {(counts > 0).sum()} experts have load, top_k {top_k}")
    with np.errstate(divide="ignore"):
        log_w = torch.from_numpy(np.log(counts / counts.sum()))
    return gumbel_topk(log_w, tokens, top_k, g)
