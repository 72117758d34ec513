"""The grouped decode GEMV under the interpreter: both paths (CUDA-core GEMV, tensor-core tile),
both weight formats, against `moebench.core.reference` per slot; rows of non-local slots keep their
poison; bitwise equal to the sparse GEMV, the dense GEMM and torch's rounding where every fp32
sum is exact; other ranks' experts never read.

Inputs and references are built on the CPU; the kernels run on the test device (the GPU when
TRITON_INTERPRET is not 1), through `on_device`."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from decode_inputs import FORMATS, exact_weights, quantised, routing, rows_ref
from kernel_device import DEVICE, on_device

from moebench.kernels.batched_gemm import batched_gemm
from moebench.kernels.fp8_placed import place_e4m3
from moebench.kernels.grouped_gemv import grouped_gemv, scale_words, word_aligned_scales
from moebench.kernels.grouped_launch import Launch
from moebench.kernels.mx_dot_order import dot_order_mxfp4
from moebench.kernels.mx_rotated import biased_scales, rotate_mxfp4
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.kernels.tile_packed import pack_tiles

grouped, sparse, dense = on_device(grouped_gemv), on_device(sparse_gemv), on_device(batched_gemm)

# Small launches of both paths for the interpreter: the GEMV with two slots a pass and 16 rows a
# program (the GPU's FP8 default is 1 slot and 2 rows; a row's sum does not depend on the block),
# the tile at its smallest (16 slots, 16 rows). K steps of 32 values (GEMV) or 64 (tile) so that
# R = 64 takes two or one.
LAUNCHES = {
    "gemv": Launch(path="gemv", block_m=2, block_n=16, block_k=32, num_warps=1),
    "gemv-slots": Launch(
        path="gemv", block_m=1, block_n=16, block_k=32, num_warps=1, slot_grid=True
    ),  # fmt: skip
    "dot": Launch(path="dot", block_m=16, block_n=16, block_k=64, num_warps=4),
    "dot-tma": Launch(path="dot", block_m=16, block_n=16, block_k=64, num_warps=4, tma=True),
    "dot-passes": Launch(
        path="dot", block_m=16, block_n=16, block_k=64, num_warps=4, pass_grid=True
    ),
    "dot-tma-passes": Launch(
        path="dot", block_m=16, block_n=16, block_k=64, num_warps=4, tma=True, pass_grid=True
    ),
}


def launch_of(path: str, fmt: str) -> Launch:
    """``LAUNCHES[path]``; the TMA launches are the FP8 tile's only (skipped for MXFP4)."""
    if path.startswith("dot-tma") and fmt != "fp8":
        pytest.skip("TMA loads and one pass a program are the FP8 tile's")
    return LAUNCHES[path]


def poisoned(*shape: int) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=torch.bfloat16)


# (T tokens, K slots, E local experts, expert offset, ids relative to the offset or None for
# `routing`, activation); each names its edge.
SHAPES = [
    pytest.param(1, 2, 3, 0, None, "swiglu_oai", id="one-token"),
    # 17 slots on local expert 1: more than a pass of either path (2 and 16 slots)
    pytest.param(17, 2, 2, 4, [[1, -3]] * 17, "silu", id="tokens-more-than-a-block"),
    # a token's three slots all on one expert (duplicate ids): 9 slots, one expert
    pytest.param(3, 3, 4, 2, [[2, 2, 2]] * 3, "swiglu_oai", id="every-slot-on-one-expert"),
    # experts 0, 2 and 3 receive nothing
    pytest.param(4, 2, 4, 8, [[1, -1], [5, 1], [1, -8], [9, 1]], "silu", id="empty-local-experts"),
    pytest.param(
        3, 2, 3, 40, [[-1, -2], [-5, 3], [7, -40]], "swiglu_oai", id="all-slots-non-local"
    ),
    pytest.param(2, 3, 3, 0, [[0, 1, 2], [2, 0, 1]], "silu", id="k-equals-local-experts"),
    pytest.param(5, 3, 7, 7, None, "swiglu_oai", id="prime-experts-half-remote"),
]


@pytest.mark.parametrize("path", list(LAUNCHES))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("T", "K", "E", "offset", "ids", "act"), SHAPES)
def test_grouped_gemv_fc1_and_fc2(path, fmt, T, K, E, offset, ids, act):
    """fc1 (every slot reads its token, GLU fused) and fc2 (every slot its own activation row)
    against the reference, slot by slot; rows of non-local slots keep the NaN poison."""
    torch.manual_seed(T * 10 + K + E)
    D, F = 64, 32
    if ids is None:
        ids = routing(T, K, E, offset, T)
    else:
        ids = torch.tensor(ids, dtype=torch.int32) + offset
    w13, s13, w13d = quantised(fmt, torch.randn(E, 2 * F, D) * D**-0.5)
    w2, s2, w2d = quantised(fmt, torch.randn(E, D, F) * F**-0.5)
    b13, b2 = (torch.randn(E, 2 * F) * 0.5).bfloat16(), (torch.randn(E, D) * 0.5).bfloat16()
    x = torch.randn(T, D).bfloat16()
    a, o = poisoned(T, K, F), poisoned(T, K, D)
    launch = launch_of(path, fmt)
    grouped(x, ids, w13, s13, b13, a, expert_offset=offset, launch=launch, glu=act)
    grouped(a, ids, w2, s2, b2, o, expert_offset=offset, launch=launch)
    local = (ids >= offset) & (ids < offset + E)
    assert torch.isnan(a[~local].float()).all() and torch.isnan(o[~local].float()).all()
    for t, k in local.nonzero().tolist():
        e = int(ids[t, k]) - offset
        want_a = rows_ref(x[t : t + 1], w13d[e], b13[e], act)[0]
        torch.testing.assert_close(a[t, k].float(), want_a, rtol=2**-7, atol=2**-7)
        want_o = rows_ref(a[t : t + 1, k], w2d[e], b2[e], "none")[0]
        torch.testing.assert_close(o[t, k].float(), want_o, rtol=2**-7, atol=2**-7)


@pytest.mark.parametrize("path", list(LAUNCHES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_exact_sums_are_bitwise_the_other_kernels_and_torch(path, fmt):
    """fp32 sums that are exact whatever the order, plus a bias that needs rounding: the bf16
    outputs equal torch's round-to-nearest-even of the exact value bit for bit, and with the GLU
    fused they equal the sparse GEMV's and the dense GEMM's (the same epilogue) bit for bit; a
    K step shorter than R (R = 96: three 32-value GEMV steps, a masked second 64-value tile)."""
    g = torch.Generator().manual_seed(5)
    T, K, E, N, R = 3, 2, 2, 32, 96
    w, s, wd = exact_weights(fmt, E, N, R, g)
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 1], [0, 5]], dtype=torch.int32)  # a duplicate, a remote slot
    exact = torch.einsum("tr,enr->etn", x.float(), wd) + b.float()[:, None, :]
    want = exact.bfloat16()
    assert (want.float() != exact).float().mean() > 0.3  # the test really exercises the rounding
    out = poisoned(T, K, N)
    grouped(x, ids, w, s, b, out, expert_offset=0, launch=launch_of(path, fmt))
    for t, k in ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0)):
        assert torch.equal(out[t, k].view(torch.int16), want[ids[t, k], t].view(torch.int16))
    assert torch.isnan(out[2, 1].float()).all()
    for glu in ("silu", "swiglu_oai"):
        got, by_sparse = poisoned(T, K, N // 2), poisoned(T, K, N // 2)
        by_dense = torch.empty(E, T, N // 2, dtype=torch.bfloat16)
        grouped(x, ids, w, s, b, got, expert_offset=0, launch=launch_of(path, fmt), glu=glu)
        sparse(x, ids, w, s, b, by_sparse, expert_offset=0, glu=glu, block_k=32)
        dense(x, w, s, b, by_dense, glu=glu)
        assert torch.equal(got.view(torch.int16), by_sparse.view(torch.int16))
        for t, k in ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0)):
            assert torch.equal(
                got[t, k].view(torch.int16), by_dense[ids[t, k], t].view(torch.int16)
            )


