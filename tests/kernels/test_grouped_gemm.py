"""The grouped GEMM kernel against reference.grouped_gemm, in both modes and both precisions.

Runs under the Triton interpreter on the CPU (conftest sets TRITON_INTERPRET=1); with
TRITON_INTERPRET=0 on a GPU machine the same tests run the compiled kernels on CUDA.

Every run starts from poisoned buffers: the padding and tail rows of the input hold NaN (and, for
fp8, infinite scales), and the output holds a NaN with a payload no computation produces, so the
tests can tell unwritten elements from written ones.
"""

from __future__ import annotations

import functools
import os
import zlib
from dataclasses import dataclass

import pytest
import torch

from moebench.core import reference
from moebench.core.layout import expert_ends, live_row_mask, used_rows
from moebench.core.numerics import bitwise_compare, calc_diff, nonfinite
from moebench.kernels.grouped_gemm import K_LOOPS, LOADS, grouped_gemm

DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
# The oracle is float32 of the very operands the kernel reads, so the only error left is fp32
# accumulation order and the final bf16 rounding of the output (~1e-6 in calc_diff).
TOL = 1e-5
# A bf16 NaN whose payload no arithmetic produces: an element that still holds it was not written.
POISON_BITS = 0x7FA5
# The interpreter computes with numpy, which warns when the poisoned padding makes NaN; expected.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@dataclass(frozen=True, kw_only=True)
class Case:
    counts: tuple[int, ...]  # live rows of each expert; E = len(counts)
    rows: int  # M, the capacity buffer
    alignment: int
    block_m: int
    block_n: int = 128
    k: int = 256
    n: int = 128


CASES = [
    # general: partial blocks, padding after every expert, tail blocks, two N tiles
    pytest.param(
        Case(counts=(40, 17, 64, 3), rows=256, alignment=32, block_m=32, n=256), id="mixed"
    ),
    # empty expert in the middle and at the end (its endpoint equals its start)
    pytest.param(
        Case(counts=(30, 0, 50, 0), rows=192, alignment=32, block_m=32), id="empty-expert"
    ),
    # all experts empty: every block is dead, psum writes nothing
    pytest.param(Case(counts=(0, 0, 0, 0), rows=128, alignment=32, block_m=32), id="all-empty"),
    # one expert holding everything, behind two empty ones (default BLOCK_M 64)
    pytest.param(
        Case(counts=(0, 0, 200, 0), rows=320, alignment=64, block_m=64), id="one-expert-all-rows"
    ),
    # full buffer: counts are multiples of A and fill M, no padding, no tail
    pytest.param(
        Case(counts=(64, 32, 96, 64), rows=256, alignment=32, block_m=32), id="full-buffer"
    ),
    # rows fewer than a block: each expert's rows fit inside its first block
    pytest.param(Case(counts=(3, 1), rows=192, alignment=64, block_m=64), id="rows-below-block"),
    # prime E = 5, smallest alignment and block
    pytest.param(Case(counts=(17, 0, 33, 64, 9), rows=192, alignment=16, block_m=16), id="prime-E"),
    # tail blocks: most of the buffer lies past the last expert's aligned end (owned by E-1)
    pytest.param(Case(counts=(16, 16), rows=256, alignment=16, block_m=16), id="tail-blocks"),
    # BLOCK_M < A: dead blocks inside an expert's aligned span; K = 640 reaches the second packed
    # scale word; BLOCK_N = 64 puts two N tiles in one 128-row weight-scale band
    pytest.param(
        Case(counts=(5, 70), rows=256, alignment=64, block_m=16, block_n=64, k=640, n=256),
        id="dead-blocks-in-span",
    ),
    # a single expert (E = 1)
    pytest.param(Case(counts=(100,), rows=256, alignment=128, block_m=64), id="single-expert"),
]
PRECISIONS = ["fp8", "bf16"]
MODES = ["all", "psum"]


def _plan(case: Case) -> dict[str, torch.Tensor]:
    """Route slots so that expert e receives counts[e] of them, through the reference scatter."""
    g = torch.Generator().manual_seed(1)
    E = len(case.counts)
    ids = torch.repeat_interleave(torch.arange(E), torch.tensor(case.counts))
    ids = ids[torch.randperm(ids.numel(), generator=g)]
    return reference.scatter_plan(ids.view(-1, 1), 0, E, case.alignment, case.rows)


