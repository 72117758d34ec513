"""Read-only: the FP8 tile's grid and box through TMA, strided natural rows against packed tiles."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(__file__))
import torch
import gd_pack
dev = torch.device('cuda')
flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=dev)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

def timeit(f, n=30):
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        flush.add_(1); start.record(); f(); end.record(); end.synchronize()
        ts.append(start.elapsed_time(end) * 1e3)
    return statistics.median(ts)

buf = torch.empty(400 * 2**20, dtype=torch.uint8, device=dev)
dst = torch.empty_like(buf)
t = timeit(lambda: dst.copy_(buf))
copy = 2 * buf.numel() / t / 1e3
print(f'copy 400 MiB: {t:.1f} us, {copy:.0f} GB/s (read+write)', flush=True)
for (E, N, R) in ((16, 5760, 2880), (16, 2880, 2880)):
    w = torch.randint(0, 256, (E, N, R), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    out = torch.empty(E * N, dtype=torch.int32, device=dev)
    for spec in os.environ.get('RSPECS', '64:128:4:4,64:128:6:4,128:128:4:8,64:256:4:4').split(','):
        bn, bk, ns, nw = map(int, spec.split(':'))
        for packed in (False, True):
            f, KB = gd_pack.read_only(w, bn, bk, ns, packed, out, nw)
            us = timeit(f)
            byts = E * N * KB * bk
            print(f'read N={N} bn={bn} bk={bk} stages={ns} warps={nw} packed={packed}: {us:.1f} us '
                  f'{byts / us / 1e3:.0f} GB/s = {byts / us / 1e3 / copy:.0%} of copy', flush=True)
