"""The MXFP4 tile's decode PTX (`tile_order._E2M1_BF16_ASM` and its folded form), run by a small
emulator of the five instructions it uses, on every byte value in every position of a word and
every scale byte: the interpreter runs no PTX, so this is where the CPU suite checks the
instructions themselves (the GPU runs of tests/kernels/test_grouped_decode.py check the compiled
kernel). Values are checked against e2m1 x 2^(s - 127) rounded to bf16, the folded form against the
unfolded bit for bit, and FOLD_SCALES_UP_TO against the largest scale byte whose folded factor
bf16 holds."""

from __future__ import annotations

import torch
from ptx_emulator import bf16_of, bf16x2_mul, prmt, run_ptx

from moebench.kernels.grouped_gemv import FOLD_SCALES_UP_TO
from moebench.kernels.mx_rotated import (
    E2M1_BF16_ROTATED_ASM,
    E2M1_BF16_ROTATED_FOLDED_ASM,
    E2M1_F32_ROTATED_HIGH_ASM,
    E2M1_F32_ROTATED_LOW_ASM,
    POSITIONS,
    rotate_mxfp4,
)
from moebench.kernels.tile_order import _E2M1_BF16_ASM, _E2M1_BF16_FOLDED_ASM

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _words_and_scales(scales: range) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every byte value in each of a word's four positions (word i holds bytes i, i + 1, i + 2,
    i + 3 mod 256), crossed with every scale byte; bytes 0-1 take scale s, bytes 2-3 scale
    s' = the next scale byte in ``scales``, so that the two scale operands are told apart."""
    i = torch.arange(256, dtype=torch.int64)
    word = sum(((i + j) % 256) << (8 * j) for j in range(4))
    s = torch.tensor(list(scales), dtype=torch.int64)
    s_next = torch.roll(s, -1)
    W, S = torch.meshgrid(word, torch.arange(len(s)), indexing="ij")
    return W.reshape(-1), s[S.reshape(-1)], s_next[S.reshape(-1)]


def _reference(byte: torch.Tensor, nibble_high: bool, s: torch.Tensor) -> torch.Tensor:
    """bf16 bits of e2m1 x 2^(s - 127), byte 0 giving 0 (the kernels' convention)."""
    n = (byte >> 4) & 0xF if nibble_high else byte & 0xF
    mag = torch.tensor(E2M1, dtype=torch.float64)[n & 7]
    v = torch.where(n & 8 != 0, -mag, mag) * torch.pow(2.0, (s - 127).double())
    v = torch.where(s == 0, torch.where(n & 8 != 0, -0.0, 0.0), v)
    return v.float().bfloat16().view(torch.int16).to(torch.int64) & 0xFFFF


def _outputs(regs) -> dict[tuple[int, bool], torch.Tensor]:
    """(byte position, high nibble) -> the bf16 bits the asm wrote for it: $0 / $2 the low /
    high nibbles of bytes 0 and 1 (one a half), $1 / $3 of bytes 2 and 3."""
    out = {}
    for pos in range(4):
        for high in (False, True):
            reg = f"${(pos // 2) + (2 if high else 0)}"
            out[(pos, high)] = (regs[reg] >> (16 * (pos % 2))) & 0xFFFF
    return out


def _pair(bits: torch.Tensor) -> torch.Tensor:
    return bits | (bits << 16)


def test_the_decode_gives_each_value_times_its_scale():
    """Every nibble in every position of a word, every finite scale byte (0 included: 0), with
    a different scale for bytes 0-1 and 2-3: the bf16 of e2m1 x 2^(s - 127), subnormals too."""
    word, s, s2 = _words_and_scales(range(0, 255))
    regs = run_ptx(_E2M1_BF16_ASM.value, {4: word, 5: _pair(s << 7), 6: _pair(s2 << 7)})
    for (pos, high), got in _outputs(regs).items():
        scale = s if pos < 2 else s2
        want = _reference((word >> (8 * pos)) & 0xFF, high, scale)
        assert torch.equal(got, want), (pos, high)


