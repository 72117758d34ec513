"""What the two decode arms share: one rank's inputs, the workspace, the stage wiring, the ledger.

Decode (DESIGN sections 3 and 4): a few tokens, each routed to its top-k experts, gpt-oss
semantics (gate/up rows interleaved, expert biases, `swiglu_oai` or `silu`). The arms differ in
how much weight they read: `dense_decode` multiplies every token by every local expert (batched
GEMMs that stream all E local experts once a step, whatever the routing) and keeps only the
token's local top-k slots in the weighted sum; `sparse_decode` runs a GEMV per (token, slot) whose
programs read the slot's expert id themselves and leave at once when it is not local, so it
streams only the experts actually routed here, once per slot. Both use the same weights, the same
combine and three stages:

- ``fc1``: gate/up projection + bias, with the GLU fused in the epilogue (the interleaved layout
  puts each (gate, up) pair in one program's columns), bf16 activation out;
- ``fc2``: down projection + bias, bf16 out;
- ``combine``: weighted sum over the token's local slots (skipped, never multiplied by zero).

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from moebench import reference
from moebench.kernels.batched_gemm import batched_gemm
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.sparse_gemv import sparse_gemv
from moebench.routing import local_counts

STAGES = ("fc1", "fc2", "combine")
PRECISIONS = ("w8a16", "w4a16")
KERNEL_DIR = Path(reference.__file__).parent / "kernels"
LAYOUTS = ("TKD", "ETD")  # sparse: one row a (token, slot); dense: one row an (expert, token)


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One rank's decode inputs, prepared (quantised) before anything is timed.

    x_TD: bf16 [T, D]. topk_ids_TK: int32 [T, K] global ids; topk_weights_TK: float32 [T, K].
    w13: [E, 2F, D] gate/up rows interleaved (row 2j gate, 2j+1 up of column j); w2: [E, D, F].
    w8a16: FP8 e4m3 weights, float32 per-expert scales w13_scale [E], w2_scale [E].
    w4a16: MXFP4, uint8 [E, 2F, D/2] and [E, D, F/2], e8m0 scales [E, 2F, D/32], [E, D, F/32].
    b13_E2F: bf16 [E, 2F]; b2_ED: bf16 [E, D]. Local experts: [expert_offset, expert_offset + E).
    """

    x_TD: torch.Tensor
    topk_ids_TK: torch.Tensor
    topk_weights_TK: torch.Tensor
    w13: torch.Tensor
    w13_scale: torch.Tensor
    b13_E2F: torch.Tensor
    w2: torch.Tensor
    w2_scale: torch.Tensor
    b2_ED: torch.Tensor
    expert_offset: int
    precision: str
    activation: str

    @property
    def local_experts(self) -> int:
        return self.w13.shape[0]

    @property
    def intermediate(self) -> int:
        return self.b13_E2F.shape[1] // 2


class Workspace:
    """Every buffer a decode step writes, allocated once so that the step is graph-capturable.

    ``TKD`` (sparse): a_TKF [T, K, F] and o_TKD [T, K, D], one row a slot. ``ETD`` (dense):
    a_ETF [E, T, F] and o_ETD [E, T, D], one row an (expert, token). y_TD: bf16 [T, D].
    """

    def __init__(self, p: Problem, *, layout: str):
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        dev = p.x_TD.device
        T, K = p.topk_ids_TK.shape
        D, F, E = p.x_TD.shape[1], p.intermediate, p.local_experts
        lead = (T, K) if layout == "TKD" else (E, T)
        self.problem = p
        self.layout = layout
        self.a = torch.empty(*lead, F, dtype=torch.bfloat16, device=dev)
        self.o = torch.empty(*lead, D, dtype=torch.bfloat16, device=dev)
        self.y_TD = torch.empty(T, D, dtype=torch.bfloat16, device=dev)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in vars(self).items() if isinstance(v, torch.Tensor)}

    def poison(self) -> None:
        """NaN in every buffer a stage writes, so a gate can see what was (not) written."""
        for t in self.buffers().values():
            t.fill_(float("nan"))

    def written_rows(self) -> torch.Tensor:
        """Bool over the leading dims of ``a``/``o``: the rows the step must write (host check).

        TKD: the slots routed to a local expert; ETD: every (expert, token)."""
        p = self.problem
        if self.layout == "ETD":
            return torch.ones(self.a.shape[:2], dtype=torch.bool, device=self.a.device)
        e = p.topk_ids_TK.to(torch.int64) - p.expert_offset
        return (e >= 0) & (e < p.local_experts)


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    run: Callable[[], None]


def build_stages(ws: Workspace) -> tuple[Stage, ...]:
    """The three stages as argument-free closures over the workspace (no allocation inside)."""
    p = ws.problem
    E, off = p.local_experts, p.expert_offset

    if ws.layout == "TKD":

        def run_fc1() -> None:
            sparse_gemv(p.x_TD, p.topk_ids_TK, p.w13, p.w13_scale, p.b13_E2F, ws.a,
                        expert_offset=off, glu=p.activation)  # fmt: skip

        def run_fc2() -> None:
            sparse_gemv(ws.a, p.topk_ids_TK, p.w2, p.w2_scale, p.b2_ED, ws.o, expert_offset=off)

    else:

        def run_fc1() -> None:
            batched_gemm(p.x_TD, p.w13, p.w13_scale, p.b13_E2F, ws.a, glu=p.activation)

        def run_fc2() -> None:
            batched_gemm(ws.a, p.w2, p.w2_scale, p.b2_ED, ws.o)

    def run_combine() -> None:
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=E, layout=ws.layout)  # fmt: skip

    fns = (run_fc1, run_fc2, run_combine)
    return tuple(Stage(name=n, run=f) for n, f in zip(STAGES, fns, strict=True))


def expert_bytes(p: Problem) -> dict[str, int]:
    """Bytes of one expert's weights per stage: values, scales and bias."""

    def one(w: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> int:
        per = lambda t: t[0].numel() * t.element_size() if t.dim() > 1 else t.element_size()
        return per(w) + per(scale) + per(bias)

    return {"fc1": one(p.w13, p.w13_scale, p.b13_E2F), "fc2": one(p.w2, p.w2_scale, p.b2_ED)}


def weight_bytes(p: Problem, *, layout: str) -> dict[str, int]:
    """Expert weight bytes one step reads on this rank, per stage (the work model's byte count).

    Dense (``ETD``): every local expert, once. Sparse (``TKD``): only the local experts that some
    slot routes to, each counted once (the DRAM minimum; a GEMV program per slot streams its
    expert again, which the L2 may or may not serve). Computed on the host before timing.
    """
    per = expert_bytes(p)
    if layout == "ETD":
        hit = p.local_experts
    else:
        counts = local_counts(p.topk_ids_TK.cpu(), p.expert_offset, p.local_experts)
        hit = int((counts > 0).sum())
    out = {s: 0 for s in STAGES}
    out["fc1"], out["fc2"] = hit * per["fc1"], hit * per["fc2"]
    out["ffn"] = out["fc1"] + out["fc2"]
    return out


def sources() -> tuple[Path, ...]:
    """Files the decode arms are built from (hashed into their provenance)."""
    kernels = ["sparse_gemv.py", "batched_gemm.py", "combine_topk.py", "mxfp4.py", "fp8.py",
               "act_quant.py"]  # fmt: skip
    return (Path(__file__),) + tuple(KERNEL_DIR / k for k in kernels)
