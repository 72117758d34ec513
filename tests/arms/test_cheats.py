"""The red-team corpus (examples/arms/cheats/, issue 25 item 6; docs/DESIGN.md section 15): each
cheating arm is caught by the gate that names it, and nobody else is blamed.

Every test runs a scenario through the real CLI on two simulated ranks with the culprit listed
first, so that the arms after it run on whatever it left behind; then it reads the checks table
and asserts the exit code, the culprit's named gate failed on every rank, and every other arm
(its honest twin, the built-in ``stock`` in one test) passed every gate on every rank. The
GPU-only cheats (a side stream, a persisting L2 window) are in test_cheats_gpu.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import runner

from moebench.cli.app import app
from moebench.results.reader import load_run

REPO = Path(__file__).resolve().parents[2]
CHEATS = REPO / "examples" / "arms" / "cheats"
MEMOISED = REPO / "examples" / "arms" / "cheating.py"
RANKS = (0, 1)

SCENARIO = """\
name: cheat
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 8, alignment: 16}
precision: fp8
arms: ARMS
measure: {regimes: [ffn], warmup: 0, blocks: 2, iterations: 1, baseline: BASELINE}
"""
# Every gate an arm that ran and was timed must show on each rank (CPU: no device gates).
TIMED_GATES = ("reference", "nan_poison", "inputs_unchanged", "timed_outputs", "post_timing",
               "deterministic", "fresh_input")  # fmt: skip
# A staged arm's (stock's): bitwise after timing, so no deterministic row; alone among the staged
# arms, so no cross-arm row.
STAGED_GATES = ("reference", "nan_poison", "sentinel_live", "inputs_unchanged", "timed_outputs",
                "post_timing", "fresh_input")  # fmt: skip


def cheat(file: str, attr: str = "ARM") -> str:
    return f"{CHEATS / file}:{attr}"


def run_cheat(tmp: Path, arms: list[str], baseline: str, exit_code: int,
              text: str = SCENARIO) -> tuple[Path, list]:  # fmt: skip
    """Run the scenario ``text`` with ``arms`` (the culprit first) and ``baseline``; its run
    folder and checks rows."""
    text = text.replace("ARMS", json.dumps(arms)).replace("BASELINE", baseline)
    path = tmp / "s.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["run", str(path), "--results", str(tmp / "results")])
    assert result.exit_code == exit_code, result.output
    (run_dir,) = (tmp / "results").iterdir()
    return run_dir, load_run(run_dir).checks.to_pylist()


def statuses(rows: list, arm: str) -> dict[tuple[int, str], list[str]]:
    """{(rank, gate): [status, ...]} of ``arm``'s rows."""
    out: dict[tuple[int, str], list[str]] = {}
    for c in rows:
        if c["arm"] == arm:
            out.setdefault((c["rank"], c["gate"]), []).append(c["status"])
    return out


def assert_caught(rows: list, arm: str, *gates: str, ranks: tuple[int, ...] = RANKS) -> None:
    """Each of ``gates`` failed for ``arm`` on every rank."""
    got = statuses(rows, arm)
    for rank in ranks:
        for gate in gates:
            assert "fail" in got.get((rank, gate), []), (arm, rank, gate, got)


def assert_passed(rows: list, arm: str, *gates: str) -> None:
    """Each of ``gates`` passed for ``arm`` on every rank (the cheat got past it)."""
    got = statuses(rows, arm)
    for rank in RANKS:
        for gate in gates:
            assert got.get((rank, gate)) == ["pass"], (arm, rank, gate, got)


def assert_innocent(
    rows: list, arm: str, gates: tuple[str, ...] = TIMED_GATES, ranks: tuple[int, ...] = RANKS
) -> None:
    """``arm`` passed every gate on every rank: each of ``gates`` is there, and no row of it
    failed or errored (``skip`` is a gate that does not apply on the CPU; ``info`` only for
    ``deterministic``, a fact and never a failure)."""
    got = statuses(rows, arm)
    for rank in ranks:
        for gate in gates:
            assert (rank, gate) in got, (arm, rank, gate, sorted(got))
    for (rank, gate), ss in got.items():
        for s in ss:
            ok = s in ("pass", "skip") or (gate == "deterministic" and s == "info")
            assert ok, f"innocent {arm} blamed: {gate} {s} on rank {rank}"


@pytest.mark.slow  # stock under the Triton interpreter: about 10 s
def test_an_arm_that_wipes_its_tokens_fails_alone(tmp_path):
    """Cheat 1 (wipe_tokens.py): its own output is right, its inputs_unchanged fails; stock and
    the honest twin, gated after it on the same tensors, pass every gate on every rank."""
    arms = [cheat("wipe_tokens.py"), "stock", cheat("wipe_tokens.py", "HONEST")]
    _, rows = run_cheat(tmp_path, arms, "stock", exit_code=1)
    assert_caught(rows, "wipe_tokens", "inputs_unchanged")
    assert_passed(rows, "wipe_tokens", "reference")  # computed before it wiped x_TD
    detail = next(c["detail"] for c in rows if c["arm"] == "wipe_tokens" and c["status"] == "fail")
    assert "x_TD" in detail and "restored" in detail, detail
    assert_innocent(rows, "wipe_tokens_honest")
    assert_innocent(rows, "stock", STAGED_GATES)


