"""grouped_decode: slots grouped by expert on the device, each touched expert's weights read once.

`sparse_decode` streams an expert once per slot routed to it, so from about 16 tokens a rank it
reads more than `dense_decode`, which streams every local expert once whatever the routing. This
arm reads each *touched* local expert once for all of its slots: the same GEMV launcher does fc1
(gate/up + bias, GLU fused) and fc2 (down + bias), and its programs, one per (block of output
columns, j-th touched expert), find their expert and its slots from ``topk_ids`` themselves
(`moebench.kernels.grouped_slots`). An untouched expert has no program; a program past the last
touched expert returns having read only the routing. Nothing is read back to the host and no
buffer is written but the workspace's, so one CUDA graph replays with any routing. Its weight
bytes are the touched experts' by construction, the count the work model already gives the
sparse layout. The combine is the other decode arms' (non-local slots skipped, never multiplied by
zero), on the sparse arm's one-row-a-slot workspace (``TKD``): rows of non-local slots keep their
poison.

Launch: a GEMV on CUDA cores when the slots are few per expert, a tensor-core tile when they are
many (`moebench.kernels.grouped_launch.default_launch`, chosen from the shapes when the stages are
built, never from the routing). The one-pass tile (16 tokens and more at gpt-oss-20b EP2) is a
Gluon kernel (`moebench.kernels.mx_gluon` for MXFP4, `fp8_gluon` for FP8) on a GPU where its
layout fits, its passes read from a table one small kernel fills before fc1
(`pass_table`), and the Triton tile elsewhere (`gluon_or_triton`: the CPU, the interpreter). All
write the sparse and dense arms' arithmetic (products exact in fp32, the FP8 scale after the sum,
the same bias, GLU and bf16 rounding), so the three agree but for the order of fp32 sums: bitwise
where the sums are exact, within the precision's tolerance otherwise (the decode cross-arm gate).
"""

import dataclasses
import functools

import torch

from arms.decode import pipeline
from moebench.arm.base import Arm, LayoutShapes, Stage
from moebench.arm.decode import Problem, Workspace
from moebench.core.vocabulary import DECODE_STAGES
from moebench.kernels.combine_topk import combine_topk
from moebench.kernels.expert_ready import ready_counters
from moebench.kernels.fp8_gluon import grouped_gluon_fp8
from moebench.kernels.fp8_gluon_layout import Fp8GluonWeights, pack_fp8_gluon
from moebench.kernels.fp8_placed import place_e4m3
from moebench.kernels.gluon_parts import x_rows_aligned
from moebench.kernels.grouped_gemv import (
    grid_programs,
    grid_tiles,
    grouped_gemv,
    max_scale_byte,
    word_aligned_scales,
)
from moebench.kernels.grouped_launch import Launch, default_launch, paired_launches, triton_tile
from moebench.kernels.launch import weight_format
from moebench.kernels.mx_dot_order import dot_order_mxfp4
from moebench.kernels.mx_gluon import grouped_gluon_mxfp4
from moebench.kernels.mx_gluon_layout import STEP, GluonWeights, gluon_scales, gluon_words
from moebench.kernels.mx_gluon_layout import fits as gluon_layout_fits
from moebench.kernels.mx_rotated import FOLD_SCALES_UP_TO, biased_scales, rotate_mxfp4
from moebench.kernels.pass_table import new_table, pass_table
from moebench.kernels.split_k import split_scratch
from moebench.kernels.stream_k import stream_programs, stream_scratch
from moebench.kernels.tile_packed import pack_tiles

# Programmatic dependent launch of the grouped kernels and the combine, per precision: on in both.
# MXFP4 as the sparse arm (arms/decode/pipeline.py PDL), whose GEMV loops the few-token launch
# shares (the MXFP4 sparse step was 34.8 us without it and 33.1 with it). FP8, off in the sparse
# arm, won with it at every count timed on the H200 once the tile widened e4m3 by bit placement
# (gpt-oss-20b EP2, tools/bench_grouped_decode.py, docs/perf/2026-12-02-decode-kernel/): 1 token
# 40.4 against 40.9 us, 8: 96.5 against 98.6 and 97.4 against 99.7, 16: 133.3 against 135.5, 32:
# 143.6 against 146.5, 64: 145.8 against 148.7 and 147.8 against 150.3. Every choice writes the
# same bits.
PDL = {"w8a16": True, "w4a16": True}