def _inputs(case: Case, precision: str, pad_M: torch.Tensor, seed: int):
    """Kernel operands (padding rows poisoned) and the float32 oracle operands (a_MK, w_ENK)."""
    g = torch.Generator().manual_seed(seed)
    E, M, K, N = len(case.counts), case.rows, case.k, case.n
    # Magnitudes that vary per 128-column group and per 128x128 weight block, so that a scale
    # applied to the wrong group or block shows up.
    x_scale = 2.0 ** torch.randint(-3, 4, (M, K // 128, 1), generator=g)
    x = (torch.randn(M, K // 128, 128, generator=g) * x_scale).view(M, K)
    w_scale = 2.0 ** torch.randint(-6, -2, (E, N // 128, 1, K // 128, 1), generator=g)
    w = (torch.randn(E, N // 128, 128, K // 128, 128, generator=g) * w_scale).view(E, N, K)
    if precision == "fp8":
        q, exp = reference.quant_fp8_ue8m0(x)
        sf = reference.pack_ue8m0(exp)
        wq, ws = reference.quant_weight_fp8_block(w)
        a_ref = reference.dequant_fp8_ue8m0(q, exp)
        w_ref = reference.dequant_weight_fp8_block(wq, ws)
        q.view(torch.uint8)[pad_M] = 0x7F  # e4m3fn NaN
        sf[pad_M] = -1  # every exponent byte 255: an infinite scale
        return (q, sf, wq, ws), (a_ref, w_ref)
    a = x.to(torch.bfloat16)
    wb = w.to(torch.bfloat16)
    a_ref, w_ref = a.float(), wb.float()
    a[pad_M] = float("nan")
    return (a, None, wb, None), (a_ref, w_ref)


def _poisoned_out(M: int, N: int) -> torch.Tensor:
    return torch.full((M, N), POISON_BITS, dtype=torch.int16, device=DEVICE).view(torch.bfloat16)


def _to_device(t: torch.Tensor | None) -> torch.Tensor | None:
    if t is None:
        return None
    if t.dtype == torch.int32:  # packed scales: keep the M-major layout
        M, G4 = t.shape
        return reference.empty_packed_scales(M, 4 * G4, DEVICE).copy_(t)
    return t.to(DEVICE)


@functools.cache
def _run(case: Case, precision: str):
    """Both modes on the same poisoned operands. Returns (plan, live_M, ref_MN, {mode: out_MN})."""
    plan = _plan(case)
    live = live_row_mask(plan["ends_E"], case.alignment, case.rows)
    seed = zlib.crc32(repr((case, precision)).encode())
    (a, sf, w, ws), (a_ref, w_ref) = _inputs(case, precision, ~live, seed)
    ref = reference.grouped_gemm(a_ref, w_ref, plan["row_expert_M"])
    ends = plan["ends_E"].to(DEVICE)
    a, sf, w, ws = (_to_device(t) for t in (a, sf, w, ws))
    outs = {}
    for mode in MODES:
        out = _poisoned_out(case.rows, case.n)
        grouped_gemm(
            a,
            sf,
            w,
            ws,
            ends,
            out,
            alignment=case.alignment,
            mode=mode,
            BLOCK_M=case.block_m,
            BLOCK_N=case.block_n,
        )
        outs[mode] = out.cpu()
    return plan, live, ref, outs


def _is_poison(out_MN: torch.Tensor) -> torch.Tensor:
    return out_MN.view(torch.int16) == POISON_BITS


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CASES)
def test_live_rows_match_reference(case, precision, mode):
    _, live, ref, outs = _run(case, precision)
    got = outs[mode][live].float()
    assert nonfinite(got) == 0
    assert calc_diff(got, ref[live]) < TOL


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CASES)
def test_modes_bitwise_equal_on_live_rows(case, precision):
    _, live, _, outs = _run(case, precision)
    result = bitwise_compare(outs["all"][live], outs["psum"][live])
    assert result.equal, result.describe()


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CASES)
def test_psum_skips_dead_blocks_all_writes_everything(case, precision):
    _, live, _, outs = _run(case, precision)
    live_block = live.view(-1, case.block_m).any(dim=1)
    dead_rows = (~live_block).repeat_interleave(case.block_m)
    assert _is_poison(outs["psum"][dead_rows]).all()
    assert not _is_poison(outs["psum"][live]).any()
    assert not _is_poison(outs["all"]).any()


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", [c for c in CASES if c.id != "full-buffer"])
def test_input_padding_poison_stays_in_padding(case, precision):
    _, live, _, outs = _run(case, precision)
    assert (~live).any()  # the case has padding, so the input really carried poison
    for mode in MODES:
        assert nonfinite(outs[mode][live]) == 0, mode
    # The poison did flow through the padding rows that "all" computes.
    assert nonfinite(outs["all"][~live]) > 0


def _valid_fp8(M=64, E=2, N=128, K=256):
    q = torch.zeros(M, K, dtype=torch.float8_e4m3fn)
    sf = reference.empty_packed_scales(M, K // 128, "cpu")
    w = torch.zeros(E, N, K, dtype=torch.float8_e4m3fn)
    ws = torch.ones(E, N // 128, K // 128)
    ends = torch.zeros(E, dtype=torch.int32)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    return [q, sf, w, ws, ends, out]


@pytest.mark.parametrize(
    ("change", "kwargs", "match"),
    [
        ({}, {"mode": "masked"}, "mode"),
        ({}, {"alignment": 48}, "alignment"),
        ({}, {"alignment": 32, "BLOCK_M": 64}, "BLOCK_M"),
        ({}, {"BLOCK_N": 512}, "BLOCK_N"),
        ({4: torch.zeros(2, dtype=torch.int64)}, {}, "ends_E"),
        ({4: torch.zeros(3, dtype=torch.int32)}, {}, "ends_E"),
        ({0: torch.zeros(64, 128, dtype=torch.float8_e4m3fn)}, {}, "K"),
        ({5: torch.empty(64, 128, dtype=torch.float32)}, {}, "out_MN"),
        ({1: None}, {}, "a_sf_MG4"),
        ({3: torch.ones(2, 1, 1)}, {}, "w_scale"),
        ({2: torch.zeros(2, 128, 256, dtype=torch.bfloat16)}, {}, "w_ENK"),
        (
            {
                0: torch.zeros(64, 256, dtype=torch.bfloat16),
                2: torch.zeros(2, 128, 256, dtype=torch.bfloat16),
            },
            {},
            "bf16 takes no",
        ),
    ],
)
def test_launcher_rejects_bad_arguments(change, kwargs, match):
    args = _valid_fp8()
    for i, t in change.items():
        args[i] = t
    options = {"alignment": 64, "mode": "psum", **kwargs}
    with pytest.raises(ValueError, match=match):
        grouped_gemm(*args, **options)


@pytest.mark.parametrize(
    "counts, alignment, block_m, block_n",
    [
        ([40, 0, 75, 1], 64, 32, 128),  # empty expert between live ones
        ([0, 0, 0], 64, 64, 128),  # all experts empty: no work item at all
        ([0, 200, 0], 64, 32, 256),  # one expert holding everything; two weight-scale bands
        ([64, 128, 64], 64, 64, 64),  # full buffer, no padding
    ],
)
def test_persistent_psum_matches_psum_bitwise(counts, alignment, block_m, block_n):
    # The persistent schedule visits the same live tiles with the same tile function.
    torch.manual_seed(sum(counts) + block_n)
    E, N, K = len(counts), 256, 256
    ends = expert_ends(torch.tensor(counts, dtype=torch.int32), alignment)
    M = max(int(used_rows(torch.tensor(counts), alignment)), alignment) + alignment
    a = torch.randn(M, K)
    q, exp = reference.quant_fp8_ue8m0(a)
    sf = reference.pack_ue8m0(exp)
    wq, ws = reference.quant_weight_fp8_block(torch.randn(E, N, K) / 16)
    live = live_row_mask(ends, alignment, M)
    operands = (*map(_to_device, (q, sf, wq, ws)), ends.to(DEVICE))
    outs = []
    # The tile order (group_m) changes which tiles run together, never a tile's bits; nor does
    # fusing the tile loop with the K loop (flatten, a compiler hint).
    for persistent, group_m, flatten in ((False, 8, False), (True, 8, False), (True, 3, False),
                                         (True, 8, True)):  # fmt: skip
        out = _poisoned_out(M, N)
        grouped_gemm(
            *operands,
            out,
            alignment=alignment,
            mode="psum",
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            persistent=persistent,
            group_m=group_m,
            flatten=flatten,
        )
        outs.append(out.cpu())
    for other in outs[1:]:
        assert torch.equal(outs[0][live].view(torch.int16), other[live].view(torch.int16))
    plan = reference.scatter_plan(
        torch.repeat_interleave(torch.arange(E), torch.tensor(counts))[:, None],
        0,
        E,
        alignment,
        M,
    )
    assert torch.equal(plan["ends_E"], ends)
    ref = reference.grouped_gemm(
        reference.dequant_fp8_ue8m0(q, exp),
        reference.dequant_weight_fp8_block(wq, ws),
        plan["row_expert_M"],
    )
    if live.any():
        assert calc_diff(outs[1][live].float(), ref[live]) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize(
    "counts, alignment, block_m, block_n, k",
    [
        ([40, 0, 75, 1], 64, 32, 128, 256),  # two K steps: one pair, nothing left over
        ([0, 200, 0], 64, 32, 256, 640),  # five steps: pairs then a leftover step; vector weight
        # scales over two bands; the second packed scale word
        ([64, 128, 64], 64, 64, 64, 128),  # one K step: no pair at all; full buffer
        ([30, 0, 5], 32, 32, 128, 768),  # six steps: several iterations; an empty expert
    ],
)
def test_k_loops_bitwise_equal_to_plain(counts, alignment, block_m, block_n, k):
    # Every tile loop joins the K steps in the same order through the same promotion, so each
    # schedule writes the same elements with the same bits as the plain loop.
    g = torch.Generator().manual_seed(zlib.crc32(repr((counts, k, block_n)).encode()))
    E, N = len(counts), 256
    ends = expert_ends(torch.tensor(counts, dtype=torch.int32), alignment)
    M = max(int(used_rows(torch.tensor(counts), alignment)), alignment) + alignment
    # K steps that nearly cancel in pairs: group 2j+1 of a repeats group 2j, its weight blocks are
    # the negated fp8 values, and its weight scales are larger by a random factor of 1 + O(2^-8).
    # The fp32 partial sums then dwarf the result, so a step joined out of order, or with another
    # step's scale, shows in the bf16 output.
    x = torch.randn(M, k // 128, 128, generator=g) * 2.0 ** torch.randint(
        -3, 4, (M, k // 128, 1), generator=g
    )
    x[:, 1::2] = x[:, 0::2][:, : k // 256]
    q, exp = reference.quant_fp8_ue8m0(x.view(M, k))
    sf = reference.pack_ue8m0(exp)
    wq, ws = reference.quant_weight_fp8_block(torch.randn(E, N, k, generator=g) / 16)
    wq = wq.view(torch.uint8).view(E, N, k // 128, 128)
    wq[:, :, 1::2] = wq[:, :, 0::2][:, :, : k // 256] ^ 0x80  # the sign bit
    wq = wq.view(E, N, k).view(torch.float8_e4m3fn)
    ws[:, :, 1::2] = ws[:, :, 0::2][:, :, : k // 256] * (
        1 + torch.rand(E, N // 128, k // 256, generator=g) / 256
    )
    # "all" runs the grid kernel over every block (psum's grid is the same kernel, returning
    # early); persistent psum runs the live-tile kernel.
    # The TMA loads fetch the same tiles (rows past M as zeros), so every loop over them writes
    # the same bits too.
    variants = [(loop, loads) for loads in LOADS for loop in K_LOOPS]
    operands = (*map(_to_device, (q, sf, wq, ws)), ends.to(DEVICE))
    for mode, persistent in (("all", False), ("psum", True)):
        outs = {}
        for loop, loads in variants:
            out = _poisoned_out(M, N)
            grouped_gemm(
                *operands, out, alignment=alignment, mode=mode, BLOCK_M=block_m,
                BLOCK_N=block_n, persistent=persistent, k_loop=loop, loads=loads,
            )  # fmt: skip
            outs[loop, loads] = out.cpu()
        for variant in variants[1:]:
            result = bitwise_compare(outs["plain", "pointer"], outs[variant])
            assert result.equal, f"{variant}, {mode} persistent={persistent}: {result.describe()}"


def test_k_loop_rejected_when_unknown_or_bf16():
    args = _valid_fp8()
    with pytest.raises(ValueError, match="k_loop"):
        grouped_gemm(*args, alignment=64, mode="psum", k_loop="unroll3")
    with pytest.raises(ValueError, match="loads must be one of"):
        grouped_gemm(*args, alignment=64, mode="psum", loads="cp.async")
    # TMA reads whole, aligned rows: a strided weight view or a misaligned activation is refused.
    q, sf, w, ws, ends, out = args
    with pytest.raises(ValueError, match="contiguous w_ENK"):
        grouped_gemm(q, sf, w.transpose(1, 2).contiguous().transpose(1, 2), ws, ends, out,
                     alignment=64, mode="psum", loads="tma")  # fmt: skip
    wide = torch.zeros(64, 256 + 16, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="16-byte aligned rows"):
        grouped_gemm(wide[:, 8 : 8 + 256], sf, w, ws, ends, out, alignment=64, mode="psum",
                     loads="tma")  # fmt: skip
    args[0] = torch.zeros(64, 256, dtype=torch.bfloat16)
    args[2] = torch.zeros(2, 128, 256, dtype=torch.bfloat16)
    args[1] = args[3] = None
    with pytest.raises(ValueError, match="k_loop 'overlap1' is for fp8"):
        grouped_gemm(*args, alignment=64, mode="psum", k_loop="overlap1")
