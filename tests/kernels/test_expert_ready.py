"""fc2 waiting for fc1 expert by expert (`moebench.kernels.expert_ready`, ``Launch.expert_ready``)
on the interpreter, where the kernels run one after the other: the outputs are the whole-grid
wait's bit for bit, fc1 counts every program it runs on an expert as started and as finished, fc2
counts nothing, and any order of launches (fc1 alone, fc2 alone, again) leaves started == done, so
that fc2 never waits on counts no fc1 in flight will raise. The GPU's interleaving is the bench's
to check (tools/bench_grouped_decode.py checks every launch against the reference first)."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from kernel_device import on_device

from moebench.kernels.expert_ready import ready_counters
from moebench.kernels.grouped_gemv import grouped_gemv
from moebench.kernels.grouped_launch import Launch
from moebench.kernels.tile_packed import pack_tiles

# The launcher on the kernel tests' device (`kernel_device`: the GPU under make test-gpu).
gemv = on_device(grouped_gemv)

T, K, E, R, F = 17, 2, 2, 256, 32
# Expert 0 takes 16 slots, expert 1 seventeen (two passes of 16); global expert 5 is not local.
IDS = torch.tensor([[0, 1]] * 16 + [[1, 5]], dtype=torch.int32)


def launch(pass_grid: bool, packed: bool) -> Launch:
    return Launch(path="dot", block_m=16, block_n=16, block_k=64, num_warps=4, tma=True,
                  pass_grid=pass_grid, fp8_packed=packed)  # fmt: skip


def inputs(packed: bool):
    g = torch.Generator().manual_seed(31)
    w1 = torch.randint(0, 256, (E, 2 * F, R), generator=g, dtype=torch.uint8)
    w2 = torch.randint(0, 256, (E, R, F), generator=g, dtype=torch.uint8)
    w1, w2 = (w.view(torch.float8_e4m3fn) for w in (w1, w2))
    if packed:
        w1 = pack_tiles(w1, 16, 64)  # fc2's R = F = 32 is no whole 64-value step: not packed
    s1, s2 = torch.tensor([0.125, 2.0]), torch.tensor([0.5, 0.25])
    b1 = (torch.randint(-64, 64, (E, 2 * F), generator=g) + 0.3).bfloat16()
    b2 = (torch.randint(-64, 64, (E, R), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    return x, (w1, s1, b1), (w2, s2, b2)


def poisoned(*shape: int) -> torch.Tensor:
    return torch.full(shape, float("nan")).bfloat16()


def fc1(x, w, a, l1: Launch, ready=None) -> None:
    gemv(x, IDS, *w, a, expert_offset=0, launch=l1, glu="swiglu_oai", ready=ready)


def fc2(a, w, o, l2: Launch, ready=None) -> None:
    gemv(a, IDS, *w, o, expert_offset=0, launch=l2, ready=ready)


def programs_on_each_expert(l1: Launch) -> list[int]:
    """fc1's programs that work on each expert: a pass (pass grid) or the expert (its loop)."""
    row_blocks = 2 * F // l1.block_n
    passes = [1, 1] if not l1.pass_grid else [1, 2]  # 16 and 17 slots, 16 a pass
    return [row_blocks * n for n in passes]


@pytest.mark.parametrize("packed", [False, True], ids=["natural", "packed"])
@pytest.mark.parametrize("pass_grid", [False, True], ids=["expert-loop", "one-pass"])
def test_expert_ready_writes_the_whole_waits_bits_and_counts_fc1s_programs(pass_grid, packed):
    x, w1, w2 = inputs(packed)
    base1 = launch(pass_grid, packed)
    base2 = launch(pass_grid, False)
    a0, o0 = poisoned(T, K, F), poisoned(T, K, R)
    fc1(x, w1, a0, base1)
    fc2(a0, w2, o0, base2)
    l1 = dataclasses.replace(base1, expert_ready="signal")
    l2 = dataclasses.replace(base2, expert_ready="wait")
    ready = ready_counters(E, x.device)
    a, o = poisoned(T, K, F), poisoned(T, K, R)
    fc1(x, w1, a, l1, ready)
    want = programs_on_each_expert(base1)
    assert ready.tolist() == [want, want]  # started, finished
    fc2(a, w2, o, l2, ready)
    assert ready.tolist() == [want, want]  # fc2 counts nothing
    assert torch.equal(a.view(torch.int16), a0.view(torch.int16))
    assert torch.equal(o.view(torch.int16), o0.view(torch.int16))
    # Any order of launches keeps started == done: fc2 alone, fc1 twice, fc2 again.
    fc2(a, w2, o, l2, ready)
    fc1(x, w1, a, l1, ready)
    fc1(x, w1, a, l1, ready)
    fc2(a, w2, o, l2, ready)
    assert ready.tolist() == [[3 * n for n in want]] * 2
    assert torch.equal(o.view(torch.int16), o0.view(torch.int16))


