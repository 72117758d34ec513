"""What the three prefill arms share: the stage wiring over moebench's prefill workspace.

The arms differ only in two switches: the grouped GEMMs visit every capacity block (``all``) or
only blocks overlapping live rows (``psum``), and the activation sweeps the whole buffer (dense) or
only each expert's [start, end) (masked). Everything else, scatter and combine included, is the
same code so that a measured difference can only come from those switches.

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate, M capacity rows,
G4 packed UE8M0 scale words.
"""

from __future__ import annotations

import torch

from moebench.arm.base import Stage, Work
from moebench.arm.prefill import Problem, Workspace
from moebench.core.vocabulary import PREFILL_STAGES, WHOLE_FFN
from moebench.kernels.act_quant import act_quant_dense, act_quant_masked
from moebench.kernels.combine import combine
from moebench.kernels.grouped_gemm import grouped_gemm
from moebench.kernels.scatter import scatter
from moebench.routing.synthetic import local_counts


def gemm_block_m(alignment: int) -> int:
    """Rows of a grouped-GEMM block: a block must not straddle two experts, so it can be no
    taller than the alignment."""
    return min(64, alignment)


def live_rows(p: Problem) -> int:
    """Slots routed to this rank's experts: the live rows of its capacity buffer, counted from the
    routing when the stages are built (a host read, never inside timing)."""
    return int(local_counts(p.topk_ids_TK, p.expert_offset, p.local_experts).sum())


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
    if live_rows(p) < STREAMING_ROWS_PER_EXPERT * p.local_experts:
        return dict(loads="pointer", num_stages=4, programs_per_sm=2)
    return dict(loads="tma", num_stages=3, programs_per_sm=3)


# The masked activation takes the persistent schedule when at most this fraction of the capacity
# buffer is live, the grid schedule above it (see masked_act_launch). Measured crossover on the
# H200 (V4-Flash rank shape, 28,672 rows): persistent faster at 6,144 live rows (20.96 against
# 21.36 us), grid at 7,168 (23.76 against 23.97).
PERSISTENT_ACT_MAX_LIVE = 0.22
# The persistent schedule's items and grid: 16-row tiles of one column group, 16 programs an SM.
PERSISTENT_ACT = dict(schedule="persistent", block_rows=16, groups=1, programs_per_sm=16)
GRID_ACT = dict(schedule="grid", block_rows=16, groups=2)


def masked_act_launch(p: Problem, capacity_rows: int) -> dict:
    """Launch options of the masked activation, measured on the H200 (docs/PERF.md, issue 19).

    No one schedule is best at both ends. The grid schedule launches the dense kernel's grid and
    lets each row block return at once when it holds no live row: on a full buffer that is the
    dense kernel plus one endpoint lookup a program, but at 3,072 live rows of 28,672 it pays for
    14,336 mostly empty programs (12 us with no live row at all). The persistent schedule strides
    a fixed grid over the live (tile, group) items only and costs what the live rows cost, but on
    a full buffer its stride loop is 14% slower than the grid. The live fraction is counted from
    the case's routing when the stages are built, before anything is timed; it picks a launch,
    never a result (both write the same bits, and either is correct for any routing, so a graph
    captured with one routing replays correctly with another).
    """
    if live_rows(p) <= PERSISTENT_ACT_MAX_LIVE * capacity_rows:
        return dict(PERSISTENT_ACT)
    return dict(GRID_ACT)


def build_stages(ws: Workspace, *, gemm_mode: str, masked_act: bool) -> tuple[Stage, ...]:
    """The five stages as argument-free closures over the workspace (no allocation inside)."""
    p = ws.problem
    A = p.alignment
    block_m = gemm_block_m(A)
    # Launch choices measured on the H200 (docs/PERF.md): the psum GEMMs stride a persistent grid
    # over live tiles, the fp8 ones launched as fp8_gemm_launch says; the dense activation takes
    # 16-row items of two groups, the masked one the schedule masked_act_launch picks.
    gemm_opts = dict(BLOCK_M=block_m, persistent=gemm_mode == "psum")
    if p.precision == "fp8":
        gemm_opts.update(fp8_gemm_launch(p, gemm_mode))
    act_opts = dict(block_rows=16, groups=2)
    masked_opts = masked_act_launch(p, ws.h_M2F.shape[0]) if masked_act else {}

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
                **masked_opts,
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
    return tuple(Stage(name=n, run=f) for n, f in zip(PREFILL_STAGES, fns, strict=True))


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

    out = {s: 0 for s in PREFILL_STAGES}
    out["fc1"] = read * per_expert(p.w13_EFD, p.w13_scale)
    out["fc2"] = read * per_expert(p.w2_EDF, p.w2_scale)
    out[WHOLE_FFN] = out["fc1"] + out["fc2"]
    return out


def work(p: Problem, *, gemm_mode: str, masked_act: bool) -> dict[str, Work]:
    """The work ledger of one step on this rank (moebench.arm.base.Work per stage, ``ffn`` the
    sum), from the case's routing on the host before timing: what the layouts change.

    Rows: the scatter writes the live rows; the GEMMs compute every capacity row (``all``) or the
    row blocks that overlap some expert's live rows (``psum``; with ``gemm: torch`` each expert's
    whole aligned span); the activation sweeps the capacity buffer (dense) or the live rows
    (masked); the combine writes every token. Bytes: each input read once and each output
    written once (FP8 rows with packed UE8M0 scale words, bf16 intermediates, the weights of the
    experts the GEMMs read). FLOPs: the GEMMs' 2 * rows * K * N; the elementwise stages are
    memory-bound and counted as 0.
    """
    T, K = p.topk_ids_TK.shape
    D, F = p.x_TD.shape[1], p.w2_EDF.shape[2]
    E, A, M = p.local_experts, p.alignment, p.capacity_rows
    counts = local_counts(p.topk_ids_TK.cpu(), p.expert_offset, E).to(torch.int64)
    live = int(counts.sum())
    if gemm_mode == "all":
        gemm_rows = M
    elif p.gemm == "torch":
        gemm_rows = int(((counts + A - 1) // A * A).sum())
    else:
        bm = gemm_block_m(A)
        gemm_rows = int(((counts + bm - 1) // bm * bm).sum())
    act_rows = live if masked_act else M
    fp8 = p.precision == "fp8"
    x_row = D * p.x_TD.element_size() + (4 * -(-D // 512) if p.x_sf_TG4 is not None else 0)
    a_row = F * (1 if fp8 else 2) + (4 * -(-F // 512) if fp8 else 0)
    wb = weight_bytes(p, gemm_mode=gemm_mode)
    out = {
        "scatter": Work(rows=live, bytes_read=T * K * 4 + live * x_row,
                        bytes_written=live * x_row + M * 8 + T * K * 4 + E * 4),
        "fc1": Work(rows=gemm_rows, bytes_read=wb["fc1"] + gemm_rows * x_row,
                    bytes_written=gemm_rows * 2 * F * 2, flops=2 * gemm_rows * D * 2 * F),
        "act": Work(rows=act_rows, bytes_read=act_rows * 2 * F * 2,
                    bytes_written=act_rows * a_row),
        "fc2": Work(rows=gemm_rows, bytes_read=wb["fc2"] + gemm_rows * a_row,
                    bytes_written=gemm_rows * D * 2, flops=2 * gemm_rows * F * D),
        "combine": Work(rows=T, bytes_read=live * D * 2 + T * K * 8, bytes_written=T * D * 2),
    }  # fmt: skip
    out[WHOLE_FFN] = Work.total(out.values(), rows=live)
    return out