@pytest.mark.parametrize("path", list(LAUNCHES))
def test_every_e4m3_byte_decodes_to_its_value(path):
    """All 256 e4m3 bytes (subnormals, both zeros, the largest) as weights read through one-hot
    slots: each output is the byte's value exactly, so both paths' conversions are exact. The
    tile and the dense GEMM decode by bit placement (`jit.e4m3_to_bf16`), under which a NaN byte
    reads +-480 (torch: NaN), the same on the GPU and the interpreter; the GEMV's conversion keeps
    NaN, which then spreads to its whole row (times the slots' zeros), so it sees the two NaN
    bytes as zeros."""
    T, N, R = 16, 16, 64
    codes = torch.arange(256, dtype=torch.int32)
    if LAUNCHES[path].path == "gemv":  # either grid
        codes[[0x7F, 0xFF]] = 0
    w = codes.to(torch.uint8).view(torch.float8_e4m3fn)
    w = w.reshape(1, N, T).repeat_interleave(R // T, dim=2)  # byte 16 n + t at (n, 4 t .. 4 t + 3)
    x = torch.zeros(T, R, dtype=torch.bfloat16)
    x[torch.arange(T), 4 * torch.arange(T)] = 1.0
    ids = torch.zeros(T, 1, dtype=torch.int32)
    out = poisoned(T, 1, N)
    scale, bias = torch.ones(1), torch.zeros(1, N, dtype=torch.bfloat16)
    grouped(x, ids, w, scale, bias, out, expert_offset=0, launch=LAUNCHES[path])
    want = w[0, :, ::4].t().float()  # [T, N]: byte 16 n + t
    got = out[:, 0].float()
    nan = want.isnan()
    assert torch.equal(got[~nan], want[~nan])
    if LAUNCHES[path].path != "gemv":
        assert nan.sum() == 2 and sorted(got[nan].tolist()) == [-480.0, 480.0]
        # The dense GEMM converts with the same helper.
        by_dense = torch.empty(1, T, N, dtype=torch.bfloat16)
        dense(x, w, scale, bias, by_dense, block_n=16)
        assert torch.equal(by_dense[0].view(torch.int16), out[:, 0].view(torch.int16))


@pytest.mark.parametrize("path", list(LAUNCHES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_other_ranks_experts_are_never_read(path, fmt):
    """The local experts sit between NaN experts of other ranks, and ids point far outside (below
    zero, past every expert): a program that served a non-local id would read NaN. The output
    is finite and bitwise the output of a clean, contiguous copy."""
    torch.manual_seed(7)
    E, N, R, T, K = 2, 32, 64, 3, 3
    w, s, _ = quantised(fmt, torch.randn(E, N, R) * 0.1)
    w_all = torch.zeros(3 * E, *w.shape[1:], dtype=w.dtype)
    w_all.view(torch.uint8).fill_(0x7F if fmt == "fp8" else 0xFF)  # NaN bytes
    w_all[E : 2 * E] = w
    s_all = torch.full((3 * E, *s.shape[1:]), float("nan") if fmt == "fp8" else 255)
    s_all = s_all.to(s.dtype)
    s_all[E : 2 * E] = s
    b = (torch.randn(E, N) * 0.5).bfloat16()
    b_all = torch.full((3 * E, N), float("nan"), dtype=torch.bfloat16)
    b_all[E : 2 * E] = b
    offset = 100
    ids = torch.tensor([[100, 98, 101], [-5, 101, 1 << 20], [99, 102, 100]], dtype=torch.int32)
    x = torch.randn(T, R).bfloat16()
    got, clean = (
        torch.zeros(T, K, N, dtype=torch.bfloat16),
        torch.zeros(T, K, N, dtype=torch.bfloat16),
    )
    # The poisoned experts go to the device whole, so that the slices keep their NaN neighbours.
    w_all, s_all, b_all = w_all.to(DEVICE), s_all.to(DEVICE), b_all.to(DEVICE)
    launch = launch_of(path, fmt)
    grouped(x, ids, w_all[E : 2 * E], s_all[E : 2 * E], b_all[E : 2 * E], got,
            expert_offset=offset, launch=launch)  # fmt: skip
    grouped(x, ids, w.clone(), s.clone(), b.clone(), clean, expert_offset=offset, launch=launch)
    assert torch.isfinite(got.float()).all()
    assert torch.equal(got.view(torch.int16), clean.view(torch.int16))


def test_one_launch_serves_every_routing():
    """The launch is fixed by the shapes; routings that touch one, some or all local experts, with
    one slot or more than a pass an expert, all come out right through the same launch object
    (nothing about the routing is decided on the host)."""
    torch.manual_seed(3)
    T, K, E, D, N = 9, 2, 4, 64, 32
    w, s, wd = quantised("fp8", torch.randn(E, N, D) * D**-0.5)
    b = (torch.randn(E, N) * 0.5).bfloat16()
    x = torch.randn(T, D).bfloat16()
    launch = Launch(path="gemv", block_m=2, block_n=32, block_k=64, num_warps=1)
    routings = [
        torch.full((T, K), 2, dtype=torch.int32),  # one expert, 18 slots: nine passes
        torch.arange(T * K, dtype=torch.int32).reshape(T, K) % E,  # every expert, 4-5 slots
        torch.tensor([[3, 9]] * T, dtype=torch.int32),  # one expert and a remote slot a token
        torch.full((T, K), 7, dtype=torch.int32),  # nothing local
    ]
    for ids in routings:
        out = poisoned(T, K, N)
        grouped(x, ids, w, s, b, out, expert_offset=0, launch=launch)
        local = ids < E
        assert torch.isnan(out[~local].float()).all()
        for t, k in local.nonzero().tolist():
            want = rows_ref(x[t : t + 1], wd[ids[t, k]], b[ids[t, k]], "none")[0]
            torch.testing.assert_close(out[t, k].float(), want, rtol=2**-7, atol=2**-7)


@pytest.mark.parametrize("path", ["gemv", "dot"])
def test_programmatic_dependent_launch_writes_the_same_bits(path):
    """On the GPU a launch with ``pdl`` starts while the previous kernel finishes and waits for it
    before reading x; it must write the plain launch's bits (the interpreter runs both plainly)."""
    torch.manual_seed(4)
    T, K, E, D, N = 4, 2, 3, 64, 32
    w, s, _ = quantised("mxfp4", torch.randn(E, N, D) * D**-0.5)
    b = (torch.randn(E, N) * 0.5).bfloat16()
    x = torch.randn(T, D).bfloat16()
    ids = torch.tensor([[0, 2], [2, 5], [1, 0], [0, 1]], dtype=torch.int32)
    outs = []
    for pdl in (False, True):
        outs.append(poisoned(T, K, N // 2))
        launch = dataclasses.replace(LAUNCHES[path], pdl=pdl)
        grouped(x, ids, w, s, b, outs[-1], expert_offset=0, launch=launch, glu="swiglu_oai")
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
    assert torch.isnan(outs[1][1, 1].float()).all() and torch.isfinite(outs[1][0].float()).all()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", list(LAUNCHES))
def test_the_bias_loaded_before_the_loop_writes_the_same_bits(path, fmt):
    """``early_bias`` only moves the bias load before the K loop: the same bits as after it, for
    every launch, with a GLU and without, non-local slots left poisoned."""
    torch.manual_seed(5)
    T, K, E, D, N = 5, 2, 3, 64, 32
    w, s, _ = quantised(fmt, torch.randn(E, N, D) * D**-0.5)
    b = (torch.randn(E, N) * 0.5).bfloat16()
    x = torch.randn(T, D).bfloat16()
    ids = torch.tensor([[0, 2], [2, 5], [1, 0], [0, 1], [2, 1]], dtype=torch.int32)
    for glu, n_out in (("swiglu_oai", N // 2), ("none", N)):
        outs = []
        for early in (False, True):
            outs.append(poisoned(T, K, n_out))
            launch = dataclasses.replace(LAUNCHES[path], early_bias=early,
                                         tma=LAUNCHES[path].tma and fmt == "fp8")  # fmt: skip
            grouped(x, ids, w, s, b, outs[-1], expert_offset=0, launch=launch, glu=glu)
        assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
        assert torch.isnan(outs[1][1, 1].float()).all() and torch.isfinite(outs[1][0].float()).all()


def test_launcher_names_bad_arguments():
    w, s, _ = quantised("fp8", torch.randn(2, 32, 64))
    b = torch.zeros(2, 32, dtype=torch.bfloat16)
    ids = torch.zeros(1, 1, dtype=torch.int32)
    x = torch.zeros(1, 64, dtype=torch.bfloat16)
    out = torch.empty(1, 1, 32, dtype=torch.bfloat16)
    gemv = LAUNCHES["gemv"]
    with pytest.raises(ValueError, match="out must be bf16"):
        grouped_gemv(x, ids, w, s, b, out[..., :16], expert_offset=0, launch=gemv)
    with pytest.raises(ValueError, match="block_n must be a power of two >= 2 dividing N"):
        grouped_gemv(x, ids, w, s, b, out, expert_offset=0, launch=Launch(
            path="gemv", block_m=1, block_n=64, block_k=64, num_warps=1))  # fmt: skip
    with pytest.raises(ValueError, match="the dot path needs block_m, block_n >= 16"):
        grouped_gemv(x, ids, w, s, b, out, expert_offset=0, launch=Launch(
            path="dot", block_m=8, block_n=16, block_k=64, num_warps=4))  # fmt: skip
    with pytest.raises(ValueError, match="num_stages is for the dot path"):
        grouped_gemv(x, ids, w, s, b, out, expert_offset=0, launch=Launch(
            path="gemv", block_m=1, block_n=16, block_k=64, num_warps=1, num_stages=2))  # fmt: skip
    with pytest.raises(ValueError, match="path must be one of"):
        grouped_gemv(x, ids, w, s, b, out, expert_offset=0, launch=Launch(
            path="split", block_m=1, block_n=16, block_k=64, num_warps=1))  # fmt: skip
    with pytest.raises(ValueError, match="w_scale float32"):
        grouped_gemv(x, ids, w, s[:1], b, out, expert_offset=0, launch=gemv)
    with pytest.raises(ValueError, match="topk_ids_TK must be int32"):
        grouped_gemv(x, ids.long(), w, s, b, out, expert_offset=0, launch=gemv)


@pytest.mark.parametrize("block_n", [32, 64, 128])
@pytest.mark.parametrize(("fmt", "tma"), [("fp8", False), ("fp8", True), ("mxfp4", False)])
def test_the_tiles_row_order_comes_back_to_the_rows(fmt, tma, block_n):
    """The MXFP4 tile reads its bytes and scale bytes in the operand's row order
    (`tile_order.loaded_rows`) and puts them back before the decode, the FP8 tile its rows
    through pointers or one TMA box a step: with row blocks of 2-8 warps' 16 rows and a last step
    past R (R = 160 on 128-value steps), every output row is its own row's exact value, bitwise
    torch's rounding (sums exact in any order)."""
    g = torch.Generator().manual_seed(11)
    T, K, E, N, R = 3, 2, 2, 256, 160
    w, s, wd = exact_weights(fmt, E, N, R, g)
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 0], [1, 1]], dtype=torch.int32)
    want = (torch.einsum("tr,enr->etn", x.float(), wd) + b.float()[:, None, :]).bfloat16()
    out = poisoned(T, K, N)
    launch = Launch(path="dot", block_m=16, block_n=block_n, block_k=128, num_warps=4, tma=tma)
    grouped(x, ids, w, s, b, out, expert_offset=0, launch=launch)
    for t in range(T):
        for k in range(K):
            assert torch.equal(out[t, k].view(torch.int16), want[ids[t, k], t].view(torch.int16))


@pytest.mark.parametrize("pass_grid", [False, True])
@pytest.mark.parametrize("block_k", [128, 256])
def test_mxfp4_scales_read_as_words_give_the_bytes_bits(pass_grid, block_k):
    """Scale rows on 4-byte boundaries (`word_aligned_scales`) let the MXFP4 tile load a step's
    scales as 32-bit words: over whole steps and a masked one (R = 672: five or two whole steps
    and a part), each group's own scale (random per group) meets its values, so the output is
    bitwise the byte loads' on the unpadded scales and each row's exact value (sums exact in any
    order), bitwise torch's rounding."""
    g = torch.Generator().manual_seed(14)
    T, K, E, N, R = 3, 2, 2, 16, 672
    w, s, wd = exact_weights("mxfp4", E, N, R, g)
    assert len(s.unique()) > 3 and not scale_words(s)  # 21 scale bytes a row: odd offsets
    words = word_aligned_scales(s)
    assert scale_words(words) and torch.equal(words, s) and words.stride(1) == 32
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 0], [1, 5]], dtype=torch.int32)
    want = (torch.einsum("tr,enr->etn", x.float(), wd) + b.float()[:, None, :]).bfloat16()
    launch = Launch(path="dot", block_m=16, block_n=16, block_k=block_k, num_warps=4,
                    pass_grid=pass_grid)  # fmt: skip
    by_bytes, by_words = poisoned(T, K, N), poisoned(T, K, N)
    grouped(x, ids, w, s, b, by_bytes, expert_offset=0, launch=launch)
    grouped(x, ids, w, words, b, by_words, expert_offset=0, launch=launch)
    assert torch.equal(by_words.view(torch.int16), by_bytes.view(torch.int16))
    for t, k in ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0)):
        assert torch.equal(by_words[t, k].view(torch.int16), want[ids[t, k], t].view(torch.int16))
    assert torch.isnan(by_words[2, 1].float()).all()


