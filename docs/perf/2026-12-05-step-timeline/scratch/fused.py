"""fc1 and fc2 of the grouped FP8 step as one persistent stream (a candidate, timed against the
arm's two launches; the combine stays the arm's).

Why (call2's timeline, H100, 64 tokens): fc1's first wave of 792 programs streams at about 89% of
copy, its second at about 80%, and fc2's one wave of 720 at 79%; each stage ends in a tail (the
last 10% of fc1's programs take 7 us), and fc2 starts only when all of fc1 has ended.

What: one launch of SMs x 6 programs. A program claims work items in order from a counter (an
atomic add): first every fc1 item (pass j of BLOCK_M slots x column block nb, passes in the arm's
order, expert by expert), then every fc2 item. An fc2 item of pass j waits (acquire) until the
N1 / BLOCK_N fc1 items of pass j have stored their GLU outputs (each adds one, release, after its
stores), then reads those rows. Claimed in order, every fc1 item is held by a running program
before any fc2 item is claimed, so a wait always ends; fc2's first items find their pass long
done. Both stages' weights are one placed copy, [E * N1 + E * N2, R] rows behind one TMA
descriptor, so that one pipelined K loop serves both; the x operand, scale, bias and epilogue are
picked per item. Each output is computed as the arm's tile computes it (same tile, same K order,
same epilogue): the outputs are the arm's bit for bit.

The counters: [0] the claim counter, [1] programs finished, [2 + j] pass j's finished fc1 items.
The last program to finish zeroes them, so the next launch (a graph replay) finds them zero.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools python3 DIR/fused.py [--tokens 16,32,64] [--seeds 0,1]
[--rank 0,1]; on the CPU (interpreter): python3 DIR/fused.py --selftest
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.fp8_placed import place_e4m3
from moebench.kernels.gemv_parts import row_bias
from moebench.kernels.grouped_dot import _fp8_step
from moebench.kernels.grouped_slots import _expert_hits, expert_slots, slot_epilogue
from moebench.kernels.jit import pdl_launch_dependents, pdl_wait

PROGRAMS_PER_SM = 6


@triton.jit
def _fused_fp8(
    x_ptr, a_ptr, o_ptr, ids_ptr, w, s1_ptr, s2_ptr, b1_ptr, b2_ptr, ctr_ptr,
    TK, K, expert_offset, E, R, N1, N2,
    stride_xt, stride_at, stride_ak, stride_it, stride_ik, stride_b1, stride_b2,
    stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, PLACED: tl.constexpr,
    EARLY_CLAIM: tl.constexpr = False, SPIN_LOADS: tl.constexpr = False,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    ex = tl.arange(0, BLOCK_E)
    hits = _expert_hits(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, BLOCK_E, SCAN)
    passes = (hits + BLOCK_M - 1) // BLOCK_M
    end = tl.cumsum(passes, 0)
    total = tl.sum(passes, 0)
    nb1 = N1 // BLOCK_N
    nb2 = N2 // BLOCK_N
    items1 = total * nb1
    items = items1 + total * nb2
    pdl_wait(GDC)  # x may be the previous kernel's output
    i = tl.atomic_add(ctr_ptr, 1)
    while i < items:
        if EARLY_CLAIM:  # the next item claimed now, its round trip behind this item's loop
            nxt = tl.atomic_add(ctr_ptr, 1)
        fc2 = i >= items1
        ii = tl.where(fc2, i - items1, i)
        per = tl.where(fc2, nb2, nb1)
        j = ii // per
        n_block = ii % per
        mine = (end - passes <= j) & (j < end)
        e = tl.sum(tl.where(mine, ex, 0), 0)
        count = tl.sum(tl.where(mine, hits, 0), 0)
        m0 = (j - tl.sum(tl.where(mine, end - passes, 0), 0)) * BLOCK_M
        e64 = e.to(tl.int64)
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        b_ptr = tl.where(fc2, b2_ptr, b1_ptr)
        stride_be = tl.where(fc2, stride_b2, stride_b1)
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        scale = tl.load(tl.where(fc2, s2_ptr, s1_ptr) + e64)
        if fc2:
            # fc1's GLU rows of pass j, all of its column blocks, stored before they are read.
            if SPIN_LOADS:  # plain volatile reads while waiting, one acquire once done
                done = tl.load(ctr_ptr + 2 + j, volatile=True)
                while done < nb1:
                    done = tl.load(ctr_ptr + 2 + j, volatile=True)
                tl.atomic_add(ctr_ptr + 2 + j, 0, sem="acquire")
            else:
                done = tl.atomic_add(ctr_ptr + 2 + j, 0, sem="acquire")
                while done < nb1:
                    done = tl.atomic_add(ctr_ptr + 2 + j, 0, sem="acquire")
        x_base = tl.where(fc2, a_ptr, x_ptr)
        xt = tl.where(fc2, stride_at, stride_xt)
        xk = tl.where(fc2, stride_ak, 0)
        x_at = x_base + (t64 * xt + k64 * xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        w_row = tl.where(fc2, E * N1 + e * N2, e * N1) + n_block * BLOCK_N
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in tl.range(0, R, BLOCK_K, num_stages=NUM_STAGES):
            acc = _fp8_step(acc, w, w_row, x_at, k0, R, m_ok, not EVEN_K, True, INTERPRET,
                            PLACED)  # fmt: skip
        h = tl.trans(acc) * scale
        if fc2:
            slot_epilogue(h, bias, n_block, t64, k64, m_ok, o_ptr, stride_ot, stride_ok, "none",
                          BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
        else:
            slot_epilogue(h, bias, n_block, t64, k64, m_ok, a_ptr, stride_at, stride_ak, GLU,
                          BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
            tl.debug_barrier()  # every thread's stores before the release
            tl.atomic_add(ctr_ptr + 2 + j, 1, sem="release")
        if EARLY_CLAIM:
            i = nxt
        else:
            i = tl.atomic_add(ctr_ptr, 1)
    finished = tl.atomic_add(ctr_ptr + 1, 1, sem="acq_rel")
    if finished == tl.num_programs(0) - 1:
        # Every program has made its last claim: zero the counters for the next launch.
        tl.store(ctr_ptr, 0)
        tl.store(ctr_ptr + 1, 0)
        for q in range(0, total):
            tl.store(ctr_ptr + 2 + q, 0)


def fused_weights(w13: torch.Tensor, w2: torch.Tensor, placed: bool = True) -> torch.Tensor:
    """Both stages' FP8 weights as one [E * N1 + E * N2, R] copy (placed layout by default)."""
    rows = [w.reshape(-1, w.shape[-1]) for w in (w13, w2)]
    cat = torch.cat(rows)
    return place_e4m3(cat) if placed else cat