def test_the_folded_decode_gives_the_same_bits_up_to_its_bound():
    """The folded form (one multiply by 2^(s - 1)) against the two-multiply form, every nibble
    and scale byte 0..FOLD_SCALES_UP_TO: the same bits (both round e2m1 x 2^(s - 127) once)."""
    word, s, s2 = _words_and_scales(range(0, FOLD_SCALES_UP_TO + 1))
    folded = lambda b: _pair(torch.where(b == 0, 0, (b + 126) << 7))
    two = run_ptx(_E2M1_BF16_ASM.value, {4: word, 5: _pair(s << 7), 6: _pair(s2 << 7)})
    one = run_ptx(_E2M1_BF16_FOLDED_ASM.value, {4: word, 5: folded(s), 6: folded(s2)})
    for reg in ("$0", "$1", "$2", "$3"):
        assert torch.equal(one[reg], two[reg]), reg
    assert len(_E2M1_BF16_FOLDED_ASM.value.split(";")) < len(_E2M1_BF16_ASM.value.split(";"))


def test_the_fold_bound_is_the_last_scale_whose_factor_bf16_holds():
    """2^(s - 1) is a finite bf16 number (exponent field s + 126 below 255) up to s = 128: the
    launcher's FOLD_SCALES_UP_TO. Past it the folded factor is inf, and the folded form would
    give inf for every nonzero value, which is why larger scales take the two multiplies."""
    assert (FOLD_SCALES_UP_TO + 126) << 7 < 0x7F80 <= (FOLD_SCALES_UP_TO + 127) << 7
    word, s, s2 = _words_and_scales(range(FOLD_SCALES_UP_TO + 1, FOLD_SCALES_UP_TO + 3))
    regs = run_ptx(_E2M1_BF16_FOLDED_ASM.value,
                   {4: word, 5: _pair((s + 126) << 7), 6: _pair((s2 + 126) << 7)})  # fmt: skip
    got = bf16_of(regs["$0"]).float()
    want = bf16_of(_reference(word & 0xFF, False, s)).float()
    assert not torch.equal(got, want) and torch.isinf(got).any()


def test_the_emulator_knows_prmt_and_the_bf16_rounding():
    """The emulator's two less obvious instructions on hand-checked cases: prmt spreading bytes
    0 and 1 to the two halves, and a bf16 product rounding to nearest even, a subnormal kept."""
    w = torch.tensor([0x44332211], dtype=torch.int64)
    assert prmt(w, torch.zeros_like(w), 0x4140).item() == 0x00220011
    assert prmt(w, torch.zeros_like(w), 0x4342).item() == 0x00440033
    # 1.0078125 (0x3F81) x 1.0078125 = 1.01568..., between 0x3F82 (1.015625) and 0x3F83: nearer
    # 0x3F82; 2^-127 (0x0040, subnormal) x 1.0 stays 0x0040.
    got = bf16x2_mul(torch.tensor([0x00403F81]), torch.tensor([0x3F803F81]))
    assert got.item() == 0x00403F82


def _rotated(word: torch.Tensor) -> torch.Tensor:
    """Natural words [n] (int64) in `mx_rotated`'s layout, through the host's `rotate_mxfp4`."""
    b = torch.stack([(word >> (8 * i)) & 0xFF for i in range(4)], -1).to(torch.uint8)
    r = rotate_mxfp4(b).to(torch.int64)
    return sum(r[:, i] << (8 * i) for i in range(4))


def _words_with_every_pair() -> torch.Tensor:
    """Natural words in which each pair of values that one output register holds takes each of
    its 256 bit patterns, the other 24 bits random (so that a bit of another pair leaking into a
    register, or a carry, shows), and every byte in every position (`_words_and_scales`)."""
    g = torch.Generator().manual_seed(3)
    words = [torch.randint(0, 1 << 32, (4096,), generator=g, dtype=torch.int64)]
    pair = torch.arange(256, dtype=torch.int64)
    for j0, j1 in ((0, 2), (4, 6), (1, 3), (5, 7)):  # the values of $0, $1, $2, $3
        bits = ((pair & 0xF) << (4 * j0)) | ((pair >> 4) << (4 * j1))
        for other in (0, 0xFFFFFFFF, int(torch.randint(0, 1 << 32, (1,), generator=g))):
            keep = ~((0xF << (4 * j0)) | (0xF << (4 * j1))) & 0xFFFFFFFF
            words.append(bits | (other & keep))
    words.append(_words_and_scales(range(1))[0])
    return torch.cat(words)