def test_word_aligned_scales_copy_only_what_needs_it():
    """Scales whose rows already start on 16-byte boundaries are returned as they are; others
    come back as a padded copy holding the same values, the pad zero."""
    aligned = torch.randint(0, 255, (2, 3, 32), dtype=torch.uint8)
    assert word_aligned_scales(aligned) is aligned and scale_words(aligned)
    odd = torch.randint(0, 255, (2, 3, 90), dtype=torch.uint8)
    padded = word_aligned_scales(odd)
    assert padded.shape == odd.shape and padded.stride() == (288, 96, 1)
    assert torch.equal(padded, odd) and padded.data_ptr() != odd.data_ptr()
    storage = torch.as_strided(padded, (2, 3, 96), (288, 96, 1))
    assert not storage[:, :, 90:].any()
    assert not scale_words(odd[:, :, 1:]) and not scale_words(odd.to(torch.int32))


def test_weights_whose_rows_are_not_packed_take_the_pointer_loads():
    """TMA reads the FP8 weights as packed [E * N, R] rows; weights with a longer row stride (a
    slice of wider rows) cannot be described so and take the pointer loads, with the same bits
    as a packed copy through TMA."""
    g = torch.Generator().manual_seed(12)
    T, K, E, N, R = 3, 2, 2, 32, 96
    w, s, _ = exact_weights("fp8", E, N, R, g)
    wide = torch.zeros(E, N, R + 32, dtype=w.dtype)
    wide[:, :, :R] = w
    b = (torch.randn(E, N, generator=g) * 0.5).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 1], [0, 5]], dtype=torch.int32)
    launch = dataclasses.replace(LAUNCHES["dot-tma"], max_registers=128)
    packed, strided = poisoned(T, K, N), poisoned(T, K, N)
    grouped(x, ids, w, s, b, packed, expert_offset=0, launch=launch)
    grouped(x, ids, wide.to(DEVICE)[:, :, :R], s, b, strided, expert_offset=0, launch=launch)
    assert torch.equal(packed.view(torch.int16), strided.view(torch.int16))
    assert torch.isfinite(packed[:2].float()).all()