def max_passes(TK: int, E: int, block_m: int) -> int:
    return min(E, TK) + TK // block_m


def fused_fc(x, a, o, ids, wcat, s1, s2, b1, b2, ctr, *, E, N1, N2, expert_offset, glu,
             programs, pdl=False, block_m=16, block_n=64, block_k=64, stages=6, warps=4,
             maxnreg=80, placed=True, early_claim=False, spin_loads=False):  # fmt: skip
    """fc1 (x [T, R] -> a [T, K, N1 / 2], GLU) and fc2 (a -> o [T, K, N2]) in one launch."""
    from moebench.kernels.grouped_slots import scan_width

    T, K = ids.shape
    R = wcat.shape[1]
    desc = TensorDescriptor.from_tensor(wcat, [block_n, block_k])
    block_e = triton.next_power_of_2(E)
    kw = dict(num_warps=warps)
    if o.is_cuda:
        kw["maxnreg"] = maxnreg
        if pdl:
            kw["launch_pdl"] = True
    _fused_fp8[(programs,)](
        x, a, o, ids, desc, s1, s2, b1, b2, ctr, T * K, K, expert_offset, E, R, N1, N2,
        x.stride(0), a.stride(0), a.stride(1), *ids.stride(), b1.stride(0), b2.stride(0),
        o.stride(0), o.stride(1),
        GLU=glu, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=R % block_k == 0,
        EXACT_RNE=not o.is_cuda, BLOCK_E=block_e, SCAN=scan_width(T * K, block_e, block_m),
        NUM_STAGES=stages, INTERPRET=not o.is_cuda, GDC=pdl and o.is_cuda, PLACED=placed,
        EARLY_CLAIM=early_claim, SPIN_LOADS=spin_loads, **kw,
    )  # fmt: skip


