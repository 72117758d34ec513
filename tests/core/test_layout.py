"""The endpoint contract on device tensors, against a plain loop over the DESIGN formula."""

import pytest
import torch

from moebench.core.layout import (
    align_up,
    capacity_rows,
    expert_counts,
    expert_ends,
    expert_starts,
    live_row_mask,
)


def contract(counts, A):
    """docs/DESIGN.md section 2, literally."""
    starts, ends = [], []
    for e, c in enumerate(counts):
        s = 0 if e == 0 else align_up(ends[-1], A)
        starts.append(s)
        ends.append(s + c)
    return starts, ends


@pytest.mark.parametrize(
    "counts, A",
    [
        ([96, 0, 129, 1], 128),  # the DESIGN example: empty expert in the middle, 1-row tail
        ([0, 0, 0], 16),  # all experts empty
        ([0, 0, 5], 32),  # leading empty experts
        ([300], 128),  # one expert holding everything
        ([128, 256, 128], 128),  # full buffer: every count already aligned
        ([1, 2, 3, 4, 5, 6, 7], 16),  # prime E, rows fewer than a block
    ],
)
def test_contract_matches_formula(counts, A):
    starts, ends = contract(counts, A)
    c = torch.tensor(counts, dtype=torch.int32)
    e = expert_ends(c, A)
    assert e.dtype == torch.int32
    assert e.tolist() == ends
    assert expert_starts(e, A).tolist() == starts
    assert expert_counts(e, A).tolist() == counts


def test_design_example():
    e = expert_ends(torch.tensor([96, 0, 129, 1]), 128)
    assert e.tolist() == [96, 128, 257, 385]
    assert expert_starts(e, 128).tolist() == [0, 128, 128, 384]


def test_random_counts_roundtrip():
    g = torch.Generator().manual_seed(3)
    for A in (16, 64, 128, 256):
        counts = torch.randint(0, 400, (33,), generator=g)
        counts[torch.randint(0, 33, (5,), generator=g)] = 0
        starts, ends = contract(counts.tolist(), A)
        e = expert_ends(counts, A)
        assert e.tolist() == ends
        assert expert_starts(e, A).tolist() == starts


@pytest.mark.parametrize("A", [0, 8, 100, 129, -128])
def test_alignment_rejected(A):
    with pytest.raises(ValueError, match="power of two"):
        expert_ends(torch.tensor([1, 2]), A)


def test_capacity_formula_v4_flash():
    # DeepSeek-V4-Flash at EP8, 512 tokens per rank, top-6, 32 local experts: 24,576 + 4,096.
    assert capacity_rows(512, 8, 6, 32, 128) == 28_672


def test_live_row_mask():
    e = expert_ends(torch.tensor([3, 0, 2]), 16)
    m = live_row_mask(e, 16, 40)
    assert torch.nonzero(m).flatten().tolist() == [0, 1, 2, 16, 17]
