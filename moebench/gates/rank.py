"""Every gate of one rank, in order, before anything of it is timed (docs/DESIGN.md section 5).

For each arm: a fresh workspace poisoned, one eager run, then its family's gates (reference,
poison, sentinels), the memory record, the device gates (graph replay, dispatch); then the
cross-arm gate over every arm that ran. An arm that raises gets an ``error`` row named after
the gate and is not timed; an arm with a failed gate is not timed unless ``allow_mismatch``.
Both case loops (simulated and distributed) call ``gate_rank``; ``post_timing`` is the check
after timing that the timed replays still produce the gated output.
"""

from __future__ import annotations

import torch

from moebench.arm import assemble
from moebench.arm.base import Arm, run_all
from moebench.core import faults
from moebench.core.numerics import bitwise_compare
from moebench.gates import dispatch as dispatch_gate
from moebench.gates import graph as graph_gate
from moebench.gates.families import FamilyRecord
from moebench.gates.integrity import InputGuard
from moebench.results.rows import CaseRows, Check, record_failure


def gate_rank(
    problem,
    ref: torch.Tensor,
    arms: dict[str, Arm],
    *,
    allow_mismatch: bool,
    device: torch.device,
    stop: faults.Stopper,
    out: CaseRows,
    rank_cols: dict,
    family: FamilyRecord,
    guard: InputGuard | None = None,
):
    """Gates 1-6 for every arm of ``arms`` ({name: arm}) on this rank, rows into ``out``. Returns
    the workspaces and stages of the arms that ran ({name: (workspace, stages)}), their captures,
    and the names of the arms to time. The cross-arm gate compares the staged arms (moebench's
    workspace, the same numerics); a whole-FFN arm's numerics are its own, so it is held to the
    reference alone. ``guard``: the rank's inputs, verified after each arm's calls (a change is
    the arm's ``inputs_unchanged`` failure, undone before the next arm runs); a whole-FFN arm's
    ``prepare`` that raises is its ``prepare`` error, the gated run's its ``run`` error."""
    stage_sets = {}
    captures = {}
    bad: set[str] = set()
    names = tuple(arms)
    for name, arm in arms.items():
        stop.check(f"rank {rank_cols['rank']}, gates of {name}")
        try:
            before = 0
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats(device)
                before = torch.cuda.memory_allocated(device)
            step = "prepare" if not arm.staged else "run"
            ws = family.workspace(arm, problem)
            stages = assemble.build(arm, ws)
            _inputs_row(guard, name, "its prepare", out, rank_cols, bad)
            step = "run"
            ws.poison()
            run_all(stages)
            if problem.x_TD.is_cuda:
                torch.cuda.synchronize()
            memory = _memory_row(ws, device, before)
            cap = family.capture(arm, ws)
            rows = family.checks(arm, ws, cap, ref, problem) + [memory]
            if guard is not None:
                rows.append(guard.verified(name, "its gated run"))
        except Exception as exc:  # a kernel that cannot run this case: a row, not a crash
            record_failure(out, rank_cols, [name], step, exc, device)
            bad.add(name)
            if guard is not None:
                _inputs_row(guard, name, f"its failed {step}", out, rank_cols, bad)
            ws = stages = cap = None
        if name in bad:
            faults.release(device)
            continue
        captures[name] = cap
        stage_sets[name] = (ws, stages)
        more, raised = _device_gates(arm, name, problem, stages, family, device, out, rank_cols)
        rows += more
        if raised:
            bad.add(name)
        if guard is not None:
            changed = guard.check(name, "the graph replay and dispatch gates")
            rows += [changed] if changed is not None else []
        for c in rows:
            out.add(rank_cols, name, c)
        if any(c.failed for c in rows):
            bad.add(name)
    staged = {n: c for n, c in captures.items() if arms[n].staged}
    if staged:
        base = next(iter(staged))
        try:
            cross = family.cross_arm(base, staged, problem)
        except Exception as exc:
            record_failure(out, rank_cols, list(staged), "cross_arm", exc, device)
            bad |= set(staged)
            cross = {}
        for name, rows in cross.items():
            for c in rows:
                out.add(rank_cols, name, c)
            if any(c.failed for c in rows):
                bad.add(name)
    timed = [n for n in names if n in stage_sets and (allow_mismatch or n not in bad)]
    return stage_sets, captures, timed


def _inputs_row(guard, name: str, during: str, out: CaseRows, rank_cols: dict, bad: set) -> None:
    """A failing ``inputs_unchanged`` row when the arm changed its inputs ``during`` (undone)."""
    changed = guard.check(name, during) if guard is not None else None
    if changed is not None:
        out.add(rank_cols, name, changed)
        bad.add(name)


def post_timing(y_TD: torch.Tensor, gated_TD: torch.Tensor, what: str = "output") -> Check:
    """After timing: the output the timed replays left must be bitwise the gated one."""
    same = bitwise_compare(y_TD, gated_TD)
    return Check(
        name="post_timing",
        status="pass" if same.equal else "fail",
        detail=f"{what} after timing vs gated run: {same.describe()}",
    )


def _memory_row(ws, device: torch.device, before: int) -> Check:
    """Peak device memory of the arm's gate run (its workspace built and one eager run) above
    what was allocated before it (``before``: the rank's inputs and earlier arms' workspaces), the
    process's peak, and the bytes of its workspace: a ``memory`` row, figures in ``detail``."""
    ws_mib = graph_gate.workspace_bytes(ws) / 2**20
    if device.type != "cuda":
        return Check(name="memory", status="skip",
                     detail=f"workspace {ws_mib:.3f} MiB; peak device memory: CPU run, "
                     "not measured")  # fmt: skip
    peak = torch.cuda.max_memory_allocated(device)
    return Check(name="memory", status="pass",
                 detail=f"workspace {ws_mib:.3f} MiB; peak device memory of the arm's gate "
                 f"run {(peak - before) / 2**20:.3f} MiB above the {before / 2**20:.3f} MiB "
                 f"allocated before it (process peak {peak / 2**20:.3f} MiB)")  # fmt: skip


def _device_gates(
    arm, name, problem, stages, family, device, out, rank_cols
) -> tuple[list[Check], bool]:
    """Gates 5 and 6 (graph replay, dispatch) for one arm that ran: their rows, and whether one
    raised (then it is an ``error`` row of that gate, already in ``out``; ``DeviceLost`` when it
    took the CUDA context)."""
    rows, raised = [], False
    for gate, fn in (
        ("graph_replay", lambda: graph_gate.graph_replay(
            arm, problem, lambda: family.workspace(arm, problem), family.reference)),
        ("dispatch", lambda: [dispatch_gate.dispatch(arm, stages, problem.precision, device,
                                                     getattr(problem, "gemm", "triton"))]),
    ):  # fmt: skip
        try:
            rows += fn()
        except Exception as exc:
            record_failure(out, rank_cols, [name], gate, exc, device)
            raised = True
    if device.type == "cuda":
        faults.release(device)  # the replay gate's two workspaces and graph
    return rows, raised