def test_the_rotated_layout_is_a_permutation_of_a_words_bits():
    """POSITIONS places 32 code bits on 32 distinct bits, so `rotate_mxfp4` loses nothing, and
    it refuses what has no whole words."""
    assert sorted(p for places in POSITIONS for p in places) == list(range(32))
    w = torch.randint(0, 256, (3, 5, 8), dtype=torch.uint8)
    assert rotate_mxfp4(w).shape == w.shape and not torch.equal(rotate_mxfp4(w), w)
    for bad in (w.to(torch.int16), w[..., :6]):
        try:
            rotate_mxfp4(bad)
        except ValueError as e:
            assert "rotate_mxfp4" in str(e)
        else:
            raise AssertionError("rotate_mxfp4 took a tensor without whole words")


def test_the_rotated_decode_gives_the_natural_decodes_bits():
    """Both forms of the rotated layout's decode, on rotated words, against the natural decode
    (checked above against e2m1 x 2^(s - 127)) on the same values: the same four registers bit
    for bit, every pair pattern with the other bits random, zero or all set, and a range of
    scales either side of the fold bound for the two-multiply form. A rotated word's eight values
    share one scale (one group of 32), its one scale operand."""
    word = _words_with_every_pair()
    rot = _rotated(word)
    for s in (0, 1, 2, 100, 127, FOLD_SCALES_UP_TO):
        folded = _pair(torch.full_like(word, (s + 126) << 7 if s else 0))
        one = run_ptx(E2M1_BF16_ROTATED_FOLDED_ASM.value, {4: rot, 5: folded})
        nat = run_ptx(_E2M1_BF16_FOLDED_ASM.value, {4: word, 5: folded, 6: folded})
        for reg in ("$0", "$1", "$2", "$3"):
            assert torch.equal(one[reg], nat[reg]), (s, reg)
    for s in (0, 1, 127, 200, 254):
        sc = _pair(torch.full_like(word, s << 7))
        two = run_ptx(E2M1_BF16_ROTATED_ASM.value, {4: rot, 5: sc})
        nat = run_ptx(_E2M1_BF16_ASM.value, {4: word, 5: sc, 6: sc})
        for reg in ("$0", "$1", "$2", "$3"):
            assert torch.equal(two[reg], nat[reg]), (s, reg)
    assert len(E2M1_BF16_ROTATED_FOLDED_ASM.value.split(";")) + 6 == len(
        _E2M1_BF16_FOLDED_ASM.value.split(";")
    )


def test_the_gemvs_rotated_decode_gives_each_value_exactly():
    """The CUDA-core GEMVs' decode of a rotated word, in its two halves, against each nibble's
    e2m1 value as fp32 bits (unscaled, exact): registers $0..$3 of the low half hold values 0, 2,
    1, 3 of the natural word, of the high half 4, 6, 5, 7; every pair pattern, the other bits
    random, zero or all set."""
    word = _words_with_every_pair()
    rot = _rotated(word)
    for asm, values in ((E2M1_F32_ROTATED_LOW_ASM, (0, 2, 1, 3)),
                        (E2M1_F32_ROTATED_HIGH_ASM, (4, 6, 5, 7))):  # fmt: skip
        regs = run_ptx(asm.value, {4: rot})
        for i, j in enumerate(values):
            n = (word >> (4 * j)) & 0xF
            mag = torch.tensor(E2M1, dtype=torch.float32)[n & 7]
            want = torch.where(n & 8 != 0, -mag, mag).view(torch.int32).to(torch.int64)
            assert torch.equal(regs[f"${i}"], want & 0xFFFFFFFF), (asm, j)
