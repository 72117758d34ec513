"""Scratch (sixth session): every e4m3 byte through `jit._E4M3_BF16_ASM` and gd_abl's
four-instruction variant on the GPU; the two must agree bit for bit, in every byte position of
the packed four (each byte at each position, 256 x 4 cases)."""
import sys, os
sys.path.insert(0, os.path.dirname(__file__))
import torch
import triton
import triton.language as tl
import gd_abl
from moebench.kernels.jit import e4m3_to_bf16


@triton.jit
def _both(w_ptr, a_ptr, b_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    w = tl.load(w_ptr + offs)
    tl.store(a_ptr + offs, e4m3_to_bf16(w, False))
    tl.store(b_ptr + offs, gd_abl.e4m3_cvt(w, gd_abl._E4M3_BF16_SIGN_ASM))


codes = torch.arange(256, dtype=torch.int32)
# each byte at each of the four positions of a packed word: rotate the sequence
w = torch.cat([torch.roll(codes, r) for r in range(4)]).to(torch.uint8).cuda().view(torch.float8_e4m3fn)
a = torch.empty(w.numel(), dtype=torch.bfloat16, device='cuda')
b = torch.empty_like(a)
_both[(1,)](w, a, b, N=w.numel())
same = torch.equal(a.view(torch.int16), b.view(torch.int16))
ref = w.float()
ok = ~ref.isnan()
exact = torch.equal(a.float()[ok], ref[ok])
print(f'cvt_check: {w.numel()} bytes, new == committed bitwise: {same}; committed == torch (non-NaN): {exact}; NaN bytes read {sorted(set(a.float()[~ok].tolist()))}')
assert same and exact
