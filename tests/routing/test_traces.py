"""Traces: Parquet round trip, exact replay, statistics, scenarios pinned to models, the CLI."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from moebench.cli.app import app
from moebench.core.errors import ScenarioError, TraceError, clip
from moebench.core.vocabulary import Regime
from moebench.plan.cases import plan
from moebench.routing.raw_files import load_any
from moebench.routing.replay import apportion, replay_load
from moebench.routing.step_draws import trace_layer_map
from moebench.routing.synthetic import local_counts, rank_statistics, synthesize
from moebench.routing.trace_stats import layer_stats, summary
from moebench.routing.traces import (
    Trace,
    first_line,
    read_meta,
    read_parquet,
    validate,
    write_parquet,
)
from moebench.spec.load import load_scenario, parse_scenario

runner = CliRunner()
MODEL = {"id": "x/tiny", "revision": "r1", "hidden": 128, "intermediate": 128, "experts": 8,
         "top_k": 2}  # fmt: skip


def load_trace(**kw) -> Trace:
    g = np.random.default_rng(1)
    counts = g.integers(0, 100, size=(2, 3, 8)).astype(np.float64)
    counts[:, 0] = 0
    t = Trace(kind="load", experts=8, layers=(0, 1, 5), top_k=2, model_id="x/tiny", revision="r1",
              source="counts:c.npy", counts_SLE=counts)  # fmt: skip
    return validate(replace(t, **kw), "test")


def token_trace(weights: bool = True, **kw) -> Trace:
    g = np.random.default_rng(2)
    ids = np.stack([np.stack([g.permutation(8)[:2] for _ in range(2)]) for _ in range(6)])
    ids = ids.astype(np.int32)
    ids[4, 1, 1] = -1  # an unused slot
    w = g.random(ids.shape, dtype=np.float32) if weights else None
    t = Trace(kind="token", experts=8, layers=(3, 4), top_k=2, model_id="x/tiny", revision="r1",
              topk_ids_TLK=ids, topk_weights_TLK=w)  # fmt: skip
    return validate(replace(t, **kw), "test")


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


def scenario_text(path: str, **model) -> str:
    return yaml.safe_dump({
        "name": "t", "model": {**MODEL, **model}, "topology": {"ep": 2},
        "routing": {"source": "trace", "path": path, "layer": 1},
        "shape": {"tokens_per_rank": 8, "alignment": 16},
    })  # fmt: skip


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


# --- CLI -----------------------------------------------------------------------------------------


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("moebench: error: "), result.output
    return lines[0]


def test_cli_import_then_stats(tmp_path):
    src = tmp_path / "c.csv"
    np.savetxt(src, load_trace().counts_SLE[0], delimiter=",", fmt="%d")
    out = tmp_path / "t.parquet"
    args = ["trace", "import", str(src), "--format", "counts", "--model", "x/tiny",
            "--revision", "r1", "--top-k", "2", "-o", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "load trace of x/tiny at r1" in result.output and read_meta(out)["top_k"] == 2
    result = runner.invoke(app, ["trace", "stats", str(out), "--ep", "2"])
    assert result.exit_code == 0, result.output
    assert "x/tiny at r1" in result.output and "EP2 overload" in result.output
    assert "empty (dense) layers, not shown: 0" in result.output
    result = runner.invoke(app, ["trace", "stats", str(out), "--ep", "4", "--tokens", "10",
                                 "--layer", "2"])  # fmt: skip
    assert result.exit_code == 0 and "a replayed step of 10 tokens x top-2" in result.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["stats", "{tmp}/missing.json"], "cannot read trace"),
        (["stats", "{tmp}/bad.json"], "malformed JSON"),
        (["stats", "{tmp}/c.npy", "--ep", "3"], "--ep: 3 does not divide"),
        (["stats", "{tmp}/c.npy", "--layer", "9"], "layer 9 is not in the trace"),
        (["stats", "{tmp}/c.npy", "--tokens", "4"], "pass --top-k"),
        (["stats", "{tmp}/c.txt"], "unknown trace type .txt"),
        (
            [
                "import",
                "{tmp}/bad.json",
                "--format",
                "sglang-stat",
                "--model",
                "m",
                "--revision",
                "r",
                "--top-k",
                "2",
                "-o",
                "{tmp}/o.parquet",
            ],
            "malformed JSON",
        ),  # fmt: skip
        (
            [
                "import",
                "{tmp}/c.npy",
                "--format",
                "magic",
                "--model",
                "m",
                "--revision",
                "r",
                "-o",
                "{tmp}/o.parquet",
            ],
            "--format: expected one of",
        ),  # fmt: skip
        (
            [
                "import",
                "{tmp}/c.npy",
                "--format",
                "counts",
                "--model",
                "m",
                "--revision",
                "r",
                "--top-k",
                "2",
                "-o",
                "{tmp}/o.csv",
            ],
            "a moebench trace is a .parquet file",
        ),  # fmt: skip
        (
            [
                "import",
                "{tmp}/c.npy",
                "--format",
                "counts",
                "--model",
                "m",
                "--revision",
                "r",
                "--top-k",
                "2",
                "-o",
                "{tmp}/no/such/o.parquet",
            ],
            "cannot write",
        ),  # fmt: skip
    ],
)
def test_cli_bad_input_exits_2_in_one_line(tmp_path, args, fragment):
    (tmp_path / "bad.json").write_text('{"logical_count": [[1, 2')
    (tmp_path / "c.txt").write_text("1,2")
    np.save(tmp_path / "c.npy", load_trace().counts_SLE)
    line = one_line_error(runner.invoke(app, ["trace", *[a.format(tmp=tmp_path) for a in args]]))
    assert fragment in line, line
    assert not (tmp_path / "o.parquet").exists()


def test_run_records_trace_label_and_sha(tmp_path):
    """A run replaying a trace fills the routing table's label and trace_sha256."""
    write_parquet(load_trace(), tmp_path / "t.parquet")
    doc = yaml.safe_load(scenario_text("t.parquet"))
    doc["shape"]["tokens_per_rank"] = 4
    doc["routing"]["layer"] = 5
    doc["arms"], doc["precision"] = ["prefix_sum_masked"], "bf16"  # one arm: the test is the table
    doc["measure"] = {"regimes": ["ffn"], "warmup": 0, "blocks": 1, "iterations": 1,
                      "baseline": "prefix_sum_masked"}  # fmt: skip
    (tmp_path / "s.yaml").write_text("# a trace replayed end to end\n" + yaml.safe_dump(doc))
    result = runner.invoke(app, ["run", str(tmp_path / "s.yaml"), "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "r").iterdir()
    rows = pq.read_table(run_dir / "routing" / "c000.parquet").to_pylist()
    assert {r["routing"] for r in rows} == {"trace(t.parquet,layer=5)"}
    assert {r["trace_sha256"] for r in rows} == {load_trace().sha256}
    n = apportion(load_trace().layer_counts(5), 16, 8)
    assert [r["live_rows"] for r in rows] == [int(n[:4].sum()), int(n[4:].sum())]


# --- what the import writes, and what it refuses -------------------------------------------------


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_parquet_trace_gets_the_mode_of_the_umask(tmp_path, mask, mode):
    """Not mkstemp's 0600: the mode a plain open() gives under the umask."""
    old = os.umask(mask)
    try:
        write_parquet(load_trace(), tmp_path / "t.parquet")
        src = tmp_path / "c.csv"
        np.savetxt(src, load_trace().counts_SLE[0], delimiter=",", fmt="%d")
        result = runner.invoke(app, [*import_args(src, tmp_path / "cli.parquet")])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    for name in ("t.parquet", "cli.parquet"):
        assert oct((tmp_path / name).stat().st_mode & 0o777) == oct(mode), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "cli.parquet", "t.parquet"]


def import_args(src: Path, out: Path, *extra: str, model: str = "x/tiny", rev: str = "r1"):
    return ["trace", "import", str(src), "--format", "counts", "--model", model,
            "--revision", rev, "--top-k", "2", "-o", str(out), *extra]  # fmt: skip


def test_cli_import_refuses_to_replace_its_output_without_force(tmp_path, monkeypatch):
    src = tmp_path / "c.csv"
    np.savetxt(src, load_trace().counts_SLE[0], delimiter=",", fmt="%d")
    out = tmp_path / "t.parquet"
    out.write_bytes(b"an earlier import, to keep")
    line = one_line_error(runner.invoke(app, import_args(src, out)))
    assert line == f"moebench: error: -o: {out} already exists; pass --force to replace it"
    assert out.read_bytes() == b"an earlier import, to keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "t.parquet"]  # no temp file
    result = runner.invoke(app, import_args(src, out, "--force"))
    assert result.exit_code == 0, result.output
    assert read_meta(out)["model_id"] == "x/tiny"
    # the race: the output appears after the check, while the trace is being read
    out.unlink()
    from moebench.routing import traces

    real = traces.atomic_write

    def appears_meanwhile(path, write, **kw):
        path.write_bytes(b"written by someone else meanwhile")
        return real(path, write, **kw)

    monkeypatch.setattr(traces, "atomic_write", appears_meanwhile)
    line = one_line_error(runner.invoke(app, import_args(src, out)))
    assert "already exists; pass --force" in line
    assert out.read_bytes() == b"written by someone else meanwhile"


V3_ID, V3_REV = "deepseek-ai/DeepSeek-V3", "e815299b0bcbac849fa540c768ef21845365c9eb"


def v3_scenario(path: str, **model) -> str:
    return yaml.safe_dump({
        "name": "t", "model": {"preset": "deepseek-v3", **model}, "topology": {"ep": 8},
        "routing": {"source": "trace", "path": path, "layer": 1},
        "shape": {"tokens_per_rank": 8},
    })  # fmt: skip


def test_cli_import_at_another_revision_warns_and_the_scenario_says_the_same(tmp_path):
    """A trace recorded on another revision of a preset's model is kept (it is legitimate);
    the import warns in one line, and the scenario's pin error gives the same advice."""
    src = tmp_path / "c.npy"
    np.save(src, np.random.default_rng(0).integers(0, 50, size=(3, 256)))
    out = tmp_path / "t.parquet"
    result = runner.invoke(app, import_args(src, out, model=V3_ID, rev="main"))
    assert result.exit_code == 0, result.output
    advice = "to replay this trace, set model.revision: main in the scenario"
    example = "(model: {preset: deepseek-v3, revision: main})"
    assert result.stderr.splitlines() == [
        f"moebench: warning: --revision main is not the revision preset deepseek-v3 pins "
        f"({V3_REV}); {advice} {example}"
    ]
    assert read_meta(out)["revision"] == "main"  # kept as recorded
    with pytest.raises(ScenarioError) as info:
        parse_scenario(v3_scenario("t.parquet"), path=str(tmp_path / "s.yaml"))
    msg = str(info.value)
    assert len(msg.splitlines()) == 1
    assert f"pinned to {V3_ID} at revision main" in msg
    assert f"the scenario's model is {V3_ID} at revision {V3_REV} (preset deepseek-v3)" in msg
    assert msg.endswith(f"; {advice} {example}")
    s = parse_scenario(v3_scenario("t.parquet", revision="main"), path=str(tmp_path / "s.yaml"))
    assert s.model.revision == "main" and s.model.label == "deepseek-v3 (modified: revision=main)"
    # the preset's own revision, or a model that is no preset's: no warning
    for model, rev, extra in ((V3_ID, V3_REV, []), ("x/tiny", "main", ["--experts", "256"])):
        args = import_args(src, tmp_path / f"{rev}.parquet", *extra, model=model, rev=rev)
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and result.stderr == "", result.output


# --- one-line messages are cut at a word, never inside one ---------------------------------------


@pytest.mark.parametrize(
    "text, limit, want",
    [
        ("short enough", 20, "short enough"),  # nothing to cut
        ("alpha beta gamma delta", 15, "alpha beta..."),  # cut before the word that overflows
        ("alpha beta, gamma delta", 16, "alpha beta..."),  # no dangling comma before "..."
        ("alpha beta gamma", 13, "alpha beta..."),  # the limit falls on a space
        ("a" * 30, 10, "a" * 7 + "..."),  # one word longer than the limit: cut, marked
        ("line one\n  line\ttwo", 80, "line one line two"),  # whitespace runs become one space
    ],
)
def test_clip_cuts_at_a_word_boundary(text, limit, want):
    assert clip(text, limit) == want
    assert len(clip(text, limit)) <= limit


def test_first_line_drops_advice_to_load_unsafely_and_cuts_at_a_word():
    torchs = Exception(
        "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
        "`weights_only` argument in `torch.load` from `False` to `True`. Re-running "
        "`torch.load` with `weights_only` set to `False` will likely succeed, but it can result "
        "in arbitrary code execution. Do it only if you got the file from a trusted source.\n"
        "Please file an issue with the following: WeightsUnpickler error: Unsupported operand 1"
    )
    assert first_line(torchs) == "Weights only load failed."
    numpys = ValueError(
        "This file contains pickled (object) data. If you trust the file you can load it "
        "unsafely using the `allow_pickle=` keyword argument or `pickle.load()`."
    )
    assert first_line(numpys) == "This file contains pickled (object) data."
    long = ValueError("could not convert string to float: " + " ".join(["'token'"] * 60))
    line = first_line(long)
    assert len(line) <= 160 and line.endswith("'token'...")