@pytest.mark.parametrize(("fmt", "tma"), [("fp8", False), ("fp8", True), ("mxfp4", False)])
def test_one_pass_a_program_writes_the_bits_of_one_expert_a_program(fmt, tma):
    """``pass_grid``: program j runs the j-th pass of 16 slots over the touched experts instead of
    one expert's passes in a loop. Routings with one slot, exactly a pass, a pass and one (one
    expert, then every expert), and three passes an expert, experts touched and not, duplicate
    ids and remote slots: the same bits as the loop, every routed row written, the rest
    untouched; more programs than passes return having written nothing."""
    g = torch.Generator().manual_seed(13)
    K, E, D, N = 4, 3, 64, 32
    w, s, _ = quantised(fmt, torch.randn(E, N, D, generator=g) * D**-0.5)
    b = (torch.randn(E, N, generator=g) * 0.5).bfloat16()
    loop = Launch(path="dot", block_m=16, block_n=16, block_k=64, num_warps=4, tma=tma)
    routings = [
        torch.tensor([[1, 7, 8, 9]], dtype=torch.int32),  # one slot of one expert
        torch.tensor([[0, 2, 0, 5]] * 8, dtype=torch.int32),  # 16 slots of expert 0, 8 of 2
        torch.tensor([[2, 2, 2, 2]] * 4 + [[2, 6, 7, 8]], dtype=torch.int32),  # 17: two passes
        torch.randint(0, E, (12, K), generator=g).int(),  # about 16 an expert
        torch.tensor([[1, 1, 1, 1]] * 12, dtype=torch.int32),  # 48 slots: three passes
        # 17 slots on each local expert: six passes, the grid's bound min(3, 68) + 68 // 16 = 7
        torch.tensor([[0, 1, 2, 9]] * 17, dtype=torch.int32),
        torch.full((3, K), 9, dtype=torch.int32),  # nothing local
    ]
    for ids in routings:
        x = torch.randn(ids.shape[0], D, generator=g).bfloat16()
        outs = []
        for launch in (loop, dataclasses.replace(loop, pass_grid=True)):
            outs.append(poisoned(ids.shape[0], K, N // 2))
            grouped(x, ids, w, s, b, outs[-1], expert_offset=0, launch=launch, glu="swiglu_oai")
        assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), ids
        local = ids < E
        assert torch.isfinite(outs[1][local].float()).all()
        assert torch.isnan(outs[1][~local].float()).all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_slot_grid_writes_the_bits_of_the_expert_grid(fmt):
    """``slot_grid``: program j serves slot j's expert where j is its first slot, instead of the
    j-th touched expert. Routings with one token, a remote slot first, a token's duplicate ids
    (an expert's second pass scans for its slot), every slot on one expert, nothing local and
    many tokens: the same bits as the expert grid, every routed row written, the rest untouched,
    with and without the dependent launch and the early bias."""
    g = torch.Generator().manual_seed(17)
    K, E, D, N = 4, 3, 64, 32
    w, s, _ = quantised(fmt, torch.randn(E, N, D, generator=g) * D**-0.5)
    b = (torch.randn(E, N, generator=g) * 0.5).bfloat16()
    experts = Launch(path="gemv", block_m=1, block_n=16, block_k=32, num_warps=1)
    routings = [
        torch.tensor([[1, 7, 0, 2]], dtype=torch.int32),  # one token, a remote slot
        torch.tensor([[9, 2, 2, 0]], dtype=torch.int32),  # remote first, expert 2 twice
        torch.tensor([[1, 1, 1, 1]] * 3, dtype=torch.int32),  # 12 slots on one expert
        torch.full((2, K), 9, dtype=torch.int32),  # nothing local
        torch.randint(0, E + 2, (6, K), generator=g).int(),  # some remote, passes of several
    ]
    for ids in routings:
        x = torch.randn(ids.shape[0], D, generator=g).bfloat16()
        for pdl, early in ((False, False), (True, True)):
            outs = []
            for slots in (False, True):
                launch = dataclasses.replace(experts, slot_grid=slots, pdl=pdl, early_bias=early)
                outs.append(poisoned(ids.shape[0], K, N // 2))
                grouped(x, ids, w, s, b, outs[-1], expert_offset=0, launch=launch,
                        glu="swiglu_oai")  # fmt: skip
            assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), ids
            local = ids < E
            assert torch.isfinite(outs[1][local].float()).all()
            assert torch.isnan(outs[1][~local].float()).all()


def test_launch_options_are_checked():
    """TMA is the FP8 tile's and one pass a program the tile's; a register cap outside what a
    thread may hold is refused."""
    w, s, _ = quantised("mxfp4", torch.randn(1, 16, 64))
    x, ids = torch.zeros(1, 64).bfloat16(), torch.zeros(1, 1, dtype=torch.int32)
    out, b = poisoned(1, 1, 16), torch.zeros(1, 16).bfloat16()
    with pytest.raises(ValueError, match="tma is for the FP8 dot path"):
        grouped(x, ids, w, s, b, out, expert_offset=0, launch=LAUNCHES["dot-tma"])
    with pytest.raises(ValueError, match="pass_grid is for the dot path"):
        grouped(x, ids, w, s, b, out, expert_offset=0,
                launch=dataclasses.replace(LAUNCHES["gemv"], pass_grid=True))  # fmt: skip
    for launch in (dataclasses.replace(LAUNCHES["dot"], slot_grid=True),
                   dataclasses.replace(LAUNCHES["gemv"], slot_grid=True)):  # fmt: skip
        with pytest.raises(ValueError, match="slot_grid is for the GEMV with one slot a pass"):
            grouped(x, ids, w, s, b, out, expert_offset=0, launch=launch)
    with pytest.raises(ValueError, match="max_registers"):
        grouped(x, ids, w, s, b, out, expert_offset=0,
                launch=dataclasses.replace(LAUNCHES["dot"], max_registers=300))  # fmt: skip
    w8, s8, _ = quantised("fp8", torch.randn(1, 16, 64))
    with pytest.raises(ValueError, match="mx_rotated is for MXFP4 weights"):
        grouped(x, ids, w8, s8, b, out, expert_offset=0,
                launch=dataclasses.replace(LAUNCHES["dot"], mx_rotated=True))  # fmt: skip


@pytest.mark.parametrize("pass_grid", [False, True])
def test_mxfp4_tile_with_scales_folded_gives_the_same_bits(pass_grid):
    """Given the scales' largest byte (``max_scale_byte``), up to FOLD_SCALES_UP_TO the MXFP4
    tile decodes with one multiply a pair of values (`grouped_dot`, FOLD_SCALES): scale bytes 0,
    1 (subnormal values), small and 128 (the bound) in one tensor give the bits of the
    two-multiply decode. Past the bound (a byte of 130) the launcher keeps the two multiplies, and
    the bits are again the same. Under the interpreter both run its fp32 decode (the PTX itself is
    tests/kernels/test_mx_decode_ptx.py's); compiled, this checks the folded kernel."""
    g = torch.Generator().manual_seed(15)
    T, K, E, N, R = 3, 2, 2, 16, 288
    w, _, _ = exact_weights("mxfp4", E, N, R, g)
    s = torch.randint(100, 129, (E, N, R // 32), generator=g, dtype=torch.uint8)
    s[0, :4, 0], s[1, 3, 2], s[1, 5, :] = torch.tensor([0, 1, 2, 128], dtype=torch.uint8), 0, 1
    s = word_aligned_scales(s)
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 0], [1, 5]], dtype=torch.int32)
    launch = Launch(path="dot", block_m=16, block_n=16, block_k=128, num_warps=4,
                    pass_grid=pass_grid)  # fmt: skip
    for scales in (s, _with_a_byte_past_the_bound(s)):
        assert int(scales.max()) == (128 if scales is s else 130)
        two, one = poisoned(T, K, N), poisoned(T, K, N)
        grouped(x, ids, w, scales, b, two, expert_offset=0, launch=launch)
        grouped(x, ids, w, scales, b, one, expert_offset=0, launch=launch,
                max_scale_byte=int(scales.max()))  # fmt: skip
        assert torch.equal(one.view(torch.int16), two.view(torch.int16))
        assert torch.isfinite(one[:2].float()).all() and torch.isnan(one[2, 1].float()).all()


@pytest.mark.parametrize(("path", "fold"), [
    ("dot", False), ("dot", True), ("dot-passes", True), ("gemv", False),
])  # fmt: skip
def test_mxfp4_reads_rotated_weights_as_the_natural_ones(path, fold):
    """Weights in `mx_rotated`'s layout (``Launch.mx_rotated``) give the natural layout's bits on
    both paths, the tile's scales folded or not, the last K step masked (R = 288), subnormal and
    zero scales; natural weights read as rotated do not (the layout is what the decode reads).
    Under the interpreter the decodes run the PTX's integer steps (`mx_rotated`); the PTX itself
    is tests/kernels/test_mx_decode_ptx.py's, and compiled this checks the kernels."""
    g = torch.Generator().manual_seed(17)
    T, K, E, N, R = 3, 2, 2, 16, 288
    w, _, _ = exact_weights("mxfp4", E, N, R, g)
    s = torch.randint(100, 129, (E, N, R // 32), generator=g, dtype=torch.uint8)
    s[0, :3, 0], s[1, 3, 2] = torch.tensor([0, 1, 2], dtype=torch.uint8), 0
    s = word_aligned_scales(s)
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 0], [1, 5]], dtype=torch.int32)
    launch = LAUNCHES[path]
    if launch.path != "gemv":
        launch = dataclasses.replace(launch, block_k=128)
    rotated = dataclasses.replace(launch, mx_rotated=True)
    largest = int(s.max()) if fold else None
    natural, got, wrong = poisoned(T, K, N), poisoned(T, K, N), poisoned(T, K, N)
    grouped(x, ids, w, s, b, natural, expert_offset=0, launch=launch, max_scale_byte=largest)
    grouped(x, ids, rotate_mxfp4(w), s, b, got, expert_offset=0, launch=rotated,
            max_scale_byte=largest)  # fmt: skip
    assert torch.equal(got.view(torch.int16), natural.view(torch.int16))
    assert torch.isfinite(got[:2].float()).all() and torch.isnan(got[2, 1].float()).all()
    grouped(x, ids, w, s, b, wrong, expert_offset=0, launch=rotated, max_scale_byte=largest)
    assert not torch.equal(wrong[:2].view(torch.int16), natural[:2].view(torch.int16))


@pytest.mark.parametrize("path", ["dot", "dot-tma", "dot-passes", "dot-tma-passes"])
def test_fp8_tile_reads_placed_weights_as_the_natural_ones(path):
    """Weights in `fp8_placed`'s layout (``Launch.fp8_placed``) give the natural layout's bits on
    the FP8 tile, by pointers and through TMA, looping over passes or one pass a program, the
    last K step masked (R = 288 at 64 values a step), every e4m3 byte among the weights
    (subnormals, both zeros, the NaN bytes, +-480 in either layout); natural weights read as
    placed do not (the layout is what the decode reads). Under the interpreter the decode runs
    the PTX's integer steps (`fp8_placed`); the PTX itself is tests/kernels/test_fp8_placed.py's,
    and compiled this checks the kernel."""
    g = torch.Generator().manual_seed(19)
    T, K, E, N, R = 3, 2, 2, 16, 288
    w = torch.randint(0, 256, (E, N, R), generator=g, dtype=torch.uint8)
    w[0, 0, :256] = torch.arange(256, dtype=torch.uint8)
    w = w.view(torch.float8_e4m3fn)
    s = torch.tensor([0.125, 2.0])
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 0], [1, 5]], dtype=torch.int32)
    launch = LAUNCHES[path]
    placed = dataclasses.replace(launch, fp8_placed=True)
    natural, got, wrong = poisoned(T, K, N), poisoned(T, K, N), poisoned(T, K, N)
    grouped(x, ids, w, s, b, natural, expert_offset=0, launch=launch)
    grouped(x, ids, place_e4m3(w), s, b, got, expert_offset=0, launch=placed)
    assert torch.equal(got.view(torch.int16), natural.view(torch.int16))
    assert torch.isfinite(got[:2].float()).all() and torch.isnan(got[2, 1].float()).all()
    grouped(x, ids, w, s, b, wrong, expert_offset=0, launch=placed)
    assert not torch.equal(wrong[:2].view(torch.int16), natural[:2].view(torch.int16))


def test_the_placed_layout_is_the_fp8_tiles_only():
    """``fp8_placed`` is refused for MXFP4 weights and for the GEMV path. (Rows are whole 4-byte
    words, as the decode needs: R is a multiple of 32, which the launcher checks for every
    launch.)"""
    w8, s8, _ = quantised("fp8", torch.randn(1, 16, 64))
    wm, sm, _ = quantised("mxfp4", torch.randn(1, 16, 64))
    x, ids = torch.zeros(1, 64).bfloat16(), torch.zeros(1, 1, dtype=torch.int32)
    out, b = poisoned(1, 1, 16), torch.zeros(1, 16).bfloat16()
    for w, s, path in ((wm, sm, "dot"), (w8, s8, "gemv")):
        with pytest.raises(ValueError, match="fp8_placed is for the FP8 dot path"):
            grouped(x, ids, w, s, b, out, expert_offset=0,
                    launch=dataclasses.replace(LAUNCHES[path], fp8_placed=True))  # fmt: skip


