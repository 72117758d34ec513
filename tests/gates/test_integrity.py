"""The input guard's rotation (docs/DESIGN.md section 15): a permuted load gathers a set's rows
from its device copy without a synchronisation, and the next verification still names whatever
an arm wrote: the inputs themselves, or moebench's device copy of a set."""

from dataclasses import dataclass

import torch

from moebench.gates.integrity import InputGuard


@dataclass
class Toy:
    x_TD: torch.Tensor
    topk_ids_TK: torch.Tensor
    w_ED: torch.Tensor  # not rotated: the same in every set


def toy(seed: int = 0) -> Toy:
    g = torch.Generator().manual_seed(seed)
    return Toy(x_TD=torch.randn(6, 4, generator=g),
               topk_ids_TK=torch.randint(0, 3, (6, 2), generator=g),
               w_ED=torch.randn(3, 4, generator=g))  # fmt: skip


def guarded():
    problem = toy()
    pristine = {k: v.clone() for k, v in vars(problem).items()}
    guard = InputGuard(problem)
    other = toy(1)
    guard.add_set({"x_TD": other.x_TD, "topk_ids_TK": other.topk_ids_TK})
    return problem, pristine, guard, other


def test_a_permuted_load_writes_the_sets_rows_and_verifies_clean():
    problem, pristine, guard, other = guarded()
    rows = torch.randperm(6, generator=torch.Generator().manual_seed(3))
    guard.load(1, rows)
    assert torch.equal(problem.x_TD, other.x_TD[rows])
    assert torch.equal(problem.topk_ids_TK, other.topk_ids_TK[rows])
    assert torch.equal(problem.w_ED, pristine["w_ED"])
    assert guard.check("honest", "a turn") is None
    guard.load(0, rows)  # state 0 permuted, then state 0 as built
    assert torch.equal(problem.x_TD, pristine["x_TD"][rows])
    guard.load(0)
    assert all(torch.equal(getattr(problem, k), v) for k, v in pristine.items())
    assert guard.check("honest", "a turn") is None


def test_an_arm_that_writes_a_permuted_input_is_named_and_state_0_restored():
    problem, pristine, guard, _ = guarded()
    guard.load(1, torch.arange(5, -1, -1))
    problem.x_TD[2, 1] += 1.0  # the arm's write
    bad = guard.check("writer", "its timed samples of block 0")
    assert bad is not None and bad.status == "fail" and "x_TD" in bad.detail
    assert "writer" in bad.detail
    assert all(torch.equal(getattr(problem, k), v) for k, v in pristine.items())
    assert guard.check("next", "a turn") is None


def test_an_arm_that_writes_moebenchs_copy_of_a_set_is_named_and_the_copy_renewed():
    problem, pristine, guard, other = guarded()
    rows = torch.arange(6)
    guard.load(1, rows)
    guard._device[(1, "x_TD")].zero_()  # an out-of-bounds write into the harness's copy
    bad = guard.check("scribbler", "its timed samples of block 0")
    assert bad is not None and "x_TD (input set 1)" in bad.detail
    guard.load(1, rows)  # copied again from the host: the set as it was made
    assert torch.equal(problem.x_TD, other.x_TD)
    assert guard.check("next", "a turn") is None
