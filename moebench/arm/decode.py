"""The decode contract: one rank's decode inputs (``Problem``) and the workspace of a decode step
(``Workspace``, in one of two row layouts), docs/DESIGN.md sections 3 and 4.

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LAYOUTS = ("TKD", "ETD")  # sparse: one row a (token, slot); dense: one row an (expert, token)


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One rank's decode inputs, prepared (quantised) before anything is timed.

    x_TD: bf16 [T, D]. topk_ids_TK: int32 [T, K] global ids; topk_weights_TK: float32 [T, K].
    w13: [E, 2F, D] gate/up rows interleaved (row 2j gate, 2j+1 up of column j); w2: [E, D, F].
    w8a16: FP8 e4m3 weights, float32 per-expert scales w13_scale [E], w2_scale [E].
    w4a16: MXFP4, uint8 [E, 2F, D/2] and [E, D, F/2], e8m0 scales [E, 2F, D/32], [E, D, F/32].
    b13_E2F: bf16 [E, 2F]; b2_ED: bf16 [E, D]. Local experts: [expert_offset, expert_offset + E)
    of ``experts``, the model's global expert count (ids in topk_ids_TK lie in [0, experts)).
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
    experts: int  # the model's global experts (E is this rank's share)
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