# Triton kernel functions the stages launch, per precision (the GEMV or the tensor-core path,
# chosen per case from the shapes), and those they must not (moebench/gates/dispatch.py).
_LAUNCHES = {
    "w8a16": ("_grouped_gemv_fp8|_grouped_dot_fp8|_grouped_gluon_fp8", "_combine_topk"),
    "w4a16": (
        "_grouped_gemv_mxfp4|_grouped_dot_mxfp4|_grouped_dot_mxfp4_stream|_grouped_gluon_mxfp4",
        "_combine_topk",
    ),
}
_FORBIDDEN = ("_batched_gemm", "_sparse_gemv_fp8", "_sparse_gemv_mxfp4", "_sparse_gemv_mxfp4_dot")


def launches(p: Problem) -> tuple[Launch, Launch]:
    """The fc1 and fc2 launches of a problem, from its shapes (never its routing)."""
    T, K = p.topk_ids_TK.shape
    pdl = PDL.get(p.precision, False)
    fmt = weight_format(p.w13)
    E = p.local_experts
    values = 2 if fmt == "mxfp4" else 1  # R in values: MXFP4 holds two a byte
    one = lambda w: default_launch(fmt, tokens=T, top_k=K, experts=E, columns=w.shape[1],
                                   reduction=w.shape[2] * values, pdl=pdl)  # fmt: skip
    return paired_launches(one(p.w13), one(p.w2), fmt, slots_per_expert=T * K / E)


# What the MXFP4 tile reads of a scale tensor (`tiles_scales`), one entry per tensor while it
# lives (`pipeline.made_once`): a padded copy (None when the rows are aligned already: the tensor
# itself, not kept alive here). The model regime builds stages for every token count of every
# layer over the same weights (gpt-oss-120b: about 107 MB of padded scales a layer), and they
# share one entry. The rotated weights are `pipeline.rotated_weights`', shared with the sparse arm.
_TILE_SCALES: dict[int, tuple[int, torch.Tensor | None]] = {}

# MXFP4 scales packed box by box for the tile (`Launch.mx_packed_scales`) or biased
# (`Launch.mx_biased_scales`, padded rows where not packed), one copy a scale tensor and (block_n,
# block_k, packed, biased) while it lives; and the scales' largest byte (read back once, at build),
# whichever copy the launch reads.
_PACKED_SCALES: dict[tuple[int, int, bool, bool], dict[int, tuple[int, torch.Tensor]]] = {}
_LARGEST_SCALE: dict[int, tuple[int, int | None]] = {}

# FP8 weights in `fp8_placed`'s layout for the tile (`Launch.fp8_placed`), one copy a weight tensor
# while it lives (`pipeline.made_once`), shared by every build over the same, unchanged weights.
# The copy doubles the FP8 expert weights held while both are alive (the one-slot GEMV and the
# other decode arms read the natural layout).
_PLACED_WEIGHTS: dict[int, tuple[int, torch.Tensor]] = {}

# FP8 weights packed box by box for the tile through TMA (`Launch.fp8_packed`; placed too where the
# launch says so), one copy a weight tensor and (block_n, block_k, placed) while it lives. The
# default launch sets it for FP8's one-pass tile where R is whole steps (5-6% faster,
# `grouped_launch.FP8_PACKED`); tools/bench_grouped_decode.py times other launches (``packed``).
_PACKED_WEIGHTS: dict[tuple[int, int, bool], dict[int, tuple[int, torch.Tensor]]] = {}

