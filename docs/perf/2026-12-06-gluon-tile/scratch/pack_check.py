"""The probe's host packing (mx_gluon.pack_weights) decoded back on the CPU, word by word,
against the dequantised weights: run from the repository root with PYTHONPATH=$PWD."""

import sys

import torch

sys.path.insert(0, "docs/perf/2026-12-06-gluon-tile/scratch")
import mx_gluon as g

from moebench.core.reference import dequant_weight_mxfp4, e2m1_values, e8m0_to_scale
from moebench.kernels.mx_rotated import POSITIONS

torch.manual_seed(0)
E, N, R = 2, 64, 2880
codes = torch.randint(0, 16, (E, N, R), dtype=torch.uint8)
scales = torch.randint(118, 129, (E, N, R // 32), dtype=torch.uint8)
wm, wt, sm, st = g.pack_weights(codes, scales)
print(wm.shape, wt.shape, sm.shape, st.shape)


def unrot(word):  # int64 tensor of rotated words -> natural words
    out = torch.zeros_like(word)
    for j, places in enumerate(POSITIONS):
        for bit, place in enumerate(places):
            out |= ((word >> place) & 1) << (4 * j + bit)
    return out


W = torch.zeros(E, N, R)
ref = dequant_weight_mxfp4(codes[..., 0::2] | (codes[..., 1::2] << 4), scales)
wm64 = wm.to(torch.int64) & 0xFFFFFFFF
wt64 = wt.to(torch.int64) & 0xFFFFFFFF
for s in range(22):
    for a in range(4):
        for j in range(4):
            nat = unrot(wm64[..., s * 16 + 4 * a + j])
            sc = ((sm[..., s].to(torch.int64) & 0xFFFFFFFF) >> (8 * j)) & 0xFF
            for nib in range(8):
                c = (nat >> (4 * nib)) & 0xF
                W[..., 128 * s + g._k_of(j, nib, a)] = e2m1_values(c) * e8m0_to_scale(sc)
for a in range(4):
    for j in range(2):
        nat = unrot(wt64[..., 2 * a + j])
        sc = ((st.to(torch.int64) & 0xFFFFFFFF) >> (8 * j)) & 0xFF
        for nib in range(8):
            c = (nat >> (4 * nib)) & 0xF
            W[..., 2816 + g._k_of(j, nib, a)] = e2m1_values(c) * e8m0_to_scale(sc)
print("equal:", torch.equal(W, ref))
