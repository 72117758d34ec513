"""The prefill contract: one rank's inputs (``Problem``) and the workspace moebench allocates for
a prefill arm (``Workspace``): the capacity buffer, the endpoints, packed UE8M0 scales
(docs/DESIGN.md sections 2 and 4). Every prefill arm writes into the same workspace, so every
gate applies to it, bitwise cross-arm equality included.

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate, M capacity rows,
G4 packed UE8M0 scale words.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moebench.core import reference
from moebench.kernels.scatter import scatter_scratch

FP8 = torch.float8_e4m3fn


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One rank's inputs, prepared before anything is timed.

    x_TD: bf16 [T, D] tokens, or FP8 e4m3 with x_sf_TG4 (packed UE8M0, per 128 columns) for fp8.
    topk_ids_TK: int32 [T, K] global expert ids; topk_weights_TK: float32 [T, K].
    w13_EFD: [E, 2F, D] gate rows then up rows; w2_EDF: [E, D, F]; bf16, or FP8 e4m3 with fp32
    128x128 block scales w13_scale [E, 2F/128, D/128] and w2_scale [E, D/128, F/128].
    Local experts are the global ids [expert_offset, expert_offset + E) of ``experts``, the
    model's global expert count (every rank's; ids in topk_ids_TK lie in [0, experts)).
    """

    x_TD: torch.Tensor
    x_sf_TG4: torch.Tensor | None
    topk_ids_TK: torch.Tensor
    topk_weights_TK: torch.Tensor
    w13_EFD: torch.Tensor
    w13_scale: torch.Tensor | None
    w2_EDF: torch.Tensor
    w2_scale: torch.Tensor | None
    expert_offset: int
    experts: int  # the model's global experts (E is this rank's share)
    alignment: int
    capacity_rows: int
    precision: str
    activation: str
    gemm: str = "triton"  # "torch": both GEMMs through torch._grouped_mm (bf16 only)

    @property
    def local_experts(self) -> int:
        return self.w13_EFD.shape[0]


class Workspace:
    """Every buffer the pipeline writes, allocated once so that the FFN is graph-capturable."""

    def __init__(self, p: Problem):
        dev = p.x_TD.device
        T, K = p.topk_ids_TK.shape
        D = p.x_TD.shape[1]
        F = p.w2_EDF.shape[2]
        E, M = p.local_experts, p.capacity_rows
        act_dtype = FP8 if p.precision == "fp8" else torch.bfloat16
        self.problem = p
        self.xs_MD = torch.empty(M, D, dtype=p.x_TD.dtype, device=dev)
        self.xs_sf_MG4 = (
            reference.empty_packed_scales(M, D // reference.GROUP, dev)
            if p.x_sf_TG4 is not None
            else None
        )
        self.counts_E = torch.empty(E, dtype=torch.int32, device=dev)
        self.scatter_scratch = scatter_scratch(T, K, E, dev)
        self.ends_E = torch.empty(E, dtype=torch.int32, device=dev)
        self.row_expert_M = torch.empty(M, dtype=torch.int32, device=dev)
        self.row_src_M = torch.empty(M, dtype=torch.int32, device=dev)
        self.slot_row_TK = torch.empty(T, K, dtype=torch.int32, device=dev)
        self.h_M2F = torch.empty(M, 2 * F, dtype=torch.bfloat16, device=dev)
        self.a_MF = torch.empty(M, F, dtype=act_dtype, device=dev)
        self.a_sf_MG4 = (
            reference.empty_packed_scales(M, F // reference.GROUP, dev)
            if p.precision == "fp8"
            else None
        )
        self.o_MD = torch.empty(M, D, dtype=torch.bfloat16, device=dev)
        # gemm: torch: the group offsets torch._grouped_mm takes (each expert's aligned end).
        self.offs_E = torch.empty(E, dtype=torch.int32, device=dev)
        self.y_TD = torch.empty(T, D, dtype=torch.bfloat16, device=dev)

    def buffers(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in vars(self).items() if isinstance(v, torch.Tensor)}

    def poison(self) -> None:
        """NaN in float buffers, 0x7F bytes in FP8 data and scales, -7 in index buffers.

        Only the buffers a stage writes are poisoned, so a gate can see what was written.
        """
        for t in self.buffers().values():
            if t.dtype == FP8:
                t.view(torch.uint8).fill_(0x7F)
            elif t.is_floating_point():
                t.fill_(float("nan"))
            elif t is self.a_sf_MG4 or t is self.xs_sf_MG4:
                t.fill_(0x7F7F7F7F)
            else:
                t.fill_(-7)