@pytest.mark.parametrize("placed", [False, True], ids=["natural", "placed"])
@pytest.mark.parametrize("path", ["dot-tma", "dot-tma-passes"])
def test_fp8_tile_reads_packed_weights_as_the_natural_ones(path, placed):
    """Weights in `tile_packed`'s order (``Launch.fp8_packed``, packed for the launch's block_n
    and block_k) give the unpacked weights' bits on the FP8 tile through TMA, looping over passes
    or one pass a program, with natural or placed words (every e4m3 byte among the weights, two
    row blocks and four K steps an expert, an expert with two passes of slots); unpacked weights
    read as packed do not (the order is what the descriptor's coordinates read)."""
    g = torch.Generator().manual_seed(23)
    T, K, E, N, R = 17, 2, 2, 32, 256
    w = torch.randint(0, 256, (E, N, R), generator=g, dtype=torch.uint8)
    w[0, 0, :256] = torch.arange(256, dtype=torch.uint8)
    w = w.view(torch.float8_e4m3fn)
    if placed:
        w = place_e4m3(w)
    s = torch.tensor([0.125, 2.0])
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1]] * 16 + [[1, 5]], dtype=torch.int32)
    launch = dataclasses.replace(LAUNCHES[path], fp8_placed=placed)
    packed = dataclasses.replace(launch, fp8_packed=True)
    tiles = pack_tiles(w, launch.block_n, launch.block_k)
    natural, got, wrong = poisoned(T, K, N), poisoned(T, K, N), poisoned(T, K, N)
    grouped(x, ids, w, s, b, natural, expert_offset=0, launch=launch)
    grouped(x, ids, tiles, s, b, got, expert_offset=0, launch=packed)
    assert torch.equal(got.view(torch.int16), natural.view(torch.int16))
    assert torch.isfinite(got[:, 0].float()).all() and torch.isnan(got[16, 1].float()).all()
    grouped(x, ids, w, s, b, wrong, expert_offset=0, launch=packed)
    assert not torch.equal(wrong[:16].view(torch.int16), natural[:16].view(torch.int16))


def test_fp8_tile_prefetching_its_first_boxes_gives_the_packed_bits():
    """``fp8_prefetch`` (a packed program's first boxes asked of the L2 before the dependent-launch
    wait) and ``fp8_prefetch_ahead`` (each step's box that many steps on) read nothing: the packed
    launch's bits, whether they ask for fewer boxes than a program has or more (an expert with
    two passes of slots); refused without packed weights, past 128 boxes and below 0. On the GPU
    the bench checks them against the reference before timing them."""
    g = torch.Generator().manual_seed(29)
    T, K, E, N, R = 17, 2, 2, 32, 256
    w = torch.randint(0, 256, (E, N, R), generator=g, dtype=torch.uint8).view(torch.float8_e4m3fn)
    s = torch.tensor([0.5, 4.0])
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1]] * 16 + [[1, 5]], dtype=torch.int32)
    packed = dataclasses.replace(LAUNCHES["dot-tma-passes"], fp8_packed=True)
    tiles = pack_tiles(w, packed.block_n, packed.block_k)
    want = poisoned(T, K, N)
    grouped(x, ids, tiles, s, b, want, expert_offset=0, launch=packed)
    for boxes, ahead in ((1, 0), (3, 0), (128, 0), (0, 1), (2, 3), (0, 9)):
        got = poisoned(T, K, N)
        launch = dataclasses.replace(packed, fp8_prefetch=boxes, fp8_prefetch_ahead=ahead)
        grouped(x, ids, tiles, s, b, got, expert_offset=0, launch=launch)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16)), (boxes, ahead)
    for bad in (dataclasses.replace(packed, fp8_packed=False, fp8_prefetch=2),
                dataclasses.replace(packed, fp8_prefetch=129),
                dataclasses.replace(packed, fp8_prefetch=-1),
                dataclasses.replace(packed, fp8_packed=False, fp8_prefetch_ahead=2),
                dataclasses.replace(packed, fp8_prefetch_ahead=-1)):  # fmt: skip
        with pytest.raises(ValueError, match="fp8_prefetch(_ahead)? must be 0 or, with fp8_packed"):
            grouped(x, ids, tiles if bad.fp8_packed else w, s, b, want, expert_offset=0,
                    launch=bad)  # fmt: skip


def test_packed_weights_are_the_fp8_tma_tiles_with_whole_steps_only():
    """``fp8_packed`` is refused for MXFP4 weights, the GEMV path, the pointer loads (the
    coordinates are TMA's) and an R that is no multiple of block_k (a box past R would read the
    next box's bytes, not zeros)."""
    w8, s8, _ = quantised("fp8", torch.randn(1, 16, 64))
    wm, sm, _ = quantised("mxfp4", torch.randn(1, 16, 64))
    w96, s96, _ = quantised("fp8", torch.randn(1, 16, 96))
    out, b = poisoned(1, 1, 16), torch.zeros(1, 16).bfloat16()
    ids = torch.zeros(1, 1, dtype=torch.int32)
    refused = ((wm, sm, "dot"), (w8, s8, "gemv"), (w8, s8, "dot"), (w96, s96, "dot-tma"))
    for w, s, path in refused:
        x = torch.zeros(1, w.shape[2] * (2 if w.dtype == torch.uint8 else 1)).bfloat16()
        with pytest.raises(ValueError, match="fp8_packed is for the FP8 dot path through TMA"):
            grouped(x, ids, w, s, b, out, expert_offset=0,
                    launch=dataclasses.replace(LAUNCHES[path], fp8_packed=True))  # fmt: skip


# The MXFP4 tile's layout tests: 17 tokens, top-2, two local experts of 32 rows (two row blocks),
# expert 1 holding 17 slots (two passes of 16), expert 5 not local.
MX_T, MX_K, MX_E, MX_N = 17, 2, 2, 32


