"""Routing: seeded synthetic families, load-trace replay, per-rank slices and their statistics.

Everything here runs on the host before timing. A routing is ``topk_ids_TK`` (int32, distinct
experts per token, global expert ids) and ``topk_weights_TK`` (float32, positive, summing to 1 per
token) for all T = tokens_per_rank * dp tokens of the step. In the simulated topology rank r owns
the global experts [r * E_local, (r + 1) * E_local) and sees every token; the slots routed elsewhere
are skipped by its scatter and combine.

Trace files are read by ``raw_files.load_any``, replayed by ``trace_replay`` (load traces with
the recorded histogram exactly, per-token traces as recorded).

Legend: T tokens, K top-k, E experts (global unless said).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from moebench.core.errors import TraceError
from moebench.core.layout import align_up
from moebench.core.vocabulary import ROUTING_FAMILIES
from moebench.routing import replay as trace_replay
from moebench.routing.raw_files import load_any


@dataclass(frozen=True, kw_only=True)
class Routing:
    topk_ids_TK: torch.Tensor
    topk_weights_TK: torch.Tensor
    label: str
    trace_sha256: str = ""


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def gumbel_topk(log_w_E: torch.Tensor, tokens: int, top_k: int, g: torch.Generator):
    """K distinct experts per token, drawn without replacement with probabilities ~ exp(log_w).

    Adding Gumbel noise to log-weights and taking the top k is exact sampling without replacement.
    """
    u = torch.rand(tokens, log_w_E.numel(), generator=g, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(u.clamp(1e-300, 1 - 1e-16)))
    return torch.topk(log_w_E[None, :].double() + gumbel, top_k, dim=1).indices


def router_weights(tokens: int, top_k: int, g: torch.Generator) -> torch.Tensor:
    """Router weights: softmax of random logits over each token's k choices (never zero)."""
    return torch.softmax(torch.randn(tokens, top_k, generator=g), dim=1).float()


def _balanced(tokens: int, experts: int, top_k: int, g: torch.Generator) -> torch.Tensor:
    """Round-robin over a seeded expert permutation: loads differ by at most one.

    Slot s = t*K + k takes expert perm[s mod E]; the K slots of a token are consecutive, hence
    distinct whenever K <= E.
    """
    perm = torch.randperm(experts, generator=g)
    s = torch.arange(tokens * top_k).view(tokens, top_k)
    return perm[s % experts]


def load_trace_counts(path: str | Path, layer: int | None) -> tuple[np.ndarray, str]:
    """Per-expert counts (float64 [E], steps summed) of one layer of a load trace, and the
    trace's content sha256: what a trace scenario replays. ``layer`` None takes the first layer
    with load. Any malformed file is one TraceError naming it (moebench.routing.raw_files)."""
    t = load_any(path)
    if t.kind != "load":
        raise TraceError(f"{path}: a per-token trace has no load counts; replay it as recorded")
    counts_LE = t.counts_SLE.sum(axis=0)
    totals = counts_LE.sum(axis=1)
    if layer is None:
        loaded = np.nonzero(totals > 0)[0]
        if loaded.size == 0:
            raise TraceError(f"{path}: every layer is empty")
        index = int(loaded[0])
    elif layer in t.layers:
        index = t.layers.index(layer)
    else:
        raise TraceError(
            f"{path}: layer {layer} not in the trace (layers {t.layers[0]}..{t.layers[-1]})"
        )
    if totals[index] <= 0:
        raise TraceError(f"{path}: layer {t.layers[index]} has no routed tokens (a dense layer?)")
    return counts_LE[index].copy(), t.sha256


