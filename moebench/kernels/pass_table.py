"""The grouped decode's passes as a table in device memory, for the Gluon tiles (`mx_gluon`,
`fp8_gluon`).

The Triton tile finds its pass from the routing in every program (`grouped_slots.program_work` and
`expert_slots`: a scan of the slots, then a match of the pass's ranks). The Gluon tile reads it from
this table instead, which one small Triton kernel fills from the same functions before fc1 and
which fc1 and fc2 of the step both read: row j is the j-th pass of BLOCK_M slots over the touched
local experts (`grouped_slots.touched_pass`'s order), int32 [TABLE_HEAD + BLOCK_M]:

- 0: the pass's local expert; 1: its live slots, min(BLOCK_M, count - m0), 0 past the last pass
  (the program then returns having read only this); 2: the expert's slots (count); 3: the pass's
  first slot among them (m0);
- TABLE_HEAD ..: the live slots' numbers s = t * K + k in increasing order, the last one repeated
  past them (`expert_slots`), so that every row a pass addresses is one of the expert's own.

The table has `grouped_gemv.grid_programs` rows (a bound from the shapes: any routing fits) and is
made when the stages are built, never in a step. Its kernel waits for the kernel before it (a
programmatic dependent launch) before it writes, so that a table is never rewritten while the
previous step's fc2 still reads it. The interpreter runs it: `tests/kernels/test_mx_gluon.py`
checks it against the routing on the CPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.grouped_slots import expert_slots, scan_width, touched_pass
from moebench.kernels.jit import HAS_PDL, pdl_launch_dependents, pdl_wait

TABLE_HEAD = 4


@triton.jit
def _pass_table(
    ids_ptr, table_ptr, TK, K, expert_offset, E, stride_it, stride_ik,
    BLOCK_E: tl.constexpr, SCAN: tl.constexpr, BLOCK_M: tl.constexpr, HEAD: tl.constexpr,
    GDC: tl.constexpr,
):  # fmt: skip
    # Written only once the previous kernel (the last reader of the previous step's table) is done.
    pdl_wait(GDC)
    pdl_launch_dependents(GDC)
    j = tl.program_id(0)
    e, count, m0 = touched_pass(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                BLOCK_E, SCAN, BLOCK_M)  # fmt: skip
    live = tl.maximum(tl.minimum(count - m0, BLOCK_M), 0)
    row = table_ptr + j * (HEAD + BLOCK_M)
    head = tl.arange(0, HEAD)
    values = tl.where(head == 0, e, tl.where(head == 1, live, tl.where(head == 2, count, m0)))
    values = tl.where(live > 0, values, 0)  # past the last pass: zeros
    tl.store(row + head, values)
    slots = tl.zeros([BLOCK_M], dtype=tl.int32)
    if live > 0:
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count,
                                m0, BLOCK_M, SCAN)  # fmt: skip
        slots = (t64 * K + k64).to(tl.int32)
    tl.store(row + HEAD + tl.arange(0, BLOCK_M), slots)


def new_table(programs: int, block_m: int, device) -> torch.Tensor:
    """An empty table of ``programs`` passes of ``block_m`` slots (module docstring)."""
    return torch.zeros(programs, TABLE_HEAD + block_m, dtype=torch.int32, device=device)


def pass_table(
    topk_ids_TK: torch.Tensor,
    table: torch.Tensor,
    *,
    expert_offset: int,
    experts: int,
    block_m: int,
    pdl: bool = False,
) -> None:
    """Fill ``table`` (`new_table`'s, one row a pass) with the passes of ``topk_ids_TK``'s slots
    over the local experts [expert_offset, expert_offset + experts)."""
    T, K = topk_ids_TK.shape
    if tuple(table.shape[1:]) != (TABLE_HEAD + block_m,) or table.dtype != torch.int32:
        raise ValueError(f"pass_table: the table must be int32 [P, {TABLE_HEAD + block_m}], got "
                         f"{table.dtype} {tuple(table.shape)}")  # fmt: skip
    block_e = triton.next_power_of_2(experts)
    gdc = pdl and HAS_PDL and table.is_cuda
    _pass_table[(table.shape[0],)](
        topk_ids_TK, table, T * K, K, expert_offset, experts, *topk_ids_TK.stride(),
        BLOCK_E=block_e, SCAN=scan_width(T * K, block_e, block_m), BLOCK_M=block_m,
        HEAD=TABLE_HEAD, GDC=gdc, **({"launch_pdl": True} if gdc else {}),
    )  # fmt: skip
