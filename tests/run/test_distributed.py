"""topology.mode distributed: real ranks on gloo, on the CPU, started by torchrun.

The end-to-end test runs the real CLI with ``--nproc 2`` in a subprocess (it launches torchrun,
which starts two ranks under the Triton interpreter) and judges the stored run and its
comparison. tests/dist_worker.py holds the ranks of the lower-level tests.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from moebench.cli.app import app
from moebench.comm import world as distributed
from moebench.comm.exchange import Exchange
from moebench.results.reader import load_run
from moebench.spec.load import parse_scenario

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]

# The brief's tiny case: 4 experts over ep = dp = 2 ranks, 4 tokens per rank, top-2.
TINY = """\
name: tiny-dist
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2, dp: 2, mode: distributed}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: fp8
measure: {regimes: [ffn, kernel], stages: [act], warmup: 0, blocks: 2, iterations: 1}
"""


def child_env() -> dict:
    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "1"  # the ranks run the kernels in the interpreter
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("moebench: error: "), result.output
    return lines[0]


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    scenario = tmp / "tiny.yaml"
    scenario.write_text(TINY)
    cmd = [sys.executable, "-m", "moebench.cli", "run", str(scenario), "--nproc", "2",
           "--results", str(tmp / "results")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp / "results").iterdir()
    return run_dir, proc


def test_two_ranks_on_gloo_end_to_end(two_rank_run):
    run_dir, proc = two_rank_run
    run = load_run(run_dir)
    m = run.manifest
    assert m["status"] == "complete"
    assert m["distributed"] == {"world_size": 2, "backend": "gloo", "timeout_s": 300.0, "dp": 2,
                                "tp": 1, "ep": 2}  # fmt: skip
    assert "--nproc 2" in m["command"]
    samples = run.samples.to_pylist()
    assert {s["rank"] for s in samples} == {0, 1}
    ffn = {s["stage"] for s in samples if s["regime"] == "ffn"}
    assert ffn == {"dispatch", "ffn", "sync_wait", "combine_a2a", "layer"}
    assert {s["stage"] for s in samples if s["regime"] == "kernel"} == {"act"}
    # Per rank, arm and stage: 2 blocks x 1 iteration, the same (block, iteration) on both ranks.
    keys = {(s["arm"], s["stage"], s["block"], s["iteration"]) for s in samples
            if s["regime"] == "ffn"}  # fmt: skip
    for rank in (0, 1):
        mine = {(s["arm"], s["stage"], s["block"], s["iteration"]) for s in samples
                if s["regime"] == "ffn" and s["rank"] == rank}  # fmt: skip
        assert mine == keys and len(mine) == 3 * 5 * 2
    assert all(s["time_us"] > 0 and s["device"] == "cpu" for s in samples)
    checks = run.checks.to_pylist()
    assert all(c["status"] in ("pass", "skip") for c in checks), [
        c for c in checks if c["status"] not in ("pass", "skip")
    ]
    names = {(c["gate"], c["rank"]) for c in checks}
    for rank in (0, 1):
        for name in (
            "distributed_reference",
            "distributed_cross_arm",
            "distributed_post_timing",
            "reference",
            "sentinel_live",
            "cross_arm_output",
            "post_timing",
        ):
            assert (name, rank) in names
    ref = [c for c in checks if c["gate"] == "distributed_reference"]
    assert len(ref) == 2 * 3 and all(c["error"] < 2e-3 for c in ref)
    routing = run.routing.to_pylist()
    assert sorted(r["rank"] for r in routing) == [0, 1]
    assert sum(r["live_rows"] for r in routing) == 2 * 4 * 2  # every slot lands on one rank
    # The launcher printed rank 0's summary once: on the CPU, its gates and work ledger.
    assert proc.stdout.count("Gates: every arm passed every gate") == 1


def test_compare_shows_passes_stragglers_and_ranks(two_rank_run):
    run_dir, _ = two_rank_run
    result = runner.invoke(app, ["compare", str(run_dir), "--timings", "--width", "200"])
    assert result.exit_code == 0, result.output
    out = result.output
    print(out)
    for arm in ("stock", "prefix_sum", "prefix_sum_masked"):
        line = next(ln for ln in out.splitlines() if f"c000 [eager] {arm}: critical path" in ln)
        assert "max over 2 ranks of layer" in line and "over 2 passes" in line
    assert "straggler rank" in out and "sync_wait" in out and "dispatch" in out
    doc = json.loads(runner.invoke(app, ["compare", str(run_dir), "--format", "json"]).output)
    paths = doc["distributed"]
    assert len(paths) == 3
    for p in paths:
        assert p["ranks"] == 2 and p["passes"] == 2 and p["straggler_rank"] in (0, 1)
        assert p["critical_min_us"] <= p["critical_median_us"] <= p["critical_max_us"]
        assert set(p["rank_medians"]) == {"dispatch", "ffn", "sync_wait", "combine_a2a", "layer"}
        # the critical path of a pass is the slowest rank's layer time
        assert p["critical_max_us"] >= max(p["rank_medians"]["layer"]) * 0.999
    rows = {(r["stage"], r["arm"]): r for r in doc["rows"] if r["regime"] == "ffn"}
    assert rows[("layer", "stock")]["n_ranks"] == 2
    md = runner.invoke(app, ["compare", str(run_dir), "--format", "markdown", "--timings"]).output
    assert "## Distributed: critical path per pass" in md


def _torchrun(mode: str, out: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(REPO / "tests" / "dist_worker.py"), mode, str(out)]  # fmt: skip
    env = child_env()
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    seen = []
    for rank in (0, 1):
        path = out / f"rank{rank}.json"
        assert path.is_file(), proc.stdout + proc.stderr
        seen.append(json.loads(path.read_text()))
        assert "crash" not in seen[-1], seen[-1].get("crash")
    return seen


@pytest.mark.slow
def test_exchange_and_agreement_across_two_ranks(tmp_path):
    seen = _torchrun("units", tmp_path)
    for rank, s in enumerate(seen):
        for layout in ("dp2", "tp2"):  # dp x tp = 2 x 1 and 1 x 2: tokens split either way
            x = s[layout]
            assert x["owned"], x  # every live received row is of an expert this rank owns
            assert x["received_live"] == x["expected_live"]
            assert x["max_error"] < 1e-2, x  # bf16 rows back to their tokens, weighted
        assert s["dp2"]["tokens"] == [rank * 5, rank * 5 + 5]
        assert s["tp2"]["tokens"] == [[0, 3], [3, 7]][rank]  # 7 tokens over tp = 2
        # A rank's error reaches every rank, which stop at the same point.
        assert s["failure"]["message"].startswith("rank 1 failed in a test: ValueError: rank one")
        assert not s["failure"]["input"]
        # The same user mistake everywhere is re-raised as itself (the CLI's exit 2).
        assert s["input"] == {"type": "MoebenchError", "message": "same mistake everywhere"}
        # Rank 0 waited in an all-to-all for rank 1, which had failed: the timeout frees it, and
        # the root cause (rank 1's error) leads the message.
        assert s["blocked"]["message"].startswith(
            "rank 1 failed in a blocked collective: RuntimeError: gone before the all-to-all"
        )
    assert seen[0]["blocked"]["kinds"] == ["timeout", "error"]


@pytest.mark.slow
def test_a_failing_rank_is_recorded_by_rank_zero(tmp_path):
    seen = _torchrun("runner_failure", tmp_path)
    want = "rank 1 failed timing case c000: RuntimeError: injected while timing"
    assert all(s["message"].startswith(want) for s in seen), seen
    (run_dir,) = (tmp_path / "results").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"].startswith(want)
    # Rank 0 was waiting for rank 1 at the first pass's meeting point: freed by the timeout.
    assert [(f["rank"], f["kind"]) for f in manifest["failed_ranks"]] == [
        (0, "timeout"),
        (1, "error"),
    ]
    assert manifest["failed_ranks"][1]["error"] == "RuntimeError: injected while timing"
    assert manifest["finished_cases"] == []


@pytest.mark.slow
def test_an_arm_that_raises_is_an_error_row_and_the_run_ends_errors(tmp_path):
    seen = _torchrun("arm_error", tmp_path)
    for s in seen:  # every rank reports rank 0's verdict
        assert s["status"] == "errors" and not s["mismatches"], s
        assert any("prefix_sum: run: error: RuntimeError: injected arm error" in e
                   for e in s["errors"]), s  # fmt: skip
    (run_dir,) = (tmp_path / "results").iterdir()
    run = load_run(run_dir)
    assert run.manifest["status"] == "errors"
    bad = [c for c in run.checks.to_pylist() if c["arm"] == "prefix_sum"]
    assert {(c["rank"], c["gate"], c["status"]) for c in bad} == {
        (0, "run", "error"),
        (1, "run", "error"),
    }
    timed = {s["arm"] for s in run.samples.to_pylist()}
    assert timed == {"stock", "prefix_sum_masked"}


@pytest.mark.slow
def test_torchrun_ranks_resolve_a_users_file_arm(tmp_path):
    arm = REPO / "examples" / "arms" / "torch_grouped.py"
    scenario = tmp_path / "user.yaml"
    scenario.write_text(TINY.replace("measure:", f"arms: [stock, '{arm}:ARM']\nmeasure:").replace(
        "regimes: [ffn, kernel], stages: [act]", "regimes: [ffn]"))  # fmt: skip
    cmd = [sys.executable, "-m", "moebench.cli", "run", str(scenario), "--nproc", "2",
           "--results", str(tmp_path / "results")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "results").iterdir()
    run = load_run(run_dir)
    mine = [c for c in run.checks.to_pylist() if c["arm"] == "torch_grouped"]
    names = {(c["rank"], c["gate"]) for c in mine if c["status"] == "pass"}
    for rank in (0, 1):
        for check in ("reference", "distributed_reference", "fresh_input"):
            assert (rank, check) in names, (rank, check)
    assert run.manifest["sources"]["torch_grouped"]["origin"] == "file"


def _copy_run(run_dir: Path, tmp_path: Path, edit=None) -> Path:
    copy = tmp_path / "results" / run_dir.name
    shutil.copytree(run_dir, copy)
    if edit is not None:
        manifest = copy / "manifest.json"
        doc = json.loads(manifest.read_text())
        edit(doc)
        manifest.write_text(json.dumps(doc))
    return copy


def _resume(copy: Path, *flags: str) -> subprocess.CompletedProcess:
    scenario = copy.parent.parent / "tiny.yaml"
    scenario.write_text(TINY)
    cmd = [sys.executable, "-m", "moebench.cli", "run", str(scenario), "--nproc", "2",
           "--resume", str(copy), *flags]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def _drift(doc: dict) -> None:
    doc["sources"]["prefix_sum_masked"]["hash"] = "b" * 64


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit, message",
    [
        (_drift, "arm 'prefix_sum_masked': sources bbbbbbbbbbbbbbbb... when the run started"),
        (lambda doc: doc.update(device="cuda"), "the run started on cuda, this resume would run"),
    ],
    ids=["sources-changed", "other-device"],
)
def test_a_distributed_resume_on_changed_sources_or_device_is_refused(
    two_rank_run, tmp_path, edit, message
):
    run_dir, _ = two_rank_run
    copy = _copy_run(run_dir, tmp_path, edit)
    before = {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    proc = _resume(copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("moebench: error: ")]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_a_distributed_resume_records_its_history_and_the_drift_it_allowed(two_rank_run, tmp_path):
    run_dir, _ = two_rank_run
    copy = _copy_run(run_dir, tmp_path, _drift)
    proc = _resume(copy, "--allow-source-drift")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = json.loads((copy / "manifest.json").read_text())
    assert m["status"] == "complete" and m["finished_cases"] == ["c000"]
    (resume,) = m["resumes"]
    assert resume["source_drift"][0].startswith("arm 'prefix_sum_masked': sources bbbbbbbbbbbb")
    assert "--resume" in resume["command"] and "--nproc 2" in resume["command"]


# --------------------------------------------------------------------------- in-process


def test_token_ranges_cover_the_step_once():
    s = parse_scenario(TINY.replace("dp: 2,", "dp: 1, tp: 2,").replace(
        "tokens_per_rank: 4", "tokens_per_rank: 5"))  # fmt: skip
    assert [distributed.token_range(s, r) for r in (0, 1)] == [(0, 2), (2, 5)]
    assert distributed.max_tokens(s) == 3
    s = parse_scenario(TINY)
    assert [distributed.token_range(s, r) for r in (0, 1)] == [(0, 4), (4, 8)]


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        # a world size that does not fit dp x tp
        (TINY, ["--nproc", "3"], "the world has 3 rank(s) but the scenario needs dp x tp = 2 x 1"),
        # --nproc on a simulated scenario
        (TINY.replace("mode: distributed", "mode: simulated"), ["--nproc", "2"],
         "topology.mode: is 'simulated'; launching ranks needs 'distributed'"),
        # distributed, but neither --nproc nor torchrun
        (TINY, [], "needs one process per rank: pass --nproc 2"),
        (TINY, ["--nproc", "0"], "--nproc: must be at least 1"),
    ],
)  # fmt: skip
def test_launch_errors_are_one_line(tmp_path, text, args, message):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text)
    result = runner.invoke(app, ["run", str(scenario), "--results", str(tmp_path / "r"), *args])
    assert message in one_line_error(result)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("precision", ["fp8", "bf16"])
def test_a_world_of_one_agrees_with_simulated_bit_for_bit(tmp_path, precision):
    """World size 1 (gloo here, NCCL on the GPU): dispatch to itself, the arm on the received rows,
    combine; the output is the simulated run's, bit for bit (same rows in the same order)."""
    import torch
    import torch.distributed as dist

    from moebench.arm import registry
    from moebench.arm.base import run_all
    from moebench.arm.prefill import Workspace
    from moebench.core.numerics import bitwise_compare
    from moebench.plan.cases import plan
    from moebench.plan.inputs import build_problem, make_tokens, make_weights
    from moebench.run import distributed_rank as dist_runner

    text = TINY.replace("ep: 2, dp: 2", "ep: 1").replace(
        "precision: fp8", f"precision: {precision}"
    )
    s = parse_scenario(text)
    (p,) = plan(s)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        world = distributed.World(rank=0, size=1, local_rank=0, device=torch.device("cpu"),
                                  backend="gloo", timeout_s=60.0, ctl=dist.group.WORLD)  # fmt: skip
        c = dist_runner.layer_inputs(world, p, "run")
        x = make_tokens(tokens=4, hidden=128, seed=3, device=torch.device("cpu"))  # dp = 1
        w13, w2 = make_weights(experts=range(4), hidden=128, intermediate=128, seed=3,
                               device=torch.device("cpu"))  # fmt: skip
        simulated = build_problem(
            x_TD=x, topk_ids_TK=p.routing.topk_ids_TK, topk_weights_TK=p.routing.topk_weights_TK,
            w13_EFD=w13, w2_EDF=w2, expert_offset=0, experts=4, alignment=16,
            capacity_rows=p.capacity_rows, precision=precision, activation="silu",
        )  # fmt: skip
        for name in ("stock", "prefix_sum", "prefix_sum_masked"):  # the prefill family
            arm = registry.resolve(name)
            ws = Workspace(c.problem)
            stages = arm.build(ws)
            dist_runner.run_layer(c, ws, lambda stages=stages: run_all(stages))
            ws_sim = Workspace(simulated)
            run_all(arm.build(ws_sim))
            same = bitwise_compare(c.exchange.y_TD, ws_sim.y_TD)
            assert same.equal, (name, same.describe())
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("with_scales", [True, False])
def test_pack_places_every_slot_and_touches_nothing_else(with_scales):
    """Exchange.pack on one process (no collective): each slot's row in its destination block, in
    (token, slot) order, holds its token's bytes, its scale words and its expert id; every other
    row keeps its poison; the counts say how many rows each destination got."""
    import torch

    T, K, D, W, E = 6, 3, 128, 3, 4  # 12 experts over 3 ranks
    g = torch.Generator().manual_seed(0)
    x = torch.randn(T, D, generator=g).to(torch.float8_e4m3fn)
    sf = torch.randint(0, 1 << 30, (T, 2), generator=g, dtype=torch.int32) if with_scales else None
    ids = torch.randint(0, W * E, (T, K), generator=g, dtype=torch.int32)
    world = distributed.World(rank=0, size=W, local_rank=0, device=torch.device("cpu"),
                              backend="gloo", timeout_s=1.0, ctl=None)  # fmt: skip
    ex = Exchange(world, x_TD=x, x_sf_TG4=sf, topk_ids_TK=ids,
                              topk_weights_TK=torch.ones(T, K), experts_per_rank=E,
                              slots_per_rank=T * K)  # fmt: skip
    ex.pack()
    S, written = T * K, set()
    fill = [0] * W
    for t in range(T):
        for k in range(K):
            d = int(ids[t, k]) // E
            row = d * S + fill[d]
            fill[d] += 1
            written.add(row)
            want = x[t].view(torch.uint8)
            if sf is not None:
                want = torch.cat([want, sf[t].view(torch.uint8)])
            want = torch.cat([want, ids[t, k : k + 1].view(torch.uint8)])
            assert torch.equal(ex.send_RB[row], want), (t, k)
            assert int(ex.slot_row_TK[t, k]) == row
    assert ex.send_counts_W.tolist() == fill
    for row in set(range(W * S)) - written:
        assert bool((ex.send_RB[row] == 0x7F).all()), row


def test_pack_with_no_tokens_sends_nothing():
    import torch

    world = distributed.World(rank=0, size=2, local_rank=0, device=torch.device("cpu"),
                              backend="gloo", timeout_s=1.0, ctl=None)  # fmt: skip
    ex = Exchange(world, x_TD=torch.zeros(0, 128, dtype=torch.bfloat16),
                              x_sf_TG4=None, topk_ids_TK=torch.zeros(0, 2, dtype=torch.int32),
                              topk_weights_TK=torch.zeros(0, 2), experts_per_rank=2,
                              slots_per_rank=4)  # fmt: skip
    ex.send_counts_W.fill_(7)
    ex.pack()
    assert ex.send_counts_W.tolist() == [0, 0]
    assert bool((ex.send_RB == 0x7F).all())
