"""Sparse top-k GEMV launch variants at gpt-oss-20b decode shapes, one token, on the GPU.

Rank 0 of `scenarios/gpt-oss-20b-decode.yaml` (16 local experts, top-4), both weight formats. Each
variant's fc1 (gate_up with the GLU fused, on the tokens) and fc2 (on the default's fc1 output) are
checked against the default launch before they are timed: bitwise, and otherwise by the scale-free
difference against the precision's tolerance (split-K changes the fp32 summation order). A variant
that fails its check is reported and not timed. Times are medians of CUDA-graph replays, L2
flushed by a read before each. Bandwidth counts the bytes of the distinct local experts the token
hits (values, scales, biases), as the work model does, against the copy ceiling of the GPU it runs
on (tools/copy_ceiling.py: the H200's measured 4.27 TB/s, or one measured at the start on a GPU
moebench has no figure for; the log says which).

Variants are (block_n, weight bytes a row a step, warps, num_stages, split_k, tensor_cores,
group_major); block_k is derived per format (FP8: one value a byte; MXFP4: two).

Beside the GEMV, a read floor: `_read_words`, a kernel that only reads the same experts' weight
bytes (XOR-reduced to one word a program so that nothing is optimised away), over several
program sizes. Its best time is what any kernel needs to read those bytes under this timer, the
ceiling a GEMV is held to besides the copy ceiling. Then the step floor: the sparse step (fc1, fc2
and the combine, one CUDA graph) against the same graph with each GEMV replaced by the best read
of its bytes; and torch's copy (read + written, the copy ceiling's measure) and amax (read only)
over as many bytes, to show what the ceiling is at this size.

The sweep stops starting new variants after half of TIME_BUDGET_S a precision, so that the run
stays within one device call; the JSON is rewritten after every row.

Usage (GPU): PYTHONPATH=$PWD python3 tools/bench_decode.py OUT [VARIANTS]
VARIANTS replaces the sweep: comma-separated
block_n:row_bytes:warps[:num_stages[:split_k[:tc[:gm]]]], "-" for the default of a field (tc 1:
the tensor-core MXFP4 kernel; gm 0 or 1: the MXFP4 tile row-major or group-major), "@PRECISION"
after an item to run it for that precision only, e.g. "-:-:4,8:2048:4:-:1,16:256:4:-:-:0:0@w4a16".
The default launch always runs first, as the reference.
"""

from __future__ import annotations

import json
import math
import sys
import time

import torch
import triton
import triton.language as tl
from copy_ceiling import copy_tbs

from arms.decode import pipeline as decode
from moebench.arm.decode import Workspace as DecodeWorkspace
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.core.vocabulary import DECODE_STAGES
from moebench.gates.families import family_of
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.measure import bench
from moebench.measure.clock import Clock
from moebench.plan.cases import plan
from moebench.plan.inputs import make_tokens
from moebench.spec.load import load_scenario

TIME_BUDGET_S = 180.0
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# The copy ceiling of the GPU this runs on (tools/copy_ceiling.py), never another GPU's.
COPY_TBS, COPY_FROM = copy_tbs(dev)
flush = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
CLOCK = Clock(dev)

# (block_n, row bytes a step, warps, num_stages, split_k, tensor_cores, group_major); None = the
# launcher's default.
VARIANTS = (
    [(None, None, None, None, 1), (8, None, 4, None, 1), (None, 256, 4, None, 1)]
    # Software-pipelined K loop (cp.async into shared memory), two tile sizes, three depths.
    + [(bn, rb, 4, st, 1) for bn in (16, 8) for rb in (256, 512) for st in (2, 3, 4)]
    + [(32, 256, 8, 3, 1), (32, 512, 8, 3, 1), (16, 1024, 4, 2, 1)]
    # Split-K: more programs when only 2-3 experts are live, with and without pipelining.
    + [(16, rb, 4, st, sk) for sk in (2, 4) for rb in (256, 512) for st in (None, 3)]
    + [(8, 256, 4, 3, 3)]
)
VARIANTS = [(*v, False, None, None) for v in VARIANTS]  # every variant for both precisions
# Read floor launches: (bytes a program, bytes a step, warps). Small programs did best on
# 2026-12-01 (16-32 KiB); programs that loop over many steps were slower.
READ_LAUNCHES = [(4 << 10, 4 << 10, 1), (8 << 10, 8 << 10, 1), (8 << 10, 8 << 10, 2),
                 (8 << 10, 4 << 10, 1), (16 << 10, 16 << 10, 4), (16 << 10, 8 << 10, 2),
                 (16 << 10, 4 << 10, 1), (32 << 10, 32 << 10, 8), (32 << 10, 16 << 10, 4),
                 (32 << 10, 8 << 10, 4), (64 << 10, 16 << 10, 4)]  # fmt: skip