def selftest() -> None:
    """Under the interpreter: the fused launch's a and o against the arm's two tile launches,
    bit for bit, small shapes (D = F, as gpt-oss-20b: one R for both stages), routings with a
    pass past BLOCK_M slots and untouched experts; the counters zero after each launch."""
    from moebench.kernels.grouped_gemv import grouped_gemv
    from moebench.kernels.grouped_launch import Launch

    torch.manual_seed(0)
    E, E_ALL, K, D, T = 4, 8, 2, 128, 20
    F = D
    tile = Launch(path="dot", block_m=16, block_n=64, block_k=64, num_warps=4, num_stages=6,
                  tma=True, pass_grid=True, early_bias=True, fp8_placed=True)  # fmt: skip
    w13 = (torch.randn(E, 2 * F, D) * 0.5).to(torch.float8_e4m3fn)
    w2 = (torch.randn(E, D, F) * 0.5).to(torch.float8_e4m3fn)
    s1, s2 = torch.rand(E) * 0.01 + 0.001, torch.rand(E) * 0.01 + 0.001
    b1 = (torch.randn(E, 2 * F) * 0.1).to(torch.bfloat16)
    b2 = (torch.randn(E, D) * 0.1).to(torch.bfloat16)
    p13, p2, wcat = place_e4m3(w13), place_e4m3(w2), fused_weights(w13, w2)
    x = torch.randn(T, D).to(torch.bfloat16)
    routings = {
        "skewed": torch.stack([torch.full((T,), 5), torch.randint(0, E_ALL, (T,))], 1),
        "uniform": torch.randint(0, E_ALL, (T, K)),
        "none local": torch.randint(0, 4, (T, K)),
    }
    for name, ids in routings.items():
        ids = ids.int()
        off = 4
        poison = lambda *shape: torch.full(shape, -7.0).to(torch.bfloat16)
        a_ref, o_ref = poison(T, K, F), poison(T, K, D)
        grouped_gemv(x, ids, p13, s1, b1, a_ref, expert_offset=off, launch=tile, glu="swiglu_oai")
        grouped_gemv(a_ref, ids, p2, s2, b2, o_ref, expert_offset=off, launch=tile)
        for early, spin in ((False, False), (True, False), (False, True)):
            a, o = poison(T, K, F), poison(T, K, D)
            ctr = torch.zeros(2 + max_passes(T * K, E, 16), dtype=torch.int32)
            fused_fc(x, a, o, ids, wcat, s1, s2, b1, b2, ctr, E=E, N1=2 * F, N2=D,
                     expert_offset=off, glu="swiglu_oai", programs=3,
                     early_claim=early, spin_loads=spin)  # fmt: skip
            same_a = torch.equal(a.view(torch.int16), a_ref.view(torch.int16))
            same_o = torch.equal(o.view(torch.int16), o_ref.view(torch.int16))
            routed = int(((ids >= off) & (ids < off + E)).sum())
            print(f"{name}, early claim {early}, spin loads {spin}: local slots {routed}, "
                  f"a bitwise {same_a}, o bitwise {same_o}, "
                  f"counters zero {not ctr.any()}")  # fmt: skip
            assert same_a and same_o and not ctr.any()


def fused_stages(ws, st, programs: int, pdl: bool, early_claim: bool = False,
                 spin_loads: bool = False):  # fmt: skip
    """The arm's stages ``st`` with fc1 and fc2 replaced by one fused launch (the second stage a
    no-op) and the arm's combine."""
    from moebench.arm.base import Stage

    p = ws.problem
    E, F = p.local_experts, p.w2.shape[2]
    wcat = fused_weights(p.w13, p.w2)
    T, K = p.topk_ids_TK.shape
    ctr = torch.zeros(2 + max_passes(T * K, E, 16), dtype=torch.int32, device=wcat.device)

    def run() -> None:
        fused_fc(p.x_TD, ws.a, ws.o, p.topk_ids_TK, wcat, p.w13_scale, p.w2_scale, p.b13_E2F,
                 p.b2_ED, ctr, E=E, N1=p.w13.shape[1], N2=p.w2.shape[1],
                 expert_offset=p.expert_offset, glu=p.activation, programs=programs,
                 pdl=pdl, early_claim=early_claim, spin_loads=spin_loads)  # fmt: skip
        assert F == p.w13.shape[2], "one R for both stages"

    return (Stage(name="fc1", run=run), Stage(name="fc2", run=lambda: None), st[2]), ctr


