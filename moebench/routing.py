"""Routing: seeded synthetic families, load-trace replay, per-rank slices and their statistics.

Everything here runs on the host before timing. A routing is ``topk_ids_TK`` (int32, distinct
experts per token, global expert ids) and ``topk_weights_TK`` (float32, positive, summing to 1 per
token) for all T = tokens_per_rank * dp tokens of the step. In the simulated topology rank r owns
the global experts [r * E_local, (r + 1) * E_local) and sees every token; the slots routed elsewhere
are skipped by its scatter and combine.

Legend: T tokens, K top-k, E experts (global unless said).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from moebench.errors import TraceError
from moebench.layout import align_up

FAMILIES = ("uniform", "balanced", "zipf", "hot_rank", "empty_experts", "full_capacity", "trace")


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


def _gumbel_topk(log_w_E: torch.Tensor, tokens: int, top_k: int, g: torch.Generator):
    """K distinct experts per token, drawn without replacement with probabilities ~ exp(log_w).

    Adding Gumbel noise to log-weights and taking the top k is exact sampling without replacement.
    """
    u = torch.rand(tokens, log_w_E.numel(), generator=g, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(u.clamp(1e-300, 1 - 1e-16)))
    return torch.topk(log_w_E[None, :].double() + gumbel, top_k, dim=1).indices


def _weights(tokens: int, top_k: int, g: torch.Generator) -> torch.Tensor:
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


MAX_TRACE_BYTES = 256 << 20
MAX_TRACE_LAYERS = 1 << 16
MAX_TRACE_EXPERTS = 1 << 14


def load_trace_counts(path: str | Path, layer: int | None) -> tuple[np.ndarray, str]:
    """Per-expert counts of one layer from a load trace, and the file's sha256.

    Formats: SGLang's expert-distribution ``stat`` JSON (``{"logical_count": [[E] x layers]}``) and
    a NumPy count matrix ``[layers, E]`` (.npy, integer or float, never pickled objects). Richer
    trace formats come with the trace importers. Anything else, however malformed, is one
    TraceError naming the file.
    """
    p = Path(path)
    try:
        with open(p, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TraceError(f"{p}: not a regular file")
            raw = f.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise TraceError(f"{p}: cannot read trace ({exc.strerror or exc})") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceError(f"{p}: larger than {MAX_TRACE_BYTES >> 20} MiB; not a load trace")
    sha = hashlib.sha256(raw).hexdigest()
    try:
        counts = _npy_counts(raw, p) if p.suffix == ".npy" else _json_counts(raw, p)
    except TraceError:
        raise
    except (
        ValueError,
        TypeError,
        OverflowError,
        RecursionError,
        MemoryError,
        EOFError,
        SyntaxError,
    ) as exc:
        detail = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise TraceError(f"{p}: malformed trace ({detail})") from None
    if counts.ndim != 2 or not 1 <= counts.shape[0] <= MAX_TRACE_LAYERS:
        raise TraceError(
            f"{p}: expected a [layers, experts] count matrix, got shape {list(counts.shape)}"
        )
    if not 1 <= counts.shape[1] <= MAX_TRACE_EXPERTS:
        raise TraceError(
            f"{p}: {counts.shape[1]} experts per layer; expected 1 to {MAX_TRACE_EXPERTS}"
        )
    counts = counts.astype(np.float64)
    if not np.isfinite(counts).all():
        raise TraceError(f"{p}: expected a finite [layers, experts] count matrix")
    if (counts < 0).any():
        raise TraceError(f"{p}: negative expert counts")
    with np.errstate(over="ignore"):
        totals = counts.sum(axis=1)
    if layer is None:
        nonzero = np.nonzero(totals > 0)[0]
        if nonzero.size == 0:
            raise TraceError(f"{p}: every layer is empty")
        layer = int(nonzero[0])
    if not 0 <= layer < counts.shape[0]:
        raise TraceError(f"{p}: layer {layer} out of range [0, {counts.shape[0]})")
    if totals[layer] <= 0:
        raise TraceError(f"{p}: layer {layer} has no routed tokens (a dense layer?)")
    return counts[layer].copy(), sha


def _npy_counts(raw: bytes, p: Path) -> np.ndarray:
    """A numeric 2-D array from .npy bytes; the header is checked before any data is read, so a
    header that declares a huge shape allocates nothing."""
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise TraceError(f"{p}: .npy format version {version} is not supported")
    if dtype.hasobject or dtype.kind not in "biuf" or dtype.fields is not None:
        raise TraceError(f"{p}: expected integer or float counts, got dtype {dtype.str}")
    if len(shape) != 2:
        raise TraceError(f"{p}: expected a [layers, experts] count matrix, got shape {list(shape)}")
    if math.prod(shape) * dtype.itemsize != len(raw) - f.tell():
        raise TraceError(f"{p}: truncated or padded .npy (header declares shape {list(shape)})")
    return np.load(io.BytesIO(raw), allow_pickle=False)


def _json_counts(raw: bytes, p: Path) -> np.ndarray:
    """``logical_count`` of an SGLang stat JSON as a float64 matrix, every entry checked."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or "logical_count" not in doc:
        raise TraceError(f"{p}: expected a JSON object with 'logical_count'")
    rows = doc["logical_count"]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise TraceError(f"{p}: logical_count must be a non-empty list of per-layer lists")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise TraceError(f"{p}: logical_count[{i}] has {len(row)} experts, layer 0 has {width}")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in row):
            raise TraceError(f"{p}: logical_count[{i}] holds a value that is not a number")
    return np.array(rows, dtype=np.float64).reshape(len(rows), width)


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
    if family == "uniform":
        ids = _gumbel_topk(torch.zeros(experts), tokens, top_k, g)
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
        ids = _gumbel_topk(-alpha * torch.log(ranks), tokens, top_k, g)
        label = f"zipf(alpha={alpha:g})"
    elif family == "hot_rank":
        # Weight h on the hot rank's experts so that about hot_fraction of slots land there.
        f = min(max(hot_fraction, 1e-6), 1 - 1e-6)
        h = f * (experts - local) / ((1 - f) * local) if experts > local else 1.0
        log_w = torch.zeros(experts, dtype=torch.float64)
        log_w[hot_rank * local : (hot_rank + 1) * local] = math.log(h)
        ids = _gumbel_topk(log_w, tokens, top_k, g)
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
        ids = _gumbel_topk(log_w, tokens, top_k, g)
        label = f"empty_experts(fraction={empty_fraction:g})"
    elif family == "trace":
        counts, sha = load_trace_counts(trace_path, trace_layer)
        if counts.size != experts:
            raise TraceError(
                f"{trace_path}: trace has {counts.size} experts, the model has {experts}"
            )
        if (counts > 0).sum() < top_k:
            raise TraceError(f"{trace_path}: fewer than top_k experts have any load")
        with np.errstate(divide="ignore"):
            log_w = torch.from_numpy(np.log(counts))
        ids = _gumbel_topk(log_w, tokens, top_k, g)
        label = f"trace({Path(trace_path).name},layer={trace_layer})"
    else:
        raise ValueError(f"unknown routing family {family!r}; expected one of {FAMILIES}")
    return Routing(
        topk_ids_TK=ids.to(torch.int32).contiguous(),
        topk_weights_TK=_weights(tokens, top_k, g),
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
