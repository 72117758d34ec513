"""The FP8 tile's placed layout (`moebench.kernels.fp8_placed`): the host's bit permutation, and
its decode PTX run by the emulator (tests/kernels/ptx_emulator.py) on every pattern of each
output pair, against the natural layout's decode (`jit._E4M3_BF16_ASM`) and the e4m3 values
themselves. The kernels that read the layout are tests/kernels/test_grouped_decode.py's."""

from __future__ import annotations

import pytest
import torch
from ptx_emulator import run_ptx

from moebench.kernels.fp8_placed import E4M3_BF16_PLACED_ASM, POSITIONS, place_e4m3
from moebench.kernels.jit import _E4M3_BF16_ASM


def _words_with_every_pair() -> torch.Tensor:
    """Natural words (int64) in which each pair of values one output register holds (bytes 0-1,
    bytes 2-3) takes each of its 65,536 patterns, the other two bytes zero, all set or random (so
    that a bit of the other pair leaking into a register shows)."""
    g = torch.Generator().manual_seed(5)
    pair = torch.arange(1 << 16, dtype=torch.int64)
    words = []
    for shift in (0, 16):
        for other in (0, 0xFFFF, None):
            rest = (
                torch.randint(0, 1 << 16, pair.shape, generator=g, dtype=torch.int64)
                if other is None
                else torch.full_like(pair, other)
            )
            words.append((pair << shift) | (rest << (16 - shift)))
    return torch.cat(words)


def _placed(word: torch.Tensor) -> torch.Tensor:
    """Natural words [n] in the placed layout, through the host's `place_e4m3`."""
    b = torch.stack([(word >> (8 * i)) & 0xFF for i in range(4)], -1).to(torch.uint8)
    p = place_e4m3(b).to(torch.int64)
    return sum(p[:, i] << (8 * i) for i in range(4))


def _value_bits(byte: torch.Tensor) -> torch.Tensor:
    """bf16 bits of e4m3 byte ``byte``'s value; the NaN bytes (0x7F, 0xFF) as +-480, the bit
    placement's reading of them (`jit.e4m3_to_bf16`)."""
    v = byte.to(torch.uint8).view(torch.float8_e4m3fn).float()
    v = torch.where(byte & 0x7F == 0x7F, torch.where(byte & 0x80 != 0, -480.0, 480.0), v)
    return v.bfloat16().view(torch.int16).to(torch.int64) & 0xFFFF


def test_the_placed_layout_is_a_permutation_of_a_words_bits():
    """POSITIONS places 32 code bits on 32 distinct bits, so `place_e4m3` loses nothing; it keeps
    the shape and dtype and refuses what has no whole words or is not e4m3 bytes."""
    assert sorted(p for places in POSITIONS for p in places) == list(range(32))
    w = torch.randint(0, 256, (3, 5, 8), dtype=torch.uint8)
    placed = place_e4m3(w.view(torch.float8_e4m3fn))
    assert placed.dtype == torch.float8_e4m3fn and placed.shape == w.shape
    assert not torch.equal(placed.view(torch.uint8), w)
    assert torch.equal(place_e4m3(w), placed.view(torch.uint8))
    for bad in (w.to(torch.int16), w[..., :6]):
        with pytest.raises(ValueError, match="place_e4m3"):
            place_e4m3(bad)


def test_the_placed_decode_gives_the_natural_decodes_bits():
    """The placed decode on placed words: the same two registers as the natural decode on the
    natural words, bit for bit, for every pattern of each pair with the other bits zero, all set
    or random; and each half the bf16 of its value (NaN bytes +-480, as the natural decode)."""
    word = _words_with_every_pair()
    got = run_ptx(E4M3_BF16_PLACED_ASM.value, {2: _placed(word)})
    nat = run_ptx(_E4M3_BF16_ASM.value, {2: word})
    for reg in ("$0", "$1"):
        assert torch.equal(got[reg], nat[reg]), reg
    for j in range(4):  # value j: byte j of the natural word, half j % 2 of register $(j // 2)
        half = (got[f"${j // 2}"] >> (16 * (j % 2))) & 0xFFFF
        assert torch.equal(half, _value_bits((word >> (8 * j)) & 0xFF)), j


def test_the_placed_decode_takes_fewer_instructions():
    """Eight instructions besides the constant's move (a mask, two shifts, three masks or ors,
    two multiplies) against the natural decode's twelve: the point of the layout."""

    def count(asm: str) -> int:
        return sum(1 for ln in asm.splitlines() if ln.strip().endswith(";")
                   and not ln.strip().startswith((".reg", "mov")))  # fmt: skip

    assert (count(E4M3_BF16_PLACED_ASM.value), count(_E4M3_BF16_ASM.value)) == (8, 12)


@pytest.mark.parametrize(
    "mutant",
    [("0x87F087F0", "0x87F087F8"), ("shl.b32 a, $2, 4", "shl.b32 a, $2, 3"),
     ("0x07000700", "0x07800700"), ("or.b32 a, a, b", "and.b32 a, a, b")],
)  # fmt: skip
def test_a_mutated_decode_fails_the_comparison(mutant):
    """The comparison above catches a wrong mask, shift or op: it can fail."""
    asm = E4M3_BF16_PLACED_ASM.value
    assert mutant[0] in asm
    word = _words_with_every_pair()
    got = run_ptx(asm.replace(*mutant), {2: _placed(word)})
    nat = run_ptx(_E4M3_BF16_ASM.value, {2: word})
    assert not all(torch.equal(got[r], nat[r]) for r in ("$0", "$1"))