def bench_main() -> None:
    from bench_grouped_decode import SCENARIO, checked
    from sparse_ab import parser

    from moebench.arm import registry
    from moebench.arm.decode import Workspace
    from moebench.gates.families import family_of
    from moebench.measure import bench
    from moebench.measure.clock import Clock
    from moebench.plan.cases import plan
    from moebench.plan.inputs import decode_reference_output, make_tokens
    from moebench.spec.load import load_scenario, scenario_with

    ap = parser("16,32,64", "0,1,2", "w8a16", "")
    ap.add_argument(
        "--per-sm",
        default="6",
        help="programs an SM, comma separated; a trailing "
        "'e' claims each next item early (EARLY_CLAIM), e.g. 6,6e",
    )
    a = ap.parse_args()
    dev = torch.device("cuda")
    clock = Clock(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    arm = registry.resolve("grouped_decode")
    per_sm = a.per_sm.split(",")
    names = ["arm"] + [f"fused{n}" for n in per_sm]
    print(torch.__version__, torch.cuda.get_device_name(0), f"{sms} SMs", flush=True)
    worst: dict = {}
    toks = {int(v) for v in a.tokens.split(",")}
    for seed in [int(v) for v in a.seeds.split(",")]:
        s = scenario_with(load_scenario(a.scenario or SCENARIO), **{"routing.seed": seed})
        for rank in [int(v) for v in a.rank.split(",")]:
            for pl in plan(s):
                cs = pl.case.scenario
                T = cs.shape.tokens_per_rank
                if T not in toks or cs.precision != "w8a16":
                    continue
                x = make_tokens(tokens=T, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
                prob = family_of(cs).problem(cs, pl.routing, pl.capacity_rows, x, rank, dev)
                ws = Workspace(prob, layout=arm.layout)
                st = arm.build(ws)
                ref = decode_reference_output(prob)
                row = checked(ws, st, ref, cs.precision)
                y_arm, a_arm, o_arm = ws.y_TD.clone(), ws.a.clone(), ws.o.clone()
                forms = [st]
                ok = row["ok"]
                for n in per_sm:
                    fst, ctr = fused_stages(ws, st, int(n.rstrip("es")) * sms, pdl=True,
                                            early_claim="e" in n, spin_loads="s" in n)  # fmt: skip
                    r = checked(ws, fst, ref, cs.precision)
                    same = torch.equal(ws.y_TD.view(torch.int16), y_arm.view(torch.int16))
                    if not same:  # where: fc1's rows (a), fc2's (o), the output (y)
                        bits = lambda u, v: int((u.view(torch.int16) != v.view(torch.int16)).sum())
                        big = lambda u, v: float((u.float() - v.float()).abs().nan_to_num(0).max())
                        print(f"  differs from the arm: a {bits(ws.a, a_arm)} values (max "
                              f"{big(ws.a, a_arm):.3g}), o {bits(ws.o, o_arm)} (max "
                              f"{big(ws.o, o_arm):.3g}), y {bits(ws.y_TD, y_arm)} of "
                              f"{ws.y_TD.numel()}", flush=True)  # fmt: skip
                    zero = not bool(ctr.any())
                    print(f"T={T} seed={seed} rank={rank} fused{n}: diff {r['diff']:.2e} "
                          f"sentinels {r['sentinels']} bitwise-arm {same} counters-zero {zero}",
                          flush=True)  # fmt: skip
                    ok = ok and r["ok"] and same and zero
                    forms.append(fst)
                if not ok:
                    print(f"T={T} seed={seed} rank={rank}: a check FAILED; not timed", flush=True)
                    continue
                fns = [lambda f=f: [g.run() for g in f] for f in forms]
                us = bench.time_interleaved(clock, fns, rounds=8, reps=4)
                line = " ".join(f"{n}={u:.1f}" for n, u in zip(names, us, strict=True))
                print(f"T={T} seed={seed} rank={rank} {line}", flush=True)
                for n, u in zip(names, us, strict=True):
                    worst.setdefault((T, n), {}).setdefault(seed, {})[rank] = u
    print("\nthe slower rank's step per draw (the arm's slower rank), mean, change:")
    for T in sorted(toks):
        base = worst.get((T, "arm"), {})
        for n in names:
            per = worst.get((T, n), {})
            vals = [per[d][max(base[d], key=base[d].get)] for d in per if len(base.get(d, {})) > 1]
            if not vals:
                continue
            arm_vals = [max(base[d].values()) for d in per if len(base.get(d, {})) > 1]
            m, mb = sum(vals) / len(vals), sum(arm_vals) / len(arm_vals)
            print(f"  T={T:2d} {n:8s}: " + " ".join(f"{v:.1f}" for v in vals)
                  + f"  mean {m:.1f}  change {m / mb - 1:+.1%}", flush=True)  # fmt: skip


if __name__ == "__main__":
    import sys

    if "--selftest" in sys.argv:
        selftest()
    else:
        bench_main()
