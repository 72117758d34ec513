"""The scatter kernels against reference.scatter_plan and layout.expert_ends (interpreter)."""

from __future__ import annotations

import pytest
import torch
from kernel_device import on_device

from moebench.core import layout, reference
from moebench.kernels.scatter import FUSIONS, scatter_scratch
from moebench.kernels.scatter import scatter as scatter_kernel

scatter = on_device(scatter_kernel)  # the GPU under make test-gpu, else the interpreter

POISON_INT = 0x5A5A5A5A  # index maps and scale words start as garbage that no valid value equals

# Launch variants of the stage; each must write the same outputs as the reference, bit for bit.
# The copy tiles are small so that D (96, 640) spans several column blocks and rows per step.
VARIANTS = [
    pytest.param(dict(fusion="none"), id="four-launches"),
    pytest.param(dict(fusion="maps"), id="maps-in-assign"),
    pytest.param(
        dict(fusion="maps", copy_block_t=2, copy_block_d=64, copy_warps=2), id="copy-2x64"
    ),
    pytest.param(dict(fusion="maps_copy", copy_block_t=2, copy_block_d=64), id="copy-in-assign"),
    # chunks of 32 slots: several (expert, chunk) programs share an expert's padding and the tail
    pytest.param(
        dict(fusion="maps_copy", chunk=32, copy_block_t=4, copy_block_d=64), id="chunk-32"
    ),
]
SMALL_TILES = ("copy-2x64", "chunk-32")  # too many interpreted programs for the 1,100-token case
assert {v.values[0]["fusion"] for v in VARIANTS} == set(FUSIONS)


def route(T: int, K: int, n_global: int, E: int, offset: int, mode: str, seed: int):
    """top-k ids [T, K] int32, distinct per token, from random scores shaped by ``mode``."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(T, n_global, generator=g)
    local = slice(offset, offset + E)
    if mode == "skip_one":  # local expert 1 is never chosen
        scores[:, offset + 1] = -1.0
    elif mode == "none_local":  # every slot goes to another rank
        scores[:, local] = -1.0
    elif mode == "one_expert":  # each token's only local slot is local expert 2
        scores[:, local] = -1.0
        scores[:, offset + 2] = 2.0
    return scores.topk(K, dim=1).indices.to(torch.int32)


# (T, K, n_global, E, offset, A, mode, tight)
CASES = [
    pytest.param(40, 4, 16, 8, 0, 16, "random", False, id="random"),
    pytest.param(24, 3, 12, 4, 0, 16, "skip_one", False, id="empty-expert"),
    pytest.param(20, 2, 12, 4, 4, 16, "none_local", False, id="all-experts-empty"),
    pytest.param(30, 3, 12, 4, 0, 32, "one_expert", False, id="one-expert-holds-all"),
    # K == E == n_global and T a multiple of A: every count is T, no padding, M = used rows.
    pytest.param(32, 3, 3, 3, 0, 16, "random", True, id="full-buffer"),
    pytest.param(3, 2, 8, 4, 0, 16, "random", False, id="T-smaller-than-a-block"),
    pytest.param(25, 3, 14, 7, 0, 16, "random", False, id="prime-E"),
    pytest.param(12, 6, 6, 6, 0, 16, "random", False, id="K-equals-E"),
    pytest.param(30, 4, 24, 8, 8, 16, "random", False, id="rank-1-offset"),
    # 1,100 tokens x top-4 = 4,400 slots: three chunks of 2,048 placed in parallel, so an expert's
    # rows continue across chunk boundaries.
    pytest.param(1100, 4, 16, 4, 4, 16, "random", False, id="several-chunks"),
]


def make_buffers(T: int, K: int, E: int, M: int, D: int, dtype: torch.dtype, chunk=None):
    """Outputs of the stage, poisoned: NaN rows (0x7F bytes for fp8), garbage index maps."""
    if dtype == torch.float8_e4m3fn:
        xs = torch.full((M, D), 0x7F, dtype=torch.uint8).view(dtype)
    else:
        xs = torch.full((M, D), float("nan"), dtype=dtype)
    full = lambda *shape: torch.full(shape, POISON_INT, dtype=torch.int32)
    return dict(
        xs_MD=xs,
        counts_E=full(E),
        ends_E=full(E),
        row_expert_M=full(M),
        row_src_M=full(M),
        slot_row_TK=full(T, K),
        scratch_EC=scatter_scratch(T, K, E, "cpu", chunk).fill_(-7),
    )


def check_plan(bufs: dict, ids: torch.Tensor, offset: int, E: int, A: int, M: int) -> dict:
    plan = reference.scatter_plan(ids, offset, E, A, M)
    for name in ("ends_E", "row_expert_M", "row_src_M", "slot_row_TK"):
        assert bufs[name].dtype == torch.int32
        assert torch.equal(bufs[name], plan[name]), name
    rel = ids.to(torch.int64).flatten() - offset
    counts = torch.bincount(rel[(rel >= 0) & (rel < E)], minlength=E)
    assert torch.equal(bufs["counts_E"], counts.to(torch.int32))
    assert torch.equal(bufs["ends_E"], layout.expert_ends(counts, A))
    live = layout.live_row_mask(bufs["ends_E"], A, M)
    assert torch.equal(bufs["row_expert_M"] < 0, ~live)
    return plan


def check_rows(
    xs: torch.Tensor, before: torch.Tensor, x: torch.Tensor, row_src: torch.Tensor, K: int
):
    """Live rows hold their token's bytes; every other row still holds its poison bytes."""
    live = row_src >= 0
    tok = row_src[live].to(torch.int64) // K
    raw = lambda t: t.view(torch.uint8)
    assert torch.equal(raw(xs)[live], raw(x)[tok])
    assert torch.equal(raw(xs)[~live], raw(before)[~live])


