"""Scratch (issue 28, 2026-12-06, twenty-fifth session): the twenty-fourth session's timeline
(docs/perf/2026-12-06-one-token/scratch/gemv_timeline.py) with the GEMV's expert-by-expert wait
(``ready``: fc1 counts its programs started and finished on each expert, fc2 waits for its expert
only, `moebench.kernels.expert_ready`), so that the arm's step and the step of ready_bench.py's
``ready`` kind print side by side (``--kinds arm,ready``); the wait-exit stamp is taken after
the expert-by-expert wait.

Where the one-token sparse FP8 step's time goes, program by program: the arm's GEMV
(`sparse_gemv._sparse_gemv_fp8`) with %globaltimer stamps a program (start, past its routing load,
past the dependent-launch wait, past the K loop, end) and its SM (%smid), in the arm's step (fc1,
fc2, combine; one CUDA graph, L2 flushed), the step timed by moebench's clock beside.

The stamped kernel is the arm's body for body (the helpers it calls are the package's), with one
more argument, STAMP, swapped in for the launcher's kernel while the stages are captured; each
stage's programs write to their own buffer. The step is checked against the reference first, with
the stamps on.

Per (tokens, draw, rank) it prints, from REPS replays (medians): for each stage, in us from fc1's
first program start, the first and last program start (all programs, and the local ones), the
first and last wait exit, the loop ends' 10th / 50th / 90th percentile and last, and the last end;
the stage's weight bytes over (last end - first wait exit) against the copy ceiling; how many
programs each SM ran; the step's time from events.

Usage (GPU): PYTHONPATH=$PWD:$PWD/tools python3 DIR/gemv_timeline.py [--tokens 1]
[--seeds 0,1,2,3] [--rank 0,1] [--reps 5]
"""

from __future__ import annotations

import statistics

import copy_ceiling
import torch
import triton
import triton.language as tl
from bench_grouped_decode import SCENARIO, checked
from ready_bench import steps as ready_steps
from sparse_ab import parser

import moebench.kernels.sparse_gemv as sg
from moebench.arm import registry
from moebench.arm.decode import Workspace
from moebench.gates.families import family_of
from moebench.kernels.expert_ready import signal_done, wait_for_inputs
from moebench.kernels.gemv_parts import gemv_epilogue, k_range, program_expert, row_bias
from moebench.kernels.jit import (
    pdl_launch_dependents,
    pdl_launch_dependents_after,
    pdl_wait,
    prefetch_l2_box,
)
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import decode_reference_output, make_tokens
from moebench.spec.load import load_scenario, scenario_with

MODES = {
    "arm": 0,
    "ready": 0,
    "done_only": 1,
    "started_only": 2,
    "striped": 3,
    "pf_both": 4,
    "pf_fc1": 5,
    "pf_fc2": 6,
}
FIELDS = 7  # smid, local, start, routed, waited, looped, end


@triton.jit
def _now(d):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [d], dtype=tl.int64,
                                     is_pure=False, pack=1)  # fmt: skip


@triton.jit
def _smid(d):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [d], dtype=tl.int32,
                                     is_pure=False, pack=1)  # fmt: skip


# Ablations (MODE, this scratch only): the package's counters [2, E] put every fc1 program's two
# atomics on one 128-byte line; here each (started / done, expert, stripe) counter has a line of
# its own, fc1's program n_block counting on stripe n_block % STRIPES. MODE 1: fc1 counts itself
# done only (release), fc2 waits for the whole of fc1 (the done signal's cost alone); 2: fc1
# counts itself started only and lets fc2 launch after (the started count's cost alone), fc2 the
# whole wait; 3: both, fc2 waiting on its expert's stripes (the exact form, striped). MODE 4-6
# (third session call, the arm's launches otherwise): each program asks the L2 for its own rows
# at its start (one bulk prefetch of BLOCK_N x R bytes, before fc2's wait), so that its later K
# steps' loads find their bytes on the way: 4 in fc1 and fc2, 5 in fc1 only, 6 in fc2 only.
STRIPES = tl.constexpr(32)