# MXFP4 bytes packed box by box for the tile (`Launch.mx_packed`; rotated too where the launch
# says so), one copy a weight tensor and (block_n, block_k, rotated) while it lives;
# tools/bench_grouped_decode.py times it (``packed``).
_MX_PACKED_WEIGHTS: dict[tuple[int, int, bool], dict[int, tuple[int, torch.Tensor]]] = {}

# MXFP4 bytes with each step's values in the tile's K order (`Launch.mx_dot_order`, rotated;
# packed box by box where the launch says so), one copy a weight tensor and (block_n, block_k,
# packed) while it lives.
_MX_DOT_ORDER_WEIGHTS: dict[tuple[int, int, bool], dict[int, tuple[int, torch.Tensor]]] = {}


# MXFP4 weights and scales in `mx_gluon_layout`'s layout for the Gluon tile (`Launch.gluon`),
# one copy a tensor while it lives (`pipeline.made_once`): about the problem's own bytes again.
_GLUON_WORDS: dict[int, tuple[int, tuple[torch.Tensor, torch.Tensor]]] = {}
_GLUON_SCALES: dict[int, tuple[int, tuple[torch.Tensor, torch.Tensor]]] = {}
# FP8 weights in `fp8_gluon_layout`'s layout for the Gluon tile, likewise (placed and moved: the
# problem's bytes again).
_FP8_GLUON_WEIGHTS: dict[int, tuple[int, Fp8GluonWeights]] = {}


def _padded_entry(w_scale: torch.Tensor) -> torch.Tensor | None:
    padded = word_aligned_scales(w_scale)
    return None if padded is w_scale else padded