@triton.jit
def _xor_words(w_ptr, lo, n_words, CHUNK: tl.constexpr, STEP: tl.constexpr):
    """The XOR of CHUNK int32 words at ``w_ptr`` from word ``lo`` (those below ``n_words``),
    STEP words a step, the next step loaded before this one is reduced."""
    offs = tl.arange(0, STEP)
    acc = tl.zeros([STEP], dtype=tl.int32)
    nxt = tl.load(w_ptr + lo + offs, mask=lo + offs < n_words, other=0)
    for k in range(STEP, CHUNK + STEP, STEP):
        cur = nxt
        nxt = tl.load(w_ptr + lo + k + offs, mask=(k < CHUNK) & (lo + k + offs < n_words),
                      other=0)  # fmt: skip
        acc ^= cur
    return tl.xor_sum(acc, 0)


@triton.jit
def _read_words(w_ptr, starts_ptr, out_ptr, n_words, CHUNK: tl.constexpr, STEP: tl.constexpr):
    """Reads CHUNK int32 words of expert ``starts[program_id(1)]`` (a word offset) from word
    ``program_id(0) * CHUNK``; stores their XOR, one word a program."""
    base = tl.load(starts_ptr + tl.program_id(1))
    word = _xor_words(w_ptr + base, tl.program_id(0) * CHUNK, n_words, CHUNK, STEP)
    tl.store(out_ptr + tl.program_id(1) * tl.num_programs(0) + tl.program_id(0), word)


@triton.jit
def _read_two(w1_ptr, w2_ptr, starts_ptr, words_ptr, out_ptr, n_first,
              CHUNK: tl.constexpr, STEP: tl.constexpr):  # fmt: skip
    """`_read_words` over two tensors in one launch: item ``program_id(1)`` is ``words[item]``
    int32 words from word ``starts[item]`` of ``w1`` for the first ``n_first`` items, of ``w2``
    after; a program past its item's words stores nothing."""
    item = tl.program_id(1)
    base = tl.load(starts_ptr + item)
    n_words = tl.load(words_ptr + item)
    lo = tl.program_id(0) * CHUNK
    if lo < n_words:
        if item < n_first:
            word = _xor_words(w1_ptr + base, lo, n_words, CHUNK, STEP)
        else:
            word = _xor_words(w2_ptr + base, lo, n_words, CHUNK, STEP)
        tl.store(out_ptr + item * tl.num_programs(0) + tl.program_id(0), word)


@triton.jit
def _nothing(out_ptr):
    """A launch that does no work: what the timer gives a graph of one kernel."""
    pass


