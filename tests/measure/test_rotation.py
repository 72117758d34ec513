"""The block order: a Williams design, balanced for position and for the arm that ran before."""

from collections import Counter

import pytest

from moebench.measure.rotation import block_order, williams_rows


@pytest.mark.parametrize("n", range(1, 9))
def test_every_arm_takes_every_position_equally_often(n):
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for row in rows:
        assert sorted(row) == list(range(n))
    for position in range(n):
        counts = Counter(row[position] for row in rows)
        assert set(counts) == set(range(n)) and len(set(counts.values())) == 1, counts


@pytest.mark.parametrize("n", range(2, 9))
def test_every_arm_follows_every_other_arm_equally_often(n):
    follows = Counter((row[i], row[i + 1]) for row in williams_rows(n) for i in range(n - 1))
    assert len(follows) == n * (n - 1)  # every ordered pair of two different arms
    assert len(set(follows.values())) == 1, follows


def test_the_cyclic_rotation_is_not_balanced_for_carry_over():
    # What the design replaces: ABC, BCA, CAB has B before C twice and A before C never.
    cyclic = [["A", "B", "C"], ["B", "C", "A"], ["C", "A", "B"]]
    follows = Counter((r[i], r[i + 1]) for r in cyclic for i in range(2))
    assert follows[("B", "C")] == 2 and follows[("A", "C")] == 0


def test_blocks_cycle_through_the_rows_and_short_runs_keep_the_old_order():
    arms = ["stock", "prefix_sum", "prefix_sum_masked"]
    assert [block_order(arms, b)[0] for b in range(3)] == arms  # ABC, BCA, CAB as before
    assert block_order(arms, 3) == arms[::-1]  # then the mirror rows
    assert block_order(arms, 6) == block_order(arms, 0)
    assert block_order([], 4) == []
    assert block_order(["a", "b", "c", "d"], 1) == ["b", "c", "a", "d"]
