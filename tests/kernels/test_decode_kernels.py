"""The decode kernels under the interpreter: the sparse GEMV, the dense batched GEMM and the top-k
combine, against `moebench.core.reference`; bf16 stores rounded exactly; non-local slots skipped.

Inputs and references are built on the CPU; the kernels run on the test device (the GPU when
TRITON_INTERPRET is not 1), through `on_device`."""

from __future__ import annotations

import pytest
import torch
from decode_inputs import FORMATS, exact_weights, quantised, routing, rows_ref
from kernel_device import DEVICE, on_device

from moebench.kernels.batched_gemm import batched_gemm
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.mx_rotated import rotate_mxfp4
from moebench.kernels.sparse_gemv import sparse_gemv

gemv, dense, combine = on_device(sparse_gemv), on_device(batched_gemm), on_device(combine_topk)


# (T tokens, K slots, E local experts, expert offset, ids); each names its edge.
SHAPES = [
    pytest.param(1, 2, 3, 0, None, id="one-token"),
    pytest.param(3, 2, 3, 40, None, id="all-slots-non-local"),  # ids wrapped below 37 below
    pytest.param(2, 3, 3, 0, [[0, 1, 2], [2, 0, 1]], id="k-equals-local-experts"),
    pytest.param(5, 2, 4, 4, None, id="prime-tokens-half-remote"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("T", "K", "E", "offset", "ids"), SHAPES)
def test_sparse_gemv_fc1_and_fc2(fmt, T, K, E, offset, ids):
    torch.manual_seed(T * 10 + K)
    D, F = 64, 32
    ids = torch.tensor(ids, dtype=torch.int32) + offset if ids else routing(T, K, E, offset, T)
    if T == 3:  # every id below the local range: nothing is local on this rank
        ids = ids % max(offset - E, 1)
    w13, s13, w13d = quantised(fmt, torch.randn(E, 2 * F, D) * D**-0.5)
    w2, s2, w2d = quantised(fmt, torch.randn(E, D, F) * F**-0.5)
    b13, b2 = (torch.randn(E, 2 * F) * 0.5).bfloat16(), (torch.randn(E, D) * 0.5).bfloat16()
    x = torch.randn(T, D).bfloat16()
    a = torch.full((T, K, F), float("nan"), dtype=torch.bfloat16)
    o = torch.full((T, K, D), float("nan"), dtype=torch.bfloat16)
    # fc1: every slot reads its token, GLU fused; fc2: every slot its own activation row.
    gemv(x, ids, w13, s13, b13, a, expert_offset=offset, glu="swiglu_oai", block_k=32)
    gemv(a, ids, w2, s2, b2, o, expert_offset=offset)
    local = 0
    for t in range(T):
        for k in range(K):
            e = int(ids[t, k]) - offset
            if not 0 <= e < E:
                # The program left before loading anything: its rows keep the NaN poison.
                assert torch.isnan(a[t, k].float()).all() and torch.isnan(o[t, k].float()).all()
                continue
            local += 1
            want_a = rows_ref(x[t : t + 1], w13d[e], b13[e], "swiglu_oai")[0]
            torch.testing.assert_close(a[t, k].float(), want_a, rtol=2**-7, atol=2**-7)
            want_o = rows_ref(a[t : t + 1, k], w2d[e], b2[e], "none")[0]
            torch.testing.assert_close(o[t, k].float(), want_o, rtol=2**-7, atol=2**-7)
    assert local == 0 if T == 3 else local > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_bf16_stores_round_to_nearest_even_exactly(fmt):
    """fp32 sums that are exact whatever the order, plus a bias that needs rounding: the bf16
    outputs must equal torch's round-to-nearest-even bit for bit (the interpreter's own
    conversion truncates, docs/DESIGN.md section 11), in the GEMV and in the dense GEMM."""
    g = torch.Generator().manual_seed(5)
    T, K, E, N, R = 3, 2, 2, 64, 64
    w, s, wd = exact_weights(fmt, E, N, R, g)
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    ids = torch.tensor([[0, 1], [1, 0], [0, 1]], dtype=torch.int32)
    out = torch.empty(T, K, N, dtype=torch.bfloat16)
    gemv(x, ids, w, s, b, out, expert_offset=0, block_k=32)
    out_dense = torch.empty(E, T, N, dtype=torch.bfloat16)
    dense(x, w, s, b, out_dense)
    want = (torch.einsum("tr,enr->etn", x.float(), wd) + b.float()[:, None, :]).bfloat16()
    rounded = want.float() != torch.einsum("tr,enr->etn", x.float(), wd) + b.float()[:, None]
    assert rounded.float().mean() > 0.5  # the test really exercises the rounding
    assert torch.equal(out_dense.view(torch.int16), want.view(torch.int16))
    for t in range(T):
        for k in range(K):
            assert torch.equal(out[t, k].view(torch.int16), want[ids[t, k], t].view(torch.int16))


# Launch variants of the sparse GEMV (keyword arguments); each names what it exercises.
GEMV_VARIANTS = [
    pytest.param({}, id="default"),
    pytest.param({"num_stages": 2}, id="pipelined-2"),
    pytest.param({"num_stages": 4, "block_n": 8}, id="pipelined-4-more-stages-than-steps"),
    pytest.param({"split_k": 2}, id="split-2"),
    pytest.param({"split_k": 3, "num_stages": 3}, id="split-3-last-slice-short-pipelined"),
    pytest.param({"split_k": 8}, id="split-8-empty-slices"),
    pytest.param({"pdl": True}, id="pdl-first-step-peeled"),
    pytest.param({"pdl": True, "block_k": 256}, id="pdl-one-step-covers-R"),
    pytest.param({"pdl": True, "pdl_trigger": "local"}, id="pdl-trigger-once-local"),
    pytest.param({"pdl": True, "pdl_trigger": "end"}, id="pdl-trigger-after-the-loop"),
    # early_loads is the default: the variants load the bias (and scale) after the loop instead
    pytest.param({"early_loads": False}, id="late-loads"),
    pytest.param({"early_loads": False, "pdl": True}, id="late-loads-pdl-peeled"),
    pytest.param({"early_loads": False, "split_k": 3}, id="late-loads-ignored-by-split-k"),
    pytest.param({"block_n": 4, "block_k": 512}, id="four-rows-512-one-masked-step"),
    pytest.param({"max_registers": 80}, id="registers-capped"),
]


# (format, variant): every variant above for both formats, and the MXFP4-only tensor-core kernel
# (the masked last step at block_k 128 and 256 > R; 32-row blocks).
GEMV_CASES = [pytest.param(f, *v.values, id=f"{f}-{v.id}") for f in FORMATS for v in GEMV_VARIANTS]
GEMV_CASES += [
    pytest.param("mxfp4", {"group_major": False}, id="mxfp4-row-major"),
    pytest.param(
        "mxfp4",
        {"group_major": False, "block_n": 32, "block_k": 128},
        id="mxfp4-row-major-32-rows-tail",
    ),  # fmt: skip
    pytest.param(
        "mxfp4",
        {"group_major": False, "split_k": 3, "num_stages": 2},
        id="mxfp4-row-major-split-3-pipelined",
    ),  # fmt: skip
    # FP8's plain loop takes the token's values once a step from FP8_TOKEN_ONCE_FROM_ROWS rows
    # (the test's 16 rows) and through the row-broadcast tile below; either way the same bits.
    pytest.param("fp8", {"token_once": False}, id="fp8-token-through-row-tile"),
    pytest.param("fp8", {"token_once": False, "pdl": True}, id="fp8-row-tile-pdl-peeled"),
    pytest.param("fp8", {"token_once": True, "block_n": 2}, id="fp8-token-once-two-rows"),
    pytest.param("fp8", {"token_once": True, "block_k": 256}, id="fp8-token-once-one-step"),
    # FP8's plain loop runs whole steps unmasked from FP8_WHOLE_STEPS_FROM_ROWS rows (the test's
    # 16), the step past R masked after them; every step masked below. The same bits either way.
    pytest.param("fp8", {"whole_steps": False}, id="fp8-every-step-masked"),
    pytest.param("fp8", {"whole_steps": False, "pdl": True}, id="fp8-every-step-masked-pdl"),
    pytest.param("fp8", {"whole_steps": True, "block_n": 2}, id="fp8-whole-steps-two-rows"),
    pytest.param("fp8", {"whole_steps": False, "num_stages": 2}, id="fp8-masked-pipelined"),
    pytest.param("fp8", {"whole_steps": True, "block_k": 32}, id="fp8-whole-steps-even-k"),
    # MXFP4's pipelined loop loads its scales a step ahead, and takes PDL (its wait comes before
    # the loop's first copies); the step past R is masked at block_k 64 and R = 160.
    pytest.param("mxfp4", {"num_stages": 3, "pdl": True}, id="mxfp4-pipelined-pdl"),
    pytest.param("mxfp4", {"num_stages": 2, "block_k": 32}, id="mxfp4-pipelined-even-k"),
    # MXFP4's token words loaded by each thread itself (inline PTX on the GPU, `tl.load` here):
    # the quads split back into the four words of a pair; masked and unmasked steps, pipelined.
    pytest.param("fp8", {"token_load": "quads"}, id="fp8-token-quads"),
    pytest.param("fp8", {"token_load": "quads", "block_n": 2}, id="fp8-token-quads-two-rows"),
    pytest.param(
        "fp8", {"token_load": "quads", "whole_steps": False}, id="fp8-token-quads-every-step-masked"
    ),
    pytest.param("fp8", {"token_load": "quads", "block_k": 32}, id="fp8-token-quads-even-k"),
    pytest.param("fp8", {"token_load": "quads", "pdl": True}, id="fp8-token-quads-pdl-peeled"),
    pytest.param("fp8", {"token_load": "quads", "num_stages": 2}, id="fp8-token-quads-pipelined"),
    pytest.param("mxfp4", {"token_load": "words"}, id="mxfp4-token-words"),
    pytest.param("mxfp4", {"token_load": "quads"}, id="mxfp4-token-quads"),
    pytest.param("mxfp4", {"token_load": "quads", "block_k": 32}, id="mxfp4-token-quads-even-k"),
    pytest.param("mxfp4", {"token_load": "words", "block_k": 32}, id="mxfp4-token-words-even-k"),
    pytest.param(
        "mxfp4", {"token_load": "quads", "num_stages": 3, "pdl": True}, id="mxfp4-quads-pipelined"
    ),
    # MXFP4 weights in `mx_rotated`'s layout (the test rotates them): a word's values decoded
    # exact, four at a time; masked and even steps, pipelined with PDL, the token's quads.
    pytest.param("mxfp4", {"mx_rotated": True}, id="mxfp4-rotated"),
    pytest.param("mxfp4", {"mx_rotated": True, "block_k": 32}, id="mxfp4-rotated-even-k"),
    pytest.param(
        "mxfp4", {"mx_rotated": True, "num_stages": 3, "pdl": True}, id="mxfp4-rotated-pipelined"
    ),
    pytest.param("mxfp4", {"mx_rotated": True, "token_load": "quads"}, id="mxfp4-rotated-quads"),
    pytest.param("mxfp4", {"mx_rotated": True, "group_major": False}, id="mxfp4-rotated-row-major"),
    # The first two steps' weights loaded before the dependent-launch wait.
    pytest.param("fp8", {"pdl": True, "pdl_peel": 2}, id="fp8-pdl-peel-two"),
    pytest.param("fp8", {"pdl": True, "pdl_peel": 2, "block_k": 32}, id="fp8-pdl-peel-two-even"),
    # The local (token, slot) pairs served first in launch order (`program_expert`).
    pytest.param("fp8", {"local_first": True}, id="fp8-local-first"),
    pytest.param(
        "fp8", {"local_first": True, "pdl": True, "pdl_trigger": "local"}, id="fp8-local-first-pdl"
    ),  # fmt: skip
    pytest.param("mxfp4", {"local_first": True, "mx_rotated": True}, id="mxfp4-local-first"),
    pytest.param("mxfp4", {"tensor_cores": True}, id="mxfp4-tensor-cores"),
    pytest.param("mxfp4", {"tensor_cores": True, "block_k": 128}, id="mxfp4-tensor-cores-tail"),
    pytest.param(
        "mxfp4",
        {"tensor_cores": True, "block_k": 256, "block_n": 32},
        id="mxfp4-tensor-cores-one-step-32-rows",
    ),
]
# Variants whose fp32 sums run in another order: bitwise only on inputs whose sums are exact.
REORDERING = ("split_k", "tensor_cores", "group_major")


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "variant"), GEMV_CASES)
def test_sparse_gemv_variants_match_the_default(fmt, variant):
    """R = 160 is five 32-value steps (a short last step at block_k 64, short or empty split-K
    slices). Pipelining keeps the default's arithmetic, so its outputs are bitwise the default's on
    random inputs; split-K adds the slices' sums last and the tensor cores sum in their own order,
    so on random inputs they are held to the reference's tolerance, and on inputs whose sums are
    exact in any order they must be bitwise.
    Non-local slots keep their NaN poison in every variant."""
    g = torch.Generator().manual_seed(3)
    T, K, E, N, R, offset = 2, 3, 3, 64, 160, 4
    ids = torch.tensor([[4, 9, 6], [5, 4, 0]], dtype=torch.int32)
    local = (ids >= offset) & (ids < offset + E)
    for exact in (False, True):
        if exact:
            w, s, wd = exact_weights(fmt, E, N, R, g)
            x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
        else:
            w, s, wd = quantised(fmt, torch.randn(E, N, R, generator=g) * R**-0.5)
            x = torch.randn(T, R, generator=g).bfloat16()
        b = (torch.randn(E, N, generator=g) * 0.5).bfloat16()
        for glu in ("none", "swiglu_oai"):
            n_out = N // 2 if glu != "none" else N
            want = torch.full((T, K, n_out), float("nan"), dtype=torch.bfloat16)
            got = torch.full_like(want, float("nan"))
            # 16 rows a program: the interpreter runs 8x fewer programs than at the GPU's default
            # of 2 (a row's sum does not depend on the block).
            opts = dict(expert_offset=offset, glu=glu, block_k=64, block_n=16)
            gemv(x, ids, w, s, b, want, **opts)
            w_v = rotate_mxfp4(w) if variant.get("mx_rotated") else w
            gemv(x, ids, w_v, s, b, got, **{**opts, **variant})
            assert torch.isnan(got[~local].float()).all()
            if exact or not any(k in variant for k in REORDERING):
                assert torch.equal(got.view(torch.int16), want.view(torch.int16))
            else:
                for t, k in local.nonzero().tolist():
                    e = int(ids[t, k]) - offset
                    ref_tk = rows_ref(x[t : t + 1], wd[e], b[e], glu)[0]
                    torch.testing.assert_close(got[t, k].float(), ref_tk, rtol=2**-7, atol=2**-7)


