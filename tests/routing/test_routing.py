"""Routing families are seeded, valid (distinct top-k per token) and shaped as their name says."""

import pytest
import torch

from moebench.core.errors import TraceError
from moebench.routing.raw_files import load_any
from moebench.routing.replay import apportion
from moebench.routing.synthetic import local_counts, rank_statistics, synthesize


def valid(r, tokens, experts, top_k):
    ids = r.topk_ids_TK
    assert ids.shape == (tokens, top_k) and ids.dtype == torch.int32
    assert ids.min() >= 0 and ids.max() < experts
    assert (ids.sort(dim=1).values.diff(dim=1) != 0).all(), "experts repeat within a token"
    w = r.topk_weights_TK
    assert (w > 0).all() and torch.allclose(w.sum(1), torch.ones(tokens))


@pytest.mark.parametrize("family", ["uniform", "balanced", "zipf", "hot_rank", "empty_experts"])
def test_families_valid_and_deterministic(family):
    a = synthesize(family=family, tokens=256, experts=32, top_k=4, ep=4, seed=5)
    b = synthesize(family=family, tokens=256, experts=32, top_k=4, ep=4, seed=5)
    c = synthesize(family=family, tokens=256, experts=32, top_k=4, ep=4, seed=6)
    valid(a, 256, 32, 4)
    assert torch.equal(a.topk_ids_TK, b.topk_ids_TK)
    assert torch.equal(a.topk_weights_TK, b.topk_weights_TK)
    assert not torch.equal(a.topk_ids_TK, c.topk_ids_TK)


def test_balanced_is_exact():
    r = synthesize(family="balanced", tokens=512 * 8, experts=256, top_k=6, ep=8)
    counts = local_counts(r.topk_ids_TK, 0, 256)
    assert (counts == 96).all()
    assert int(local_counts(r.topk_ids_TK, 0, 32).sum()) == 3072


def test_hot_rank_gets_its_share():
    r = synthesize(
        family="hot_rank", tokens=2048, experts=64, top_k=4, ep=8, hot_rank=3, hot_fraction=0.5
    )
    share = local_counts(r.topk_ids_TK, 3 * 8, 8).sum() / r.topk_ids_TK.numel()
    assert 0.3 < float(share) < 0.6  # without replacement the share lands under the target


def test_empty_experts_are_empty():
    r = synthesize(
        family="empty_experts", tokens=1024, experts=32, top_k=2, ep=1, empty_fraction=0.25
    )
    counts = local_counts(r.topk_ids_TK, 0, 32)
    assert int((counts == 0).sum()) == 8


def test_zipf_is_skewed():
    r = synthesize(family="zipf", tokens=4096, experts=64, top_k=2, ep=1, alpha=1.5)
    counts = local_counts(r.topk_ids_TK, 0, 64).double()
    assert counts.max() / counts.mean() > 5


def test_full_capacity_needs_aligned_counts():
    r = synthesize(family="full_capacity", tokens=256, experts=8, top_k=4, ep=2, alignment=128)
    assert (local_counts(r.topk_ids_TK, 0, 8) == 128).all()
    with pytest.raises(ValueError, match="multiple of the alignment"):
        synthesize(family="full_capacity", tokens=100, experts=8, top_k=4, ep=2, alignment=128)


def test_rank_statistics():
    r = synthesize(family="balanced", tokens=64, experts=16, top_k=2, ep=4)
    st = rank_statistics(r.topk_ids_TK, rank=1, ep=4, local_experts=4, capacity_rows=128)
    assert st["live_rows"] == 32 and st["empty_experts"] == 0
    assert st["overload"] == pytest.approx(1.0) and st["entropy"] == pytest.approx(2.0)
    assert st["live_fraction"] == pytest.approx(0.25)


def test_sglang_trace_replay_follows_load(shared_traces):
    path = shared_traces / "sglang-deepseek-v3-expert-load" / "decode_in1000out1000.json"
    trace = load_any(path)
    counts = trace.layer_counts(3)
    assert counts.size == 256 and len(trace.sha256) == 64
    r = synthesize(family="trace", tokens=8192, experts=256, top_k=8, ep=8,
                   trace_path=str(path), trace_layer=3)  # fmt: skip
    valid(r, 8192, 256, 8)
    got = local_counts(r.topk_ids_TK, 0, 256)
    assert got.tolist() == apportion(counts, 8192 * 8, 8192).tolist()  # exactly, not on average
    assert int(got.argmax()) == int(counts.argmax())
    assert r.trace_sha256 == trace.sha256
    assert r.label == "trace(decode_in1000out1000.json,layer=3,unpinned)"


def test_trace_errors(tmp_path):
    def replay(path, layer=0):
        synthesize(family="trace", tokens=4, experts=2, top_k=1, ep=1, trace_path=str(path),
                   trace_layer=layer)  # fmt: skip

    bad = tmp_path / "bad.json"
    bad.write_text('{"logical_count": [[1, 2], [3')
    with pytest.raises(TraceError, match="malformed"):
        replay(bad)
    with pytest.raises(TraceError, match="cannot read"):
        replay(tmp_path / "missing.json")
    dense = tmp_path / "dense.json"
    dense.write_text('{"logical_count": [[0, 0], [1, 2]]}')
    with pytest.raises(TraceError, match="no routed tokens"):
        replay(dense)
    with pytest.raises(TraceError, match="layer 5 is not in the trace"):
        replay(dense, 5)
