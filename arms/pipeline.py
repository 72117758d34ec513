"""What the three prefill arms share: one rank's inputs, its workspace, and the stage wiring.

The arms differ only in two switches: the grouped GEMMs visit every capacity block (``all``) or
only blocks overlapping live rows (``psum``), and the activation sweeps the whole buffer (dense) or
only each expert's [start, end) (masked). Everything else, scatter and combine included, is the
same code so that a measured difference can only come from those switches.

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate, M capacity rows,
G4 packed UE8M0 scale words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from moebench import reference
from moebench.kernels.act_quant import act_quant_dense, act_quant_masked
from moebench.kernels.combine import combine
from moebench.kernels.grouped_gemm import grouped_gemm
from moebench.kernels.scatter import scatter, scatter_scratch
from moebench.routing import local_counts

STAGES = ("scatter", "fc1", "act", "fc2", "combine")
KERNEL_DIR = Path(reference.__file__).parent / "kernels"
FP8 = torch.float8_e4m3fn


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One rank's inputs, prepared before anything is timed.

    x_TD: bf16 [T, D] tokens, or FP8 e4m3 with x_sf_TG4 (packed UE8M0, per 128 columns) for fp8.
    topk_ids_TK: int32 [T, K] global expert ids; topk_weights_TK: float32 [T, K].
    w13_EFD: [E, 2F, D] gate rows then up rows; w2_EDF: [E, D, F]; bf16, or FP8 e4m3 with fp32
    128x128 block scales w13_scale [E, 2F/128, D/128] and w2_scale [E, D/128, F/128].
    Local experts are the global ids [expert_offset, expert_offset + E).
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


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    run: Callable[[], None]


def gemm_block_m(alignment: int) -> int:
    """Rows of a grouped-GEMM block: a block must not straddle two experts, so it can be no
    taller than the alignment."""
    return min(64, alignment)


# Below this many live rows per local expert on average, the psum GEMMs launch with pointer
# loads (see fp8_gemm_launch).
STREAMING_ROWS_PER_EXPERT = 64


def fp8_gemm_launch(p: Problem, gemm_mode: str) -> dict:
    """Launch options of the fp8 grouped GEMMs, measured on the H200 (docs/PERF.md, 2026-12-01).

    Both modes fetch tiles by TMA with 3 pipeline stages (the TMA loop needs 166 registers and 72
    KB of shared memory, so 3 programs fit an SM where the pointer loop's 236 registers allowed
    2): faster in the stock mode at every shape timed, and in the psum mode once the experts hold
    a row block or more each (V4-Flash EP8, ~96 rows an expert: FC1 183.7 against 188.0 us; 768
    rows an expert: 893 against 962). When the average local expert holds less than
    STREAMING_ROWS_PER_EXPERT live rows, every weight tile is read by a single row block and the
    psum GEMM is a pure weight stream; there the pointer loop's 4 stages stream faster (EP1, 256
    experts of ~12 rows: FC1 1,134 against 1,307 us, FC2 571 against 696). The average is
    counted from the case's routing when the stages are built, before anything is timed; it picks
    a launch, never a result (every launch writes the same bits).
    """
    if gemm_mode == "all":
        return dict(loads="tma", num_stages=3)
    E = p.local_experts
    local = int(local_counts(p.topk_ids_TK, p.expert_offset, E).sum())
    if local < STREAMING_ROWS_PER_EXPERT * E:
        return dict(loads="pointer", num_stages=4, programs_per_sm=2)
    return dict(loads="tma", num_stages=3, programs_per_sm=3)


def build_stages(ws: Workspace, *, gemm_mode: str, masked_act: bool) -> tuple[Stage, ...]:
    """The five stages as argument-free closures over the workspace (no allocation inside)."""
    p = ws.problem
    A = p.alignment
    block_m = gemm_block_m(A)
    # Launch choices measured on the H200 (docs/PERF.md): the psum GEMMs stride a persistent grid
    # over live tiles, the fp8 ones launched as fp8_gemm_launch says; the activation takes 16-row
    # items of two groups, and the masked one runs the dense grid with an early exit per row
    # block.
    gemm_opts = dict(BLOCK_M=block_m, persistent=gemm_mode == "psum")
    if p.precision == "fp8":
        gemm_opts.update(fp8_gemm_launch(p, gemm_mode))
    act_opts = dict(block_rows=16, groups=2)

    def run_scatter() -> None:
        scatter(
            p.x_TD,
            p.x_sf_TG4,
            p.topk_ids_TK,
            expert_offset=p.expert_offset,
            alignment=A,
            xs_MD=ws.xs_MD,
            xs_sf_MG4=ws.xs_sf_MG4,
            counts_E=ws.counts_E,
            ends_E=ws.ends_E,
            row_expert_M=ws.row_expert_M,
            row_src_M=ws.row_src_M,
            slot_row_TK=ws.slot_row_TK,
            scratch_EC=ws.scatter_scratch,
        )

    def run_fc1() -> None:
        grouped_gemm(
            ws.xs_MD,
            ws.xs_sf_MG4,
            p.w13_EFD,
            p.w13_scale,
            ws.ends_E,
            ws.h_M2F,
            alignment=A,
            mode=gemm_mode,
            **gemm_opts,
        )

    def run_act() -> None:
        if masked_act:
            act_quant_masked(
                ws.h_M2F,
                ws.a_MF,
                ws.a_sf_MG4,
                ws.ends_E,
                alignment=A,
                activation=p.activation,
                schedule="grid",
                **act_opts,
            )
        else:
            act_quant_dense(ws.h_M2F, ws.a_MF, ws.a_sf_MG4, activation=p.activation, **act_opts)

    def run_fc2() -> None:
        grouped_gemm(
            ws.a_MF,
            ws.a_sf_MG4,
            p.w2_EDF,
            p.w2_scale,
            ws.ends_E,
            ws.o_MD,
            alignment=A,
            mode=gemm_mode,
            **gemm_opts,
        )

    def run_combine() -> None:
        combine(ws.o_MD, ws.slot_row_TK, p.topk_weights_TK, ws.y_TD)

    if p.gemm == "torch":
        run_fc1, run_fc2 = _torch_gemms(ws, gemm_mode=gemm_mode)
    fns = (run_scatter, run_fc1, run_act, run_fc2, run_combine)
    return tuple(Stage(name=n, run=f) for n, f in zip(STAGES, fns, strict=True))


def _torch_gemms(ws: Workspace, *, gemm_mode: str):
    """FC1 and FC2 through torch._grouped_mm, PyTorch's grouped GEMM (the peer
    our Triton GEMM is measured against). Its groups are contiguous row ranges given by
    cumulative offsets and cannot leave gaps, so padding is handled by the offsets: each expert's
    group is its whole aligned span [start, align_up(end)) (padding rows inside a span are
    computed, the results ignored). ``psum`` ends the last group at the last aligned end, so the
    capacity tail is skipped; ``all`` (stock) gives the tail to the last expert, so every row of
    the buffer is computed. torch allocates the outputs: the stage rebinds ws.h_M2F / ws.o_MD to
    them (under a CUDA graph this happens once, at capture, and replays reuse that memory).
    """
    p = ws.problem
    A, M = p.alignment, p.capacity_rows
    w13_EDN = p.w13_EFD.transpose(1, 2)  # [E, D, 2F] views: torch wants B as [E, K, N]
    w2_EFN = p.w2_EDF.transpose(1, 2)

    def offsets() -> None:
        torch.add(ws.ends_E, A - 1, out=ws.offs_E)
        ws.offs_E.div_(A, rounding_mode="floor").mul_(A)
        if gemm_mode == "all":
            ws.offs_E[-1:].fill_(M)

    def run_fc1() -> None:
        offsets()
        ws.h_M2F = torch._grouped_mm(ws.xs_MD, w13_EDN, offs=ws.offs_E)

    def run_fc2() -> None:
        ws.o_MD = torch._grouped_mm(ws.a_MF, w2_EFN, offs=ws.offs_E)

    return run_fc1, run_fc2


def run_all(stages: tuple[Stage, ...]) -> None:
    for s in stages:
        s.run()


def sources(*, masked_act: bool) -> tuple[Path, ...]:
    """Files the arm is built from (hashed into its provenance)."""
    kernels = ["scatter.py", "grouped_gemm.py", "act_quant.py", "fp8.py", "combine.py"]
    return (Path(__file__),) + tuple(KERNEL_DIR / k for k in kernels)


def weight_bytes(p: Problem, *, gemm_mode: str) -> dict[str, int]:
    """Expert weight bytes (values and block scales) that FC1 and FC2 read on this rank in one step,
    per stage (the work model's byte count; computed on the host before timing).

    ``psum``: the experts with at least one live row. ``all`` (stock): every expert that owns a
    block of the capacity buffer, i.e. those with live rows and expert E-1, which owns the tail.
    """
    E, A = p.local_experts, p.alignment
    counts = local_counts(p.topk_ids_TK.cpu(), p.expert_offset, E)
    if gemm_mode == "psum":
        read = int((counts > 0).sum())
    else:
        aligned = (counts + A - 1) // A * A
        starts = torch.cumsum(aligned, 0) - aligned
        block_rows = torch.arange(0, p.capacity_rows, gemm_block_m(A))
        owners = torch.searchsorted(starts, block_rows, right=True) - 1
        read = int(torch.unique(owners).numel())

    def per_expert(w: torch.Tensor, scale: torch.Tensor | None) -> int:
        return w[0].numel() * w.element_size() + (
            scale[0].numel() * scale.element_size() if scale is not None else 0
        )

    out = {s: 0 for s in STAGES}
    out["fc1"] = read * per_expert(p.w13_EFD, p.w13_scale)
    out["fc2"] = read * per_expert(p.w2_EDF, p.w2_scale)
    out["ffn"] = out["fc1"] + out["fc2"]
    return out