@pytest.mark.slow
@pytest.mark.parametrize(
    "T, K, n_global, E, offset, A, mode, tight, variant",
    [
        pytest.param(*case.values, *variant.values, id=f"{case.id}-{variant.id}")
        for case in CASES
        for variant in VARIANTS
        if not (case.id == "several-chunks" and variant.id in SMALL_TILES)
    ],
)
def test_scatter_bf16(T, K, n_global, E, offset, A, mode, tight, variant):
    D = 96
    ids = route(T, K, n_global, E, offset, mode, seed=T * 131 + K)
    rel = ids.to(torch.int64).flatten() - offset
    counts = torch.bincount(rel[(rel >= 0) & (rel < E)], minlength=E)
    M = layout.used_rows(counts, A) if tight else layout.capacity_rows(T, 1, K, E, A)
    if tight:
        assert int(counts.sum()) == M  # the edge this case claims: no padding, no tail
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    bufs = make_buffers(T, K, E, M, D, torch.bfloat16, variant.get("chunk"))
    before = bufs["xs_MD"].clone()
    scatter(x, None, ids, expert_offset=offset, alignment=A, xs_sf_MG4=None, **bufs, **variant)
    plan = check_plan(bufs, ids, offset, E, A, M)
    check_rows(bufs["xs_MD"], before, x, plan["row_src_M"], K)


@pytest.mark.parametrize(
    "T, K, n_global, E, offset, A, mode",
    [
        pytest.param(20, 4, 16, 8, 8, 16, "random", id="rank-1-offset"),
        pytest.param(5, 2, 8, 4, 0, 16, "skip_one", id="empty-expert-T-small"),
        pytest.param(12, 3, 12, 4, 0, 16, "none_local", id="all-experts-empty"),
    ],
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_scatter_fp8_with_scales(T, K, n_global, E, offset, A, mode, variant):
    D = 640  # 5 groups of 128 -> 2 packed words, the second half empty
    G = D // reference.GROUP
    ids = route(T, K, n_global, E, offset, mode, seed=T * 17 + E)
    M = layout.capacity_rows(T, 1, K, E, A)
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(3)) * 10
    q, exp = reference.quant_fp8_ue8m0(x)
    x_sf = reference.pack_ue8m0(exp)  # M-major view, strides (1, T_pad)
    assert x_sf.stride(0) == 1
    bufs = make_buffers(T, K, E, M, D, torch.float8_e4m3fn, variant.get("chunk"))
    xs_sf = reference.empty_packed_scales(M, G, "cpu")
    xs_sf.fill_(POISON_INT)
    before = bufs["xs_MD"].clone()
    scatter(q, x_sf, ids, expert_offset=offset, alignment=A, xs_sf_MG4=xs_sf, **bufs, **variant)
    plan = check_plan(bufs, ids, offset, E, A, M)
    check_rows(bufs["xs_MD"], before, q, plan["row_src_M"], K)
    live = plan["row_src_M"] >= 0
    tok = plan["row_src_M"][live].to(torch.int64) // K
    assert torch.equal(xs_sf[live], x_sf[tok])
    assert bool((xs_sf[~live] == POISON_INT).all())
    if bool(live.any()):  # reference.unpack_ue8m0 cannot reshape zero rows
        assert torch.equal(reference.unpack_ue8m0(xs_sf[live], G), exp[tok])


