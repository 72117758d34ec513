"""Read-pattern test: a [BN rows, BK bytes] tile a step across 16 experts' fc1 FP8 weights, and the
cheap e4m3 asm in isolation."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton, triton.language as tl
import gd_exp
dev = torch.device('cuda')
E, N, R = 16, 5760, 2880

@triton.jit
def rd(w_ptr, out_ptr, R, stride_e, stride_n, BN: tl.constexpr, BK: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr):
    n = tl.program_id(0); e = tl.program_id(1)
    rows = n * BN + tl.arange(0, BN)
    base = w_ptr + e.to(tl.int64) * stride_e + rows.to(tl.int64)[:, None] * stride_n + tl.arange(0, BK // 4)[None, :]
    acc = tl.zeros([BN, BK // 4], dtype=tl.int32)
    r_main = R // (BK * SUB) * (BK * SUB) // 4
    for k0 in tl.range(0, r_main, BK * SUB // 4, num_stages=NS if NS else None):
        for j in tl.static_range(SUB):
            acc ^= tl.load(base + k0 + j * (BK // 4))
    tl.store(out_ptr + n * BN + tl.arange(0, BN) + e * 8192, tl.xor_sum(acc, 1))

w = torch.randint(-2**31, 2**31 - 1, (E, N, R // 4), dtype=torch.int32, device=dev)
out = torch.empty(E * 8192, dtype=torch.int32, device=dev)
flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for spec in sys.argv[1:]:
    bn, bk, sub, ns, nw = map(int, spec.split(':'))
    grid = (N // bn, E)
    f = lambda: rd[grid](w, out, R, w.stride(0), w.stride(1), BN=bn, BK=bk, SUB=sub, NS=ns, num_warps=nw)
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        flush.add_(1); start.record(); f(); end.record(); end.synchronize(); ts.append(start.elapsed_time(end) * 1e3)
    r_main = R // (bk * sub) * (bk * sub)
    byts = E * N * r_main
    med = statistics.median(ts)
    print(f'read bn={bn} bk={bk} sub={sub} stages={ns} warps={nw}: {med:.1f} us, {byts / med / 1e3:.0f} GB/s ({byts / med / 1e3 / 4270:.0%} of copy)', flush=True)

# cheap asm in isolation
@triton.jit
def conv(w_ptr, o_ptr, BN: tl.constexpr, BK: tl.constexpr, RESHAPE: tl.constexpr):
    offs = tl.arange(0, BN)[:, None] * BK + tl.arange(0, BK)[None, :]
    w = tl.load(w_ptr + offs)
    if RESHAPE:
        w = tl.reshape(w, [BN, BK // 16, 16])
        v = tl.inline_asm_elementwise(gd_exp._E4M3_BF16_ASM, "=r,=r,r", [w.to(tl.uint8, bitcast=True)], dtype=tl.bfloat16, is_pure=True, pack=4)
        v = tl.reshape(v, [BN, BK])
    else:
        v = gd_exp.fp8_tile_cheap(w, False)
    tl.store(o_ptr + offs, v)
wb = torch.randint(0, 256, (64, 64), dtype=torch.uint8, device=dev)
wb[wb == 127] = 0; wb[wb == 255] = 0
w8 = wb.view(torch.float8_e4m3fn)
want = w8.to(torch.bfloat16).reshape(64, 16, 2, 2).permute(0, 1, 3, 2).reshape(64, 64)
for reshape in (False, True):
    o = torch.empty(64, 64, dtype=torch.bfloat16, device=dev)
    conv[(1,)](w8, o, BN=64, BK=64, RESHAPE=reshape, num_warps=4)
    print('cheap asm isolation reshape', reshape, 'equal', torch.equal(o, want), 'natural-equal', torch.equal(o, w8.to(torch.bfloat16)), flush=True)
    if not torch.equal(o, want):
        print(o[0, :8].float().tolist(), want[0, :8].float().tolist(), w8[0,:8].float().tolist())
