"""The launches the prefill arms choose from the case's routing: fp8_gemm_launch (the fp8 grouped
GEMMs) and masked_act_launch (the masked activation's schedule)."""

import math
from types import SimpleNamespace

import torch

from arms.prefill.pipeline import (
    PERSISTENT_ACT_MAX_LIVE,
    STREAMING_ROWS_PER_EXPERT,
    fp8_gemm_launch,
    masked_act_launch,
)


def problem(rows_per_expert: int, E: int = 4, offset: int = 8, foreign: int = 100):
    """A stand-in with E local experts [offset, offset + E), each routed rows_per_expert slots,
    and `foreign` slots routed to other ranks' experts."""
    local = torch.arange(offset, offset + E).repeat_interleave(rows_per_expert)
    ids = torch.cat([local, torch.full((foreign,), offset + E + 1)]).to(torch.int32)
    return SimpleNamespace(topk_ids_TK=ids.view(-1, 1), local_experts=E, expert_offset=offset)


def test_few_rows_an_expert_stream_the_weights_with_pointer_loads():
    launch = fp8_gemm_launch(problem(STREAMING_ROWS_PER_EXPERT - 1), "psum")
    assert launch == dict(loads="pointer", num_stages=4, programs_per_sm=2)


def test_a_row_block_an_expert_or_more_takes_tma():
    # Foreign slots do not count: only the rows this rank's experts receive.
    launch = fp8_gemm_launch(problem(STREAMING_ROWS_PER_EXPERT, foreign=10_000), "psum")
    assert launch == dict(loads="tma", num_stages=3, programs_per_sm=3)


def test_the_stock_mode_always_takes_tma():
    assert fp8_gemm_launch(problem(1), "all")["loads"] == "tma"
    assert fp8_gemm_launch(problem(500), "all")["loads"] == "tma"


def test_a_sparse_buffer_takes_the_persistent_activation():
    # 4 experts x 100 rows live, foreign slots not counted.
    capacity = math.ceil(400 / PERSISTENT_ACT_MAX_LIVE)
    launch = masked_act_launch(problem(100, foreign=10_000), capacity)
    assert launch["schedule"] == "persistent"
    assert masked_act_launch(problem(100), capacity - 1)["schedule"] == "grid"


def test_a_full_buffer_takes_the_grid_activation():
    launch = masked_act_launch(problem(384), 4 * 384)
    assert launch["schedule"] == "grid" and launch["block_rows"] == 16
