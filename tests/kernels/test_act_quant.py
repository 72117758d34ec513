"""The `act` stage: act_quant_dense against the reference, act_quant_masked against dense.

Legend: M capacity rows, F intermediate, G = F/128 groups, G4 packed scale words, E experts.
"""

import os

import pytest
import torch

from moebench.core import reference
from moebench.core.layout import expert_ends, live_row_mask, used_rows
from moebench.core.numerics import TOLERANCE, bitwise_compare, calc_diff
from moebench.kernels.act_quant import (
    BLOCK_ROWS,
    SCHEDULES,
    act_quant_dense,
    act_quant_masked,
)

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETING else "cpu"
# Huge negative gates overflow exp(-gate) to inf in the interpreter's numpy (sigmoid -> 0, as in
# torch); numpy warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")

POISON_BYTE = 0x7F  # e4m3fn NaN; as a scale word, four exponent bytes no input produces here
POISON_WORD = 0x7F7F7F7F
# Relative margin within which the kernel's fp32 activation may differ from torch's (an ulp or a
# few of sigmoid/exp): values this close to an e4m3/bf16 tie or a power-of-two scale boundary may
# legitimately round the other way, all others must match to the bit.
MARGIN = 1e-5


def _inputs(M: int, F: int, seed: int) -> torch.Tensor:
    """bf16 [M, 2F] of fresh random values, some rows huge (exponent bytes >= 128, so the packed
    word's sign bit is set) and some tiny (below the 1e-4 amax floor)."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(M, 2 * F, generator=g) * 3
    h[1::7] *= 400.0
    h[3::11] *= 1e-5
    return h.to(torch.bfloat16).to(DEVICE)


def _outputs(M: int, F: int, precision: str):
    """Poisoned (out_MF, sf_MG4, scale storage) for a run: every byte the kernel may write is
    poison, including the scale store's M_pad padding rows that nobody may write."""
    if precision == "bf16":
        return torch.full((M, F), float("nan"), dtype=torch.bfloat16, device=DEVICE), None, None
    out = torch.full((M, F), POISON_BYTE, dtype=torch.uint8, device=DEVICE)
    sf = reference.empty_packed_scales(M, F // reference.GROUP, DEVICE)
    store = torch.empty(0, dtype=torch.int32, device=DEVICE).set_(sf.untyped_storage())
    store.fill_(POISON_WORD)
    return out.view(torch.float8_e4m3fn), sf, store


def _robust_mask(x: torch.Tensor, convert) -> torch.Tensor:
    """True where ``convert`` gives the same bits for x within the relative MARGIN."""
    lo = convert(x * (1 - MARGIN)).view(-1).contiguous()
    hi = convert(x * (1 + MARGIN)).view(-1).contiguous()
    raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[lo.element_size()]
    return (lo.view(raw) == hi.view(raw)).view(x.shape)


def _check_against_reference(h, out, sf, activation, precision):
    """The kernel's output on every row against reference.act_quant."""
    a = reference.activation(h.cpu(), activation)
    out = out.cpu()
    if precision == "bf16":
        want = reference.act_quant(h.cpu(), activation, "bf16")
        robust = _robust_mask(a, lambda v: v.to(torch.bfloat16))
        assert torch.equal(out[robust].view(torch.int16), want[robust].view(torch.int16))
        assert (out.view(torch.int16) != want.view(torch.int16)).float().mean() < 1e-3
        assert calc_diff(out.float(), a) < TOLERANCE["bf16"]
        return
    G = a.shape[1] // reference.GROUP
    q_want, sf_want = reference.act_quant(h.cpu(), activation, "fp8")
    exp_got = reference.unpack_ue8m0(sf.cpu(), G)
    exp_want = reference.unpack_ue8m0(sf_want, G)
    # Bytes past the last group of each word are zero.
    assert (reference.unpack_ue8m0(sf.cpu(), 4 * sf.shape[1])[:, G:] == 0).all()
    # Scale bytes: exact wherever the group maximum is not on a power-of-two boundary.
    amax = a.view(a.shape[0], G, reference.GROUP).abs().amax(dim=2)
    scale_robust = _robust_mask(amax, lambda v: reference.ue8m0_exponent(v).to(torch.int32))
    assert torch.equal(exp_got[scale_robust], exp_want[scale_robust])
    # FP8 bytes: exact where the scale matched and the scaled value is not near an e4m3 tie.
    inv = reference.exponent_to_scale(254 - exp_want.to(torch.int32)).repeat_interleave(
        reference.GROUP, dim=1
    )
    robust = _robust_mask(a * inv, lambda v: v.to(torch.float8_e4m3fn))
    robust &= (exp_got == exp_want).repeat_interleave(reference.GROUP, dim=1)
    assert torch.equal(out.view(torch.uint8)[robust], q_want.view(torch.uint8)[robust])
    # The exemption stays an exemption: over all bytes, mismatches are rare (none seen on the CPU).
    assert (out.view(torch.uint8) != q_want.view(torch.uint8)).float().mean() < 1e-3
    # And as values: dequantised within the fp8 tolerance of the float32 activation.
    assert calc_diff(reference.dequant_fp8_ue8m0(out, exp_got), a) < TOLERANCE["fp8"]


# (counts per expert, alignment, tail rows past the last expert, F, activation, precision,
# programs of the masked kernel's persistent grid)
CASES = [
    pytest.param([40, 0, 75, 1], 32, 19, 256, "silu", "fp8", 2, id="empty-expert"),
    pytest.param([0, 0, 0], 16, 40, 256, "silu", "fp8", 4, id="all-experts-empty"),
    # 150 rows = 5 tiles x 2 groups over 2 programs: a five-trip stride loop, one expert.
    pytest.param([0, 150, 0], 32, 10, 256, "silu", "fp8", 2, id="one-expert-holds-all"),
    pytest.param([64, 32, 96], 32, 0, 256, "silu", "fp8", 3, id="full-buffer-no-padding"),
    pytest.param([5, 2], 16, 2, 256, "silu", "fp8", 4, id="rows-fewer-than-a-block"),
    pytest.param([17, 0, 33, 5, 64, 1, 20], 16, 7, 256, "silu", "fp8", 2, id="prime-E-7"),
    pytest.param([40, 0, 75, 1], 32, 19, 256, "swiglu_oai", "fp8", 2, id="swiglu_oai"),
    pytest.param([40, 0, 75, 1], 32, 19, 256, "silu", "bf16", 2, id="bf16-output"),
    pytest.param([40, 0, 75, 1], 32, 19, 256, "swiglu_oai", "bf16", 2, id="swiglu_oai-bf16"),
    # G = 5: two packed words, the second holding one group and three zero bytes.
    pytest.param([30, 9], 16, 5, 640, "silu", "fp8", 2, id="two-packed-words"),
]


@pytest.mark.parametrize("counts, alignment, tail, F, activation, precision, row_programs", CASES)
def test_act_quant(counts, alignment, tail, F, activation, precision, row_programs):
    counts_E = torch.tensor(counts, dtype=torch.int32)
    M = used_rows(counts_E, alignment) + tail
    ends_E = expert_ends(counts_E, alignment).to(DEVICE)
    live = live_row_mask(ends_E, alignment, M).cpu()
    h = _inputs(M, F, seed=sum(counts) + F)

    # Dense covers every row of the buffer and matches the reference.
    out_d, sf_d, store_d = _outputs(M, F, precision)
    act_quant_dense(h, out_d, sf_d, activation=activation)
    _check_against_reference(h, out_d, sf_d, activation, precision)

    # Masked writes the live rows, bitwise as dense does, and nothing else.
    out_m, sf_m, store_m = _outputs(M, F, precision)
    act_quant_masked(
        h,
        out_m,
        sf_m,
        ends_E,
        alignment=alignment,
        activation=activation,
        schedule="persistent",
        programs=row_programs,
    )
    raw = torch.uint8 if precision == "fp8" else torch.int16
    bytes_d = out_d.view(raw).cpu()
    bytes_m = out_m.view(raw).cpu()
    result = bitwise_compare(bytes_m[live], bytes_d[live])
    assert result.equal, f"masked vs dense on live rows: {result.describe()}"
    if precision == "fp8":
        assert not (bytes_m[live] == POISON_BYTE).any(), "a live FP8 byte was left unwritten"
        assert (bytes_m[~live] == POISON_BYTE).all(), "masked wrote a padding row"
        result = bitwise_compare(sf_m.cpu()[live], sf_d.cpu()[live])
        assert result.equal, f"masked vs dense scales on live rows: {result.describe()}"
        assert not (sf_m.cpu()[live] == POISON_WORD).any(), "a live scale word was left unwritten"
        assert (sf_m.cpu()[~live] == POISON_WORD).all(), "masked wrote a padding row's scales"
        # Neither touches the scale store's M_pad padding rows.
        store_pad = store_d.view(-1, M + (-M) % 4)[:, M:]
        assert (store_pad == POISON_WORD).all()
        assert (store_m.view(-1, M + (-M) % 4)[:, M:] == POISON_WORD).all()
    else:
        assert not torch.isnan(out_m.cpu()[live]).any(), "a live bf16 value was left unwritten"
        assert torch.isnan(out_m.cpu()[~live]).all(), "masked wrote a padding row"

    # The grid schedule (row blocks that look up their expert) writes exactly the same bytes,
    # padding left poisoned.
    for schedule in ("grid",):
        out_g, sf_g, _ = _outputs(M, F, precision)
        act_quant_masked(
            h,
            out_g,
            sf_g,
            ends_E,
            alignment=alignment,
            activation=activation,
            schedule=schedule,
            block_rows=16,
        )
        assert torch.equal(out_g.view(raw).cpu(), out_m.view(raw).cpu()), schedule
        if precision == "fp8":
            assert torch.equal(sf_g.cpu(), sf_m.cpu()), schedule

    # So does the stream schedule (the stride loop that loads the next item before storing this
    # one), whose last prefetch lies past the work and must read and write nothing.
    out_s, sf_s, _ = _outputs(M, F, precision)
    act_quant_masked(
        h,
        out_s,
        sf_s,
        ends_E,
        alignment=alignment,
        activation=activation,
        schedule="stream",
        programs=row_programs,
    )
    assert torch.equal(out_s.view(raw).cpu(), out_m.view(raw).cpu())
    if precision == "fp8":
        assert torch.equal(sf_s.cpu(), sf_m.cpu())


def test_rows_fewer_than_a_block_dense_only():
    # M < BLOCK_ROWS and M not a multiple of 4 (scale store padded to M_pad).
    M, F = BLOCK_ROWS // 2 - 1, 256
    h = _inputs(M, F, seed=5)
    out, sf, _ = _outputs(M, F, "fp8")
    act_quant_dense(h, out, sf)
    _check_against_reference(h, out, sf, "silu", "fp8")


def _args(M=64, F=256, out_dtype=torch.float8_e4m3fn):
    h = torch.randn(M, 2 * F).to(torch.bfloat16)
    out = torch.empty(M, F, dtype=out_dtype)
    sf = reference.empty_packed_scales(M, F // 128, "cpu") if out_dtype != torch.bfloat16 else None
    return h, out, sf


@pytest.mark.parametrize(
    "change, message",
    [
        pytest.param(lambda a: (a[0].float(), a[1], a[2]), "bf16", id="h-dtype"),
        pytest.param(
            lambda a: (a[0][:, :320], a[1][:, :160], a[2]), "multiple of 128", id="F-not-multiple"
        ),
        pytest.param(lambda a: (a[0], a[1][:32], a[2]), "out_MF must be", id="out-shape"),
        pytest.param(
            lambda a: (a[0], a[1].view(torch.uint8), a[2]), "float8_e4m3fn or", id="out-dtype"
        ),
        pytest.param(lambda a: (a[0], a[1], None), "sf_MG4", id="sf-missing"),
        pytest.param(lambda a: (a[0], a[1], a[2].to(torch.int64)), "sf_MG4", id="sf-dtype"),
        pytest.param(
            lambda a: (a[0], a[1].to(torch.bfloat16), a[2]), "sf_MG4=None", id="sf-with-bf16"
        ),
    ],
)
def test_launchers_reject_bad_arguments(change, message):
    h, out, sf = change(_args())
    with pytest.raises(ValueError, match=message):
        act_quant_dense(h, out, sf)
    ends = torch.tensor([10, 40], dtype=torch.int32)
    with pytest.raises(ValueError, match=message):
        act_quant_masked(h, out, sf, ends, alignment=16)


def test_masked_rejects_bad_endpoints_and_options():
    h, out, sf = _args()
    ends = torch.tensor([10, 40], dtype=torch.int32)
    with pytest.raises(ValueError, match="ends_E"):
        act_quant_masked(h, out, sf, ends.to(torch.int64), alignment=16)
    with pytest.raises(ValueError, match="alignment"):
        act_quant_masked(h, out, sf, ends, alignment=24)
    with pytest.raises(ValueError, match="programs"):
        act_quant_masked(h, out, sf, ends, alignment=16, schedule="persistent", programs=0)
    with pytest.raises(ValueError, match="schedule"):
        act_quant_masked(h, out, sf, ends, alignment=16, schedule="fast")
    with pytest.raises(ValueError, match="activation"):
        act_quant_dense(h, out, sf, activation="gelu")


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs need a GPU without the interpreter")
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_masked_replays_in_a_cuda_graph_with_any_routing(schedule):
    # Captured once with one routing, replayed with others written into the same ends tensor.
    M, F, A = 512, 256, 32
    h = _inputs(M, F, seed=9)
    ends = torch.zeros(3, dtype=torch.int32, device=DEVICE)
    out, sf, _ = _outputs(M, F, "fp8")
    act_quant_masked(h, out, sf, ends, alignment=A, schedule=schedule)  # compile outside
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        act_quant_masked(h, out, sf, ends, alignment=A, schedule=schedule)
    out_d, sf_d, _ = _outputs(M, F, "fp8")
    act_quant_dense(h, out_d, sf_d)
    for counts in ([100, 0, 50], [0, 400, 3], [1, 1, 1]):
        ends.copy_(expert_ends(torch.tensor(counts), A))
        out.view(torch.uint8).fill_(POISON_BYTE)
        sf.fill_(POISON_WORD)
        graph.replay()
        live = live_row_mask(ends, A, M)
        assert torch.equal(out.view(torch.uint8)[live], out_d.view(torch.uint8)[live])
        assert torch.equal(sf[live], sf_d[live])
        assert (out.view(torch.uint8)[~live] == POISON_BYTE).all()
        assert (sf[~live] == POISON_WORD).all()


@pytest.mark.parametrize(
    "groups, F",
    [
        (2, 640),  # G = 5: the last item holds one real group and one past the end
        (4, 640),  # one item holds the whole first word, the next the one-group second word
        (4, 256),  # item wider than the row (G = 2): masked columns, two zero scale bytes
    ],
)
def test_groups_per_item_do_not_change_a_byte(groups, F):
    counts_E = torch.tensor([30, 0, 9], dtype=torch.int32)
    M = used_rows(counts_E, 16) + 5
    ends_E = expert_ends(counts_E, 16).to(DEVICE)
    live = live_row_mask(ends_E, 16, M).cpu()
    h = _inputs(M, F, seed=groups * F)
    out_1, sf_1, _ = _outputs(M, F, "fp8")
    act_quant_dense(h, out_1, sf_1)
    out_g, sf_g, _ = _outputs(M, F, "fp8")
    act_quant_dense(h, out_g, sf_g, groups=groups, block_rows=16)
    assert torch.equal(out_g.view(torch.uint8), out_1.view(torch.uint8))
    assert torch.equal(sf_g, sf_1)
    out_m, sf_m, _ = _outputs(M, F, "fp8")
    act_quant_masked(
        h, out_m, sf_m, ends_E, alignment=16, groups=groups, schedule="persistent", programs=3
    )
    assert torch.equal(out_m.view(torch.uint8)[live], out_1.view(torch.uint8)[live])
    assert torch.equal(sf_m[live], sf_1[live])
    assert (out_m.view(torch.uint8)[~live] == POISON_BYTE).all()
    assert (sf_m[~live] == POISON_WORD).all()