@pytest.mark.parametrize("variant", [{}, {"block_k": 32, "max_registers": 80}])
def test_mxfp4_rotated_weights_give_the_natural_bits(variant):
    """MXFP4 weights in `mx_rotated`'s layout (``mx_rotated=True``) give the natural layout's bits
    (random and exact-sum inputs, both GLUs through one check each); natural weights read as
    rotated do not (the layout is what the decode reads). Under the interpreter the decode runs
    the PTX's integer steps; the PTX is tests/kernels/test_mx_decode_ptx.py's."""
    g = torch.Generator().manual_seed(5)
    T, K, E, N, R, offset = 2, 3, 3, 64, 160, 4
    ids = torch.tensor([[4, 9, 6], [5, 4, 0]], dtype=torch.int32)
    w, s, _ = quantised("mxfp4", torch.randn(E, N, R, generator=g) * R**-0.5)
    x = torch.randn(T, R, generator=g).bfloat16()
    b = (torch.randn(E, N, generator=g) * 0.5).bfloat16()
    opts = {**dict(expert_offset=offset, glu="swiglu_oai", block_k=64, block_n=16), **variant}
    want, got, wrong = (torch.full((T, K, N // 2), float("nan"), dtype=torch.bfloat16)
                        for _ in range(3))  # fmt: skip
    gemv(x, ids, w, s, b, want, **opts)
    gemv(x, ids, rotate_mxfp4(w), s, b, got, **opts, mx_rotated=True)
    gemv(x, ids, w, s, b, wrong, **opts, mx_rotated=True)
    local = (ids >= offset) & (ids < offset + E)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert torch.isfinite(got[local].float()).all() and torch.isnan(got[~local].float()).all()
    assert not torch.equal(wrong[local].view(torch.int16), want[local].view(torch.int16))


@pytest.mark.parametrize("fmt", FORMATS)
def test_local_first_serves_each_local_slot_once(fmt):
    """``local_first`` hands the local (token, slot) pairs to the first programs in launch order:
    every routing below (none local, all local, a remote slot first, last or between, remote
    tokens) gives the default's bits on the local rows and leaves the others' NaN poison, so no
    pair is served twice, skipped, or written to another pair's row."""
    g = torch.Generator().manual_seed(11)
    K, E, N, R, offset = 4, 4, 32, 64, 8
    w, s, _ = quantised(fmt, torch.randn(E, N, R, generator=g) * R**-0.5)
    if fmt == "mxfp4":
        w = rotate_mxfp4(w)
    b = (torch.randn(E, N, generator=g) * 0.5).bfloat16()
    routings = [
        [[0, 1, 2, 3]],  # none local
        [[8, 9, 10, 11]],  # all local
        [[0, 9, 10, 11]],  # the first slot remote
        [[9, 0, 1, 10]],  # remote slots between
        [[11, 10, 9, 12]],  # the last slot remote
        [[1, 2, 3, 4], [9, 0, 8, 12], [13, 14, 15, 10]],  # a token with none, then scattered
    ]
    for ids_list in routings:
        ids = torch.tensor(ids_list, dtype=torch.int32)
        T = ids.shape[0]
        x = torch.randn(T, R, generator=g).bfloat16()
        local = (ids >= offset) & (ids < offset + E)
        want, got = (torch.full((T, K, N), float("nan"), dtype=torch.bfloat16) for _ in range(2))
        opts = dict(expert_offset=offset, block_n=16, mx_rotated=fmt == "mxfp4")
        gemv(x, ids, w, s, b, want, **opts)
        gemv(x, ids, w, s, b, got, **opts, local_first=True)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16)), ids_list
        assert torch.isnan(got[~local].float()).all() and torch.isfinite(got[local].float()).all()
    with pytest.raises(ValueError, match="local_first takes at most 64"):
        ids = torch.full((17, K), offset, dtype=torch.int32)
        out = torch.zeros(17, K, N, dtype=torch.bfloat16)
        sparse_gemv(torch.zeros(17, R).bfloat16(), ids, w, s, b, out, expert_offset=offset,
                    mx_rotated=fmt == "mxfp4", local_first=True)  # fmt: skip


