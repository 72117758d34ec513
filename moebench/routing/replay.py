"""Replay of a trace layer as one step's routing of T tokens.

Load traces are replayed exactly, not in expectation: the step's T*K slots are apportioned to the
experts on the recorded shares (``apportion``), then dealt to tokens so that no token holds an
expert twice, then shuffled with the seed. The replayed histogram is the apportionment, for any T.

Dealing: lay the slots out as one sequence, each expert's n[e] slots in one contiguous run (the
experts in a seeded order), and give slot j to token j mod T as its (j div T)-th choice. Every token
gets exactly K slots. A run of n[e] <= T consecutive slots lands on n[e] consecutive residues
mod T, which are distinct: no token receives an expert twice. The apportionment caps n[e] at T,
so this always holds. Shuffling tokens and the order of each token's slots moves ids around
without changing any token's set or the histogram.

Per-token traces are replayed as recorded: the layer's tokens in order, cut to T or tiled (token
t replays recorded token t mod T_rec); tokens with an unused slot (-1) in that layer are skipped.

Legend: T tokens, K top-k, E experts.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from moebench.core.errors import TraceError
from moebench.routing.traces import Trace


def apportion(counts_E, slots: int, cap: int) -> np.ndarray:
    """int64 [E]: ``slots`` split over experts in proportion to ``counts_E``, none above ``cap``.

    Largest remainder in exact rational arithmetic (no float rounding can shift a slot): every
    expert gets the floor of its quota, the slots left over go to the largest fractional parts
    (ties to the lower expert id). An expert whose quota exceeds ``cap`` is held at ``cap`` and
    the rest is apportioned again over the others (their quotas only grow, so holding every
    over-cap expert of a round at once is exact). Experts with no count get nothing.
    ValueError when the slots cannot fit: fewer than slots / cap experts have any count.
    """
    c = [Fraction(float(x)) for x in np.asarray(counts_E, dtype=np.float64).ravel()]
    if any(x < 0 for x in c) or slots < 0 or cap < 0:
        raise ValueError("counts, slots and cap must be >= 0")
    n = [0] * len(c)
    held: set[int] = set()
    while True:
        free = [e for e, x in enumerate(c) if x > 0 and e not in held]
        left = slots - cap * len(held)
        total = sum((c[e] for e in free), Fraction(0))
        if left > 0 and total == 0:
            live = sum(1 for x in c if x > 0)
            raise ValueError(f"{slots} slots do not fit {live} loaded experts of at most {cap}")
        over = [e for e in free if left * c[e] > cap * total]
        if not over:
            break
        held.update(over)
    for e in held:
        n[e] = cap
    if left:
        quota = {e: left * c[e] / total for e in free}
        for e, q in quota.items():
            n[e] = q.numerator // q.denominator
        rest = left - sum(n[e] for e in free)
        by_remainder = sorted(free, key=lambda e: (-(quota[e] - n[e]), e))
        for e in by_remainder[:rest]:
            n[e] += 1
    return np.asarray(n, dtype=np.int64)


def replay_load(counts_E, tokens: int, top_k: int, g: torch.Generator) -> torch.Tensor:
    """int64 [T, K]: distinct experts per token, histogram exactly ``apportion(counts, T*K, T)``."""
    n_E = apportion(counts_E, tokens * top_k, tokens)
    order = torch.randperm(n_E.size, generator=g).numpy()
    slots = np.repeat(order, n_E[order])  # contiguous run per expert, T*K long
    ids_TK = torch.from_numpy(np.ascontiguousarray(slots.reshape(top_k, tokens).T))
    ids_TK = ids_TK[torch.randperm(tokens, generator=g)]
    shuffle = torch.argsort(torch.rand(tokens, top_k, generator=g), dim=1)
    return torch.gather(ids_TK, 1, shuffle)


def replay(
    trace: Trace,
    *,
    layer: int | None,
    tokens: int,
    experts: int,
    top_k: int,
    g: torch.Generator,
    where: str,
) -> tuple[torch.Tensor, torch.Tensor | None, int, list[str]]:
    """One step of ``tokens`` tokens from one layer of ``trace``.

    Returns topk_ids (int64 [T, K]), the recorded weights (float32 [T, K]) or None, the layer
    replayed, and notes for the routing label (how tokens were cut or tiled, top-k remapped).
    """
    if trace.experts != experts:
        raise TraceError(f"{where}: trace has {trace.experts} experts, the model has {experts}")
    if layer is None:
        layer = trace.default_layer(where)
    notes = []
    if trace.kind == "load":
        counts = trace.layer_counts(layer, where)
        if counts.sum() <= 0:
            raise TraceError(f"{where}: layer {layer} has no routed tokens (a dense layer?)")
        if (counts > 0).sum() < top_k:
            raise TraceError(
                f"{where}: layer {layer}: only {(counts > 0).sum()} experts have any load, "
                f"fewer than top_k {top_k}"
            )
        if trace.top_k is not None and trace.top_k != top_k:
            notes.append(f"shares of top{trace.top_k} at top{top_k}")
        return replay_load(counts, tokens, top_k, g), None, layer, notes
    if trace.top_k != top_k:
        raise TraceError(
            f"{where}: a per-token trace of top-{trace.top_k} routing cannot replay top-{top_k}"
        )
    i = trace.position(layer, where)
    ids = trace.topk_ids_TLK[:, i, :]
    keep = (ids >= 0).all(axis=1)
    if not keep.any():
        raise TraceError(f"{where}: layer {layer} has no token with all {top_k} slots routed")
    recorded = int(keep.sum())
    index = np.arange(tokens) % recorded
    notes.append(
        f"tokens={recorded}" if recorded == tokens
        else f"tokens={recorded}->{tokens} {'cut' if recorded > tokens else 'tiled'}"
    )  # fmt: skip
    ids_TK = torch.from_numpy(ids[keep][index].astype(np.int64))
    weights = None
    if trace.topk_weights_TLK is not None:
        weights = torch.from_numpy(trace.topk_weights_TLK[:, i, :][keep][index].copy())
    return ids_TK, weights, layer, notes
