"""The FP8 tile in Gluon (`moebench.kernels.fp8_gluon`) and its layout (`fp8_gluon_layout`).

On the CPU: the layout is a permutation (and `fp8_placed`'s bit placement) that comes back to the
natural bytes and puts each value where the kernel's thread reads it for its MMA fragment. On the
GPU (``make test-gpu``; Gluon has no interpreter): the tile against the Triton tile, bitwise where
every sum is exact, and against the reference, for each GLU, with and without the 64-value tail,
fc1's token rows and fc2's slot rows. The pass table is `test_mx_gluon`'s.
"""

from __future__ import annotations

import pytest
import torch
from decode_inputs import exact_weights, rows_ref
from kernel_device import DEVICE, on_device

from moebench.kernels.fp8_gluon_layout import (
    ROWS,
    STEP,
    TAIL_WORDS,
    WORDS,
    pack_fp8_gluon,
    unpack_fp8_gluon,
)
from moebench.kernels.fp8_placed import POSITIONS
from moebench.kernels.grouped_gemv import grid_programs, grouped_gemv
from moebench.kernels.grouped_launch import Launch
from moebench.kernels.pass_table import new_table, pass_table

gpu_only = pytest.mark.skipif(DEVICE == "cpu", reason="Gluon has no interpreter: GPU only")


def _bytes(E: int, N: int, R: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (E, N, R), generator=g, dtype=torch.uint8)