def _timed_launches(launch, n_bytes: int, timed: bool) -> tuple[list[dict], list[tuple]]:
    """Each of READ_LAUNCHES as ``launch(chunk_words, step_words, warps)`` gives it (an
    argument-free run and its sink), timed where ``timed``: the rows (``n_bytes`` read) and the
    (us, run, sink) of each."""
    rows, runs = [], []
    for chunk_b, step_b, nw in READ_LAUNCHES:
        run, sink = launch(chunk_b // 4, step_b // 4, nw)
        us = time_graph(run) if timed else math.nan
        runs.append((us, run, sink))
        rows.append(dict(chunk_bytes=chunk_b, step_bytes=step_b, warps=nw, us=us,
                         of_copy=n_bytes / us / 1e6 / COPY_TBS))  # fmt: skip
    return rows, runs


def read_floor(w: torch.Tensor, experts: list[int]) -> tuple[list[dict], object]:
    """Times `_read_words` over the experts' weight bytes for each of READ_LAUNCHES; returns the
    rows and the fastest launch as an argument-free callable."""
    words = _expert_words(w)
    n_words = words.shape[1]
    starts = torch.tensor([e * n_words for e in experts], dtype=torch.int64, device=w.device)

    def launch(chunk: int, step: int, nw: int):
        grid = (triton.cdiv(n_words, chunk), len(experts))
        sink = torch.empty(grid[0] * grid[1], dtype=torch.int32, device=w.device)

        def run():
            _read_words[grid](words, starts, sink, n_words, CHUNK=chunk, STEP=step, num_warps=nw)

        return run, sink

    rows, runs = _timed_launches(launch, len(experts) * n_words * 4, timed=True)
    return rows, min(runs, key=lambda r: r[0])[1]


def _expert_words(w: torch.Tensor) -> torch.Tensor:
    """``w`` [E, ...] as int32 words, one row an expert (``w``'s bytes, whatever its dtype)."""
    return w.view(torch.uint8).reshape(w.shape[0], -1).view(torch.int32)


def read_both(
    w1: torch.Tensor, w2: torch.Tensor, experts: list[int]
) -> tuple[list[dict], object, torch.Tensor]:
    """`read_floor` for fc1's and fc2's bytes of ``experts`` in one launch (`_read_two`): what a
    step that is a single kernel needs at least to read them, for each of READ_LAUNCHES (timed on
    a GPU only); returns the rows, the fastest launch as an argument-free callable, and its sink
    (each program's XOR, rows ``[items, programs]``: fc1's experts, then fc2's; 0 where a program
    had no words)."""
    words1, words2 = _expert_words(w1), _expert_words(w2)
    n1, n2 = words1.shape[1], words2.shape[1]
    starts = torch.tensor([e * n1 for e in experts] + [e * n2 for e in experts],
                          dtype=torch.int64, device=w1.device)  # fmt: skip
    lengths = torch.tensor([n1] * len(experts) + [n2] * len(experts), dtype=torch.int64,
                           device=w1.device)  # fmt: skip

    def launch(chunk: int, step: int, nw: int):
        grid = (triton.cdiv(max(n1, n2), chunk), 2 * len(experts))
        sink = torch.zeros(grid[1], grid[0], dtype=torch.int32, device=w1.device)

        def run():
            _read_two[grid](words1, words2, starts, lengths, sink, len(experts), CHUNK=chunk,
                            STEP=step, num_warps=nw)  # fmt: skip

        return run, sink

    rows, runs = _timed_launches(launch, len(experts) * (n1 + n2) * 4, timed=w1.is_cuda)
    _, run, sink = min(runs, key=lambda r: r[0]) if w1.is_cuda else runs[0]
    return rows, run, sink


def empty_launch(device: torch.device):
    """An argument-free callable launching `_nothing` on one program."""
    sink = torch.zeros(1, dtype=torch.int32, device=device)
    return lambda: _nothing[(1,)](sink)


def torch_at_size(w: torch.Tensor, n_experts: int) -> list[dict]:
    """torch kernels over ``n_experts`` experts' bytes (contiguous, from expert 0): a copy, the
    copy ceiling's own measure (bytes read + written), and a read-only reduction (amax over the
    bytes viewed as int32), against this tool's read kernel."""
    src = w[:n_experts]
    n = src.numel() * src.element_size()
    dst = torch.empty_like(src)
    words = src.view(torch.uint8).reshape(-1).view(torch.int32)
    out = []
    for name, fn, moved in (("copy", lambda: dst.copy_(src), 2 * n),
                            ("amax", lambda: words.amax(), n)):  # fmt: skip
        us = time_graph(fn)
        out.append(dict(torch_op=name, bytes_read=n, us=us, of_copy=moved / us / 1e6 / COPY_TBS))
    return out


def time_graph(fn, reps: int = 50) -> float:
    """Median us of ``reps`` graph replays of ``fn``, L2 flushed before each (the project's clock,
    moebench/measure/bench.py)."""
    return bench.time_graph(CLOCK, fn, reps=reps)


def agreement(got: torch.Tensor, want: torch.Tensor, rows: torch.Tensor) -> tuple[bool, float]:
    """(bitwise equal, scale-free difference on the rows the step must write). Unwritten rows of
    both start as the same NaN, so bitwise equality also says nothing else was written."""
    bitwise = bool(torch.equal(got.view(torch.int16), want.view(torch.int16)))
    return bitwise, calc_diff(got[rows].float(), want[rows].float())


def parse_variants(spec: str) -> list[tuple]:
    """Variants from the command line (module docstring), the default launch first."""
    out = [(None, None, None, None, 1, False, None, None)]
    for item in spec.split(","):
        item, _, only = item.partition("@")
        f = [None if v in ("-", "") else int(v) for v in item.split(":")]
        f += [None] * (7 - len(f))
        bn, rb, nw, st, sk, tc, gm = f
        out.append((bn, rb, nw, st, sk or 1, bool(tc), None if gm is None else bool(gm),
                    only or None))  # fmt: skip
    return out


def main(out_dir: str, variants=VARIANTS) -> None:
    t_start = time.monotonic()
    s = load_scenario("scenarios/gpt-oss-20b-decode.yaml")
    print(f"copy ceiling: {COPY_FROM}", flush=True)
    rows = []

    def save() -> None:
        with open(f"{out_dir}/bench_decode.json", "w") as fh:
            json.dump(rows, fh, indent=1)

    for p in plan(s):
        cs = p.case.scenario
        if cs.shape.tokens_per_rank != 1:
            continue
        x = make_tokens(tokens=1, hidden=cs.model.hidden, seed=cs.routing.seed, device=dev)
        prob = family_of(cs).problem(cs, p.routing, p.capacity_rows, x, 0, dev)
        ws = DecodeWorkspace(prob, layout="TKD")
        written = ws.written_rows()
        bytes_hit = decode.weight_bytes(prob, layout="TKD")
        off, fmt = prob.expert_offset, ("fp8" if prob.precision == "w8a16" else "mxfp4")
        T, K = prob.topk_ids_TK.shape

        def fc1(out, ids=prob.topk_ids_TK, **kw):
            sparse_gemv(prob.x_TD, ids, prob.w13, prob.w13_scale, prob.b13_E2F, out,
                        expert_offset=off, glu=prob.activation, **kw)  # fmt: skip

        def fc2(a, out, ids=prob.topk_ids_TK, **kw):
            sparse_gemv(a, ids, prob.w2, prob.w2_scale, prob.b2_ED, out,
                        expert_offset=off, **kw)  # fmt: skip

        # The fixed cost of a launch: the default launch with every slot routed off this rank,
        # so each program reads its expert id and returns. Time over this, plus bytes over the
        # copy ceiling, is what the launch could take at best.
        foreign = torch.full_like(prob.topk_ids_TK, off + prob.w13.shape[0])
        fixed = dict(
            precision=cs.precision,
            kind="no_local_slot",
            fc1_us=time_graph(lambda: fc1(ws.a, ids=foreign)),
            fc2_us=time_graph(lambda: fc2(ws.a, ws.o, ids=foreign)),
        )
        for stage in ("fc1", "fc2"):
            fixed[f"{stage}_bound_of_copy"] = (bytes_hit[stage] / COPY_TBS / 1e6) / (
                fixed[f"{stage}_us"] + bytes_hit[stage] / COPY_TBS / 1e6
            )
        rows.append(fixed)
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in fixed.items()), flush=True)  # fmt: skip

        ref_a = torch.full_like(ws.a, float("nan"))
        fc1(ref_a)
        ref_o = torch.full_like(ws.o, float("nan"))
        fc2(ref_a, ref_o)
        mb = {k: f"{v / 1e6:.1f} MB" for k, v in bytes_hit.items()}
        print(f"{cs.precision}: {int(written.sum())} local slots of {K}, fc1 {mb['fc1']}, "
              f"fc2 {mb['fc2']}")  # fmt: skip
        t_case = time.monotonic()
        hit = sorted({int(e) - off for e in prob.topk_ids_TK.flatten().tolist()
                      if 0 <= int(e) - off < prob.w13.shape[0]})  # fmt: skip
        best_read = {}
        for stage, w in (("fc1", prob.w13), ("fc2", prob.w2)):
            floor_rows, best_read[stage] = read_floor(w, hit)
            floor_rows += torch_at_size(w, len(hit))
            for r in floor_rows:
                rows.append(dict(precision=cs.precision, kind="read_floor", stage=stage, **r))
                print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in rows[-1].items()), flush=True)  # fmt: skip
        # The step (one graph: fc1, fc2, combine) against the same graph with the GEMVs replaced
        # by the best reads of their bytes: the least any kernel pair reading them could take.
        stages = {st.name: st.run for st in decode.build_stages(ws)}
        step = dict(precision=cs.precision, kind="step_floor", bytes=bytes_hit["ffn"])
        step["sparse_step_us"] = time_graph(lambda: [stages[n]() for n in DECODE_STAGES])
        step["read_step_us"] = time_graph(
            lambda: (best_read["fc1"](), best_read["fc2"](), stages["combine"]())
        )

        # The step with and without programmatic dependent launch (arms/decode/pipeline.py PDL),
        # interleaved, after checking that every launch writes the same bits: (name, pdl, the
        # FP8 first step's weights before the wait, where the next kernel may launch).
        pdl_variants = (("nopdl", False, True, "start"), ("pdl", True, True, "start"),
                        ("pdl_nopeel", True, False, "start"), ("pdl_late", True, True, "end"),
                        ("pdl_nopeel_late", True, False, "end"))  # fmt: skip

        def pdl_step(y, pdl, peel, trigger):
            kw = dict(pdl=pdl, pdl_peel=peel, pdl_trigger=trigger)
            fc1(ws.a, **kw)
            fc2(ws.a, ws.o, **kw)
            combine_topk(ws.o, prob.topk_ids_TK, prob.topk_weights_TK, y, expert_offset=off,
                         local_experts=prob.w13.shape[0], layout="TKD", pdl=pdl)  # fmt: skip

        ys = [torch.full_like(ws.y_TD, float("nan")) for _ in pdl_variants]
        for y, (_, *v) in zip(ys, pdl_variants, strict=True):
            pdl_step(y, *v)
        step["pdl_bitwise"] = all(torch.equal(y.view(torch.int16), ys[0].view(torch.int16))
                                  for y in ys)  # fmt: skip
        times = bench.time_interleaved(
            CLOCK,
            [lambda y=y, v=v: pdl_step(y, *v[1:]) for y, v in zip(ys, pdl_variants, strict=True)],
            rounds=10, reps=5,
        )  # fmt: skip
        for (name, *_), us in zip(pdl_variants, times, strict=True):
            step[f"{name}_step_us"] = us
        for k in ("sparse_step", "read_step", *(f"{v[0]}_step" for v in pdl_variants)):
            step[f"{k}_of_copy"] = bytes_hit["ffn"] / step[f"{k}_us"] / 1e6 / COPY_TBS
        step["target_us"] = bytes_hit["ffn"] / 0.75 / COPY_TBS / 1e6
        step["target60_us"] = bytes_hit["ffn"] / 0.60 / COPY_TBS / 1e6
        rows.append(step)
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in step.items()), flush=True)  # fmt: skip
        for i, (bn, row_bytes, nw, st, sk, tc, gm, only) in enumerate(variants):
            if only is not None and only != cs.precision:
                continue
            # Half the budget a precision (compiling dominates); the default always runs.
            if i > 0 and time.monotonic() - t_case > TIME_BUDGET_S / 2:
                rows.append(dict(precision=cs.precision, block_n=bn, error="time budget spent"))
                continue
            bk = None if row_bytes is None else row_bytes * (2 if fmt == "mxfp4" else 1)
            kw = dict(block_n=bn, block_k=bk, num_warps=nw, num_stages=st, split_k=sk)
            if tc:
                kw["tensor_cores"] = True
            if gm is not None:
                kw["group_major"] = gm
            row = dict(precision=cs.precision, **kw)
            part1 = part2 = None
            if sk > 1:
                part1 = torch.empty(T, K, sk, prob.w13.shape[1], dtype=torch.float32, device=dev)
                part2 = torch.empty(T, K, sk, prob.w2.shape[1], dtype=torch.float32, device=dev)
            a = torch.full_like(ws.a, float("nan"))
            o = torch.full_like(ws.o, float("nan"))
            try:
                fc1(a, partials=part1, **kw)
                fc2(ref_a, o, partials=part2, **kw)
            except Exception as exc:  # a variant the launcher refuses or cannot compile
                rows.append(dict(row, error=f"{type(exc).__name__}: {str(exc)[:120]}"))
                print(rows[-1], flush=True)
                save()
                continue
            tol = TOLERANCE[cs.precision]
            for stage, got, want in (("fc1", a, ref_a), ("fc2", o, ref_o)):
                bitwise, diff = agreement(got, want, written)
                row[f"{stage}_bitwise"], row[f"{stage}_diff"] = bitwise, diff
                row[f"{stage}_ok"] = bitwise or diff <= tol
            if row["fc1_ok"]:
                t1 = time_graph(lambda kw=kw, p=part1: fc1(ws.a, partials=p, **kw))
                row.update(fc1_us=t1, fc1_of_copy=bytes_hit["fc1"] / t1 / 1e6 / COPY_TBS)
            if row["fc2_ok"]:
                t2 = time_graph(lambda kw=kw, p=part2: fc2(ref_a, ws.o, partials=p, **kw))
                row.update(fc2_us=t2, fc2_of_copy=bytes_hit["fc2"] / t2 / 1e6 / COPY_TBS)
            # This launch's fixed cost (no local slot), to set beside its time.
            row["fc1_fixed_us"] = time_graph(
                lambda kw=kw, p=part1: fc1(ws.a, ids=foreign, partials=p, **kw)
            )
            row["fc2_fixed_us"] = time_graph(
                lambda kw=kw, p=part2: fc2(ref_a, ws.o, ids=foreign, partials=p, **kw)
            )
            rows.append(row)
            print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in row.items()), flush=True)  # fmt: skip
            save()
    save()
    print_table(rows)
    print(f"total {time.monotonic() - t_start:.0f} s")


