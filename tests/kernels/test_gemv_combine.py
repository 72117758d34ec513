"""fc2's GEMV with the decode combine folded in (`sparse_gemv(combine=...)`, `gemv_combine`):
y is `combine_topk`'s over the unfolded fc2's rows, bit for bit, in both weight formats, bf16 and
float32 y, over routings that reach each edge (one token, every slot local, a token with none,
a token's expert twice, remote slots first, last and between, tokens with different counts of
local slots); fc2's own rows are the unfolded launch's; the counters are back to zero after
every launch, so a second launch (a graph's next replay) gives the same bits; bad arguments are
refused with one line naming them. Under the interpreter the programs run one after another, so
there the last program to arrive is always the last launched; on the GPU (``make test-gpu``) the
same tests run them concurrently, which is what the fence and the counters are for."""

from __future__ import annotations

import pytest
import torch
from decode_inputs import FORMATS, quantised
from kernel_device import DEVICE

from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.gemv_combine import combine_counters
from moebench.kernels.mx_rotated import rotate_mxfp4
from moebench.kernels.sparse_gemv import sparse_gemv

K, E, D, F, OFFSET = 4, 4, 64, 64, 8
ROUTINGS = [
    pytest.param([[8, 9, 10, 11]], id="one-token-all-local"),
    pytest.param([[8, 0, 9, 1]], id="one-token-remote-between"),
    pytest.param([[0, 1, 2, 3]], id="one-token-none-local"),
    pytest.param([[0, 11, 10, 3]], id="remote-first-and-last"),
    pytest.param([[9, 9, 2, 10]], id="an-expert-twice"),
    pytest.param(
        [[1, 2, 3, 4], [9, 0, 8, 12], [13, 14, 15, 10], [11, 10, 9, 8]],
        id="tokens-with-0-to-4-local",
    ),  # fmt: skip
]