def test_fp8_blocks_follow_the_tokens():
    """FP8 takes 4 rows at 512 bytes a step from FP8_FOUR_ROWS_FROM_TOKENS tokens (measured on the
    H200), 2 rows at 1,024 below, and the 4-row blocks load the token once a step
    (FP8_TOKEN_ONCE_FROM_ROWS) and run their whole steps unmasked (FP8_WHOLE_STEPS_FROM_ROWS; the
    one-token 2-row blocks keep every step masked, measured faster there); MXFP4 one tile at every
    count."""
    from moebench.kernels.sparse_launch import (
        FP8_FOUR_ROWS_FROM_TOKENS,
        FP8_TOKEN_ONCE_FROM_ROWS,
        FP8_WHOLE_STEPS_FROM_ROWS,
        default_blocks,
    )

    assert FP8_TOKEN_ONCE_FROM_ROWS == default_blocks("fp8", FP8_FOUR_ROWS_FROM_TOKENS)[0] > 2
    assert FP8_WHOLE_STEPS_FROM_ROWS == default_blocks("fp8", FP8_FOUR_ROWS_FROM_TOKENS)[0]
    assert default_blocks("fp8", 1) == (2, 1024, 1)
    assert default_blocks("fp8", FP8_FOUR_ROWS_FROM_TOKENS - 1) == (2, 1024, 1)
    assert default_blocks("fp8", FP8_FOUR_ROWS_FROM_TOKENS) == (4, 512, 1)
    assert default_blocks("mxfp4", 1) == default_blocks("mxfp4", 64) == (16, 1024, 4)