@pytest.mark.parametrize("pass_grid", [False, True], ids=["expert-loop", "one-pass"])
def test_the_mxfp4_tile_waits_expert_by_expert_with_the_same_bits(pass_grid):
    """The MXFP4 tile (pointer loads) takes the same roles: the whole wait's bits, fc1's programs
    counted started and finished, fc2 counting nothing."""
    from decode_inputs import quantised

    g = torch.Generator().manual_seed(37)
    w1 = quantised("mxfp4", torch.randn(E, 2 * F, R, generator=g))[:2]
    w2 = quantised("mxfp4", torch.randn(E, R, 2 * F, generator=g))[:2]  # fc2's R = 64: a step
    b1 = (torch.randint(-64, 64, (E, 2 * F), generator=g) + 0.3).bfloat16()
    b2 = (torch.randint(-64, 64, (E, R), generator=g) + 0.3).bfloat16()
    x = torch.randint(-8, 9, (T, R), generator=g).bfloat16()
    base = Launch(path="dot", block_m=16, block_n=16, block_k=64, num_warps=4,
                  pass_grid=pass_grid)  # fmt: skip
    runs = {}
    for roles in (("", ""), ("signal", "wait")):
        ready = ready_counters(E, x.device) if roles[0] else None
        l1, l2 = (dataclasses.replace(base, expert_ready=r) for r in roles)
        a, o = poisoned(T, K, 2 * F // 2), poisoned(T, K, R)
        gemv(x, IDS, *w1, b1, a, expert_offset=0, launch=l1, glu="swiglu_oai", ready=ready)
        a2 = torch.cat([a, a], dim=2)  # fc2 reads R = 2F = 64 values a slot
        gemv(a2, IDS, *w2, b2, o, expert_offset=0, launch=l2, ready=ready)
        runs[roles] = (a, o, ready)
    (a0, o0, _), (a1, o1, ready) = runs.values()
    assert torch.equal(a1.view(torch.int16), a0.view(torch.int16))
    assert torch.equal(o1.view(torch.int16), o0.view(torch.int16))
    want = programs_on_each_expert(base)
    assert ready.tolist() == [want, want]


def test_expert_ready_is_refused_without_its_counters_or_off_the_tile():
    x, w1, w2 = inputs(False)
    a = torch.zeros(T, K, F).bfloat16()
    l1 = dataclasses.replace(launch(True, False), expert_ready="signal")
    with pytest.raises(ValueError, match=r"expert_ready needs int32 \[2, 2\] contiguous"):
        fc1(x, w1, a, l1)
    for bad in (torch.zeros(2, 3, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int64),
                torch.zeros(2, 2, dtype=torch.int32).t()):  # fmt: skip
        with pytest.raises(ValueError, match="expert_ready needs int32"):
            fc1(x, w1, a, l1, bad)
    with pytest.raises(ValueError, match="expert_ready must be one of"):
        fc1(x, w1, a, dataclasses.replace(l1, expert_ready="both"), ready_counters(E, x.device))
    gemv = Launch(path="gemv", block_m=2, block_n=16, block_k=32, num_warps=1,
                  expert_ready="signal")  # fmt: skip
    with pytest.raises(ValueError, match="expert_ready is for the dot path"):
        fc1(x, w1, a, gemv, ready_counters(E, x.device))


@pytest.mark.skipif(torch.cuda.device_count() == 0 or os.environ.get("TRITON_INTERPRET") == "1",
                    reason="the GPU's interleaving (make test-gpu); the interpreter runs the "
                    "kernels one after the other")  # fmt: skip
@pytest.mark.parametrize(
    ("fmt", "Tn"),
    [("fp8", 64), ("mxfp4", 64), ("mxfp4", 8)],
    ids=["fp8-one-pass", "mxfp4-one-pass", "mxfp4-expert-loop"],
)
def test_expert_ready_on_the_gpu_gives_the_whole_waits_bits_under_graph_replays(
    fmt, Tn, monkeypatch
):
    """On the GPU, with the dependent launch: fc1 and fc2 as the arm pairs them (FP8 one-pass
    tiles, placed and packed weights; MXFP4 rotated, one pass or the expert loop; fc2 waiting
    expert by expert) captured in one CUDA graph and replayed over new routings (the graph's ids
    buffer rewritten between replays), each replay's activations and outputs the whole-grid
    wait's bit for bit; the counters end equal."""
    from decode_inputs import quantised

    from arms.decode.grouped_decode import scales_launch, tiles_scales, tiles_weights
    from moebench.kernels import grouped_launch
    from moebench.kernels.grouped_launch import default_launch, paired_launches

    # The Triton tile's launches (`grouped_gemv`), whichever format's Gluon switch is on; the Gluon
    # tile's wait is tests/arms/test_gluon_stage_gpu.py's.
    monkeypatch.setattr(grouped_launch, "MX_GLUON", False)
    monkeypatch.setattr(grouped_launch, "FP8_GLUON", False)

    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(41)
    Kn, En, E_all, D, Fi = 4, 16, 32, 512, 256
    if fmt == "fp8":
        w1 = torch.randint(0, 256, (En, 2 * Fi, D), generator=g, dtype=torch.uint8)
        w2 = torch.randint(0, 256, (En, D, Fi), generator=g, dtype=torch.uint8)
        for w in (w1, w2):
            w[w % 128 == 127] = 0  # no NaN bytes
        w1, w2 = (w.view(torch.float8_e4m3fn).to(dev) for w in (w1, w2))
        s1, s2 = (torch.rand(En, generator=g).to(dev) * 0.01 for _ in range(2))
    else:
        (w1, s1), (w2, s2) = (quantised("mxfp4", torch.randn(En, n, r, generator=g))[:2]
                              for n, r in ((2 * Fi, D), (D, Fi)))  # fmt: skip
        w1, w2, s1, s2 = (t.to(dev) for t in (w1, w2, s1, s2))
    b1 = (torch.randn(En, 2 * Fi, generator=g)).bfloat16().to(dev)
    b2 = (torch.randn(En, D, generator=g)).bfloat16().to(dev)
    x = torch.randn(Tn, D, generator=g).bfloat16().to(dev)
    shape = dict(tokens=Tn, top_k=Kn, experts=En, pdl=True)
    whole = (default_launch(fmt, columns=2 * Fi, reduction=D, **shape),
             default_launch(fmt, columns=D, reduction=Fi, **shape))  # fmt: skip
    assert whole[0].path == "dot" and whole[0].pass_grid == (Tn == 64)
    pair = paired_launches(*whole, fmt, slots_per_expert=Tn * Kn / En)
    assert [f.expert_ready for f in pair] == ["signal", "wait"]
    # Each launch's weights, scales (packed, biased, padded: whatever it reads) and largest scale
    # byte as the arm builds them (`build_stages`), and the launch as it reads those scales.
    ops, launches = [], []
    for f1, f2 in (whole, pair):
        (v1, m1), (v2, m2) = tiles_scales(w1, s1, f1), tiles_scales(w2, s2, f2)
        ops.append(((tiles_weights(w1, f1), v1, m1), (tiles_weights(w2, f2), v2, m2)))
        launches.append((scales_launch(f1, m1), scales_launch(f2, m2)))
    ready = ready_counters(En, dev)
    ids = torch.zeros(Tn, Kn, dtype=torch.int32, device=dev)
    empty = lambda n: torch.empty(Tn, Kn, n, dtype=torch.bfloat16, device=dev)
    bufs = [(empty(Fi), empty(D)) for _ in range(2)]

    def step(k: int) -> None:
        (l1, l2), ((v1, t1, m1), (v2, t2, m2)), (a, o) = launches[k], ops[k], bufs[k]
        counters = ready if k else None
        grouped_gemv(x, ids, v1, t1, b1, a, expert_offset=0, launch=l1, glu="swiglu_oai",
                     ready=counters, max_scale_byte=m1)  # fmt: skip
        grouped_gemv(a, ids, v2, t2, b2, o, expert_offset=0, launch=l2, ready=counters,
                     max_scale_byte=m2)  # fmt: skip

    step(1)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(1)
    for i in range(40):
        routing = torch.stack([torch.randperm(E_all, generator=g)[:Kn] for _ in range(Tn)])
        ids.copy_(routing.int())
        graph.replay()
        step(0)
        torch.cuda.synchronize()
        for mine, want in zip(bufs[1], bufs[0], strict=True):
            local = ids < En  # rows of slots routed here
            assert torch.equal(mine[local].view(torch.int16), want[local].view(torch.int16)), i
    started, done = ready.tolist()
    assert started == done and sum(started) > 0