def mxfp4_layout_case(R: int, seed: int):
    """Exact MXFP4 weights [E, N, R / 2] (natural bytes), their scale bytes (unpadded), the same
    in padded rows, biases, integer activations and the routing: every sum exact in any order, so
    a layout that reads each value where it belongs gives the natural layout's bits. Exact: scale
    bytes 120-128 make every product a multiple of 2^-8 (half the least e2m1 step times 2^-7,
    times an integer) and every partial sum below 2^16 in magnitude (R <= 512 products of at
    most 6 x 2 x 8), 24 bits, an fp32 mantissa. (Bytes from 100, 2^-27, summed inexactly: the
    GPU's tile, summing in its own order, then differed from the natural order's bits, H100,
    2026-12-07, docs/perf/2026-12-07-stream-k/call1/gpu_tests.txt.)"""
    g = torch.Generator().manual_seed(seed)
    w, _, _ = exact_weights("mxfp4", MX_E, MX_N, R, g)
    raw = torch.randint(120, 129, (MX_E, MX_N, R // 32), generator=g, dtype=torch.uint8)
    b = (torch.randint(-64, 64, (MX_E, MX_N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (MX_T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1]] * 16 + [[1, 5]], dtype=torch.int32)
    return w, raw, word_aligned_scales(raw), b, x, ids


@pytest.mark.parametrize("R", [288, 256], ids=["ragged-last-box", "whole-boxes"])
@pytest.mark.parametrize("rotated", [False, True], ids=["natural", "rotated"])
@pytest.mark.parametrize("path", ["dot", "dot-passes"])
def test_mxfp4_tile_reads_packed_weights_as_the_natural_ones(path, rotated, R):
    """Bytes in `tile_packed`'s order (``Launch.mx_packed``: block_n rows and block_k / 2 bytes a
    box, the last box ragged where R is no multiple of block_k, here 288 = 2 x 128 + 32) give the
    unpacked bytes' bits on the MXFP4 tile, looping over passes or one pass a program, natural or
    rotated words (two row blocks an expert, an expert with two passes of slots, a GLU); unpacked
    bytes read as packed do not."""
    T, K, N = MX_T, MX_K, MX_N
    w, _, s, b, x, ids = mxfp4_layout_case(R, seed=29)
    if rotated:
        w = rotate_mxfp4(w)
    launch = dataclasses.replace(LAUNCHES[path], block_k=128, mx_rotated=rotated)
    packed = dataclasses.replace(launch, mx_packed=True)
    tiles = pack_tiles(w, launch.block_n, launch.block_k // 2, ragged_last=True)
    for glu, cols in (("none", N), ("swiglu_oai", N // 2)):
        natural, got, wrong = poisoned(T, K, cols), poisoned(T, K, cols), poisoned(T, K, cols)
        grouped(x, ids, w, s, b, natural, expert_offset=0, launch=launch, glu=glu)
        grouped(x, ids, tiles, s, b, got, expert_offset=0, launch=packed, glu=glu)
        assert torch.equal(got.view(torch.int16), natural.view(torch.int16))
        assert torch.isfinite(got[:, 0].float()).all() and torch.isnan(got[16, 1].float()).all()
        grouped(x, ids, w, s, b, wrong, expert_offset=0, launch=packed, glu=glu)
        assert not torch.equal(wrong[:16].view(torch.int16), natural[:16].view(torch.int16))


@pytest.mark.parametrize("R", [288, 256], ids=["ragged-last-box", "whole-boxes"])
@pytest.mark.parametrize("path", ["dot", "dot-passes"])
def test_mxfp4_tile_reads_packed_scales_as_the_natural_ones(path, R):
    """Scale bytes in `tile_packed`'s order (``Launch.mx_packed_scales``: block_n rows and
    block_k / 32 bytes a box, whole words; the last box ragged where R is no multiple of block_k)
    give the padded rows' bits on the MXFP4 tile, with the weights packed or not, looping over
    passes or one pass a program (two row blocks an expert, an expert with two passes of slots, a
    GLU, every scale of a row distinct enough to tell a misplaced one); unpacked scales read as
    packed do not, and a block_k of 64 (half a word a row) is refused."""
    T, K, N = MX_T, MX_K, MX_N
    w, raw, s, b, x, ids = mxfp4_layout_case(R, seed=31)
    launch = dataclasses.replace(LAUNCHES[path], block_k=128)
    scales = pack_tiles(raw, launch.block_n, launch.block_k // 32, ragged_last=True)
    tiles = pack_tiles(w, launch.block_n, launch.block_k // 2, ragged_last=True)
    for glu, cols in (("none", N), ("swiglu_oai", N // 2)):
        natural = poisoned(T, K, cols)
        grouped(x, ids, w, s, b, natural, expert_offset=0, launch=launch, glu=glu)
        assert torch.isfinite(natural[:, 0].float()).all()
        for weights, mx_packed in ((w, False), (tiles, True)):
            both = dataclasses.replace(launch, mx_packed=mx_packed, mx_packed_scales=True)
            got, wrong = poisoned(T, K, cols), poisoned(T, K, cols)
            grouped(x, ids, weights, scales, b, got, expert_offset=0, launch=both, glu=glu)
            assert torch.equal(got.view(torch.int16), natural.view(torch.int16)), mx_packed
            grouped(x, ids, weights, raw, b, wrong, expert_offset=0, launch=both, glu=glu)
            assert not torch.equal(wrong[:16].view(torch.int16), natural[:16].view(torch.int16))
    half_word = dataclasses.replace(launch, block_k=64, mx_packed_scales=True)
    with pytest.raises(ValueError, match="mx_packed_scales is for the MXFP4 dot path with block_k"):
        grouped(x, ids, w, raw, b, poisoned(T, K, N), expert_offset=0, launch=half_word)


@pytest.mark.parametrize("R", [288, 320, 256], ids=["tail-32", "tail-64", "whole-steps"])
@pytest.mark.parametrize("path", ["dot", "dot-passes"])
def test_mxfp4_tile_reads_values_in_its_k_order_as_the_natural_ones(path, R):
    """Rotated bytes in `mx_dot_order`'s layout (``Launch.mx_dot_order``: each 128-value step's
    values in the dot's K order, a last step of 32 or 64 values a step of its own) give the
    natural rotated bytes' bits on the MXFP4 tile, packed or not, scales packed or padded,
    looping over passes or one pass a program (two row blocks an expert, an expert with two
    passes of slots, a GLU; every sum exact, so the sum's order cannot show); natural bytes read
    as in K order do not."""
    T, K, N = MX_T, MX_K, MX_N
    w, raw, s, b, x, ids = mxfp4_layout_case(R, seed=37)
    launch = dataclasses.replace(LAUNCHES[path], block_k=128, mx_rotated=True)
    natural_words, words = rotate_mxfp4(w), rotate_mxfp4(dot_order_mxfp4(w, 128))
    for glu, cols in (("none", N), ("swiglu_oai", N // 2)):
        natural = poisoned(T, K, cols)
        grouped(x, ids, natural_words, s, b, natural, expert_offset=0, launch=launch, glu=glu)
        assert torch.isfinite(natural[:, 0].float()).all()
        for packed, packed_scales in ((False, False), (True, False), (True, True)):
            ordered = dataclasses.replace(launch, mx_dot_order=True, mx_packed=packed,
                                          mx_packed_scales=packed_scales)  # fmt: skip
            boxed = lambda t, p=packed: pack_tiles(t, 16, 64, ragged_last=True) if p else t
            scales = pack_tiles(raw, launch.block_n, 4, ragged_last=True) if packed_scales else s
            got, wrong = poisoned(T, K, cols), poisoned(T, K, cols)
            grouped(x, ids, boxed(words), scales, b, got, expert_offset=0, launch=ordered, glu=glu)
            assert torch.equal(got.view(torch.int16), natural.view(torch.int16)), ordered
            grouped(x, ids, boxed(natural_words), scales, b, wrong, expert_offset=0,
                    launch=ordered, glu=glu)  # fmt: skip
            assert not torch.equal(wrong[:16].view(torch.int16), natural[:16].view(torch.int16))


@pytest.mark.parametrize("path", ["dot", "dot-passes"])
def test_mxfp4_tile_reads_biased_scales_as_the_e8m0_ones(path):
    """Scale bytes stored biased (``Launch.mx_biased_scales``, `mx_rotated.biased_scales`: s + 126,
    byte 0 kept) give the e8m0 bytes' bits on the rotated MXFP4 tile with its scales folded, in the
    natural K order or its own, scales packed or padded, looping over passes or one pass a program
    (bytes 0, 1 and 128 among them, a GLU); e8m0 bytes read as biased do not. Under the
    interpreter the tile undoes the bias before its fp32 decode; compiled, its multiplier is the
    byte shifted (tests/kernels/test_mx_decode_ptx.py holds the PTX's own check)."""
    T, K, N, R = MX_T, MX_K, MX_N, 288
    w, raw, s, b, x, ids = mxfp4_layout_case(R, seed=41)
    raw[0, :4, 0], raw[1, 3, 2] = torch.tensor([0, 1, 2, 128], dtype=torch.uint8), 0
    s = word_aligned_scales(raw)
    largest = int(raw.max())
    launch = dataclasses.replace(LAUNCHES[path], block_k=128, mx_rotated=True)
    natural_words, ordered_words = rotate_mxfp4(w), rotate_mxfp4(dot_order_mxfp4(w, 128))
    for glu, cols in (("none", N), ("swiglu_oai", N // 2)):
        natural = poisoned(T, K, cols)
        grouped(x, ids, natural_words, s, b, natural, expert_offset=0, launch=launch, glu=glu,
                max_scale_byte=largest)  # fmt: skip
        for ordered, packed in ((False, False), (True, False), (True, True)):
            biased = dataclasses.replace(launch, mx_biased_scales=True, mx_dot_order=ordered,
                                         mx_packed_scales=packed)  # fmt: skip
            # Packed from the unpadded bytes, padded rows otherwise.
            lay = lambda t, p=packed: (pack_tiles(t, launch.block_n, 4, ragged_last=True) if p
                                       else word_aligned_scales(t))  # fmt: skip
            words = ordered_words if ordered else natural_words
            got, wrong = poisoned(T, K, cols), poisoned(T, K, cols)
            grouped(x, ids, words, lay(biased_scales(raw)), b, got, expert_offset=0,
                    launch=biased, glu=glu, max_scale_byte=largest)  # fmt: skip
            assert torch.equal(got.view(torch.int16), natural.view(torch.int16)), biased
            grouped(x, ids, words, lay(raw), b, wrong, expert_offset=0, launch=biased, glu=glu,
                    max_scale_byte=largest)  # fmt: skip
            assert not torch.equal(wrong[:16].view(torch.int16), natural[:16].view(torch.int16))


def test_mxfp4_biased_scales_are_the_rotated_folded_tiles_only():
    """``mx_biased_scales`` is refused for FP8 weights, the GEMV path and bytes not rotated, and
    where the scales' largest byte (before biasing) is not given or above 128 (no folded decode);
    `biased_scales` refuses bytes above 128 and keeps byte 0."""
    w8, s8, _ = quantised("fp8", torch.randn(1, 16, 128))
    wm, sm, _ = quantised("mxfp4", torch.randn(1, 16, 128))
    out, b = poisoned(1, 1, 16), torch.zeros(1, 16).bfloat16()
    ids = torch.zeros(1, 1, dtype=torch.int32)
    rotated = lambda path: dataclasses.replace(LAUNCHES[path], mx_rotated=True, block_k=128)
    small = int(sm.max())
    for w, s, launch, largest, why in (
        (w8, s8, LAUNCHES["dot"], None, "is for the MXFP4 dot path on rotated bytes"),
        (wm, sm, rotated("gemv"), small, "is for the MXFP4 dot path on rotated bytes"),
        (wm, sm, dataclasses.replace(LAUNCHES["dot"], block_k=128), small, "is for .* rotated"),
        (wm, sm, rotated("dot"), None, "needs max_scale_byte .* at most 128, got None"),
        (wm, sm, rotated("dot"), 130, "needs max_scale_byte .* at most 128, got 130"),
    ):
        x = torch.zeros(1, w.shape[2] * (2 if w.dtype == torch.uint8 else 1)).bfloat16()
        with pytest.raises(ValueError, match=f"mx_biased_scales {why}"):
            grouped(x, ids, w, s, b, out, expert_offset=0, max_scale_byte=largest,
                    launch=dataclasses.replace(launch, mx_biased_scales=True))  # fmt: skip
    raw = torch.tensor([0, 1, 127, 128], dtype=torch.uint8)
    assert biased_scales(raw).tolist() == [0, 127, 253, 254]
    with pytest.raises(ValueError, match="up to 128, got 129"):
        biased_scales(torch.tensor([129], dtype=torch.uint8))


def test_mxfp4_dot_order_is_the_rotated_mxfp4_tiles_only():
    """``mx_dot_order`` is refused for FP8 weights, the GEMV path, bytes not rotated and rows
    whose last step is no power of two of at least 32 values (R = 352: 96 left at 128 a step)."""
    w8, s8, _ = quantised("fp8", torch.randn(1, 16, 128))
    wm, sm, _ = quantised("mxfp4", torch.randn(1, 16, 128))
    w352, s352, _ = quantised("mxfp4", torch.randn(1, 16, 352))
    out, b = poisoned(1, 1, 16), torch.zeros(1, 16).bfloat16()
    ids = torch.zeros(1, 1, dtype=torch.int32)
    rotated = lambda path: dataclasses.replace(LAUNCHES[path], mx_rotated=True, block_k=128)
    for w, s, launch, why in (
        (w8, s8, LAUNCHES["dot"], "is for the MXFP4 dot path on rotated bytes"),
        (wm, sm, rotated("gemv"), "is for the MXFP4 dot path on rotated bytes"),
        (wm, sm, dataclasses.replace(LAUNCHES["dot"], block_k=128), "is for .* on rotated bytes"),
        (w352, s352, rotated("dot"), "needs R \\(352\\) a multiple of block_k"),
    ):
        x = torch.zeros(1, w.shape[2] * (2 if w.dtype == torch.uint8 else 1)).bfloat16()
        with pytest.raises(ValueError, match=f"mx_dot_order {why}"):
            grouped(x, ids, w, s, b, out, expert_offset=0,
                    launch=dataclasses.replace(launch, mx_dot_order=True))  # fmt: skip


def test_mxfp4_packed_is_the_mxfp4_tiles_only():
    """``mx_packed`` is refused for FP8 weights and for the GEMV path."""
    w8, s8, _ = quantised("fp8", torch.randn(1, 16, 128))
    wm, sm, _ = quantised("mxfp4", torch.randn(1, 16, 128))
    out, b = poisoned(1, 1, 16), torch.zeros(1, 16).bfloat16()
    x, ids = torch.zeros(1, 128).bfloat16(), torch.zeros(1, 1, dtype=torch.int32)
    for w, s, path in ((w8, s8, "dot"), (wm, sm, "gemv")):
        with pytest.raises(ValueError, match="mx_packed is for the MXFP4 dot path"):
            grouped(x, ids, w, s, b, out, expert_offset=0,
                    launch=dataclasses.replace(LAUNCHES[path], mx_packed=True))  # fmt: skip
        with pytest.raises(ValueError, match="mx_packed_scales is for the MXFP4 dot path"):
            grouped(x, ids, w, s, b, out, expert_offset=0,
                    launch=dataclasses.replace(LAUNCHES[path], mx_packed_scales=True))  # fmt: skip


@pytest.mark.parametrize("glu", ["none", "swiglu_oai"])
@pytest.mark.parametrize("path", ["dot-tma", "dot-tma-passes"])
def test_fp8_tile_rows_past_n_are_masked_through_tma(path, glu):
    """A block_n that does not divide N (96 rows, 64 a block: gpt-oss-20b's fc2 is 2,880 rows at
    128): the FP8 tile through TMA gives the bits of 32-row blocks, placed words, every expert's
    last block half past its rows (the copy engine zero-fills them; the last expert's past the
    tensor's end), no column past N written (the output's poison past N stays), an expert with two
    passes; the pointer loads and packed weights refuse it (they would read the next expert's
    rows)."""
    g = torch.Generator().manual_seed(29)
    T, K, E, N, R = 17, 2, 2, 96, 128
    w = place_e4m3(torch.randint(0, 256, (E, N, R), generator=g, dtype=torch.uint8)
                   .view(torch.float8_e4m3fn))  # fmt: skip
    s = torch.tensor([0.125, 2.0])
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1]] * 16 + [[1, 5]], dtype=torch.int32)
    cols = N // 2 if glu != "none" else N
    launch = dataclasses.replace(LAUNCHES[path], block_n=32, fp8_placed=True)
    ragged = dataclasses.replace(launch, block_n=64)
    whole, got = poisoned(T, K, cols + 8), poisoned(T, K, cols + 8)
    grouped(x, ids, w, s, b, whole[..., :cols], expert_offset=0, launch=launch, glu=glu)
    grouped(x, ids, w, s, b, got[..., :cols], expert_offset=0, launch=ragged, glu=glu)
    assert torch.equal(got.view(torch.int16), whole.view(torch.int16))
    assert torch.isfinite(got[:16, :, :cols].float()).all()
    assert torch.isnan(got[..., cols:].float()).all() and torch.isnan(got[16, 1].float()).all()
    out = poisoned(T, K, cols)
    for bad in (
        dataclasses.replace(ragged, tma=False),
        dataclasses.replace(ragged, fp8_packed=True),
    ):
        with pytest.raises(ValueError, match="block_n|fp8_packed"):
            grouped(x, ids, w, s, b, out, expert_offset=0, launch=bad, glu=glu)


def _with_a_byte_past_the_bound(s: torch.Tensor) -> torch.Tensor:
    past = word_aligned_scales(s.clone())
    past[1, 7, 1] = 130
    return past


def test_a_largest_scale_byte_below_the_scales_is_refused():
    """A ``max_scale_byte`` below the scales' largest byte would fold a decode that cannot hold
    them: the launcher refuses it where checking costs nothing (tensors on the CPU)."""
    g = torch.Generator().manual_seed(16)
    w, s, _ = exact_weights("mxfp4", 1, 16, 128, g)
    x = torch.zeros(1, 128, dtype=torch.bfloat16)
    ids = torch.zeros(1, 1, dtype=torch.int32)
    b = torch.zeros(1, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="max_scale_byte"):
        grouped_gemv(x, ids, w, s, b, poisoned(1, 1, 16), expert_offset=0,
                     launch=LAUNCHES["dot"], max_scale_byte=int(s.max()) - 1)  # fmt: skip


def one_pass_mx_case(R: int, seed: int, ordered: bool):
    """(launch, tiles, scales, b, x, ids): `mxfp4_layout_case`'s on the MXFP4 one-pass tile as
    the arm reads it (128 values a step, rotated words and scale bytes packed box by box, the
    values in the tile's K order where ``ordered``)."""
    w, raw, _, b, x, ids = mxfp4_layout_case(R, seed=seed)
    launch = dataclasses.replace(LAUNCHES["dot-passes"], block_k=128, mx_rotated=True,
                                 mx_packed=True, mx_packed_scales=True,
                                 mx_dot_order=ordered)  # fmt: skip
    words = rotate_mxfp4(dot_order_mxfp4(w, 128) if ordered else w)
    tiles = pack_tiles(words, launch.block_n, 64, ragged_last=True)
    scales = pack_tiles(raw, launch.block_n, 4, ragged_last=True)
    return launch, tiles, scales, b, x, ids


@pytest.mark.parametrize(("R", "splits"), [(288, (2,)), (512, (2, 4))],
                         ids=["tail-32", "whole-steps"])  # fmt: skip
@pytest.mark.parametrize("ordered", [False, True], ids=["natural-order", "k-order"])
def test_mxfp4_tile_split_in_k_gives_the_unsplit_bits(ordered, R, splits):
    """The one-pass MXFP4 tile with its K steps split over 2 or 4 programs a row block
    (``Launch.split_k``, `split_k`: each part's fp32 sums stored, the pair's last part adding them
    in part order) gives the unsplit tile's bits where every sum is exact (two row blocks an
    expert, an expert with two passes of slots, the last part also taking the 32-value step past
    R's whole steps), in the natural K order or its own, launched twice on the same counters (they
    only grow: SPLIT_K a launch on every pair whose pass has slots, none on the others), and twice
    more across their int32 wrap."""
    from moebench.kernels.grouped_gemv import grid_tiles
    from moebench.kernels.split_k import split_scratch

    T, K, E, N = MX_T, MX_K, MX_E, MX_N
    launch, tiles, scales, b, x, ids = one_pass_mx_case(R, 43, ordered)
    whole = poisoned(T, K, N)
    grouped(x, ids, tiles, scales, b, whole, expert_offset=0, launch=launch)
    assert torch.isfinite(whole[:, 0].float()).all() and torch.isnan(whole[16, 1].float()).all()
    for split_k in splits:
        split = dataclasses.replace(launch, split_k=split_k)
        pairs = grid_tiles(T, K, E, N, split)
        scratch = split_scratch(pairs, split_k, split.block_n, split.block_m, DEVICE)
        for launches in (1, 2):
            got = poisoned(T, K, N)
            grouped(x, ids, tiles, scales, b, got, expert_offset=0, launch=split, split=scratch)
            assert torch.equal(got.view(torch.int16), whole.view(torch.int16)), (split_k, launches)
            # Three passes have slots (expert 0: 16 slots; expert 1: 17), each over two row blocks.
            counts = scratch[1].tolist()
            assert sorted(counts, reverse=True)[:6] == [split_k * launches] * 6
            assert sum(counts) == 6 * split_k * launches
        # Across the counters' int32 wrap: started a launch short of it, two launches later.
        scratch[1].fill_(2**31 - split_k)
        for launches in (1, 2):
            got = poisoned(T, K, N)
            grouped(x, ids, tiles, scales, b, got, expert_offset=0, launch=split, split=scratch)
            assert torch.equal(got.view(torch.int16), whole.view(torch.int16)), (split_k, launches)
        assert sorted(scratch[1].tolist())[:6] == [-(2**31) + split_k] * 6


def test_split_k_is_the_mxfp4_one_pass_tiles_with_packed_scales_and_no_glu():
    """``split_k`` is refused but for the MXFP4 one-pass tile with packed scales on a stage with
    no GLU, as a power of two up to its whole steps, with scratch for its pairs."""
    from moebench.kernels.grouped_gemv import grid_tiles
    from moebench.kernels.split_k import split_scratch

    T, K, E, N, R = MX_T, MX_K, MX_E, MX_N, 512
    w, raw, _, b, x, ids = mxfp4_layout_case(R, seed=47)
    launch = dataclasses.replace(LAUNCHES["dot-passes"], block_k=128, mx_packed_scales=True,
                                 split_k=2)  # fmt: skip
    scales = pack_tiles(raw, launch.block_n, 4, ragged_last=True)
    scratch = split_scratch(grid_tiles(T, K, E, N, launch), 2, 16, 16, DEVICE)
    small = split_scratch(grid_tiles(T, K, E, N, launch) - 1, 2, 16, 16, DEVICE)
    w8, s8, _ = quantised("fp8", torch.randn(E, N, R))
    refused = "split_k must be 1 or, for the MXFP4 one-pass tile"
    for case, why in (
        (dict(glu="swiglu_oai"), refused),
        (dict(launch=dataclasses.replace(launch, pass_grid=False)), refused),
        (dict(launch=dataclasses.replace(launch, mx_packed_scales=False), s=raw), refused),
        (dict(launch=dataclasses.replace(launch, split_k=3)), refused),
        (dict(launch=dataclasses.replace(launch, split_k=8)), refused),  # 4 whole steps
        # FP8 (mx_packed_scales is MXFP4's alone, refused on its own)
        (dict(w=w8, s=s8, launch=dataclasses.replace(launch, mx_packed_scales=False)), refused),
        (dict(split=None), "split_k 2 needs \\(partials, counters\\)"),
        (dict(split=small), "split_k 2 needs \\(partials, counters\\)"),
    ):
        args = dict(w=w, s=scales, launch=launch, glu="none", split=scratch) | case
        out = poisoned(T, K, N // 2 if args["glu"] != "none" else N)
        with pytest.raises(ValueError, match=why):
            grouped(x, ids, args["w"], args["s"], b, out, expert_offset=0, launch=args["launch"],
                    glu=args["glu"], split=args["split"])  # fmt: skip


@pytest.mark.parametrize("R", [288, 512], ids=["tail-32", "whole-steps"])
@pytest.mark.parametrize("ordered", [False, True], ids=["natural-order", "k-order"])
def test_mxfp4_tile_on_a_persistent_even_grid_gives_the_one_pass_bits(ordered, R):
    """The one-pass MXFP4 tile on a persistent grid of P programs that split the tiles' K steps
    evenly (``Launch.stream_k``, `stream_k`: a tile two or more programs share summed in program
    order by the last to count) gives the one-pass grid's bits where every sum is exact: P from
    one program (every tile whole) through grids that cut tiles at every step, P past the units
    (programs with nothing to do), with and without a GLU, the step past R's whole steps with the
    tile's last unit (three passes of slots over two row blocks: 12 or 24 units). Every counter is
    back to zero after each launch, so a second launch on the same scratch gives the same bits."""
    from moebench.kernels.grouped_gemv import grid_tiles
    from moebench.kernels.stream_k import stream_programs, stream_scratch

    T, K, E, N = MX_T, MX_K, MX_E, MX_N
    launch, tiles, scales, b, x, ids = one_pass_mx_case(R, 53, ordered)
    for glu, cols in (("none", N), ("swiglu_oai", N // 2)):
        whole = poisoned(T, K, cols)
        grouped(x, ids, tiles, scales, b, whole, expert_offset=0, launch=launch, glu=glu)
        assert torch.isfinite(whole[:, 0].float()).all()
        assert torch.isnan(whole[16, 1].float()).all()  # slot routed to no local expert
        for per_sm in (1, 2, 5, 7, 13, 40):
            stream = dataclasses.replace(launch, stream_k=per_sm)
            P = stream_programs(torch.device(DEVICE), per_sm)
            scratch = stream_scratch(P, grid_tiles(T, K, E, N, stream), launch.block_n,
                                     launch.block_m, DEVICE)  # fmt: skip
            for launches in (1, 2):
                got = poisoned(T, K, cols)
                grouped(x, ids, tiles, scales, b, got, expert_offset=0, launch=stream, glu=glu,
                        stream=scratch)  # fmt: skip
                assert torch.equal(got.view(torch.int16), whole.view(torch.int16)), (
                    glu, per_sm, launches)  # fmt: skip
                assert not scratch[1].cpu().any(), (glu, per_sm, scratch[1])


def test_mxfp4_tile_on_a_persistent_grid_sums_shared_tiles_in_program_order():
    """Where the sums are not exact, a tile two programs share differs from the one-pass tile only
    in the last fp32 bits (within the decode tolerance) and gives the same bits launch after
    launch: the parts are added in program order, whichever counts last."""
    from moebench.kernels.grouped_gemv import grid_tiles
    from moebench.kernels.stream_k import stream_programs, stream_scratch

    T, K, E, N, R = MX_T, MX_K, MX_E, MX_N, 512
    w, raw, _, b, _, ids = mxfp4_layout_case(R, seed=59)
    x = torch.randn(T, R, generator=torch.Generator().manual_seed(59)).bfloat16()
    launch = dataclasses.replace(LAUNCHES["dot-passes"], block_k=128, mx_rotated=True,
                                 mx_packed=True, mx_packed_scales=True)  # fmt: skip
    tiles = pack_tiles(rotate_mxfp4(w), launch.block_n, 64, ragged_last=True)
    scales = pack_tiles(raw, launch.block_n, 4, ragged_last=True)
    whole = poisoned(T, K, N)
    grouped(x, ids, tiles, scales, b, whole, expert_offset=0, launch=launch)
    stream = dataclasses.replace(launch, stream_k=5)  # 24 units: every tile shared on the CPU
    scratch = stream_scratch(stream_programs(torch.device(DEVICE), 5),
                             grid_tiles(T, K, E, N, stream), 16, 16, DEVICE)  # fmt: skip
    runs = []
    for _ in range(2):
        got = poisoned(T, K, N)
        grouped(x, ids, tiles, scales, b, got, expert_offset=0, launch=stream, stream=scratch)
        runs.append(got)
    assert torch.equal(runs[0].view(torch.int16), runs[1].view(torch.int16))
    local = torch.isfinite(whole.float())
    assert torch.equal(torch.isfinite(runs[0].float()), local)
    gap = (runs[0].float() - whole.float())[local].abs().max()
    assert gap <= 0.02 * whole.float()[local].abs().max()


def test_stream_k_is_the_mxfp4_one_pass_tiles_with_packed_scales():
    """``stream_k`` is refused but for the MXFP4 one-pass tile with packed scales, no split_k and
    no expert_ready, with scratch for its programs and tiles, and a grid whose units times its
    programs fit the kernel's int32 arithmetic."""
    from moebench.kernels.expert_ready import ready_counters
    from moebench.kernels.grouped_gemv import grid_tiles
    from moebench.kernels.stream_k import stream_programs, stream_scratch

    T, K, E, N, R = MX_T, MX_K, MX_E, MX_N, 512
    w, raw, _, b, x, ids = mxfp4_layout_case(R, seed=61)
    launch = dataclasses.replace(LAUNCHES["dot-passes"], block_k=128, mx_packed_scales=True,
                                 stream_k=3)  # fmt: skip
    scales = pack_tiles(raw, launch.block_n, 4, ragged_last=True)
    P = stream_programs(torch.device(DEVICE), 3)
    scratch = stream_scratch(P, grid_tiles(T, K, E, N, launch), 16, 16, DEVICE)
    few_tiles = stream_scratch(P, grid_tiles(T, K, E, N, launch) - 1, 16, 16, DEVICE)
    few_programs = stream_scratch(P - 1, grid_tiles(T, K, E, N, launch), 16, 16, DEVICE)
    w8, s8, _ = quantised("fp8", torch.randn(E, N, R))
    refused = "stream_k must be 0 or, for the MXFP4 one-pass tile"
    ready = ready_counters(E, DEVICE)
    for case, why in (
        (dict(launch=dataclasses.replace(launch, pass_grid=False)), refused),
        (dict(launch=dataclasses.replace(launch, mx_packed_scales=False), s=raw), refused),
        (dict(launch=dataclasses.replace(launch, stream_k=-1)), refused),
        (dict(launch=dataclasses.replace(launch, split_k=2)), refused),
        (dict(launch=dataclasses.replace(launch, expert_ready="wait"), ready=ready), refused),
        (
            dict(
                launch=dataclasses.replace(
                    launch, path="gemv", pass_grid=False, mx_packed_scales=False
                ),
                s=raw,
            ),
            refused,
        ),
        (dict(w=w8, s=s8, launch=dataclasses.replace(launch, mx_packed_scales=False)), refused),
        (dict(stream=None), "stream_k needs \\(partials, counters\\)"),
        (dict(launch=dataclasses.replace(launch, stream_k=2**28)), "kernel's int32 arithmetic"),
        (dict(stream=few_tiles), "stream_k needs \\(partials, counters\\)"),
        (dict(stream=few_programs), "stream_k needs \\(partials, counters\\)"),
    ):
        args = dict(w=w, s=scales, launch=launch, stream=scratch, ready=None) | case
        with pytest.raises(ValueError, match=why):
            grouped(
                x,
                ids,
                args["w"],
                args["s"],
                b,
                poisoned(T, K, N),
                expert_offset=0,
                launch=args["launch"],
                stream=args["stream"],
                ready=args["ready"],
            )
