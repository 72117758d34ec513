"""Where the grouped FP8 step's time goes, program by program: the arm's fc1 and fc2 tile
(`grouped_dot._grouped_dot_fp8`, one pass a program) with four %globaltimer stamps a program
(start, past the dependent-launch wait, past the K loop, end) and its SM (%smid), in the arm's
step (fc1, fc2, combine; one CUDA graph, L2 flushed), the step timed by moebench's clock beside.

The instrumented kernel is the arm's, body for body (`_fp8_pass` inlined to stamp the end of its
K loop), with one more argument, STAMP. It is swapped in for the launcher's kernel
(`grouped_gemv._grouped_dot_fp8`) while the stages are captured; each stage's programs write to
their own buffer. The step is checked against the reference first, with the stamps on.

Per (tokens, draw, rank) it prints, from the last of REPS replays and their medians: for each
stage the times (us, from fc1's first program start) of its first and last program start, first
and last wait exit, the loop ends' 10th / 50th / 90th percentile and last, and the last end; the
stage's weight bytes over (last end - first wait exit) against the copy ceiling; the busiest and
idlest SM's real programs; the step's time from events.

A timing ablation beside it (``--splits 1,2,3``, outputs wrong on purpose past the first): fc2's
programs each read 1/S of K, S times as many of them (S - 1 more a column block), so that its
grid fills the SMs' slots more evenly and ends in finer pieces: what a split-K fc2 could gain at
most, before any reduction of its partial sums is paid. Only split 1 is checked; the steps are
timed interleaved (moebench's clock and rotation), then each replayed alone for its stamps.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools python3 DIR/timeline.py [--tokens 16,32,64]
[--seeds 0] [--rank 0] [--reps 5] [--splits 1,2,3]
"""

from __future__ import annotations

import statistics

import copy_ceiling
import torch
import triton
import triton.language as tl
from bench_grouped_decode import SCENARIO, checked
from sparse_ab import parser

import moebench.kernels.grouped_gemv as gg
from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.gemv_parts import row_bias
from moebench.kernels.grouped_dot import _fp8_step
from moebench.kernels.grouped_slots import expert_slots, program_work, slot_epilogue
from moebench.kernels.jit import pdl_launch_dependents, pdl_wait
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.spec.load import load_scenario, scenario_with

FIELDS = 6  # smid, count, start, waited, looped, end


@triton.jit
def _now(d):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [d], dtype=tl.int64,
                                     is_pure=False, pack=1)  # fmt: skip


@triton.jit
def _smid(d):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [d], dtype=tl.int32,
                                     is_pure=False, pack=1)  # fmt: skip


@triton.jit
def _stamped_fp8(
    x_ptr, ids_ptr, w, ws_ptr, b_ptr, out_ptr,
    TK, K, expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok, STAMP,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, TMA: tl.constexpr,
    PASS_GRID: tl.constexpr, EARLY_BIAS: tl.constexpr, PLACED: tl.constexpr,
    SPLIT: tl.constexpr = 1,
):  # fmt: skip
    pid = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
    t_start = _now(pid)
    at = STAMP + pid.to(tl.int64) * 6
    pdl_launch_dependents(GDC)
    e, count, m0 = program_work(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E,
                                BLOCK_E, SCAN, BLOCK_M, PASS_GRID)  # fmt: skip
    tl.store(at, _smid(pid).to(tl.int64))
    tl.store(at + 1, count.to(tl.int64))
    tl.store(at + 2, t_start)
    if count == 0:
        return
    pdl_wait(GDC)
    tl.store(at + 3, _now(pid))
    e64 = e.to(tl.int64)
    n_block = tl.program_id(0) // SPLIT
    # The timing ablation (SPLIT > 1): part p of the SPLIT programs of a block reads only its
    # share of K; every part stores its partial sums over the same outputs (wrong on purpose).
    per = tl.cdiv(tl.cdiv(R, BLOCK_K), SPLIT) * BLOCK_K
    k_lo = tl.program_id(0) % SPLIT * per
    k_hi = tl.minimum(R, k_lo + per)
    w_src = w
    w_row = e * (stride_we // stride_wn) + n_block * BLOCK_N
    scale = tl.load(ws_ptr + e64)
    t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                            BLOCK_M, SCAN)  # fmt: skip
    m_ok = m0 + tl.arange(0, BLOCK_M) < count
    if EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    x_at = x_ptr + (t64 * stride_xt + k64 * stride_xk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        acc = _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, not EVEN_K, True, INTERPRET,
                        PLACED)  # fmt: skip
    tl.store(at + 4, _now(pid))
    h = tl.trans(acc) * scale
    if not EARLY_BIAS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
    slot_epilogue(h, bias, n_block, t64, k64, m_ok, out_ptr, stride_ot, stride_ok, GLU, BLOCK_M,
                  BLOCK_N, EXACT_RNE)  # fmt: skip
    tl.store(at + 5, _now(pid))


class Swap:
    """Stands in for `_grouped_dot_fp8` in the launcher: launches the stamped kernel with the
    buffer of the stage being built (``current``)."""

    def __init__(self):
        self.current: torch.Tensor | None = None
        self.split = 1  # the K split of the launch being built (the timing ablation)
        self.grids: list = []

    def __getitem__(self, grid):
        def launch(*args, **kw):
            assert kw["PASS_GRID"] and kw["TMA"], "the stamped kernel is the one-pass TMA tile"
            self.grids.append(grid)
            g = (grid[0] * self.split, grid[1])
            _stamped_fp8[g](*args, self.current, SPLIT=self.split, **kw)

        return launch