def synthesize(
    *,
    family: str,
    tokens: int,
    experts: int,
    top_k: int,
    ep: int,
    seed: int = 0,
    alpha: float = 1.2,
    hot_rank: int = 0,
    hot_fraction: float = 0.5,
    empty_fraction: float = 0.25,
    alignment: int = 128,
    trace_path: str | None = None,
    trace_layer: int | None = None,
) -> Routing:
    """Build one step's routing for T tokens over E global experts (deterministic in ``seed``)."""
    if top_k > experts:
        raise ValueError(f"top_k {top_k} > experts {experts}")
    g = _generator(seed)
    local = experts // ep
    label = family
    sha = ""
    recorded_weights = None
    if family == "uniform":
        ids = gumbel_topk(torch.zeros(experts), tokens, top_k, g)
    elif family == "balanced":
        ids = _balanced(tokens, experts, top_k, g)
    elif family == "full_capacity":
        # Balanced, and every expert's count a multiple of the alignment, so that with a tight
        # capacity every row of the buffer is live.
        slots = tokens * top_k
        if slots % experts or (slots // experts) % alignment:
            step = experts * alignment // math.gcd(experts * alignment, top_k)
            raise ValueError(
                f"full_capacity needs tokens*top_k/experts to be a multiple of the alignment "
                f"({alignment}); global tokens must be a multiple of {step}, got {tokens}"
            )
        ids = _balanced(tokens, experts, top_k, g)
    elif family == "zipf":
        ranks = torch.randperm(experts, generator=g).double() + 1
        ids = gumbel_topk(-alpha * torch.log(ranks), tokens, top_k, g)
        label = f"zipf(alpha={alpha:g})"
    elif family == "hot_rank":
        # Weight h on the hot rank's experts so that about hot_fraction of slots land there.
        f = min(max(hot_fraction, 1e-6), 1 - 1e-6)
        h = f * (experts - local) / ((1 - f) * local) if experts > local else 1.0
        log_w = torch.zeros(experts, dtype=torch.float64)
        log_w[hot_rank * local : (hot_rank + 1) * local] = math.log(h)
        ids = gumbel_topk(log_w, tokens, top_k, g)
        label = f"hot_rank(rank={hot_rank},fraction={hot_fraction:g})"
    elif family == "empty_experts":
        n_empty = int(round(empty_fraction * experts))
        if experts - n_empty < top_k:
            raise ValueError(
                f"empty_fraction {empty_fraction} leaves {experts - n_empty} experts, "
                f"fewer than top_k {top_k}"
            )
        log_w = torch.zeros(experts, dtype=torch.float64)
        log_w[torch.randperm(experts, generator=g)[:n_empty]] = -math.inf
        ids = gumbel_topk(log_w, tokens, top_k, g)
        label = f"empty_experts(fraction={empty_fraction:g})"
    elif family == "trace":
        trace = load_any(trace_path)
        ids, recorded_weights, layer, notes = trace_replay.replay(
            trace,
            layer=trace_layer,
            tokens=tokens,
            experts=experts,
            top_k=top_k,
            g=g,
            where=str(trace_path),
        )
        if not trace.pinned:
            notes.append("unpinned")  # a raw file: taken as the scenario's model
        label = f"trace({Path(trace_path).name},layer={layer}{''.join(',' + n for n in notes)})"
        sha = trace.sha256
    else:
        raise ValueError(f"unknown routing family {family!r}; expected one of {ROUTING_FAMILIES}")
    weights = router_weights(tokens, top_k, g)
    if recorded_weights is not None:
        weights = recorded_weights.float()
    return Routing(
        topk_ids_TK=ids.to(torch.int32).contiguous(),
        topk_weights_TK=weights,
        label=label,
        trace_sha256=sha,
    )


def local_counts(topk_ids_TK: torch.Tensor, expert_offset: int, local_experts: int) -> torch.Tensor:
    """int64 [E_local]: rows each local expert receives."""
    ids = topk_ids_TK.to(torch.int64).flatten() - expert_offset
    ids = ids[(ids >= 0) & (ids < local_experts)]
    return torch.bincount(ids, minlength=local_experts)


def rows_needed(counts_E: torch.Tensor, alignment: int) -> int:
    """Rows up to the last expert's aligned end: what the capacity must hold."""
    return int(sum(align_up(int(c), alignment) for c in counts_E.tolist()))


def rank_statistics(
    topk_ids_TK: torch.Tensor, *, rank: int, ep: int, local_experts: int, capacity_rows: int
) -> dict:
    """Load statistics of one rank (the `routing` table's row, minus run/case ids).

    overload = this rank's live rows over a perfectly balanced rank's (all slots / ep);
    entropy is in bits over the rank's local experts' share of its rows.
    """
    counts = local_counts(topk_ids_TK, rank * local_experts, local_experts).double()
    live = float(counts.sum())
    balanced = topk_ids_TK.numel() / ep
    share = counts / live if live else counts
    nz = share[share > 0]
    return {
        "rank": rank,
        "local_experts": local_experts,
        "live_rows": int(live),
        "capacity_rows": capacity_rows,
        "live_fraction": live / capacity_rows,
        "empty_experts": int((counts == 0).sum()),
        "max_load": float(counts.max()),
        "mean_load": float(counts.mean()),
        "overload": live / balanced if balanced else float("nan"),
        "entropy": float(-(nz * torch.log2(nz)).sum()) if live else float("nan"),
    }
