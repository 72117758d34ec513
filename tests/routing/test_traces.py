"""Traces: Parquet round trip, exact replay, statistics, scenarios pinned to models (the CLI:
test_traces_cli.py)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_inputs import load_trace, scenario_text, token_trace

from moebench.core.errors import ScenarioError, TraceError
from moebench.core.vocabulary import Regime
from moebench.plan.cases import plan
from moebench.routing.raw_files import load_any
from moebench.routing.replay import apportion, replay_load
from moebench.routing.step_draws import trace_layer_map
from moebench.routing.synthetic import local_counts, rank_statistics, synthesize
from moebench.routing.trace_stats import layer_stats, summary
from moebench.routing.traces import (
    read_meta,
    read_parquet,
    write_parquet,
)
from moebench.spec.load import load_scenario, parse_scenario

# --- Parquet -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "trace",
    [
        pytest.param(load_trace(), id="load-2-steps"),
        pytest.param(token_trace(), id="token-with-weights"),
        pytest.param(token_trace(weights=False), id="token-without-weights"),
    ],
)
def test_parquet_round_trip_with_metadata(tmp_path, trace):
    p = tmp_path / "t.parquet"
    write_parquet(trace, p)
    meta = read_meta(p)
    assert meta["model_id"] == "x/tiny" and meta["revision"] == "r1"
    assert meta["experts"] == 8 and meta["top_k"] == 2 and meta["kind"] == trace.kind
    assert meta["sha256"] == trace.sha256 and meta["source"] == trace.source
    back = read_parquet(p)
    assert back.sha256 == trace.sha256 and back.layers == trace.layers
    for name in ("counts_SLE", "topk_ids_TLK", "topk_weights_TLK"):
        a, b = getattr(trace, name), getattr(back, name)
        assert (a is None and b is None) or (a.dtype == b.dtype and np.array_equal(a, b))
    assert load_any(p).sha256 == trace.sha256


def test_raw_file_and_its_import_hash_alike(tmp_path):
    t = load_trace()
    raw = tmp_path / "c.npy"
    np.save(raw, t.counts_SLE)
    assert load_any(raw).sha256 == replace(t, layers=(0, 1, 2)).sha256
    assert not load_any(raw).pinned


def test_corrupted_parquet_is_refused(tmp_path):
    t = load_trace()
    p = tmp_path / "t.parquet"
    write_parquet(t, p)
    table = pq.read_table(p)
    counts = table["counts"].to_pylist()
    counts[2][0] += 1.0
    bad = table.set_column(2, "counts", pa.array(counts, type=table.schema.field(2).type))
    pq.write_table(bad.replace_schema_metadata(table.schema.metadata), tmp_path / "bad.parquet")
    with pytest.raises(TraceError, match="does not match its recorded sha256"):
        read_parquet(tmp_path / "bad.parquet")
    pq.write_table(table.slice(0, 5), tmp_path / "short.parquet")
    with pytest.raises(TraceError, match="rows missing or out of order"):
        read_parquet(tmp_path / "short.parquet")
    pq.write_table(table.replace_schema_metadata(None), tmp_path / "plain.parquet")
    with pytest.raises(TraceError, match="without moebench trace metadata"):
        read_parquet(tmp_path / "plain.parquet")
    (tmp_path / "junk.parquet").write_bytes(p.read_bytes()[:100])
    with pytest.raises(TraceError, match="not a Parquet file"):
        read_parquet(tmp_path / "junk.parquet")


def test_validate_refuses_bad_traces():
    with pytest.raises(TraceError, match="repeats an expert in layer 4"):
        ids = token_trace().topk_ids_TLK.copy()
        ids[0, 1] = [3, 3]
        token_trace(topk_ids_TLK=ids)
    with pytest.raises(TraceError, match="expert ids must be in"):
        token_trace(topk_ids_TLK=token_trace().topk_ids_TLK + 8)
    with pytest.raises(TraceError, match="finite and >= 0"):
        load_trace(counts_SLE=-load_trace().counts_SLE)
    with pytest.raises(TraceError, match="a moebench trace needs"):
        write_parquet(load_trace(model_id=None), "never.parquet")


# --- replay --------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    counts=st.lists(st.integers(0, 1000) | st.floats(0, 1e6), min_size=1, max_size=40),
    tokens=st.integers(1, 64),
    k=st.integers(1, 40),
    seed=st.integers(0, 2**32),
)
def test_replay_histogram_is_the_apportionment(counts, tokens, k, seed):
    counts = np.asarray(counts, dtype=np.float64)
    top_k = min(k, int((counts > 0).sum()))
    if top_k == 0:
        return
    n = apportion(counts, tokens * top_k, tokens)
    assert n.sum() == tokens * top_k and (n <= tokens).all() and (n[counts == 0] == 0).all()
    # largest remainder: an expert held below the cap is within one slot of its quota
    quota = counts / counts.sum() * tokens * top_k
    free = n < tokens
    assert (np.abs(n[free] - quota[free]) < 1 + 1e-9).all() or (n == tokens).any()
    g = torch.Generator()
    g.manual_seed(seed)
    ids = replay_load(counts, tokens, top_k, g)
    assert ids.shape == (tokens, top_k)
    assert np.bincount(ids.numpy().ravel(), minlength=counts.size).tolist() == n.tolist()
    assert (ids.sort(dim=1).values.diff(dim=1) != 0).all(), "a token repeats an expert"
    g.manual_seed(seed)
    assert torch.equal(ids, replay_load(counts, tokens, top_k, g)), "not deterministic"


@pytest.mark.parametrize(
    "counts, slots, cap, want",
    [
        ([3, 1], 4, 4, [3, 1]),  # exact shares
        ([1, 1, 1], 4, 4, [2, 1, 1]),  # a tie goes to the lower id
        ([100, 1, 1], 6, 3, [3, 2, 1]),  # the hot expert held at the cap, the rest re-apportioned
        ([5, 0, 5], 2, 1, [1, 0, 1]),  # an empty expert stays empty
        ([0.25, 0.75], 8, 8, [2, 6]),  # fractional shares (Mixtral's per-prompt fractions)
    ],
)
def test_apportion_examples(counts, slots, cap, want):
    assert apportion(counts, slots, cap).tolist() == want


def test_apportion_refuses_what_cannot_fit():
    with pytest.raises(ValueError, match="do not fit"):
        apportion([5, 0, 0], 4, 2)


def test_token_trace_replays_as_recorded_cut_or_tiled(tmp_path):
    t = token_trace()
    p = tmp_path / "t.parquet"
    write_parquet(t, p)
    kw = dict(family="trace", experts=8, top_k=2, ep=2, trace_path=str(p))
    cut = synthesize(tokens=3, trace_layer=4, **kw)
    assert cut.label == "trace(t.parquet,layer=4,tokens=5->3 cut)"  # token 4 has an unused slot
    keep = np.delete(t.topk_ids_TLK[:, 1, :], 4, axis=0)
    assert cut.topk_ids_TK.tolist() == keep[:3].tolist()
    assert cut.topk_weights_TK.tolist() == np.delete(t.topk_weights_TLK[:, 1], 4, 0)[:3].tolist()
    tiled = synthesize(tokens=12, trace_layer=3, **kw)
    assert tiled.label == "trace(t.parquet,layer=3,tokens=6->12 tiled)"
    assert tiled.topk_ids_TK.tolist() == np.tile(t.topk_ids_TLK[:, 0, :], (2, 1)).tolist()
    assert tiled.trace_sha256 == t.sha256
    with pytest.raises(TraceError, match="top-2 routing cannot replay top-3"):
        synthesize(tokens=4, trace_layer=3, **{**kw, "top_k": 3})
    with pytest.raises(TraceError, match="has 8 experts, the model has 16"):
        synthesize(tokens=4, trace_layer=3, **{**kw, "experts": 16})


def test_load_trace_replay_label_and_top_k_mapping(tmp_path):
    p = tmp_path / "t.parquet"
    write_parquet(load_trace(), p)
    r = synthesize(family="trace", tokens=16, experts=8, top_k=1, ep=2, trace_path=str(p))
    assert r.label == "trace(t.parquet,layer=1,shares of top2 at top1)"  # layer 0 is empty
    counts = load_trace().layer_counts(1)
    assert local_counts(r.topk_ids_TK, 0, 8).tolist() == apportion(counts, 16, 16).tolist()


# --- statistics ----------------------------------------------------------------------------------


def test_layer_stats():
    s = layer_stats(np.array([8.0, 0, 4, 4]), ep=2)
    assert s["max_mean"] == 2.0 and s["min_mean"] == 0.0 and s["empty_experts"] == 1
    assert s["entropy"] == pytest.approx(1.5) and s["rank_rows"] == [8.0, 8.0]
    assert s["overload"] == 1.0
    s = layer_stats(np.array([6.0, 2, 0, 0]), ep=2)
    assert s["overload"] == 2.0 and s["rank_rows"] == [8.0, 0.0]
    with pytest.raises(TraceError, match="does not divide"):
        layer_stats(np.ones(6), ep=4)


def test_run_statistics_agree_with_trace_stats(tmp_path):
    """The routing table's per-rank rows are the replayed histogram's, as `trace stats --tokens`
    prints them."""
    p = tmp_path / "t.parquet"
    write_parquet(load_trace(), p)
    r = synthesize(family="trace", tokens=40, experts=8, top_k=2, ep=4, trace_path=str(p),
                   trace_layer=5)  # fmt: skip
    n = apportion(load_trace().layer_counts(5), 80, 40)
    s = layer_stats(n, ep=4)
    for rank in range(4):
        row = rank_statistics(r.topk_ids_TK, rank=rank, ep=4, local_experts=2, capacity_rows=256)
        assert row["live_rows"] == s["rank_rows"][rank]
    worst = max(rank_statistics(r.topk_ids_TK, rank=k, ep=4, local_experts=2,
                                capacity_rows=256)["overload"] for k in range(4))  # fmt: skip
    assert worst == pytest.approx(s["overload"])


# --- scenarios -----------------------------------------------------------------------------------


def test_scenario_checks_model_and_revision(tmp_path):
    write_parquet(load_trace(), tmp_path / "t.parquet")
    s = parse_scenario(scenario_text("t.parquet"), path=str(tmp_path / "s.yaml"))
    (case,) = plan(s)
    assert case.routing.label == "trace(t.parquet,layer=1)"
    assert case.routing.trace_sha256 == load_trace().sha256
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario_text("t.parquet", revision="r2"), path=str(tmp_path / "s.yaml"))
    msg = str(info.value)
    assert msg.startswith(f"{tmp_path / 's.yaml'}: routing.path: ") and len(msg.splitlines()) == 1
    assert "x/tiny at revision r1" in msg and "x/tiny at revision r2" in msg
    with pytest.raises(ScenarioError, match="pinned to x/tiny at revision r1, .* y/other at"):
        parse_scenario(scenario_text("t.parquet", id="y/other"), path=str(tmp_path / "s.yaml"))
    with pytest.raises(ScenarioError, match="has 8 experts, model.experts is 16"):
        parse_scenario(scenario_text("t.parquet", experts=16), path=str(tmp_path / "s.yaml"))


def test_raw_file_replays_as_the_scenarios_model(tmp_path):
    np.save(tmp_path / "c.npy", load_trace().counts_SLE)
    s = parse_scenario(scenario_text("c.npy", revision="r9"), path=str(tmp_path / "s.yaml"))
    (case,) = plan(s)
    assert case.routing.label == "trace(c.npy,layer=1,unpinned)"
    assert len(case.routing.trace_sha256) == 64


def project_trace_scenarios() -> list[Path]:
    return [p for p in sorted((REPO / "scenarios").glob("*.yaml"))
            if "../../shared/traces/" in p.read_text()]  # fmt: skip


def test_project_trace_scenarios_resolve_beside_a_checkout(tmp_path, shared_traces):
    """CI clones the repository with shared/ beside it: scenarios/../../shared/traces resolves."""
    scenarios = project_trace_scenarios()
    assert {p.name for p in scenarios} >= {"deepseek-trace-decode.yaml",
                                           "deepseek-trace-prefill.yaml"}  # fmt: skip
    (tmp_path / "repo").mkdir()
    shutil.copytree(REPO / "scenarios", tmp_path / "repo" / "scenarios")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "traces").symlink_to(shared_traces)
    for p in scenarios:
        s = load_scenario(tmp_path / "repo" / "scenarios" / p.name)
        assert Path(s.routing.path).is_relative_to(tmp_path / "shared" / "traces")
        if Regime.MODEL in s.measure.regimes:  # a whole model: its layers draw from the trace
            assert s.model.preset in {"deepseek-v3", "deepseek-v4-flash"}
            continue
        if s.step is not None:  # a model step: every MoE layer replays a trace layer of its own
            layer_map = trace_layer_map(s.routing.path, s.model.moe_layers)
            assert s.model.preset in {"deepseek-v3", "deepseek-v4-flash"}
            assert len(set(layer_map.values())) == len(layer_map) == len(s.model.moe_layers)
            continue
        cases = plan(s)
        assert {c.case.scenario.model.preset for c in cases} == {"deepseek-v3", "deepseek-v4-flash"}
        for c in cases:
            assert c.routing.label.startswith("trace(") and c.routing.label.endswith(",unpinned)")
            assert f"layer={c.case.scenario.routing.layer}" in c.routing.label
            assert len(c.routing.trace_sha256) == 64
            # exactly the recorded shares, at this model's top-k
            t = load_any(s.routing.path)
            T, K = c.routing.topk_ids_TK.shape
            want = apportion(t.layer_counts(c.case.scenario.routing.layer), T * K, T)
            assert local_counts(c.routing.topk_ids_TK, 0, 256).tolist() == want.tolist()


# --- the shared SGLang files: the README's skew figures ------------------------------------------


@pytest.mark.parametrize("name", ["decode_in2000out100.json", "prefill_in4096.json"])
def test_sglang_skew_matches_the_readme(shared_traces, name):
    t = load_any(shared_traces / "sglang-deepseek-v3-expert-load" / name)
    rows = [layer_stats(t.layer_counts(layer), ep=8) for layer in t.layers]
    assert sum(r["rows"] == 0 for r in rows) == 3  # layers 0-2 are dense
    s = summary(rows)
    assert s["layers"] == 58
    assert 5.5 <= s["max_mean_avg"] <= 8.2 and s["max_mean_max"] <= 13.75
    assert 0.08 <= s["min_mean_avg"] <= 0.19