def test_an_arm_that_doubles_the_router_weights_fails_alone(tmp_path):
    """Cheat 2 (double_weights.py): inputs_unchanged of the culprit only."""
    arms = [cheat("double_weights.py"), cheat("double_weights.py", "HONEST")]
    _, rows = run_cheat(tmp_path, arms, "double_weights_honest", exit_code=1)
    assert_caught(rows, "double_weights", "inputs_unchanged")
    assert_passed(rows, "double_weights", "reference")
    bad = [c["detail"] for c in rows if c["arm"] == "double_weights" and c["status"] == "fail"]
    assert all("topk_weights_TK" in d for d in bad), bad
    assert_innocent(rows, "double_weights_honest")


def test_an_arm_that_replays_while_an_order_blind_fingerprint_holds_fails_timed_outputs(tmp_path):
    """Cheat 3 (fingerprint_replay.py): it recomputes whenever the tokens or routing really
    change, so reference and fresh_input pass; the rotation reorders the tokens, the fingerprint
    holds, the replayed rows are in the old order: timed_outputs fails, and compare shows it as
    a mismatch without numbers."""
    arms = [cheat("fingerprint_replay.py"), cheat("fingerprint_replay.py", "HONEST")]
    run_dir, rows = run_cheat(tmp_path, arms, "fingerprint_replay_honest", exit_code=1)
    assert_caught(rows, "fingerprint_replay", "timed_outputs")
    assert_passed(rows, "fingerprint_replay", "reference", "fresh_input", "inputs_unchanged")
    assert_innocent(rows, "fingerprint_replay_honest")
    out = runner.invoke(app, ["compare", str(run_dir), "--format", "json"])
    (row,) = [x for x in json.loads(out.output)["rows"] if x["arm"] == "fingerprint_replay"]
    assert row["status"] == "mismatch" and row["median_us"] is None and not row["decision"]


def test_the_memoising_arm_fails_timed_outputs_and_fresh_input(tmp_path):
    """Cheat 4 (examples/arms/cheating.py, memoised by input address): the first timed sample
    (the gated tokens in another order, same addresses) and the fresh-input gate catch it; the
    shared honest arm (honest.py) passes."""
    arms = [f"{MEMOISED}:ARM", cheat("honest.py")]
    _, rows = run_cheat(tmp_path, arms, "honest_reference", exit_code=1)
    assert_caught(rows, "memoised", "timed_outputs", "fresh_input")
    assert_passed(rows, "memoised", "reference")
    assert_innocent(rows, "honest_reference")


def test_an_arm_that_writes_half_its_rows_fails_nan_poison_and_reference(tmp_path):
    """Cheat 5 (partial_rows.py): the unwritten rows keep their NaN poison."""
    arms = [cheat("partial_rows.py"), cheat("partial_rows.py", "HONEST")]
    _, rows = run_cheat(tmp_path, arms, "partial_rows_honest", exit_code=1)
    assert_caught(rows, "partial_rows", "nan_poison", "reference")
    assert_innocent(rows, "partial_rows_honest")
    timed = {c["arm"] for c in rows if c["gate"] == "timed_outputs"}
    assert timed == {"partial_rows_honest"}  # a mismatch is not timed


def test_an_arm_that_returns_a_stale_output_fails_timed_outputs_and_fresh_input(tmp_path):
    """Cheat 6 (stale_output.py): right for the gated inputs (reference and post_timing pass),
    wrong for every timed sample and for the fresh inputs."""
    arms = [cheat("stale_output.py"), cheat("stale_output.py", "HONEST")]
    _, rows = run_cheat(tmp_path, arms, "stale_output_honest", exit_code=1)
    assert_caught(rows, "stale_output", "timed_outputs", "fresh_input")
    assert_passed(rows, "stale_output", "reference", "post_timing", "inputs_unchanged")
    assert_innocent(rows, "stale_output_honest")


def test_an_arm_whose_summation_order_varies_passes_with_deterministic_info(tmp_path):
    """Item 9 (unordered_sum.py), honest: post_timing within tolerance, deterministic ``info``
    (not bitwise the same across calls); its fixed-order twin's deterministic is ``pass``."""
    arms = [cheat("unordered_sum.py"), cheat("unordered_sum.py", "HONEST")]
    _, rows = run_cheat(tmp_path, arms, "ordered_sum", exit_code=0)
    assert_innocent(rows, "unordered_sum")
    assert_innocent(rows, "ordered_sum")
    for rank in RANKS:
        assert statuses(rows, "unordered_sum")[(rank, "deterministic")] == ["info"]
        assert statuses(rows, "ordered_sum")[(rank, "deterministic")] == ["pass"]


@pytest.mark.parametrize(
    "file",
    ["honest.py", "wipe_tokens.py", "double_weights.py", "fingerprint_replay.py",
     "partial_rows.py", "stale_output.py", "unordered_sum.py", "side_stream.py",
     "l2_window.py"],
)  # fmt: skip
def test_every_file_of_the_corpus_says_what_it_does_gains_and_what_catches_it(file):
    import ast

    doc = ast.get_docstring(ast.parse((CHEATS / file).read_text())) or ""
    assert doc, file
    if file not in ("honest.py", "unordered_sum.py"):
        assert "What it would gain" in doc and "Caught by" in doc, file