@pytest.mark.parametrize("variant", VARIANTS)
def test_scatter_overflow_writes_nothing_past_the_buffer(variant):
    # Routing that needs more rows than the buffer has: rows >= M stay untouched, the slots that
    # did not fit get row -1, the endpoints stay true (so ends[-1] > M shows the overflow).
    T, K, E, A, D = 16, 2, 2, 16, 32
    ids = torch.stack(
        [torch.randperm(2, generator=torch.Generator().manual_seed(t)) for t in range(T)]
    )
    ids = ids.to(torch.int32)  # every token routes to both experts: counts [16, 16], 32 rows
    M, extra = 24, 8
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    big = make_buffers(T, K, E, M + extra, D, torch.bfloat16, variant.get("chunk"))
    bufs = dict(big)
    bufs["xs_MD"] = big["xs_MD"][:M]
    bufs["row_expert_M"] = big["row_expert_M"][:M]
    bufs["row_src_M"] = big["row_src_M"][:M]
    scatter(x, None, ids, expert_offset=0, alignment=A, xs_sf_MG4=None, **bufs, **variant)
    assert torch.equal(bufs["ends_E"], torch.tensor([16, 32], dtype=torch.int32))
    assert bool(big["xs_MD"][M:].isnan().all())
    assert bool((big["row_expert_M"][M:] == POISON_INT).all())
    assert bool((big["row_src_M"][M:] == POISON_INT).all())
    slot_row = bufs["slot_row_TK"].flatten()
    assert int((slot_row >= 0).sum()) == M and int(slot_row.max()) == M - 1
    assert torch.equal(bufs["row_expert_M"][16:], torch.ones(8, dtype=torch.int32))
    src = bufs["row_src_M"].to(torch.int64)
    assert torch.equal(slot_row[src], torch.arange(M, dtype=torch.int32))
    assert torch.equal(bufs["xs_MD"].view(torch.int16), x.view(torch.int16)[src // K])


def test_scatter_rejects_bad_inputs():
    T, K, E, A, D = 4, 2, 2, 16, 32
    M = layout.capacity_rows(T, 1, K, E, A)
    ids = torch.tensor([[0, 1]] * T, dtype=torch.int32)
    x = torch.randn(T, D).to(torch.bfloat16)
    bufs = make_buffers(T, K, E, M, D, torch.bfloat16)
    with pytest.raises(ValueError, match="x_TD"):
        scatter(x.float(), None, ids, expert_offset=0, alignment=A, xs_sf_MG4=None, **bufs)
    with pytest.raises(ValueError, match="alignment"):
        scatter(x, None, ids, expert_offset=0, alignment=24, xs_sf_MG4=None, **bufs)
    with pytest.raises(ValueError, match="both"):
        sf = torch.zeros(T, 1, dtype=torch.int32)
        scatter(x, sf, ids, expert_offset=0, alignment=A, xs_sf_MG4=None, **bufs)
    bad = dict(bufs, row_src_M=bufs["row_src_M"][:-1])
    with pytest.raises(ValueError, match="row_src_M"):
        scatter(x, None, ids, expert_offset=0, alignment=A, xs_sf_MG4=None, **bad)
    for wrong, match in (
        (dict(fusion="all"), "fusion"),
        (dict(chunk=24), "chunk"),
        (dict(copy_block_t=3), "copy_block_t"),
        (dict(scratch_EC=bufs["scratch_EC"][:1]), "scratch_EC"),  # E * chunks = 2 counts
    ):
        args = dict(bufs, **wrong)
        with pytest.raises(ValueError, match=match):
            scatter(x, None, ids, expert_offset=0, alignment=A, xs_sf_MG4=None, **args)


def test_scatter_variants_write_the_same_bytes():
    # Every variant against the default on one routing, every output buffer compared whole
    # (poison in the rows nobody writes included), as tools/bench_kernels.py does on the GPU.
    T, K, n_global, E, offset, A, D = 100, 4, 32, 8, 8, 16, 256
    ids = route(T, K, n_global, E, offset, "random", seed=11)
    M = layout.capacity_rows(T, 1, K, E, A)
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(5)) * 10
    q, exp = reference.quant_fp8_ue8m0(x)
    x_sf = reference.pack_ue8m0(exp)
    outs = []
    for variant in [{}] + [v.values[0] for v in VARIANTS]:
        bufs = make_buffers(T, K, E, M, D, torch.float8_e4m3fn, variant.get("chunk"))
        xs_sf = reference.empty_packed_scales(M, D // reference.GROUP, "cpu").fill_(POISON_INT)
        scatter(q, x_sf, ids, expert_offset=offset, alignment=A, xs_sf_MG4=xs_sf, **bufs, **variant)
        bufs.pop("scratch_EC")
        bufs["xs_MD"] = bufs["xs_MD"].view(torch.uint8)
        outs.append(dict(bufs, xs_sf_MG4=xs_sf))
    for got in outs[1:]:
        for name, want in outs[0].items():
            assert torch.equal(got[name], want), name