def test_registers_follow_the_tokens():
    """MXFP4 from MXFP4_CAPPED_FROM_TOKENS tokens: capped at MXFP4_CAPPED_REGISTERS, the bias
    loaded after the K loop (the cap would spill it; measured on the H200); below, and FP8 at every
    count, no cap and the epilogue's loads before the loop."""
    from moebench.kernels.sparse_launch import (
        MXFP4_CAPPED_FROM_TOKENS,
        MXFP4_CAPPED_REGISTERS,
        default_registers,
    )

    assert default_registers("mxfp4", MXFP4_CAPPED_FROM_TOKENS) == (MXFP4_CAPPED_REGISTERS, False)
    assert default_registers("mxfp4", 64) == (MXFP4_CAPPED_REGISTERS, False)
    assert default_registers("mxfp4", MXFP4_CAPPED_FROM_TOKENS - 1) == (0, True)
    assert default_registers("fp8", 1) == default_registers("fp8", 64) == (0, True)


def test_sparse_gemv_split_k_partials_checked():
    w, s, _ = quantised("fp8", torch.randn(2, 32, 64))
    b = torch.zeros(2, 32, dtype=torch.bfloat16)
    ids = torch.zeros(1, 1, dtype=torch.int32)
    x = torch.zeros(1, 64, dtype=torch.bfloat16)
    out = torch.empty(1, 1, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="partials must be float32"):
        sparse_gemv(x, ids, w, s, b, out, expert_offset=0, split_k=2,
                    partials=torch.empty(1, 1, 3, 32))  # fmt: skip
    with pytest.raises(ValueError, match="split_k must be >= 1"):
        sparse_gemv(x, ids, w, s, b, out, expert_offset=0, split_k=0)


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "variant"), GEMV_CASES)
def test_sparse_gemv_never_touches_other_ranks_experts(fmt, variant):
    """The local experts sit between NaN experts of other ranks (and ids point far outside):
    a program that did not leave at once would read NaN. The output must be finite and
    bitwise the output of a clean, contiguous copy."""
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
    ids = torch.tensor([[100, 98, 103], [-5, 101, 1 << 20], [99, 102, 100]], dtype=torch.int32)
    x = torch.randn(T, R).bfloat16()
    opts = {"block_k": 64 if variant.get("tensor_cores") else 32, **variant}
    poisoned = torch.zeros(T, K, N, dtype=torch.bfloat16)
    clean = torch.zeros(T, K, N, dtype=torch.bfloat16)
    # The poisoned experts go to the device whole, so that the slices keep their NaN neighbours.
    w_all, s_all, b_all = w_all.to(DEVICE), s_all.to(DEVICE), b_all.to(DEVICE)
    gemv(x, ids, w_all[E : 2 * E], s_all[E : 2 * E], b_all[E : 2 * E], poisoned,
         expert_offset=offset, **opts)  # fmt: skip
    gemv(x, ids, w.clone(), s.clone(), b.clone(), clean, expert_offset=offset, **opts)
    assert torch.isfinite(poisoned.float()).all()
    assert torch.equal(poisoned.view(torch.int16), clean.view(torch.int16))


