"""arms.pipeline.fp8_gemm_launch: the launch the fp8 grouped GEMMs get from the case's routing."""

from types import SimpleNamespace

import torch

from arms.prefill.pipeline import STREAMING_ROWS_PER_EXPERT, fp8_gemm_launch


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