@triton.jit
def _line(ready_ptr, row, e, E, stripe):
    return ready_ptr + ((row * E + e) * STRIPES + stripe) * 32


@triton.jit
def _inputs_ready(ready_ptr, e, E, stripe, READY: tl.constexpr, MODE: tl.constexpr,
                  GDC: tl.constexpr):  # fmt: skip
    if MODE == 0:
        wait_for_inputs(ready_ptr, e, E, READY, GDC)
    elif READY == 1 and MODE != 1:
        pdl_wait(GDC)
        old = tl.atomic_add(_line(ready_ptr, 0, e, E, stripe), 1, sem="relaxed")
        pdl_launch_dependents_after(old, GDC)
    elif READY == 2 and MODE == 3:
        s = tl.arange(0, STRIPES)
        started = tl.sum(tl.atomic_add(_line(ready_ptr, 0, e, E, s), 0, sem="acquire"))
        done = tl.sum(tl.atomic_add(_line(ready_ptr, 1, e, E, s), 0, sem="acquire"))
        reads = 0
        while (started - done > 0) & (reads < 1 << 22):
            done = tl.sum(tl.atomic_add(_line(ready_ptr, 1, e, E, s), 0, sem="acquire"))
            reads += 1
    else:
        pdl_wait(GDC)


@triton.jit
def _stamped_fp8(
    x_ptr, ids_ptr, w_ptr, ws_ptr, b_ptr, out_ptr,
    expert_offset, E, R,
    stride_xt, stride_xk, stride_it, stride_ik, stride_we, stride_wn, stride_be,
    stride_ot, stride_ok, part_ptr, stride_pt, stride_pk, N, K_SPLIT, STAMP,
    GLU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    EXACT_RNE: tl.constexpr, NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr,
    PEEL: tl.constexpr, GDC: tl.constexpr, TRIGGER: tl.constexpr, EARLY_LOADS: tl.constexpr,
    TOKEN_ONCE: tl.constexpr, WHOLE_STEPS: tl.constexpr, QUADS: tl.constexpr, PTX: tl.constexpr,
    LOCAL_FIRST: tl.constexpr, ready_ptr, READY: tl.constexpr, MODE: tl.constexpr,
    PF_BYTES: tl.constexpr,
):  # fmt: skip
    pid = (tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(
        0
    ) + tl.program_id(0)
    t_start = _now(pid)
    at = STAMP + pid.to(tl.int64) * 7
    pdl_launch_dependents(GDC and TRIGGER == "start" and READY != 1)
    t, slot, e = program_expert(ids_ptr, stride_it, stride_ik, expert_offset, E, LOCAL_FIRST)
    t_routed = _now(pid)
    tl.store(at, _smid(pid).to(tl.int64))
    tl.store(at + 2, t_start)
    tl.store(at + 3, t_routed)
    if (e < 0) | (e >= E):
        return
    tl.store(at + 1, 1)
    pdl_launch_dependents(GDC and TRIGGER == "local" and (READY != 1 or MODE == 1))
    e64 = e.to(tl.int64)
    n_block, k_lo, k_hi = k_range(R, K_SPLIT, SPLIT_K)
    FC1: tl.constexpr = GLU != "none"
    if (MODE == 4) | ((MODE == 5) & FC1) | ((MODE == 6) & (not FC1)):
        # The program's rows, contiguous (BLOCK_N rows of R bytes), asked of the L2 at once.
        prefetch_l2_box(w_ptr + e64 * stride_we + (n_block * BLOCK_N).to(tl.int64) * stride_wn,
                        e >= 0, PF_BYTES, True)  # fmt: skip
    stripe = n_block % STRIPES
    if EARLY_LOADS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        scale = tl.load(ws_ptr + e64)
    LANES: tl.constexpr = BLOCK_K // 16
    rows = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, LANES)[:, None] * 16 + tl.arange(0, 16)[None, :]
    w_rows = w_ptr + e64 * stride_we + rows.to(tl.int64)[:, None, None] * stride_wn
    x_row = (x_ptr + t.to(tl.int64) * stride_xt + slot.to(tl.int64) * stride_xk).to(
        tl.pointer_type(tl.int16)
    )
    x_rows = x_row + 0 * rows[:, None, None]
    acc = tl.zeros([BLOCK_N, LANES], dtype=tl.float32)
    k_first = k_lo
    if PEEL:
        k1 = k_lo + offs[None, :, :]
        w1 = tl.load(w_rows + k1, mask=k1 < k_hi, other=0.0)
        _inputs_ready(ready_ptr, e, E, stripe, READY, MODE, GDC)
        tl.store(at + 4, _now(pid))
        x1 = tl.load(x_rows + k1, mask=k1 < k_hi, other=0)
        acc += tl.sum(w1.to(tl.float32) * x1.to(tl.bfloat16, bitcast=True).to(tl.float32), axis=2)
        k_first = k_lo + BLOCK_K
    else:
        _inputs_ready(ready_ptr, e, E, stripe, READY, MODE, GDC)
        tl.store(at + 4, _now(pid))
    for k0 in tl.range(k_first, k_hi, BLOCK_K):
        k = k0 + offs[None, :, :]
        w = tl.load(w_rows + k, mask=k < k_hi, other=0.0)
        xv = tl.load(x_rows + k, mask=k < k_hi, other=0)
        acc += tl.sum(w.to(tl.float32) * xv.to(tl.bfloat16, bitcast=True).to(tl.float32), axis=2)
    tl.store(at + 5, _now(pid))
    pdl_launch_dependents(GDC and TRIGGER == "end" and READY != 1)
    h = tl.sum(acc, axis=1)
    if not EARLY_LOADS:
        bias = row_bias(b_ptr, e64, n_block, stride_be, BLOCK_N)
        scale = tl.load(ws_ptr + e64)
    gemv_epilogue(h * scale, bias, n_block, t, slot, out_ptr, stride_ot, stride_ok, GLU,
                  BLOCK_N, EXACT_RNE)  # fmt: skip
    if READY == 1 and MODE == 0:
        signal_done(ready_ptr, e, E)
    if READY == 1 and (MODE == 1 or MODE == 3):
        tl.debug_barrier()
        tl.atomic_add(_line(ready_ptr, 1, e, E, stripe), 1, sem="release")
    tl.store(at + 6, _now(pid))