def _problem(fmt: str, ids_list, seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(ids_list, dtype=torch.int32)
    T = ids.shape[0]
    w, s, _ = quantised(fmt, torch.randn(E, D, F, generator=g) * F**-0.5)
    if fmt == "mxfp4":
        w = rotate_mxfp4(w)
    b = (torch.randn(E, D, generator=g) * 0.5).bfloat16()
    a = torch.randn(T, K, F, generator=g).bfloat16()
    # Weights of both signs and a zero; each row's sum is not 1, as a router's need not be.
    cw = torch.randn(T, K, generator=g)
    cw[0, 0] = 0.0
    return ids, w, s, b, a, cw


def _on(*tensors):
    return [t.to(DEVICE) for t in tensors]


@pytest.mark.parametrize("y_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("ids_list", ROUTINGS)
def test_the_folded_combine_writes_combine_topks_bits(ids_list, fmt, y_dtype):
    ids, w, s, b, a, cw = _on(*_problem(fmt, ids_list, seed=len(ids_list) + 7))
    T = ids.shape[0]
    opts = dict(expert_offset=OFFSET, block_n=16, mx_rotated=fmt == "mxfp4")
    o_want = torch.full((T, K, D), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    y_want = torch.full((T, D), float("nan"), dtype=y_dtype, device=DEVICE)
    sparse_gemv(a, ids, w, s, b, o_want, **opts)
    combine_topk(o_want, ids, cw, y_want, expert_offset=OFFSET, local_experts=E, layout="TKD")
    counters = combine_counters(T, D, torch.device(DEVICE))
    for launch in range(2):  # the second as a graph's next replay: the counters back at zero
        o = torch.full_like(o_want, float("nan"))
        y = torch.full_like(y_want, float("nan"))
        sparse_gemv(a, ids, w, s, b, o, **opts, combine=(cw, y, counters))
        assert torch.equal(o.view(torch.int16), o_want.view(torch.int16)), launch
        bits = torch.int16 if y_dtype == torch.bfloat16 else torch.int32
        assert torch.equal(y.view(bits), y_want.view(bits)), launch
        assert torch.isfinite(y.float()).all()
        assert int(counters.count_nonzero()) == 0, launch


def test_the_fold_is_refused_where_it_cannot_run():
    ids, w, s, b, a, cw = _problem("fp8", [[8, 9, 10, 11]], seed=3)
    x = torch.randn(1, F).bfloat16()
    o = torch.zeros(1, K, D, dtype=torch.bfloat16)
    y = torch.zeros(1, D, dtype=torch.bfloat16)
    counters = combine_counters(1, D, torch.device("cpu"))
    opts = dict(expert_offset=OFFSET, block_n=16)
    with pytest.raises(ValueError, match="combine is fc2's"):
        a1 = torch.zeros(1, K, D // 2, dtype=torch.bfloat16)
        w1, s1, _ = quantised("fp8", torch.randn(E, D, F))
        sparse_gemv(x, ids, w1, s1, b, a1, **opts, glu="swiglu_oai", combine=(cw, y, counters))
    with pytest.raises(ValueError, match="combine is fc2's"):
        sparse_gemv(a, ids, w, s, b, o, **opts, split_k=2, combine=(cw, y, counters))
    with pytest.raises(ValueError, match="combine takes no local_first"):
        sparse_gemv(a, ids, w, s, b, o, **opts, local_first=True, combine=(cw, y, counters))
    with pytest.raises(ValueError, match="counters must be int32 with at least 4 values"):
        sparse_gemv(a, ids, w, s, b, o, **opts, combine=(cw, y, counters[:3]))
    with pytest.raises(ValueError, match=r"y_TD must be bf16 or float32 \[1, 64\]"):
        sparse_gemv(a, ids, w, s, b, o, **opts, combine=(cw, y[:, :32], counters))
    with pytest.raises(ValueError, match=r"topk_weights_TK must be float32 or bf16 \[1, 4\]"):
        sparse_gemv(a, ids, w, s, b, o, **opts, combine=(cw[:, :2], y, counters))


@pytest.mark.skipif(torch.cuda.device_count() == 0 or DEVICE == "cpu",
                    reason="the GPU's interleaving (make test-gpu); the interpreter runs the "
                    "programs one after the other")  # fmt: skip
@pytest.mark.parametrize(("fmt", "T"), [("fp8", 1), ("fp8", 4), ("mxfp4", 1), ("mxfp4", 4)])
def test_the_fold_under_graph_replays_over_new_routings(fmt, T):
    """On the GPU, at gpt-oss-20b's fc2 width (D = F = 2,880, thousands of programs arriving
    together): the folded fc2 captured with the dependent launch in one CUDA graph and replayed
    over 40 new routings (the graph's ids and weights buffers rewritten between replays), each
    replay's y `combine_topk`'s bits over the unfolded fc2 run eagerly, its rows of o the
    unfolded launch's, and the counters zero after every replay."""
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(5 + T)
    En, E_all, Dn, Fn = 16, 32, 2880, 2880
    w, s, _ = quantised(fmt, torch.randn(En, Dn, Fn, generator=g) * Fn**-0.5)
    if fmt == "mxfp4":
        w = rotate_mxfp4(w)
    w, s = w.to(dev), s.to(dev)
    b = (torch.randn(En, Dn, generator=g) * 0.5).bfloat16().to(dev)
    a = torch.randn(T, K, Fn, generator=g).bfloat16().to(dev)
    ids = torch.zeros(T, K, dtype=torch.int32, device=dev)
    cw = torch.zeros(T, K, device=dev)
    o, o_want = (torch.zeros(T, K, Dn, dtype=torch.bfloat16, device=dev) for _ in range(2))
    y, y_want = (torch.zeros(T, Dn, dtype=torch.bfloat16, device=dev) for _ in range(2))
    counters = combine_counters(T, Dn, dev)
    opts = dict(expert_offset=0, mx_rotated=fmt == "mxfp4", pdl=True)

    def folded() -> None:
        sparse_gemv(a, ids, w, s, b, o, **opts, combine=(cw, y, counters))

    folded()  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        folded()
    for i in range(40):
        routing = torch.stack([torch.randperm(E_all, generator=g)[:K] for _ in range(T)])
        ids.copy_(routing.int())
        cw.copy_(torch.rand(T, K, generator=g))
        graph.replay()
        sparse_gemv(a, ids, w, s, b, o_want, **opts)
        combine_topk(o_want, ids, cw, y_want, expert_offset=0, local_experts=En, layout="TKD")
        torch.cuda.synchronize()
        local = ids < En
        assert torch.equal(o[local].view(torch.int16), o_want[local].view(torch.int16)), i
        assert torch.equal(y.view(torch.int16), y_want.view(torch.int16)), i
        assert int(counters.count_nonzero()) == 0, i