# (T tokens, layout, float32 y); each names its edge.
COMBINES = [
    pytest.param(1, "TKD", torch.float32, id="one-token-sparse-rows"),
    pytest.param(5, "ETD", torch.bfloat16, id="prime-tokens-dense-rows"),
]


@pytest.mark.parametrize(("T", "layout", "y_dtype"), COMBINES)
def test_combine_topk_skips_non_local_slots(T, layout, y_dtype):
    """Non-local slots hold NaN weights and (sparse) NaN rows: y stays finite and equals the
    reference sum over local slots; a float32 y matches it bit for bit (no fused multiply-add)."""
    torch.manual_seed(T)
    K, E, D, offset = 3, 2, 48, 6
    ids = torch.tensor([[6, 3, 7], [9, 7, 6], [0, 1, 2], [7, 6, 11], [6, 8, 7]][:T]).int()
    local = (ids >= offset) & (ids < offset + E)
    wts = torch.where(local, torch.rand(T, K), float("nan"))
    if layout == "TKD":
        o = torch.randn(T, K, D).bfloat16()
        o[~local] = float("nan")
        rows = o.float()
    else:
        o = torch.randn(E, T, D).bfloat16()
        rows = torch.stack([o[(ids[:, k] - offset).clamp(0, E - 1), torch.arange(T)]
                            for k in range(K)], dim=1).float()  # fmt: skip
    want = torch.zeros(T, D)
    for k in range(K):
        want[local[:, k]] += wts[local[:, k], k, None] * rows[local[:, k], k]
    for pdl in (False, True):  # a programmatic dependent launch writes the same bits
        y = torch.empty(T, D, dtype=y_dtype)
        combine(o, ids, wts, y, expert_offset=offset, local_experts=E, layout=layout, pdl=pdl)
        assert torch.isfinite(y.float()).all()
        assert torch.equal(y, want.to(y_dtype))


