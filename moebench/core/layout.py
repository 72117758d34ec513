"""The endpoint contract (docs/DESIGN.md section 2) and the capacity formula.

For alignment A and live row counts ``count[e]`` of the E local experts::

    start[0] = 0
    start[e] = align_up(end[e-1], A)
    end[e]   = start[e] + count[e]

Because every start is aligned, ``start[e]`` is also the exclusive prefix sum of the aligned counts,
which is how both functions below compute it: no loop over experts, no host read, so they work on
device tensors inside a CUDA graph.

Legend: E local experts, M capacity rows.
"""

from __future__ import annotations

import torch


def align_up(n: int, alignment: int) -> int:
    """Smallest multiple of ``alignment`` that is >= n (host integers)."""
    return -(-n // alignment) * alignment


def check_alignment(alignment: int) -> None:
    if alignment < 16 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two >= 16, got {alignment}")


def expert_ends(counts_E: torch.Tensor, alignment: int) -> torch.Tensor:
    """Endpoints ``end[e]`` (int32 [E], same device) for live counts ``counts_E`` (int [E])."""
    check_alignment(alignment)
    counts = counts_E.to(torch.int64)
    aligned = (counts + alignment - 1) // alignment * alignment
    starts = torch.cumsum(aligned, 0) - aligned
    return (starts + counts).to(torch.int32)


def expert_starts(ends_E: torch.Tensor, alignment: int) -> torch.Tensor:
    """Starts ``start[e]`` (int32 [E]) recovered from the endpoints alone.

    start[0] = 0 and start[e] = align_up(end[e-1], A): the previous expert's end rounded up.
    """
    check_alignment(alignment)
    ends = ends_E.to(torch.int64)
    prev = torch.cat([ends.new_zeros(1), ends[:-1]])
    starts = (prev + alignment - 1) // alignment * alignment
    return starts.to(torch.int32)


def expert_counts(ends_E: torch.Tensor, alignment: int) -> torch.Tensor:
    """Live counts (int32 [E]) recovered from the endpoints."""
    return (ends_E.to(torch.int64) - expert_starts(ends_E, alignment).to(torch.int64)).to(
        torch.int32
    )


def capacity_rows(
    tokens_per_rank: int, ep: int, top_k: int, local_experts: int, alignment: int
) -> int:
    """Rows of the capacity buffer, fixed per case (docs/DESIGN.md section 2).

    Every token of every rank could route all of its top-k slots here, and each local expert may
    waste up to one alignment of padding: ``T*ep*K + E*A``, rounded up to A.
    """
    check_alignment(alignment)
    return align_up(tokens_per_rank * ep * top_k + local_experts * alignment, alignment)


def used_rows(counts_E: torch.Tensor, alignment: int) -> int:
    """Rows up to the last expert's aligned end (host integer; for case preparation, not timing)."""
    counts = counts_E.to(torch.int64)
    return int(((counts + alignment - 1) // alignment * alignment).sum())


def live_row_mask(ends_E: torch.Tensor, alignment: int, rows: int) -> torch.Tensor:
    """Bool [M]: True for rows inside some [start[e], end[e]). For checks, not timed paths."""
    starts = expert_starts(ends_E, alignment).to(torch.int64)
    ends = ends_E.to(torch.int64)
    m = torch.arange(rows, device=ends_E.device)
    inside = (m[:, None] >= starts[None, :]) & (m[:, None] < ends[None, :])
    return inside.any(dim=1)
