"""Graph replay gate (docs/DESIGN.md section 5, gate 5): one CUDA graph must serve every routing.

For a prefill arm the whole FFN (all five stages) is captured once in a CUDA graph with the
case's routing. Then, for each routing variant below, the variant's expert ids are written into
the very device tensor the graph reads (``problem.topk_ids_TK``), the graph's workspace is
poisoned and the graph replayed; a fresh eager run on a second workspace with the same routing is
the oracle. Live outputs ``y``, live FP8 bytes and live packed scales must be bitwise equal, the
live rows must all be written, and the masked arm must leave every padding row holding its
poison. The case's routing is restored afterwards, whatever happened.

Variants (``routing_variants``; each is valid for the capacity by construction):

- ``reversed``: the local experts' loads in reverse order (local expert e takes e' = E-1-e's ids);
- ``empty``: every other local expert (odd local index) receives nothing;
- ``all_empty``: no slot is routed to a local expert;
- ``full``: as many rows as the capacity allows, every local count a multiple of the alignment.

A slot that a variant moves off this rank gets id -1, which no rank owns (as DeepEP marks dropped
slots). The ``full`` variant may route one token twice to the same expert when the buffer holds
more rows than there are tokens; the kernels treat slots independently, so that is still a
routing the graph must serve.

On the CPU there are no CUDA graphs: one ``skip`` row says so. Decode arms get a ``skip`` row too
(the gate covers the capacity-buffer pipeline).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from moebench.arm import assemble
from moebench.arm.base import Arm, run_all
from moebench.arm.prefill import Problem
from moebench.core.families import facts
from moebench.core.numerics import bitwise_compare
from moebench.gates.checks import capture, check_reference, check_sentinels
from moebench.measure.graphs import capture_replay
from moebench.results.rows import Check
from moebench.routing.synthetic import local_counts, rows_needed

VARIANTS = ("reversed", "empty", "all_empty", "full")
NOT_LOCAL = -1  # an expert id no rank owns


def routing_variants(
    topk_ids_TK: torch.Tensor, *, expert_offset: int, experts: int, alignment: int,
    capacity_rows: int,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """The four variants of ``topk_ids_TK`` (int32 [T, K], same shape, dtype and device)."""
    ids = topk_ids_TK.to(torch.int64).cpu()
    T, K = ids.shape
    E, A = experts, alignment
    local = (ids >= expert_offset) & (ids < expert_offset + E)
    e = ids - expert_offset
    out: dict[str, torch.Tensor] = {}
    out["reversed"] = torch.where(local, expert_offset + (E - 1 - e), ids)
    out["empty"] = torch.where(local & (e % 2 == 1), torch.full_like(ids, NOT_LOCAL), ids)
    out["all_empty"] = torch.where(local, torch.full_like(ids, NOT_LOCAL), ids)
    # Full buffer: chunks of A rows dealt to the experts in turn, as many as capacity and slots
    # allow; slots are filled slot-major (k, then t) so a token's experts differ while counts <= T.
    # Only slots that hold a real row are dealt: a slot already marked NOT_LOCAL (a distributed
    # rank's unused receive slot, whose row is poison) stays so.
    usable = torch.nonzero((ids != NOT_LOCAL).t().reshape(-1)).flatten()
    chunks = min(capacity_rows // A, usable.numel() // A)
    per_expert = torch.tensor([chunks // E + (i < chunks % E) for i in range(E)]) * A
    seq = torch.repeat_interleave(torch.arange(E) + expert_offset, per_expert)
    full = torch.full((K * T,), NOT_LOCAL, dtype=torch.int64)
    full[usable[: seq.numel()]] = seq
    out["full"] = full.view(K, T).t().contiguous()
    return {k: v.to(topk_ids_TK.dtype).to(topk_ids_TK.device) for k, v in out.items()}


def _compare(name: str, arm: Arm, ws_graph, ws_eager) -> Check:
    """The graph replay's workspace against the eager run's: bitwise on live data, poison kept."""
    g, e = capture(ws_graph), capture(ws_eager)
    parts = [("ends", g.ends_E, e.ends_E), ("y", g.y_TD, e.y_TD)]
    if torch.equal(g.live_M, e.live_M):
        parts.append(("act", g.a_live, e.a_live))
        if g.a_sf_live is not None:
            parts.append(("scales", g.a_sf_live, e.a_sf_live))
    else:
        return Check(name=name, status="fail", detail="live rows of replay and eager differ")
    bad = []
    for what, a, b in parts:
        r = bitwise_compare(a, b)
        if not r.equal:
            bad.append(f"{what}: {r.describe()}")
    sentinels = check_sentinels(ws_graph, g, masked_act=arm.masked_act)
    bad += [f"{c.name}: {c.detail}" for c in sentinels if c.failed]
    live = int(g.live_M.sum())
    if bad:
        return Check(name=name, status="fail", detail="; ".join(bad))
    pad = " and padding kept its poison" if arm.masked_act else ""
    return Check(
        name=name, status="pass",
        detail=f"{live} live rows: y, FP8 bytes and scales equal the eager run bitwise{pad}",
    )  # fmt: skip


def graph_replay(
    arm: Arm, problem, workspace: Callable[[], object],
    reference: Callable[[object], torch.Tensor] | None = None,
    capture_fn: Callable[[Callable[[], None]], Callable[[], None]] | None = None,
) -> list[Check]:  # fmt: skip
    """Gate 5 for one arm; ``workspace`` builds a fresh workspace for ``problem``. One row per
    variant (``graph_replay_<variant>``), or one ``skip`` row. A staged arm's replay must equal
    a fresh eager run bitwise (its workspace, sentinels included); a whole-FFN arm's replay must
    match ``reference`` of the variant's routing within the precision's tolerance, since its
    numerics are its own.

    ``capture_fn`` turns the FFN into its replay (default: a CUDA graph, GPU only); tests on the
    CPU pass the eager function itself to exercise the variants, the comparison and the restore."""
    if not facts(arm.family).capacity_buffer or not isinstance(problem, Problem):
        return [
            Check(
                name="graph_replay",
                status="skip",
                detail="the graph replay gate covers the capacity-buffer (prefill) arms",
            )
        ]
    if not arm.graph:
        return [Check(name="graph_replay", status="skip",
                      detail="the arm declares that it cannot be captured in a CUDA graph "
                      "(graph=False): its ffn regime runs eagerly")]  # fmt: skip
    if capture_fn is None and not problem.x_TD.is_cuda:
        return [Check(name="graph_replay", status="skip",
                      detail="CPU run: no CUDA graphs (the gate runs on the GPU)")]  # fmt: skip
    p = problem
    variants = routing_variants(
        p.topk_ids_TK, expert_offset=p.expert_offset, experts=p.local_experts,
        alignment=p.alignment, capacity_rows=p.capacity_rows,
    )  # fmt: skip
    original = p.topk_ids_TK.clone()
    ws_g, ws_e = workspace(), workspace()
    st_g = assemble.build(arm, ws_g)
    st_e = assemble.build(arm, ws_e) if arm.staged else None
    rows = []
    try:
        ws_g.poison()
        replay = (capture_fn or capture_replay)(lambda: run_all(st_g))
        for name, ids in variants.items():
            check = f"graph_replay_{name}"
            need = rows_needed(local_counts(ids, p.expert_offset, p.local_experts), p.alignment)
            if need > p.capacity_rows:  # cannot happen by construction; say so if it does
                rows.append(
                    Check(
                        name=check,
                        status="error",
                        detail=f"variant needs {need} rows > capacity {p.capacity_rows}",
                    )
                )
                continue
            p.topk_ids_TK.copy_(ids)
            ws_g.poison()
            replay()
            if arm.staged:
                ws_e.poison()
                run_all(st_e)
                _sync(p)
                rows.append(_compare(check, arm, ws_g, ws_e))
            else:
                _sync(p)
                rows.append(_against_reference(check, ws_g.y_TD, reference(p), p.precision))
    finally:
        p.topk_ids_TK.copy_(original)
        _sync(p)
    return rows


def _against_reference(name: str, y_TD: torch.Tensor, ref: torch.Tensor, precision: str) -> Check:
    """A whole-FFN arm's replay against the reference of the variant's routing."""
    c = check_reference(y_TD, ref, precision)
    return Check(name=name, status=c.status, error=c.error,
                 detail=f"replay with this routing vs reference.moe_ffn: {c.detail}")  # fmt: skip


def _sync(p) -> None:
    if p.x_TD.is_cuda:
        torch.cuda.synchronize()


def workspace_bytes(ws) -> int:
    """Bytes of every tensor the workspace holds."""
    return sum(t.numel() * t.element_size() for t in ws.buffers().values())
