"""Scratch A/B of the grouped dot kernel (sixth session: kinds gv, nocap, capNN, fusedsP added): x through registers (base) vs x gathered in dot order."""
import os, sys, time, statistics, json
sys.path.insert(0, os.path.dirname(__file__))
import torch
from dataclasses import replace
import gd_exp
import gd_rows
import gd_tma
import gd_pack
import gd_abl
import gd_pf
import gd_fused
import moebench.kernels.grouped_gemv as G
from moebench.kernels.grouped_gemv import Launch, grouped_gemv, default_launch

tiny = '--tiny' in sys.argv
dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
D = F = int(os.environ.get('TINYD', 128)) if tiny else 2880
E_LOC, E_ALL, TOPK = 4 if tiny else 16, 8 if tiny else 32, 4
torch.manual_seed(int(os.environ.get('SEED', 0)))

class Shim:
    def __init__(self, fn, **extra): self.fn, self.extra = fn, extra
    def __getitem__(self, grid):
        return lambda *a, **k: self.fn[grid](*a, **self.extra, **k)

ORIG = (G._grouped_dot_fp8, G._grouped_dot_mxfp4)
def use(kind):
    if kind == 'base':
        G._grouped_dot_fp8, G._grouped_dot_mxfp4 = ORIG
    elif kind == 'gather':
        G._grouped_dot_fp8 = Shim(gd_exp._grouped_dot_fp8, GATHER=1)
        G._grouped_dot_mxfp4 = Shim(gd_exp._grouped_dot_mxfp4, GATHER=1)
    elif kind.startswith('sub'):
        G._grouped_dot_fp8 = Shim(gd_exp._grouped_dot_fp8, GATHER=0, SUB=int(kind[3:]))
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'reg':
        G._grouped_dot_fp8 = Shim(gd_exp._grouped_dot_fp8, GATHER=3, REG=1)
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind.startswith('nat'):
        G._grouped_dot_fp8 = Shim(gd_exp._grouped_dot_fp8, GATHER=3, SUB=int(kind[3:] or 1))
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'sc3':
        G._grouped_dot_fp8 = ORIG[0]
        G._grouped_dot_mxfp4 = Shim(gd_exp._grouped_dot_mxfp4, GATHER=4)
    elif kind == 'reg128':
        G._grouped_dot_fp8 = Shim(ORIG[0], maxnreg=128)
        G._grouped_dot_mxfp4 = Shim(ORIG[1], maxnreg=128)
    elif kind == 'tmareg':
        G._grouped_dot_fp8 = gd_tma.TmaShim(maxnreg=128)
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind.startswith('abl'):
        from triton.tools.tensor_descriptor import TensorDescriptor
        G._grouped_dot_fp8 = Shim(gd_abl._grouped_dot_fp8, ABL=int(kind[3:]))
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind.startswith('pf'):
        G._grouped_dot_fp8 = gd_pf.PfShim(int(kind[2:]))
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'packtma':
        G._grouped_dot_fp8 = gd_pack.PackShim(True, maxnreg=128)
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'packptr':
        G._grouped_dot_fp8 = gd_pack.PackShim(False, maxnreg=128)
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'packptrnc':
        G._grouped_dot_fp8 = gd_pack.PackShim(False)
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'tma':
        G._grouped_dot_fp8 = gd_tma.TmaShim()
        G._grouped_dot_mxfp4 = ORIG[1]
    elif kind == 'rows':
        G._grouped_dot_fp8 = ORIG[0]
        G._grouped_dot_mxfp4 = Shim(gd_rows._grouped_dot_mxfp4)
    elif kind == 'cheap':
        G._grouped_dot_fp8 = Shim(gd_exp._grouped_dot_fp8, GATHER=2)
        G._grouped_dot_mxfp4 = ORIG[1]

