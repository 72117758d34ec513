"""The MXFP4 tile in Gluon (`moebench.kernels.mx_gluon`), its layout (`mx_gluon_layout`) and its
pass table (`pass_table`).

On the CPU (the interpreter): the layout is a permutation that comes back to the natural bytes
and puts each value where the kernel's thread reads it for its MMA fragment; the pass table is the
routing's passes in `grouped_slots`' order. On the GPU (``make test-gpu``; Gluon has no
interpreter): the tile against the Triton tile, bitwise where every sum is exact, and against the
reference, for each GLU, with and without the 64-value tail, fc1's token rows and fc2's slot rows.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from decode_inputs import exact_weights, quantised, rows_ref
from kernel_device import DEVICE, on_device

from moebench.kernels.grouped_gemv import grid_programs, grouped_gemv, word_aligned_scales
from moebench.kernels.grouped_launch import Launch
from moebench.kernels.mx_gluon_layout import (
    ROWS,
    STEP,
    fits,
    gluon_scales,
    gluon_words,
    pack_gluon,
    unpack_gluon,
)
from moebench.kernels.mx_rotated import POSITIONS
from moebench.kernels.pass_table import TABLE_HEAD, new_table, pass_table

gpu_only = pytest.mark.skipif(DEVICE == "cpu", reason="Gluon has no interpreter: GPU only")


def _mx(E: int, N: int, R: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(0, 256, (E, N, R // 2), generator=g, dtype=torch.uint8)
    s = torch.randint(0, 129, (E, N, R // 32), generator=g, dtype=torch.uint8)
    return w, s


@pytest.mark.parametrize(
    "R", [2880, 512, 576], ids=["gpt-oss-tail", "whole-steps", "four-and-a-tail"]
)
def test_layout_comes_back_to_the_natural_bytes(R):
    w, s = _mx(2, 128, R, seed=R)
    packed = pack_gluon(w, s)
    back_w, back_s = unpack_gluon(packed, R)
    assert torch.equal(back_w, w) and torch.equal(back_s, s)
    E, N = 2, 128
    assert tuple(packed.main.shape) == (E, N // ROWS, R // STEP, ROWS, 16)
    assert tuple(packed.scales.shape) == (E, N // ROWS, R // STEP, ROWS)


def _nibble(word: int, value: int) -> int:
    """Natural value ``value`` (0..7) of a rotated word (`mx_rotated.POSITIONS`)."""
    return sum(((word >> place) & 1) << bit for bit, place in enumerate(POSITIONS[value]))


@pytest.mark.parametrize("R", [576, 512], ids=["tail", "no-tail"])
def test_each_value_lies_where_its_thread_reads_it(R):
    """Every value of every row, found by the kernel's addressing (row r's words of step q at
    256 (r // 16) + 128 ((r // 8) % 2) + 16 (r % 8) + 4a + j, the tail's at 8 row + 2a + j) and
    the fragment's K order (K = 32j + 16cp + 8sub + 2a + h in pair 2cp + sub, half h, whose
    nibbles are (0, 2), (4, 6), (1, 3), (5, 7)), is the natural value at (row, K); the step's
    scale word holds the group's byte at byte j."""
    E, N = 1, 128
    w, s = _mx(E, N, R, seed=7)
    codes = torch.stack((w & 0xF, w >> 4), dim=-1).reshape(E, N, R)
    main, tail = gluon_words(w)
    scales, tail_scales = gluon_scales(s)
    pair_nibbles = ((0, 2), (4, 6), (1, 3), (5, 7))
    flat, tail_flat = main.reshape(-1).tolist(), tail.reshape(-1).tolist()
    S = R // STEP
    for row in range(0, N, 7):
        nb, r = divmod(row, ROWS)
        for k in range(R):
            q, kk = divmod(k, STEP)
            j, a = kk // 32, (kk % 8) // 2
            cp, sub, h = (kk % 32) // 16, (kk % 16) // 8, kk % 2
            nib = pair_nibbles[2 * cp + sub][h]
            if q < S:
                within = 256 * (r // 16) + 128 * ((r // 8) % 2) + 16 * (r % 8) + 4 * a + j
                word = flat[((nb * S + q) * ROWS) * 16 + within]
                scale = (int(scales[0, nb, q, r]) >> (8 * j)) & 0xFF
            else:
                word = tail_flat[row * 8 + 2 * a + j]
                scale = (int(tail_scales[0, row]) >> (8 * j)) & 0xFF
            assert _nibble(word & 0xFFFFFFFF, nib) == int(codes[0, row, k]), (row, k)
            assert scale == int(s[0, row, k // 32]), (row, k)


def test_layout_takes_whole_tiles_and_even_steps_only():
    assert fits(5760, 2880) and fits(2880, 2880) and fits(64, 512) and fits(64, 768)
    assert not fits(96, 2880)  # N not whole tiles of 64 rows
    assert not fits(128, 384)  # three steps: the loop runs two a turn
    assert not fits(128, 2880 + 32)  # a 96-value last step
    assert not fits(128, 128) and not fits(128, 256)  # one or two steps: one turn of the loop
    w, s = _mx(1, 96, 512, seed=1)
    with pytest.raises(ValueError, match="multiple of 64"):
        pack_gluon(w, s)


# (T, K, E, offset, ids or None for a seeded draw, block_m): each names its edge.
TABLES = [
    pytest.param(12, 4, 8, 8, None, 4, id="drawn"),
    pytest.param(17, 2, 2, 4, [[5, 1]] * 17, 16, id="an-expert-past-a-pass"),
    pytest.param(3, 3, 4, 2, [[4, 4, 4]] * 3, 4, id="duplicate-ids"),
    pytest.param(3, 2, 3, 40, [[1, 2], [5, 3], [7, 0]], 16, id="nothing-local"),
]


@pytest.mark.parametrize(("T", "K", "E", "offset", "ids", "block_m"), TABLES)
def test_pass_table_lists_the_routings_passes(T, K, E, offset, ids, block_m):
    """Row j is the j-th pass of block_m slots over the touched local experts (experts in
    increasing id, a pass's slots in increasing slot number, the last repeated past the live
    ones); rows past the last pass are zeros."""
    if ids is None:
        g = torch.Generator().manual_seed(3)
        ids = torch.randint(0, 3 * E, (T, K), generator=g, dtype=torch.int32)
    else:
        ids = torch.tensor(ids, dtype=torch.int32)
    programs = grid_programs(T, K, E, Launch(path="dot", block_m=block_m, block_n=64,
                                             block_k=128, num_warps=4, pass_grid=True))  # fmt: skip
    table = new_table(programs, block_m, "cpu")
    on_device(pass_table)(ids, table, expert_offset=offset, experts=E, block_m=block_m)
    expected = []
    flat = ids.reshape(-1).tolist()
    for e in range(E):
        slots = [s for s, i in enumerate(flat) if i - offset == e]
        for m0 in range(0, len(slots), block_m):
            live = slots[m0 : m0 + block_m]
            expected.append(
                [e, len(live), len(slots), m0, *live, *[live[-1]] * (block_m - len(live))]
            )
    assert len(expected) <= programs
    assert table[: len(expected)].tolist() == expected
    assert not table[len(expected) :].any()
    assert table.shape[1] == TABLE_HEAD + block_m


def test_pass_table_refuses_another_width():
    ids = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="int32"):
        pass_table(ids, new_table(4, 8, "cpu"), expert_offset=0, experts=2, block_m=16)


# ---- the tile, on the GPU ---------------------------------------------------------------------

TRITON_TILE = Launch(path="dot", block_m=16, block_n=64, block_k=128, num_warps=4,
                     num_stages=3, pass_grid=True)  # fmt: skip


def _run_gluon(x, ids, w, s, b, out, *, offset, E, glu, block_m=16, pdl=False):
    """The Gluon stage as the arm runs it: the table, then the tile, on the GPU."""
    from moebench.kernels.mx_gluon import grouped_gluon_mxfp4

    T, K = ids.shape
    cuda = lambda t: t.to("cuda")
    table = new_table(grid_programs(T, K, E, dataclasses.replace(TRITON_TILE, block_m=block_m)),
                      block_m, "cuda")  # fmt: skip
    pass_table(cuda(ids), table, expert_offset=offset, experts=E, block_m=block_m, pdl=pdl)
    got = cuda(out)
    grouped_gluon_mxfp4(cuda(x), table, pack_gluon(cuda(w), cuda(s)), cuda(b), got, top_k=K,
                        block_m=block_m, glu=glu, pdl=pdl)  # fmt: skip
    torch.cuda.synchronize()
    return got.cpu()


def _case(R: int, N: int, seed: int, exact: bool):
    """Weights [3, N, R / 2], scales (exact: bytes 120-128, every sum exact in fp32), biases,
    tokens and a routing of 19 tokens, top-2 over local experts [4, 7): expert 5 with 19 slots
    (two passes of 16), expert 6 none, slots on remote experts."""
    E, T = 3, 19
    g = torch.Generator().manual_seed(seed)
    if exact:
        w, _, _ = exact_weights("mxfp4", E, N, R, g)
        s = torch.randint(120, 129, (E, N, R // 32), generator=g, dtype=torch.uint8)
        x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    else:
        w, s, _ = quantised("mxfp4", torch.randn(E, N, R, generator=g) * 0.5)
        x = torch.randn(T, R, generator=g).bfloat16()
    b = (torch.randint(-64, 64, (E, N), generator=g) + 0.3).bfloat16()
    ids = torch.tensor([[5, 4]] * 10 + [[5, 9]] * 9, dtype=torch.int32)
    ids[3] = torch.tensor([1, 5])
    return w, s, b, x, ids, E


def _nan(*shape):
    return torch.full(shape, float("nan"), dtype=torch.bfloat16)


@gpu_only
@pytest.mark.parametrize("R", [2880, 512], ids=["gpt-oss-tail", "no-tail"])
@pytest.mark.parametrize("glu", ["none", "swiglu_oai", "silu"])
def test_gluon_tile_gives_the_triton_tiles_bits_where_sums_are_exact(glu, R):
    """fc1-like (every slot reads its token) and fc2-like (every slot its own row of [T, K, R])
    on exact data: the Triton one-pass tile's bits; the rows of remote slots keep their NaN."""
    N = 128
    w, s, b, x, ids, E = _case(R, N, seed=11, exact=True)
    T, K = ids.shape
    cols = N // 2 if glu != "none" else N
    for xin in (x, torch.stack([x, x.flip(0)], dim=1)):
        want, got = _nan(T, K, cols), None
        on_device(grouped_gemv)(xin, ids, w, word_aligned_scales(s), b, want, expert_offset=4,
                                launch=TRITON_TILE, glu=glu)  # fmt: skip
        got = _run_gluon(xin, ids, w, s, b, _nan(T, K, cols), offset=4, E=E, glu=glu)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16))
        remote = (ids - 4 < 0) | (ids - 4 >= E)
        assert torch.isnan(got[remote].float()).all() and torch.isfinite(got[~remote].float()).all()


@gpu_only
@pytest.mark.parametrize("glu", ["none", "swiglu_oai"])
def test_gluon_tile_matches_the_reference(glu):
    """Random MXFP4 weights at gpt-oss-20b's R, slot by slot against the fp32 reference within
    bf16's rounding; with the dependent launch as the arm launches it."""
    from moebench.core import reference as ref

    N, R = 256, 2880
    w, s, b, x, ids, E = _case(R, N, seed=5, exact=False)
    T, K = ids.shape
    cols = N // 2 if glu != "none" else N
    got = _run_gluon(x, ids, w, s, b, _nan(T, K, cols), offset=4, E=E, glu=glu, pdl=True)
    wd = ref.dequant_weight_mxfp4(w, s)
    for t in range(T):
        for k in range(K):
            e = int(ids[t, k]) - 4
            if 0 <= e < E:
                want = rows_ref(x[t : t + 1], wd[e], b[e], glu)[0]
                err = (got[t, k].float() - want).abs().max() / want.abs().max()
                assert err < 1e-2, (t, k, float(err))