def pct(v: list[float], q: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def describe(stamps: torch.Tensor, origin: int) -> dict:
    s = stamps.view(-1, FIELDS).cpu()
    real = s[s[:, 1] > 0]
    us = lambda col: ((real[:, col] - origin) / 1000.0).tolist()
    starts, waited, looped, ends = us(2), us(3), us(4), us(5)
    per_sm = torch.bincount(real[:, 0], minlength=132)
    return dict(
        programs=len(real), first_start=min(starts), last_start=max(starts),
        first_wait=min(waited), last_wait=max(waited), loop10=pct(looped, 0.1),
        loop50=pct(looped, 0.5), loop90=pct(looped, 0.9), last_loop=max(looped), last_end=max(ends),
        sm_max=int(per_sm.max()), sm_min=int(per_sm.min()),
        loop_us=statistics.median([b - a for a, b in zip(waited, looped, strict=True)]),
    )  # fmt: skip


def main() -> None:
    ap = parser("16,32,64", "0", "w8a16", "")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--splits", default="1,2,3", help="fc2's K splits to time; 1 first")
    a = ap.parse_args()
    splits = [int(v) for v in a.splits.split(",")]
    assert splits[0] == 1
    dev = torch.device("cuda")
    clock = Clock(dev)
    copy_tbs, copy_note = copy_ceiling.copy_tbs(dev)
    arm = registry.resolve("grouped_decode")
    print(
        torch.__version__,
        torch.cuda.get_device_name(0),
        f"copy {copy_tbs:.3f} TB/s ({copy_note})",
        flush=True,
    )
    swap = Swap()
    kept, gg._grouped_dot_fp8 = gg._grouped_dot_fp8, swap
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
                wb = arm.weight_bytes(prob)
                steps = {S: stamped_step(st, swap, S, dev) for S in splits}
                # The check runs the whole (unsplit) step through the first stage's closure.
                noop = lambda: None
                runs = (steps[1][0], noop, noop)
                st2 = [type(f)(name=f.name, run=r) for f, r in zip(st, runs, strict=True)]
                row = checked(ws, st2, decode_reference_output(prob), cs.precision)
                if not row["ok"]:
                    print(f"T={T} seed={seed} rank={rank}: FAILED its check {row}", flush=True)
                    continue
                if len(swap.grids) < 2:
                    print(f"T={T}: the stamped kernel did not run (launch not the tile)")
                    continue
                # The step of each split timed interleaved (graphs, L2 flushed), then each
                # replayed alone for its stamps.
                times = bench.time_interleaved(clock, [steps[S][0] for S in splits])
                print(f"\nT={T} seed={seed} rank={rank} weight_bytes fc1={wb['fc1'] / 1e6:.1f}MB "
                      f"fc2={wb['fc2'] / 1e6:.1f}MB; step us (interleaved) "
                      + " ".join(f"split{S}={u:.1f}" for S, u in zip(splits, times, strict=True)),
                      flush=True)  # fmt: skip
                for S in splits:
                    show_stamps(clock, steps[S], wb, copy_tbs, a.reps, f"split{S}")
    gg._grouped_dot_fp8 = kept


def stamped_step(st, swap: Swap, split: int, dev):
    """(the step with fc2 split ``split`` ways, its two stamp buffers)."""
    bufs = [torch.zeros(FIELDS << 17, dtype=torch.int64, device=dev) for _ in range(2)]

    def step():
        swap.current, swap.split = bufs[0], 1
        st[0].run()
        swap.current, swap.split = bufs[1], split
        st[1].run()
        swap.split = 1
        st[2].run()

    return step, bufs


def show_stamps(clock: Clock, step_bufs, wb: dict, copy_tbs: float, n: int, label: str) -> None:
    step, bufs = step_bufs
    replay = clock.capture(step)
    for _ in range(3):
        replay()
    reps = []
    for _ in range(n):
        for b in bufs:
            b.zero_()
        step_us = clock.sample_us(replay, flush_l2=True)
        s1 = bufs[0].view(-1, FIELDS)
        origin = int(s1[s1[:, 1] > 0][:, 2].min())
        reps.append((step_us, describe(bufs[0], origin), describe(bufs[1], origin)))
    step_us = statistics.median(r[0] for r in reps)
    print(f" {label}: step us (alone, median of {n}) {step_us:.1f}", flush=True)
    for si, name in enumerate(("fc1", "fc2")):
        d = {k: statistics.median(r[si + 1][k] for r in reps) for k in reps[0][1]}
        print(f"  {name}: " + " ".join(f"{k}={v:.1f}" for k, v in d.items()), flush=True)
        win = d["last_end"] - d["first_wait"]
        rate = wb[name] / (win * 1e-6) / 1e12
        print(f"  {name} window (first wait exit -> last end) {win:.1f} us: {rate:.3f} TB/s, "
              f"{rate / copy_tbs:.0%} of copy; first wait -> loop 50% "
              f"{d['loop50'] - d['first_wait']:.1f} us", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