def weights(fmt, N, R):
    if fmt == 'fp8':
        w = (torch.randn(E_LOC, N, R, device=dev) * 0.5).to(torch.float8_e4m3fn)
        s = torch.rand(E_LOC, device=dev) * 0.01 + 0.001
    else:
        w = torch.randint(0, 256, (E_LOC, N, R // 2), device=dev, dtype=torch.uint8)
        s = torch.randint(118, 124, (E_LOC, N, R // 32), device=dev, dtype=torch.uint8)
    b = (torch.randn(E_LOC, N, device=dev) * 0.1).to(torch.bfloat16)
    return w, s, b

def routing(T):
    ids = torch.stack([torch.randperm(E_ALL, device=dev)[:TOPK] for _ in range(T)]).to(torch.int32)
    return ids

W = {fmt: (weights(fmt, 2 * F, D), weights(fmt, D, F)) for fmt in ('fp8', 'mxfp4')}
CHAIN = os.environ.get('CHAIN') == '1'
flush = torch.empty(256 * 2**20 if not tiny else 1024, dtype=torch.uint8, device=dev)

def step_fn(fmt, T, launch, ids, x, a, o1, o2):
    (w1, s1, b1), (w2, s2, b2) = W[fmt]
    def run():
        grouped_gemv(x, ids, w1, s1, b1, o1, expert_offset=0, launch=launch, glu='swiglu_oai')
        # CHAIN=1: fc2 reads fc1's output, as the arm does (the fused launch's data flow)
        grouped_gemv(o1 if CHAIN else a, ids, w2, s2, b2, o2, expert_offset=0, launch=replace(launch, block_n=min(launch.block_n, D & -D)))
    return run

def fused_fn(fmt, T, launch, ids, x, a, o1, o2, programs=None, static=False):
    """fc1 + fc2 in one persistent launch (gd_fused)."""
    (w1, s1, b1), (w2, s2, b2) = W[fmt]
    sync = torch.zeros(2 + E_LOC, dtype=torch.int32, device=dev)
    def run():
        gd_fused.fused_ffn(x, ids, w1, s1, b1, o1, w2, s2, b2, o2, sync, expert_offset=0,
                           glu='swiglu_oai', block_m=launch.block_m, block_n=launch.block_n,
                           block_k=launch.block_k, num_warps=launch.num_warps,
                           num_stages=launch.num_stages, programs=programs, static=static)
    return run


def main():
    tokens = [int(t) for t in os.environ.get('TOKENS', '64,32,16,1').split(',')]
    specs = os.environ.get('SPECS', 'base:16:64:64:4:6,gather:16:64:64:4:6').split(',')
    rows = []
    for fmt in os.environ.get('FMTS', 'fp8,mxfp4').split(','):
        for T in tokens:
            ids = routing(T)
            x = torch.randn(T, D, device=dev).to(torch.bfloat16)
            a = torch.randn(T, TOPK, F, device=dev).to(torch.bfloat16)
            outs, fns, keep = {}, {}, []
            for spec in specs:
                kind, bm, bn, bk, nw, ns = spec.split(':')
                if kind == 'gemv':
                    launch = default_launch(fmt, tokens=T, top_k=TOPK, experts=E_LOC, columns=F)
                    kind = 'base'
                elif kind == 'read':
                    continue
                elif kind.startswith('gv'):
                    # the GEMV path with explicit blocks (one slot a pass when bm is 1)
                    launch = Launch(path='gemv', block_m=int(bm), block_n=int(bn), block_k=int(bk), num_warps=int(nw), pdl=os.environ.get('PDL') == '1')
                    kind = 'base'
                elif kind.startswith('cap'):
                    # capNN: the committed tile (TMA for FP8) with at most NN registers a thread
                    launch = Launch(path='dot', block_m=int(bm), block_n=int(bn), block_k=int(bk), num_warps=int(nw), num_stages=int(ns), tma=fmt == 'fp8', max_registers=int(kind[3:]), pdl=os.environ.get('PDL') == '1')
                    kind = 'base'
                elif kind == 'nocap':
                    launch = Launch(path='dot', block_m=int(bm), block_n=int(bn), block_k=int(bk), num_warps=int(nw), num_stages=int(ns), tma=False, max_registers=0, pdl=os.environ.get('PDL') == '1')
                    kind = 'base'
                elif kind.startswith('fused'):
                    launch = Launch(path='dot', block_m=int(bm), block_n=int(bn), block_k=int(bk), num_warps=int(nw), num_stages=int(ns))
                elif kind == 'cur' or kind.startswith('abl') or kind.startswith('pf'):
                    launch = Launch(path='dot', block_m=int(bm), block_n=int(bn), block_k=int(bk), num_warps=int(nw), num_stages=int(ns), tma=fmt == 'fp8', max_registers=128, pdl=os.environ.get('PDL') == '1')
                    kind = 'base' if kind == 'cur' else kind
                else:
                    launch = Launch(path='dot', block_m=int(bm), block_n=int(bn), block_k=int(bk), num_warps=int(nw), num_stages=int(ns))
                o1 = torch.zeros(T, TOPK, F, device=dev, dtype=torch.bfloat16)
                o2 = torch.zeros(T, TOPK, D, device=dev, dtype=torch.bfloat16)
                if kind.startswith('fused'):
                    # fusedP: P programs an SM (default 4); fusedsP: the static tile order
                    static = kind.startswith('fuseds')
                    per_sm = int(kind[6 if static else 5:] or 4)
                    progs = (torch.cuda.get_device_properties(dev).multi_processor_count * per_sm
                             if dev.type == 'cuda' else (1 if static else 2))
                    run = fused_fn(fmt, T, launch, ids, x, a, o1, o2, progs, static)
                else:
                    use(kind)
                    run = step_fn(fmt, T, launch, ids, x, a, o1, o2)
                run()
                keep.append((run, o1, o2))
                if dev.type == 'cuda':
                    torch.cuda.synchronize()
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        run()
                    fns[spec] = g
                outs[spec] = (o1.clone(), o2.clone())
            base = outs[specs[0]]
            for spec in specs:
                eq = all(torch.equal(p, q) for p, q in zip(outs[spec], base))
                d = max((p.float() - q.float()).abs().max().item() for p, q in zip(outs[spec], base))
                print(f'{fmt} T={T} {spec}: equal_to_first={eq} maxdiff={d:.3g}', flush=True)
            if dev.type != 'cuda':
                continue
            times = {s: [] for s in specs}
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for g in fns.values():
                for _ in range(3): g.replay()
            for rep in range(40):
                order = specs[rep % len(specs):] + specs[:rep % len(specs)]
                for spec in order:
                    flush.add_(1)
                    start.record(); fns[spec].replay(); end.record(); end.synchronize()
                    times[spec].append(start.elapsed_time(end) * 1e3)
            for spec in specs:
                med = statistics.median(times[spec])
                print(f'{fmt} T={T} {spec}: step median {med:.1f} us (min {min(times[spec]):.1f})', flush=True)
                rows.append(dict(fmt=fmt, T=T, spec=spec, us=med))
    out = os.environ.get('OUT')
    if out:
        json.dump(rows, open(os.path.join(out, 'mb.json'), 'w'))

main()