class Swap:
    """Stands in for `_sparse_gemv_fp8` in the launcher: launches the stamped kernel (the one-token
    launch only: 2 rows, the plain loop, every step masked) with the current stage's buffer."""

    def __init__(self):
        self.current: torch.Tensor | None = None
        self.launched = 0
        self.mode = 0
        self.striped: torch.Tensor | None = None  # the ablations' counters (MODE 1-3)

    def __getitem__(self, grid):
        def launch(*args, **kw):
            assert kw["NUM_STAGES"] == 0 and kw["SPLIT_K"] == 1 and not kw["TOKEN_ONCE"]
            assert not kw["WHOLE_STEPS"] and not kw["QUADS"]
            self.launched += 1
            if self.mode:
                kw["ready_ptr"] = self.striped
            kw.setdefault("ready_ptr", self.striped)  # the package's launcher without the wait
            kw.setdefault("READY", 0)
            pf = kw["BLOCK_N"] * args[8]  # a program's rows: BLOCK_N rows of R bytes
            _stamped_fp8[grid](*args, self.current, MODE=self.mode, PF_BYTES=pf, **kw)

        return launch


def pct(v: list[float], q: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def describe(stamps: torch.Tensor, origin: int) -> dict:
    s = stamps.view(-1, FIELDS).cpu()
    s = s[s[:, 2] > 0]
    real = s[s[:, 1] > 0]
    us = lambda rows, col: ((rows[:, col] - origin) / 1000.0).tolist()
    d = dict(programs=len(s), local=len(real), first_start=min(us(s, 2)),
             last_start=max(us(s, 2)), last_routed=max(us(s, 3)))  # fmt: skip
    if len(real):
        starts, waited, looped, ends = us(real, 2), us(real, 4), us(real, 5), us(real, 6)
        per_sm = torch.bincount(real[:, 0], minlength=132)
        d.update(first_local_start=min(starts), last_local_start=max(starts),
                 first_wait=min(waited), last_wait=max(waited), loop10=pct(looped, 0.1),
                 loop50=pct(looped, 0.5), loop90=pct(looped, 0.9), last_loop=max(looped),
                 last_end=max(ends), sm_max=int(per_sm.max()), sm_min=int(per_sm.min()),
                 life_us=statistics.median(b - a for a, b in zip(starts, ends, strict=True)),
                 loop_us=statistics.median(b - a for a, b in zip(waited, looped, strict=True)),
                 )  # fmt: skip
    return d


def main() -> None:
    ap = parser("1", "0,1,2,3", "w8a16", "arm,ready")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    dev = torch.device("cuda")
    clock = Clock(dev)
    copy_tbs, copy_note = copy_ceiling.copy_tbs(dev)
    arm = registry.resolve("sparse_decode")
    name = torch.cuda.get_device_name(0)
    print(torch.__version__, name, f"copy {copy_tbs:.3f} TB/s ({copy_note})", flush=True)
    swap = Swap()
    kept, sg._sparse_gemv_fp8 = sg._sparse_gemv_fp8, swap
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
                for kind in a.kinds.split(","):
                    ws = Workspace(prob, layout=arm.layout)
                    plain = kind == "arm" or kind.startswith("pf_")
                    st = arm.build(ws) if plain else ready_steps(ws, ready=True)
                    swap.mode = MODES[kind]
                    swap.striped = torch.zeros(2 * prob.local_experts * STRIPES * 32,
                                               dtype=torch.int32, device=dev)  # fmt: skip
                    wb = arm.weight_bytes(prob)
                    bufs = [
                        torch.zeros(FIELDS << 15, dtype=torch.int64, device=dev) for _ in range(2)
                    ]

                    def step(st=st, bufs=bufs):
                        swap.current = bufs[0]
                        st[0].run()
                        swap.current = bufs[1]
                        st[1].run()
                        st[2].run()

                    one = (type(st[0])(name=st[0].name, run=step),
                           type(st[1])(name=st[1].name, run=lambda: None),
                           type(st[2])(name=st[2].name, run=lambda: None))  # fmt: skip
                    row = checked(ws, one, decode_reference_output(prob), cs.precision)
                    if not row["ok"] or swap.launched < 2:
                        print(
                            f"T={T} seed={seed} rank={rank}: FAILED {row} launched={swap.launched}"
                        )
                        continue
                    e = prob.topk_ids_TK.cpu() - prob.expert_offset
                    loc = "".join(
                        map(str, ((e >= 0) & (e < prob.local_experts)).int().view(-1).tolist())
                    )
                    show(
                        clock,
                        step,
                        bufs,
                        wb,
                        copy_tbs,
                        a.reps,
                        f"T={T} seed={seed} rank={rank} local={loc} {kind}",
                    )
    sg._sparse_gemv_fp8 = kept


def show(clock: Clock, step, bufs, wb: dict, copy_tbs: float, n: int, label: str) -> None:
    replay = clock.capture(step)
    for _ in range(3):
        replay()
    reps = []
    for _ in range(n):
        for b in bufs:
            b.zero_()
        step_us = clock.sample_us(replay, flush_l2=True)
        s1 = bufs[0].view(-1, FIELDS)
        origin = int(s1[s1[:, 2] > 0][:, 2].min())
        reps.append((step_us, describe(bufs[0], origin), describe(bufs[1], origin)))
    step_us = statistics.median(r[0] for r in reps)
    print(f"\n{label}: step us (events, median of {n}) {step_us:.2f}", flush=True)
    for si, name in enumerate(("fc1", "fc2")):
        d = {k: statistics.median(r[si + 1][k] for r in reps) for k in reps[0][si + 1]}
        print(f"  {name}: " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in d.items()), flush=True)  # fmt: skip
        if "last_end" in d:
            win = d["last_end"] - d["first_wait"]
            rate = wb[name] / (win * 1e-6) / 1e12
            print(f"  {name} window (first wait exit -> last end) {win:.2f} us: {rate:.3f} TB/s, "
                  f"{rate / copy_tbs:.0%} of copy", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