@pytest.mark.parametrize(
    "R", [2880, 512, 576], ids=["gpt-oss-tail", "whole-steps", "four-and-a-tail"]
)
def test_layout_comes_back_to_the_natural_bytes(R):
    w = _bytes(2, 128, R, seed=R)
    packed = pack_fp8_gluon(w)
    assert torch.equal(unpack_fp8_gluon(packed, R), w)
    assert tuple(packed.main.shape) == (2, 128 // ROWS, R // STEP, ROWS * WORDS)
    assert tuple(packed.tail.shape) == (2, 128, TAIL_WORDS)
    e4m3 = pack_fp8_gluon(w.view(torch.float8_e4m3fn))
    assert torch.equal(e4m3.main, packed.main) and torch.equal(e4m3.tail, packed.tail)


def _value(word: int, value: int) -> int:
    """Natural byte ``value`` (0..3) of a placed word (`fp8_placed.POSITIONS`)."""
    return sum(((word >> place) & 1) << bit for bit, place in enumerate(POSITIONS[value]))


@pytest.mark.parametrize("R", [576, 512], ids=["tail", "no-tail"])
def test_each_value_lies_where_its_thread_reads_it(R):
    """Every value of every seventh row, found by the kernel's addressing (row r's word j of lane
    a in step q at 512 (r // 16) + 256 ((r // 8) % 2) + 128 (j // 4) + 16 (r % 8) + 4a + j % 4,
    the tail's at 16 row + 4a + j) and the fragment's K order (K = 16j + 8p + 2a + h: value
    2p + h of the word), is the natural byte at (row, K)."""
    E, N = 1, 128
    w = _bytes(E, N, R, seed=7)
    main, tail = pack_fp8_gluon(w)
    flat, tail_flat = main.reshape(-1).tolist(), tail.reshape(-1).tolist()
    S = R // STEP
    for row in range(0, N, 7):
        nb, r = divmod(row, ROWS)
        for k in range(R):
            q, kk = divmod(k, STEP)
            j, p, a, h = kk // 16, (kk % 16) // 8, (kk % 8) // 2, kk % 2
            if q < S:
                within = (512 * (r // 16) + 256 * ((r // 8) % 2) + 128 * (j // 4) + 16 * (r % 8)
                          + 4 * a + j % 4)  # fmt: skip
                word = flat[(nb * S + q) * ROWS * WORDS + within]
            else:
                word = tail_flat[row * TAIL_WORDS + 4 * a + j]
            assert _value(word & 0xFFFFFFFF, 2 * p + h) == int(w[0, row, k]), (row, k)


def test_layout_refuses_shapes_the_loop_cannot_take():
    with pytest.raises(ValueError, match="multiple of 64"):
        pack_fp8_gluon(_bytes(1, 96, 512, seed=1))
    with pytest.raises(ValueError, match="even number"):
        pack_fp8_gluon(_bytes(1, 64, 384, seed=1))
    with pytest.raises(ValueError, match="e4m3"):
        pack_fp8_gluon(torch.zeros(1, 64, 512))


# ---- the tile, on the GPU ---------------------------------------------------------------------

TRITON_TILE = Launch(path="dot", block_m=16, block_n=64, block_k=64, num_warps=4,
                     num_stages=6, pass_grid=True)  # fmt: skip


def _run_gluon(x, ids, w, s, b, out, *, offset, E, glu, pdl=False):
    """The Gluon stage as the arm runs it: the table, then the tile, on the GPU."""
    from moebench.kernels.fp8_gluon import grouped_gluon_fp8

    T, K = ids.shape
    cuda = lambda t: t.to("cuda")
    table = new_table(grid_programs(T, K, E, TRITON_TILE), 16, "cuda")
    pass_table(cuda(ids), table, expert_offset=offset, experts=E, block_m=16, pdl=pdl)
    got = cuda(out)
    grouped_gluon_fp8(cuda(x), table, pack_fp8_gluon(cuda(w)), cuda(s).float(), cuda(b), got,
                      top_k=K, block_m=16, glu=glu, pdl=pdl)  # fmt: skip
    torch.cuda.synchronize()
    return got.cpu()


def _case(R: int, N: int, seed: int, exact: bool):
    """Weights [3, N, R] e4m3 and their expert scales (exact: small integers times 1/8, every sum
    exact in fp32), biases, tokens and a routing of 19 tokens, top-2 over local experts [4, 7):
    expert 5 with 19 slots (two passes of 16), expert 6 none, slots on remote experts."""
    from moebench.core import reference as ref

    E, T = 3, 19
    g = torch.Generator().manual_seed(seed)
    if exact:
        w, s, _ = exact_weights("fp8", E, N, R, g)
        x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    else:
        w = (torch.randn(E, N, R, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
        s = torch.rand(E, generator=g) / 256 + 1e-3
        x = torch.randn(T, R, generator=g).bfloat16()
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    ids = torch.tensor([[5, 4]] * 10 + [[5, 9]] * 9, dtype=torch.int32)
    ids[3] = torch.tensor([1, 5])
    return w, s.float(), b, x, ids, E, ref


def _nan(*shape):
    return torch.full(shape, float("nan"), dtype=torch.bfloat16)


@gpu_only
@pytest.mark.parametrize("R", [2880, 512], ids=["gpt-oss-tail", "no-tail"])
@pytest.mark.parametrize("glu", ["none", "swiglu_oai", "silu"])
def test_gluon_tile_gives_the_triton_tiles_bits_where_sums_are_exact(glu, R):
    """fc1-like (every slot reads its token) and fc2-like (every slot its own row of [T, K, R])
    on exact data: the Triton one-pass tile's bits; the rows of remote slots keep their NaN."""
    N = 128
    w, s, b, x, ids, E, _ = _case(R, N, seed=11, exact=True)
    T, K = ids.shape
    cols = N // 2 if glu != "none" else N
    for xin in (x, torch.stack([x, x.flip(0)], dim=1)):
        want = _nan(T, K, cols)
        on_device(grouped_gemv)(xin, ids, w, s, b, want, expert_offset=4, launch=TRITON_TILE,
                                glu=glu)  # fmt: skip
        got = _run_gluon(xin, ids, w, s, b, _nan(T, K, cols), offset=4, E=E, glu=glu)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16))
        remote = (ids - 4 < 0) | (ids - 4 >= E)
        assert torch.isnan(got[remote].float()).all() and torch.isfinite(got[~remote].float()).all()


@gpu_only
@pytest.mark.parametrize("glu", ["none", "swiglu_oai"])
def test_gluon_tile_matches_the_reference(glu):
    """Random e4m3 weights at gpt-oss-20b's R, slot by slot against the fp32 reference within
    bf16's rounding; with the dependent launch as the arm launches it."""
    N, R = 256, 2880
    w, s, b, x, ids, E, ref = _case(R, N, seed=5, exact=False)
    T, K = ids.shape
    cols = N // 2 if glu != "none" else N
    got = _run_gluon(x, ids, w, s, b, _nan(T, K, cols), offset=4, E=E, glu=glu, pdl=True)
    wd = ref.dequant_weight_fp8_expert(w, s)
    for t in range(T):
        for k in range(K):
            e = int(ids[t, k]) - 4
            if 0 <= e < E:
                want = rows_ref(x[t : t + 1], wd[e], b[e], glu)[0]
                err = (got[t, k].float() - want).abs().max() / want.abs().max()
                assert err < 1e-2, (t, k, float(err))