def tiles_scales(w, w_scale, launch: Launch) -> tuple[torch.Tensor, int | None]:
    """The scales a stage's launch reads and, for the MXFP4 tile, their largest byte (for
    `grouped_gemv`'s ``max_scale_byte``: up to 128 its decode multiplies once a pair). MXFP4
    scales for the tile come with rows on 16-byte boundaries (`grouped_gemv.word_aligned_scales`:
    a padded copy made when the stages are built, if the problem's rows are not), so that the
    tile loads them as words inside its pipeline; both are made once and shared by every build
    over the same, unchanged scales (the largest byte is one read back from the device, at build).
    With ``launch.mx_packed_scales``, instead, the copy `tile_packed.pack_tiles` makes once for
    the launch's blocks (block_k / 32 bytes a box, the last box ragged), of the bytes
    `mx_rotated.biased_scales` makes where ``launch.mx_biased_scales`` and the largest byte allow
    it (`scales_launch`). The problem's own tensor and None otherwise."""
    if weight_format(w) != "mxfp4" or launch.path != "dot":
        return w_scale, None
    largest = pipeline.made_once(_LARGEST_SCALE, w_scale, max_scale_byte)
    if launch.gluon:  # (scales, tail scales) in `mx_gluon_layout`'s layout
        return pipeline.made_once(_GLUON_SCALES, w_scale, gluon_scales), largest
    biased = scales_launch(launch, largest).mx_biased_scales
    if launch.mx_packed_scales or biased:
        bn, bk, packed = launch.block_n, launch.block_k, launch.mx_packed_scales
        cache = _PACKED_SCALES.setdefault((bn, bk, packed, biased), {})

        def copy(t: torch.Tensor) -> torch.Tensor:
            t = biased_scales(t) if biased else t
            if packed:
                return pack_tiles(t.contiguous(), bn, bk // 32, ragged_last=True)
            return word_aligned_scales(t)

        return pipeline.made_once(cache, w_scale, copy), largest
    padded = pipeline.made_once(_TILE_SCALES, w_scale, _padded_entry)
    return (w_scale if padded is None else padded), largest


def scales_launch(launch: Launch, largest: int | None) -> Launch:
    """``launch`` as it reads scales whose largest byte is ``largest`` (`tiles_scales`): without
    ``mx_biased_scales`` where a byte is above `mx_rotated.FOLD_SCALES_UP_TO` (or none is
    known), the folded decode then not being taken."""
    if launch.mx_biased_scales and (largest is None or largest > FOLD_SCALES_UP_TO):
        return dataclasses.replace(launch, mx_biased_scales=False)
    return launch


def tiles_weights(w, launch: Launch) -> torch.Tensor:
    """The weights a stage's launch reads: for MXFP4 in the rotated layout (``launch.mx_rotated``,
    either path) the copy `pipeline.rotated_weights` makes once (shared with every build over the
    same, unchanged weights and with the sparse arm), for the FP8 tile in the placed layout
    (``launch.fp8_placed``) the copy `fp8_placed.place_e4m3` makes once, packed box by box
    (``launch.fp8_packed``, placed or not as the launch says) the copy `tile_packed.pack_tiles`
    makes once for the launch's blocks, for the MXFP4 tile packed box by box (``mx_packed``, of
    the rotated copy where the launch is rotated; the last box ragged) likewise, for the MXFP4
    tile in its K order (``mx_dot_order``: `mx_dot_order.dot_order_mxfp4` for the launch's block_k,
    rotated, packed where the launch is) likewise, for the Gluon tile (``gluon``) its layout's
    copy (`mx_gluon_layout`, `fp8_gluon_layout`) likewise, otherwise the problem's own tensor."""
    fmt = weight_format(w)
    if launch.gluon and fmt == "mxfp4":  # (main, tail) words in `mx_gluon_layout`'s layout
        return pipeline.made_once(_GLUON_WORDS, w, gluon_words)
    if launch.gluon and fmt == "fp8":  # `fp8_gluon_layout`'s (main, tail) words
        return pipeline.made_once(_FP8_GLUON_WEIGHTS, w, pack_fp8_gluon)
    if launch.mx_dot_order and fmt == "mxfp4":
        bn, bk, packed = launch.block_n, launch.block_k, launch.mx_packed
        cache = _MX_DOT_ORDER_WEIGHTS.setdefault((bn, bk, packed), {})

        def dot_ordered(t: torch.Tensor) -> torch.Tensor:
            words = rotate_mxfp4(dot_order_mxfp4(t, bk))
            return pack_tiles(words, bn, bk // 2, ragged_last=True) if packed else words

        return pipeline.made_once(cache, w, dot_ordered)
    if launch.mx_packed and fmt == "mxfp4":
        bn, bk, rotated = launch.block_n, launch.block_k, launch.mx_rotated
        cache = _MX_PACKED_WEIGHTS.setdefault((bn, bk, rotated), {})
        boxes = lambda t: pack_tiles(t, bn, bk // 2, ragged_last=True)
        source = pipeline.rotated_weights(w) if rotated else w
        return pipeline.made_once(cache, source, boxes)
    if launch.mx_rotated and fmt == "mxfp4":
        return pipeline.rotated_weights(w)
    if launch.fp8_packed and fmt == "fp8":
        bn, bk, placed = launch.block_n, launch.block_k, launch.fp8_placed
        cache = _PACKED_WEIGHTS.setdefault((bn, bk, placed), {})
        make = lambda t: pack_tiles(place_e4m3(t) if placed else t, bn, bk)
        return pipeline.made_once(cache, w, make)
    if launch.fp8_placed and fmt == "fp8":
        return pipeline.made_once(_PLACED_WEIGHTS, w, place_e4m3)
    return w


def weight_copies(launch: Launch, fmt: str) -> tuple[tuple, ...]:
    """The copies of a stage's weights and scales that ``launch`` reads (`tiles_weights`,
    `tiles_scales`), each named by what makes it distinct in their caches; none for a launch that
    reads the problem's own tensors. For the memory estimates (`layout_bytes`), kept true by
    tests/arms/test_layout_bytes.py against the copies a build really makes."""
    copies: list[tuple] = []
    if launch.gluon:
        copies.append(("gluon",))
    elif fmt == "mxfp4" and launch.mx_dot_order:
        copies.append(("dot_order", launch.block_n, launch.block_k, launch.mx_packed))
    elif fmt == "mxfp4" and launch.mx_packed:
        copies.append(("mx_packed", launch.block_n, launch.block_k, launch.mx_rotated))
        copies += [("rotated",)] if launch.mx_rotated else []
    elif fmt == "mxfp4" and launch.mx_rotated:
        copies.append(("rotated",))
    elif fmt == "fp8" and launch.fp8_packed:
        copies.append(("fp8_packed", launch.block_n, launch.block_k, launch.fp8_placed))
    elif fmt == "fp8" and launch.fp8_placed:
        copies.append(("placed",))
    if fmt == "mxfp4" and launch.path == "dot":
        if launch.gluon:
            copies.append(("gluon_scales",))
        elif launch.mx_packed_scales or launch.mx_biased_scales:
            copies.append(("scales", launch.block_n, launch.block_k, launch.mx_packed_scales,
                           launch.mx_biased_scales))  # fmt: skip
        else:
            copies.append(("padded_scales",))
    return tuple(copies)


def layout_bytes(s: LayoutShapes) -> int:
    """Bytes of the copies of one layer's expert weights and scales that `build_stages` makes for
    the launches it takes at ``s``'s token counts (`launches`, `gluon_or_triton` for whether the
    Gluon tile runs, the scales assumed to fold), each copy counted once however many token
    counts read it: the memory estimates' (`Arm.layout_bytes`)."""
    fmt = {"w8a16": "fp8", "w4a16": "mxfp4"}.get(s.precision)
    if fmt is None:  # not a decode precision: no stages are built
        return 0
    D, F, E = s.hidden, s.intermediate, s.experts
    stages = {"w13": (2 * F, D), "w2": (D, F)}  # (N, R) of each weight tensor
    made: set[tuple] = set()
    for T in s.tokens:
        for name, (N, R) in stages.items():
            launch = default_launch(fmt, tokens=T, top_k=s.top_k, experts=E, columns=N,
                                    reduction=R, pdl=PDL[s.precision])  # fmt: skip
            if launch.gluon and not s.gpu:  # (default_launch asks for it where it fits)
                launch = triton_tile(launch, R, fmt)
            made.update((name, copy) for copy in weight_copies(launch, fmt))
    per_value = 1 if fmt == "fp8" else 0.5  # bytes a weight value
    total = 0
    for name, copy in made:
        N, R = stages[name]
        groups = -(-R // 32)  # MXFP4 scale bytes a row
        if copy[0] == "gluon":  # whole steps and a 64-value tail (zeros where R has none)
            row = (R // STEP * STEP + 64) * per_value
        elif copy[0] == "gluon_scales":  # a word a row a step, and one for the tail
            row = 4 * (R // STEP) + 4
        elif copy[0] == "padded_scales":  # rows padded to 16 bytes; aligned already: no copy
            row = 0 if groups % 16 == 0 else -(-groups // 16) * 16
        elif copy[0] == "scales":  # packed box by box, or biased in padded rows
            row = groups if copy[3] else -(-groups // 16) * 16
        else:
            row = R * per_value
        total += int(E * N * row)
    return total


def build_stages(
    ws: Workspace, *, fc1: Launch | None = None, fc2: Launch | None = None
) -> tuple[Stage, ...]:
    """fc1, fc2 and the combine as argument-free closures over the workspace (nothing allocated
    inside). The launches are `launches`' unless given (tools/bench_grouped_decode.py times
    others); the combine is a programmatic dependent launch when fc2 is. The counters of fc2
    waiting for fc1 (`expert_ready`), the scratch of fc2's K split (`split_k`) and of a
    stage's persistent grid (`stream_k`) are made here."""
    p = ws.problem
    E, off = p.local_experts, p.expert_offset
    default1, default2 = launches(p)
    fc1, fc2 = fc1 or default1, fc2 or default2
    fc1 = gluon_or_triton(fc1, p.w13, p.w13_scale, p.x_TD)
    fc2 = gluon_or_triton(fc2, p.w2, p.w2_scale, ws.a)
    if fc2.gluon and not fc1.gluon:
        # fc2 fills its own pass table, whose kernel lets fc2 launch before it writes: fc2 then
        # waits for the whole of the kernel before it (`pass_table`), not expert by expert.
        fc1, fc2 = (dataclasses.replace(f, expert_ready="") for f in (fc1, fc2))
    s13, max13 = tiles_scales(p.w13, p.w13_scale, fc1)
    s2, max2 = tiles_scales(p.w2, p.w2_scale, fc2)
    fc1, fc2 = scales_launch(fc1, max13), scales_launch(fc2, max2)
    w13, w2 = tiles_weights(p.w13, fc1), tiles_weights(p.w2, fc2)
    tables = _pass_tables(p, (fc1, fc2))
    # fc2 waiting for fc1 expert by expert (`expert_ready`): fc1 signals, fc2 waits, on counters
    # made here, never in a step.
    roles = (fc1.expert_ready, fc2.expert_ready)
    if roles not in (("", ""), ("signal", "wait")):
        raise ValueError(f"grouped_decode: expert_ready must be fc1 'signal' with fc2 'wait', or "
                         f"neither, got fc1 {roles[0]!r} and fc2 {roles[1]!r}")  # fmt: skip
    ready = ready_counters(E, p.x_TD.device) if roles[0] else None
    # fc2's K split (`split_k`): its parts' sums and counters, made here, never in a step.
    split = None
    if fc2.split_k > 1:
        T, K = p.topk_ids_TK.shape
        pairs = grid_tiles(T, K, E, p.w2.shape[1], fc2)
        split = split_scratch(pairs, fc2.split_k, fc2.block_n, fc2.block_m, p.x_TD.device)
    # Each stage's persistent grid (`stream_k`): its parts' sums and counters, likewise.
    stream1, stream2 = (_stream_scratch(p, f, w.shape[1]) for f, w in ((fc1, p.w13), (fc2, p.w2)))
    # A Gluon stage's operands (MXFP4: weights and scales as one); fc2 fills the pass table itself
    # unless fc1 filled it (the same block_m).
    g13 = _gluon_operands(fc1, w13, s13)
    g2 = _gluon_operands(fc2, w2, s2)
    fc2_fills = not (fc1.gluon and fc1.block_m == fc2.block_m)

    def run_fc1() -> None:
        if fc1.gluon:
            _run_gluon(p, fc1, tables, p.x_TD, g13, p.b13_E2F, ws.a, p.activation, first=True,
                       ready=ready)  # fmt: skip
            return
        grouped_gemv(p.x_TD, p.topk_ids_TK, w13, s13, p.b13_E2F, ws.a, expert_offset=off,
                     launch=fc1, glu=p.activation, max_scale_byte=max13, ready=ready,
                     stream=stream1)  # fmt: skip

    def run_fc2() -> None:
        if fc2.gluon:
            _run_gluon(p, fc2, tables, ws.a, g2, p.b2_ED, ws.o, "none", first=fc2_fills,
                       ready=ready)  # fmt: skip
            return
        grouped_gemv(ws.a, p.topk_ids_TK, w2, s2, p.b2_ED, ws.o, expert_offset=off,
                     launch=fc2, max_scale_byte=max2, ready=ready, split=split,
                     stream=stream2)  # fmt: skip

    def run_combine() -> None:
        combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD, expert_offset=off,
                     local_experts=E, layout=ws.layout, pdl=fc2.pdl)  # fmt: skip

    fns = (run_fc1, run_fc2, run_combine)
    return tuple(Stage(name=n, run=f) for n, f in zip(DECODE_STAGES, fns, strict=True))


def gluon_or_triton(launch: Launch, w, w_scale, x: torch.Tensor) -> Launch:
    """``launch``, or where it asks for the Gluon tile (``gluon``) and the stage cannot run it
    the Triton one-pass tile in its place (`grouped_launch.triton_tile`, the counters' role
    kept): Gluon runs on CUDA devices only (no interpreter), for weights whose shapes take its
    layout (`mx_gluon_layout.fits`, FP8's the same), MXFP4 scale bytes up to FOLD_SCALES_UP_TO
    and x's rows on 16-byte boundaries."""
    if not launch.gluon:
        return launch
    fmt = weight_format(w)
    N, R = w.shape[1], w.shape[2] * (2 if fmt == "mxfp4" else 1)
    ok = x.is_cuda and gluon_layout_fits(N, R) and x_rows_aligned(x)
    if ok and fmt == "mxfp4":
        largest = pipeline.made_once(_LARGEST_SCALE, w_scale, max_scale_byte)
        ok = largest is not None and largest <= FOLD_SCALES_UP_TO
    if ok:
        return launch
    return triton_tile(launch, R, fmt)


def _pass_tables(p: Problem, stages: tuple[Launch, ...]) -> dict[int, torch.Tensor]:
    """The pass tables (`pass_table`) of the Gluon stages, one a block_m, made here, never in a
    step."""
    T, K = p.topk_ids_TK.shape
    E = p.local_experts
    return {f.block_m: new_table(grid_programs(T, K, E, f), f.block_m, p.x_TD.device)
            for f in stages if f.gluon}  # fmt: skip


def _gluon_operands(launch: Launch, w, scales):
    """A Gluon stage's weight operands: MXFP4's words and scales as one `GluonWeights`, FP8's
    words (`Fp8GluonWeights`) with the expert scales; None for a Triton stage."""
    if not launch.gluon:
        return None
    if isinstance(w, Fp8GluonWeights):
        return w, scales
    return GluonWeights(*w, *scales), None


def _run_gluon(p: Problem, launch: Launch, tables, x, operands, bias, out, glu, *,
               first: bool, ready: torch.Tensor | None) -> None:  # fmt: skip
    """A Gluon stage: its pass table filled from the routing where it is the table's first reader
    (`pass_table`, before fc1), then the tile (`mx_gluon.grouped_gluon_mxfp4`,
    `fp8_gluon.grouped_gluon_fp8`)."""
    table = tables[launch.block_m]
    if first:
        pass_table(p.topk_ids_TK, table, expert_offset=p.expert_offset, experts=p.local_experts,
                   block_m=launch.block_m, pdl=launch.pdl)  # fmt: skip
    w, expert_scales = operands
    kwargs = dict(top_k=p.topk_ids_TK.shape[1], block_m=launch.block_m, glu=glu,
                  stages=launch.num_stages, pdl=launch.pdl, max_registers=launch.max_registers,
                  expert_ready=launch.expert_ready, ready=ready)  # fmt: skip
    if expert_scales is None:
        grouped_gluon_mxfp4(x, table, w, bias, out, **kwargs)
    else:
        grouped_gluon_fp8(x, table, w, expert_scales, bias, out, **kwargs)


def _stream_scratch(p: Problem, launch: Launch, columns: int):
    """The scratch of a stage's persistent grid (`stream_k`), None without one."""
    if not launch.stream_k:
        return None
    T, K = p.topk_ids_TK.shape
    device = p.x_TD.device
    tiles = grid_tiles(T, K, p.local_experts, columns, launch)
    programs = stream_programs(device, launch.stream_k)
    return stream_scratch(programs, tiles, launch.block_n, launch.block_m, device)


ARM = Arm(
    name="grouped_decode",
    family="decode",
    summary="slots grouped by expert on the device; each touched expert's weights read once",
    build=build_stages,
    weight_bytes=functools.partial(pipeline.weight_bytes, layout="TKD"),
    work=functools.partial(pipeline.work, layout="TKD"),
    layout_bytes=layout_bytes,
    kernels=("grouped_gemv[fc1+glu]", "grouped_gemv[fc2]", "combine_topk"),
    launches=_LAUNCHES,
    forbidden=_FORBIDDEN,
    layout="TKD",
)
