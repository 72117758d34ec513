"""The GPU-only cheats of the red-team corpus (examples/arms/cheats/side_stream.py and
l2_window.py; issue 25 item 6): each caught, its honest twin passing every gate, through the real
CLI on the GPU. Skipped without a GPU or under the Triton interpreter (the CPU suite).

Shapes are GPU-sized (hundreds of MB of weights, a few ms of work), not the CPU suite's tiny
ones: a side stream escapes the events only when the GPU's work outlasts the host's launches,
and an L2 window pays off only when the weights are several times the L2.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest
import torch
from test_cheats import CHEATS, TIMED_GATES, assert_caught, assert_innocent, cheat, run_cheat

from moebench.results.reader import load_run

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
    reason="GPU-only cheats: needs a GPU and compiled kernels (TRITON_INTERPRET unset or 0)",
)

RANK = (0,)
DEVICE_GATES = (*TIMED_GATES, "host_clock", "physical_floor")
# One rank (ep 1), bf16; `arms` and `measure` follow.
GPU_SCENARIO = """\
name: NAME
model: {id: test/gpu, revision: unpinned, hidden: 2048, intermediate: 1024, experts: EXPERTS,
        top_k: 2}
topology: {ep: 1}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: TOKENS, alignment: 128}
precision: bf16
arms: ARMS
measure: {regimes: [ffn], warmup: 2, blocks: 4, iterations: 5, baseline: BASELINE}
"""


def gpu_scenario(name: str, experts: int, tokens: int) -> str:
    return (GPU_SCENARIO.replace("NAME", name).replace("EXPERTS", str(experts))
            .replace("TOKENS", str(tokens)))  # fmt: skip


def details(rows: list, arm: str, gate: str) -> list[str]:
    return [c["detail"] for c in rows if c["arm"] == arm and c["gate"] == gate]


def test_an_arm_whose_work_escapes_on_a_side_stream_fails_host_clock(tmp_path):
    """side_stream.py: 8 local experts of 2048 x 1024, 1024 tokens, float32 matmuls (a few ms of
    GPU work, tens of launches); the cheat's events see the launches only, the synchronised host
    clock sees the work: host_clock fails. Its twin, joining the stream, passes every gate."""
    arms = [cheat("side_stream.py"), cheat("side_stream.py", "HONEST")]
    run_dir, rows = run_cheat(tmp_path, arms, "side_stream_honest", exit_code=1,
                              text=gpu_scenario("side-stream", experts=8, tokens=1024))  # fmt: skip
    for arm in ("side_stream", "side_stream_honest"):
        for gate in ("host_clock", "physical_floor", "timed_outputs"):
            print(f"{arm} {gate}: {details(rows, arm, gate)}")
    assert_caught(rows, "side_stream", "host_clock", ranks=RANK)
    assert_innocent(rows, "side_stream_honest", DEVICE_GATES, ranks=RANK)


def ffn_median(run_dir: Path, arm: str) -> float:
    samples = load_run(run_dir).samples.to_pylist()
    times = [s["time_us"] for s in samples if s["arm"] == arm and s["stage"] == "ffn"]
    assert times, arm
    return statistics.median(times)


def control_gain(experts: int, tokens: int) -> float:
    """The cheat's device time over its twin's, outside moebench's timer: the two arms'
    calls back to back, nothing resetting L2 between them, each behind a 1 ms spin so that the
    host has queued the whole call before the start event (the eager arm's Python launches take
    hundreds of microseconds on the H200's host). Below 1 when the window pays off."""
    import sys

    sys.path.insert(0, str(CHEATS))
    import l2_window

    from moebench.plan.inputs import build_problem, make_tokens, make_weights

    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    ids = torch.rand(tokens, experts, generator=g).topk(2, dim=1).indices.to(torch.int32)
    w13, w2 = make_weights(experts=range(experts), hidden=2048, intermediate=1024, seed=1,
                           device=dev)  # fmt: skip
    p = build_problem(
        x_TD=make_tokens(tokens=tokens, hidden=2048, seed=1, device=dev), topk_ids_TK=ids.to(dev),
        topk_weights_TK=torch.full((tokens, 2), 0.5, device=dev), w13_EFD=w13, w2_EDF=w2,
        expert_offset=0, experts=experts, alignment=128, capacity_rows=tokens * 2 + 128 * experts,
        precision="bf16", activation="silu",
    )  # fmt: skip
    runs = {}
    for arm in (l2_window.ARM, l2_window.HONEST):
        y = torch.empty(tokens, 2048, dtype=torch.bfloat16, device=dev)
        runs[arm.name] = arm.prepare(p, y)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for name, run in runs.items():
        for i in range(40):  # each arm's calls back to back: what the previous one left in L2
            torch.cuda._sleep(2_000_000)
            start.record()
            run()
            end.record()
            end.synchronize()
            if i >= 5:
                times[name].append(start.elapsed_time(end) * 1e3)
    cheat_us, honest_us = (statistics.median(times[k]) for k in ("l2_window", "l2_window_honest"))
    print(f"control (no reset between calls): l2_window {cheat_us:.1f} us, twin {honest_us:.1f} us")
    return cheat_us / honest_us


L2_EXPERTS, L2_TOKENS = 16, 16  # 201 MB of bf16 weights (about 3x the H200's L2), 16 tokens


@pytest.mark.xfail(
    strict=True,
    reason="on the H200 (2026-12-01) a persisting L2 window paid off nowhere, even with nothing "
    "resetting it: the control fails, so the test cannot show that the reset defeats it. "
    "Measured there: a 30 MB windowed tensor re-read after 200 MB streamed past it, 14.4 us with "
    "the window and 14.8 us without; this arm's w13 matmul over 101, 134 and 202 MB back to back "
    "on its windowed stream, 0.99 to 1.01 of the same matmul without the window. Also, by "
    "CUDA's description cudaCtxResetPersistingL2Cache makes persisting lines normal without "
    "evicting them, so in the ffn regime (no flush) the lines a window kept would still be "
    "there at the next sample's start (see the report of issue 25 item 6)",
)
def test_a_persisting_l2_window_gains_nothing_once_persisting_lines_are_reset(tmp_path):
    """l2_window.py, as the test should be: outside moebench's timer (no reset between calls)
    the window makes the cheat faster than its twin by over 10% at these shapes, so the cheat is
    real; in a moebench run, where the clock resets persisting L2 lines before every sample, the
    ratio of the two arms' ffn medians is at least 0.9 (the cheat no faster), and both pass every
    gate (the window changes times, not results)."""
    control = control_gain(L2_EXPERTS, L2_TOKENS)
    assert control < 0.9, f"the window did not pay off ({control:.2f}): this test proves nothing"
    arms = [cheat("l2_window.py"), cheat("l2_window.py", "HONEST")]
    run_dir, rows = run_cheat(tmp_path, arms, "l2_window_honest", exit_code=0,
                              text=gpu_scenario("l2-window", L2_EXPERTS, L2_TOKENS))  # fmt: skip
    assert_innocent(rows, "l2_window", DEVICE_GATES, ranks=RANK)
    assert_innocent(rows, "l2_window_honest", DEVICE_GATES, ranks=RANK)
    ratio = ffn_median(run_dir, "l2_window") / ffn_median(run_dir, "l2_window_honest")
    print(f"moebench run: l2_window / twin ffn medians {ratio:.3f} (control {control:.3f})")
    assert ratio >= 0.9, f"the window still pays off under moebench's clock: ratio {ratio:.3f}"