def test_batched_gemm_every_expert_every_token():
    """The dense kernel on an N that is an odd multiple of 32 (32-column programs) and a prime
    token count, both formats, with and without the fused GLU."""
    torch.manual_seed(11)
    E, T, D, F = 3, 5, 64, 48  # fc1: 2F = 96 output columns, 48 after the GLU
    x = torch.randn(T, D).bfloat16()
    for fmt in FORMATS:
        w13, s13, w13d = quantised(fmt, torch.randn(E, 2 * F, D) * D**-0.5)
        b13 = (torch.randn(E, 2 * F) * 0.5).bfloat16()
        a = torch.empty(E, T, F, dtype=torch.bfloat16)
        dense(x, w13, s13, b13, a, glu="silu")
        for e in range(E):
            want = rows_ref(x, w13d[e], b13[e], "silu")
            torch.testing.assert_close(a[e].float(), want, rtol=2**-7, atol=2**-7)
        w2, s2, w2d = quantised(fmt, torch.randn(E, 96, 64) * 0.1)  # N = 96: 32-column blocks
        b2 = (torch.randn(E, 96) * 0.5).bfloat16()
        xe = torch.randn(E, T, 64).bfloat16()
        o = torch.empty(E, T, 96, dtype=torch.bfloat16)
        dense(xe, w2, s2, b2, o)
        for e in range(E):
            torch.testing.assert_close(o[e].float(), rows_ref(xe[e], w2d[e], b2[e], "none"),
                                       rtol=2**-7, atol=2**-7)  # fmt: skip