def print_table(rows: list[dict]) -> None:
    """One line a variant, then the best variant of each (precision, stage)."""
    keys = ("block_n", "block_k", "num_warps", "num_stages", "split_k", "tensor_cores",
            "group_major")  # fmt: skip
    head = f"{'prec':6} {'bn':>4} {'bk':>5} {'w':>2} {'st':>4} {'sk':>2} {'tc':>2} {'gm':>2}"
    print(f"\n{head} {'fc1 us':>7} {'%copy':>6} {'fc2 us':>7} {'%copy':>6}  exact(fc1,fc2)")
    for r in rows:
        if r.get("kind") == "no_local_slot":
            print(f"{r['precision']:6} no local slot (fixed cost): fc1 {r['fc1_us']:.2f} us, "
                  f"fc2 {r['fc2_us']:.2f} us; best fraction of copy with that fixed cost: "
                  f"fc1 {100 * r['fc1_bound_of_copy']:.0f}%, "
                  f"fc2 {100 * r['fc2_bound_of_copy']:.0f}%")  # fmt: skip
            continue
        if r.get("kind") == "read_floor" and "torch_op" in r:
            mb = r["bytes_read"] / 1e6
            moved = "read + written" if r["torch_op"] == "copy" else "read"
            print(f"{r['precision']:6} torch {r['torch_op']} of the {r['stage']} bytes "
                  f"({mb:.1f} MB {moved}): {r['us']:.2f} us "
                  f"({100 * r['of_copy']:.0f}% of copy)")  # fmt: skip
            continue
        if r.get("kind") == "read_floor":
            print(f"{r['precision']:6} read floor {r['stage']}: {r['chunk_bytes'] >> 10} KiB a "
                  f"program, {r['step_bytes'] >> 10} KiB a step, {r['warps']} warps: "
                  f"{r['us']:.2f} us ({100 * r['of_copy']:.0f}% of copy)")  # fmt: skip
            continue
        if r.get("kind") == "step_floor":
            print(f"{r['precision']:6} step (fc1, fc2, combine; {r['bytes'] / 1e6:.1f} MB): sparse "
                  f"{r['sparse_step_us']:.2f} us ({100 * r['sparse_step_of_copy']:.0f}% of copy), "
                  f"best reads instead of the GEMVs {r['read_step_us']:.2f} us "
                  f"({100 * r['read_step_of_copy']:.0f}%); 75% of copy needs "
                  f"{r['target_us']:.2f} us")  # fmt: skip
            continue
        if "error" in r:
            print(f"{r['precision']:6} {r.get('block_n')!s:>4}  {r['error']}")
            continue
        shown = {**r, "tensor_cores": int(bool(r.get("tensor_cores")))}
        shown["group_major"] = "-" if r.get("group_major") is None else int(r["group_major"])
        widths = (4, 5, 2, 4, 2, 2, 2)
        vals = " ".join(f"{shown[k]!s:>{w}}" for k, w in zip(keys, widths, strict=True))
        cells = []
        for stage in ("fc1", "fc2"):
            us = r.get(f"{stage}_us")
            cells.append(
                f"{us:7.1f} {100 * r[f'{stage}_of_copy']:5.0f}%" if us else f"{'-':>7} {'-':>6}"
            )
        exact = ",".join(
            "bit" if r[f"{s}_bitwise"] else f"{r[f'{s}_diff']:.0e}" + ("" if r[f"{s}_ok"] else "!")
            for s in ("fc1", "fc2")
        )
        print(f"{r['precision']:6} {vals} {cells[0]} {cells[1]}  {exact}")
    print()
    for prec in sorted({r["precision"] for r in rows}):
        for stage in ("fc1", "fc2"):
            timed = [
                r
                for r in rows
                if r["precision"] == prec and r.get(f"{stage}_us") and "kind" not in r
            ]
            if not timed:
                continue
            floors = [r for r in rows if r["precision"] == prec and r.get("kind") == "read_floor"
                      and r["stage"] == stage and "torch_op" not in r]  # fmt: skip
            if floors:
                f = min(floors, key=lambda r: r["us"])
                print(f"read floor {prec} {stage}: {f['us']:.2f} us "
                      f"({100 * f['of_copy']:.0f}% of copy)")  # fmt: skip
            best = min(timed, key=lambda r: r[f"{stage}_us"])
            default = [
                r
                for r in timed
                if r["num_stages"] is None
                and r["split_k"] == 1
                and r["block_n"] is None
                and r["block_k"] is None
                and r["num_warps"] is None
                and not r.get("tensor_cores")
                and r.get("group_major") is None
            ]
            base = f", default {default[0][f'{stage}_us']:.1f} us" if default else ""
            print(f"best {prec} {stage}: {best[f'{stage}_us']:.1f} us "
                  f"({100 * best[f'{stage}_of_copy']:.0f}% of copy{base}) with "
                  + ", ".join(f"{k}={best.get(k)}" for k in keys))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], parse_variants(sys.argv[2]) if len(sys.argv) > 2 else VARIANTS)