def test_launchers_name_bad_arguments():
    w, s, _ = quantised("fp8", torch.randn(2, 32, 64))
    b = torch.zeros(2, 32, dtype=torch.bfloat16)
    ids = torch.zeros(1, 1, dtype=torch.int32)
    x = torch.zeros(1, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="out must be bf16"):
        sparse_gemv(x, ids, w, s, b, torch.empty(1, 1, 16, dtype=torch.bfloat16), expert_offset=0)
    with pytest.raises(ValueError, match="tensor_cores is implemented for MXFP4"):
        sparse_gemv(x, ids, w, s, b, torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                    tensor_cores=True)  # fmt: skip
    with pytest.raises(ValueError, match="pdl takes the plain loop"):
        sparse_gemv(x, ids, w, s, b, torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                    pdl=True, split_k=2)  # fmt: skip
    with pytest.raises(ValueError, match="pdl_trigger must be start, local or end"):
        sparse_gemv(x, ids, w, s, b, torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                    pdl=True, pdl_trigger="late")  # fmt: skip
    with pytest.raises(ValueError, match="no num_stages for FP8"):
        sparse_gemv(x, ids, w, s, b, torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                    pdl=True, num_stages=2)  # fmt: skip
    wm, sm, _ = quantised("mxfp4", torch.randn(2, 32, 64))
    with pytest.raises(ValueError, match="token_once is for FP8"):
        sparse_gemv(x, ids, wm, sm, b, torch.empty(1, 1, 32, dtype=torch.bfloat16),
                    expert_offset=0, token_once=True)  # fmt: skip
    with pytest.raises(ValueError, match="token_load takes the CUDA-core loops"):
        sparse_gemv(x, ids, w, s, b, torch.empty(1, 1, 32, dtype=torch.bfloat16),
                    expert_offset=0, token_load="words")  # fmt: skip
    with pytest.raises(ValueError, match="16-byte aligned"):
        sparse_gemv(x[:, 4:36], ids, w[:, :, :32], s, b,
                    torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                    token_load="quads")  # fmt: skip
    with pytest.raises(ValueError, match="token_load must be one of"):
        sparse_gemv(x, ids, wm, sm, b, torch.empty(1, 1, 32, dtype=torch.bfloat16),
                    expert_offset=0, token_load="vector")  # fmt: skip
    with pytest.raises(ValueError, match="16-byte aligned"):
        sparse_gemv(x[:, 4:36], ids, wm[:, :, :16], sm[:, :, :1], b,
                    torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                    token_load="quads")  # fmt: skip
    with pytest.raises(ValueError, match="whole_steps is for FP8"):
        sparse_gemv(x, ids, wm, sm, b, torch.empty(1, 1, 32, dtype=torch.bfloat16),
                    expert_offset=0, whole_steps=True)  # fmt: skip
    with pytest.raises(ValueError, match="block_n % 16 == 0"):
        sparse_gemv(x, ids, wm, sm, b, torch.empty(1, 1, 32, dtype=torch.bfloat16),
                    expert_offset=0, tensor_cores=True, block_n=8)  # fmt: skip
    with pytest.raises(ValueError, match="w_scale float32"):
        sparse_gemv(x, ids, w, s[:1], b, torch.empty(1, 1, 32, dtype=torch.bfloat16),
                    expert_offset=0)  # fmt: skip
    for bad in ({}, {"split_k": 2}, {"tensor_cores": True}):
        with pytest.raises(ValueError, match="mx_rotated is for MXFP4 weights"):
            sparse_gemv(x, ids, w if not bad else wm, s if not bad else sm, b,
                        torch.empty(1, 1, 32, dtype=torch.bfloat16), expert_offset=0,
                        mx_rotated=True, **bad)  # fmt: skip
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        batched_gemm(x, w.float(), s, b, torch.empty(2, 1, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="layout"):
        combine_topk(x[None], ids, ids.float(), x, expert_offset=0, local_experts=1, layout="X")
