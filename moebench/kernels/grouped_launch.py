"""Which launch the `grouped_decode` arm's GEMVs take (`default_launch`): the path (the one-slot
GEMV or the tensor-core tile, `moebench.kernels.grouped_gemv`), its blocks, warps, pipeline depth,
register cap and grid, read from the shapes alone (never the routing), each constant with the H200
measurements that set it. `grouped_gemv` launches what `Launch` says; the bench
(tools/bench_grouped_decode.py) times other launches beside the default."""

from __future__ import annotations

from dataclasses import dataclass, replace

from moebench.kernels.mx_dot_order import fits
from moebench.kernels.mx_gluon_layout import fits as gluon_fits

PATHS = ("gemv", "dot")


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How `grouped_gemv` launches: the path and its blocks (``block_k`` in values along R),
    warps, pipeline depth (``dot`` only; 0: the compiler's default), programmatic dependent
    launch, the FP8 tile's weights through a TMA descriptor (``tma``; where the weights allow it:
    packed rows, otherwise the pointer loads), a register cap a thread (``max_registers``; 0:
    the compiler's choice), for the tile one pass of ``block_m`` slots a program
    (``pass_grid``: the grid's second axis enumerates the passes, `grouped_slots.touched_pass`)
    instead of one touched expert a program looping over its passes, the epilogue's bias
    loaded before the K loop instead of after it (``early_bias``; the same bits), and for the
    MXFP4 weights in `mx_rotated`'s layout (``mx_rotated``, both paths: the caller passes the
    weights `mx_rotated.rotate_mxfp4` made; the same bits, fewer decode instructions), and the
    FP8 tile's in `fp8_placed`'s (``fp8_placed``: the weights `fp8_placed.place_e4m3` made; the
    same bits, fewer decode instructions), and the FP8 tile's through TMA packed box by box
    (``fp8_packed``: the weights `tile_packed.pack_tiles` made for this launch's block_n and
    block_k; the same bits, each step's box one contiguous run), the first ``fp8_prefetch`` of
    a packed program's boxes asked of the L2 before it waits for the previous kernel (sm_90
    bulk prefetch; 0: none; the same bits: nothing is read from it), and at each K step the box
    ``fp8_prefetch_ahead`` steps on (0: none), the MXFP4 tile's bytes packed box by box
    (``mx_packed``: the weights `tile_packed.pack_tiles` made for block_n rows and block_k / 2
    bytes a box, the last box ragged; the same bits, each program's boxes one run), its scale
    bytes likewise (``mx_packed_scales``: the scales `tile_packed.pack_tiles` made for block_n
    rows and block_k / 32 bytes a box, block_k a multiple of 128 so that a box's rows are whole
    words; the same bits, a step's scales one run of words), the MXFP4 tile's values stored in
    its K order (``mx_dot_order``: the rotated bytes `mx_dot_order.dot_order_mxfp4` made for
    block_k, so that the slots' operand is read as it lies; the same products, summed in another
    order), the MXFP4 tile's scale bytes biased (``mx_biased_scales``: the scales
    `mx_rotated.biased_scales` made, s + 126, for the rotated tile with every byte at most 128;
    the same bits, a scale's multiplier one shift), fc2
    waiting for fc1 expert by expert through device counters (``expert_ready``: "signal" for
    fc1, "wait" for fc2, both or neither; `expert_ready`) instead of for the whole of fc1 (the
    same bits), and the MXFP4 one-pass tile's K steps split over ``split_k`` programs a row block
    (a stage with no GLU; `split_k`: the parts' sums added on the device in a fixed order, 1:
    none; the fp32 sums grouped by part), and the MXFP4 one-pass tile on a persistent grid of
    ``stream_k`` programs an SM that splits every tile's K steps evenly over them (`stream_k`;
    0: none; the fp32 sums of a tile two programs share grouped by program), and the one-pass
    tile written in Gluon (``gluon``: `mx_gluon` for MXFP4, `fp8_gluon` for FP8, on the GPU
    where its layout fits, the Triton tile elsewhere; weights in `mx_gluon_layout`'s or
    `fp8_gluon_layout`'s layout, a copy made when the arm builds its stages; ``num_stages`` the
    slots' ring and ``max_registers`` its cap; its passes from `pass_table`; the same products,
    summed in another order), and the one-slot GEMV's grid led by slots (``slot_grid``: program
    j serves slot j's expert where j is that expert's first slot, `grouped_slots.slot_expert`,
    its first pass's token known from j, the next kernel launched once that is known; instead of
    the j-th touched expert found from every expert's count; the same bits)."""

    path: str
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 0
    pdl: bool = False
    tma: bool = False
    max_registers: int = 0
    pass_grid: bool = False
    early_bias: bool = False
    mx_rotated: bool = False
    fp8_placed: bool = False
    fp8_packed: bool = False
    fp8_prefetch: int = 0
    fp8_prefetch_ahead: int = 0
    expert_ready: str = ""
    mx_packed: bool = False
    mx_packed_scales: bool = False
    mx_dot_order: bool = False
    mx_biased_scales: bool = False
    split_k: int = 1
    stream_k: int = 0
    gluon: bool = False
    slot_grid: bool = False


# Slots an expert (T * K / E, all taken as local) above which the default launch takes the
# tensor-core tile, from 2 tokens; below, a one-slot GEMV pass. H200, gpt-oss-20b: at one slot an
# expert (4 tokens) the GEMV lost (FP8 102.6 against 72.7 us for the sparse arm), at 2 the tile won
# (119.7 against 131.9); at half (2 tokens) FP8's TMA tile won in every bench since 2026-12-02
# (48.2-48.6 against 58.7-62.1 us), MXFP4's GEMV won 35.4 against 43.3 and lost 44.0 against 43.0.
DOT_FROM_SLOTS_PER_EXPERT = {"fp8": 0.25, "mxfp4": 0.5}


# The MXFP4 tile takes 128 values a step on 4 stages at every count, its bytes read in the
# operand's row order (`tile_order.loaded_rows`). Measured on the H200 (gpt-oss-20b EP2, the step
# as one graph, docs/perf/2026-12-02-grouped-rows/ab_rows.log): 150.2 us against 164.2 for the
# 64-value, 6-stage tile (the default from 16 tokens before) at 64 tokens, 145.0 against 155.6 at
# 32, 110.8 against 133.3 at 8; 3 and 5 stages within 1.5% of 4 from 8 tokens up. At 4 tokens the
# two measurements disagree on 5 stages: 3.8% faster in that A/B (uniform routing), 1.7% slower in
# the bench with the scenario's routing (58.6 against 57.6 us, bench_stages.log, same folder).

# The tile's registers are capped at 128 a thread (4 programs an SM at 4 warps; no spills in the
# sm_90a SASS) and the FP8 tile reads its weights through a TMA descriptor, both on 4 stages at
# every count. Measured on the H200 (gpt-oss-20b EP2, the step as one graph, two routing draws,
# docs/perf/2026-12-02-grouped-rows/ab_regs_{fp8,mxfp4}_seed{0,1}.log): MXFP4 capped 138.0
# against 149.7 us at 64 tokens and 132.7 against 144.3 at 32 (the cap frees a fourth program an
# SM: fc1 took 137 registers), the same within 1.2% at 1-16 tokens. FP8 through TMA and capped
# 146.6 against 152.9 (the 5-stage pointer tile that was the default from 32 tokens) at 64 tokens,
# 143.6 against 149.3 at 32, 122.0 and 130.5 against 127.2 and 138.1 at 16 (the two draws), 116.0
# and 98.4 against 121.5 and 99.5 at 8; at 4 tokens 96.2 against 95.0 (the 5-stage pointer tile:
# 93.2). 5 stages through TMA: slower at 32 and 64 tokens, faster at 8 (113.4), mixed at 16. At 4
# tokens (one slot an expert) the pointer tile uncapped was the default until 2026-12-03: over six
# routing draws and both ranks (bench, docs/perf/2026-12-03-rank/) it won by 2-6% where a rank
# touched 5 or 7 experts and lost by 4-9% where it touched 4, 6, 9 or 10 (at 9-10, a reading:
# fc2's 405-450 programs past the 396 it holds at once, 3 an SM); on the slowest rank, the step's,
# TMA's mean 78.6 us against 80.2 and worst 87.4 against 95.8, the two equal over all twelve (71.1
# and 71.4).
TILE_MAX_REGISTERS = 128
# MXFP4's expert-loop tile (4 and 8 tokens at gpt-oss-20b EP2) on its own register cap and
# stages, so that each format's can be measured and set apart; the same as FP8's until measured
# otherwise (docs/perf/2026-12-07-regs-split/: 80 registers holds 6 programs an SM, not 4).
TILE_MXFP4_MAX_REGISTERS = 128
TILE_MXFP4_STAGES = 4

# From PASS_GRID_FROM_SLOTS_PER_EXPERT slots an expert (16 tokens at gpt-oss-20b EP2) the tile
# runs one pass of 16 slots a program (`Launch.pass_grid`) on 3 stages (FP8 since 2026-12-05 on 64-
# value steps and 6 stages: PASS_GRID_FP8_BLOCK_K below), capped at 80 registers: 6
# programs an SM (sm_90a: FP8 80 registers and 4 bytes of stack, MXFP4 80 and none; 28.7 and 20.5
# KB of shared memory), where a program looping over its expert's passes needs 116-128 and holds
# 4, and fc2's 720 tiles at 32-64 tokens fill one wave of 792 places instead of 1.4 waves of 528.
# Measured on the H200 (gpt-oss-20b EP2, the step as one graph), one pass against the loop: FP8
# 139.3-140.8 against 145.0-146.4 us at 64 tokens and 136.8-139.0 against 142.9-143.9 at 32 (three
# routing draws), MXFP4 1.3-4.1% faster at 16-64 (two; docs/perf/2026-12-02-one-launch/); FP8 at 16
# tokens faster in five of six draws by 3.5-4.1%, 0.6% slower in one, mean 126.7 against 130.9 us
# (both ranks, the slowest; docs/perf/2026-12-03-passes/). At 8 tokens one pass lost in most
# draws in both formats (FP8, six draws: mean 109.2 against 99.0), so below 16 the tile keeps the
# loop. Against 3 stages and 80 registers, one pass was slower uncapped (5 programs an SM; FP8
# 145.8-157.6 at 32-64 tokens), on 4 or 5 stages (FP8 3-14%, MXFP4 within 0.3%) and capped at 72
# or 64 registers (7 or 8 programs an SM, spilling: 6-47%; docs/perf/2026-12-03-passes/).
PASS_GRID_FROM_SLOTS_PER_EXPERT = 4
PASS_GRID_STAGES = 3
PASS_GRID_MAX_REGISTERS = 80
# MXFP4's one-pass tile's register cap (its stages: PASS_GRID_STAGES), apart from FP8's.
PASS_GRID_MXFP4_MAX_REGISTERS = 80
# MXFP4's one-pass tile on the persistent grid that splits every tile's K steps evenly over that
# many programs an SM (`Launch.stream_k`, `stream_k`; 0: the grid of one tile a program), where
# its scales are packed and R is at least one step; fc2 then waits for the whole of fc1 (the grid
# takes no expert_ready). Off: H100, 2026-12-07 (docs/perf/2026-12-07-stream-k/call1/, two draws,
# both ranks, the slower rank's step), gpt-oss-20b EP2, against the one-pass grid: 6 an SM (80
# registers) +40.0 / +41.0 / +31.3% at 16 / 32 / 64 tokens, 8 an SM (64 registers, 2 stages)
# +57.5 / +51.9 / +45.4%; at 64 tokens fc1 alone +23%, fc2 +35%.
PASS_GRID_MXFP4_STREAM_K = 0
# MXFP4's one-pass tile in Gluon (``Launch.gluon``, `mx_gluon`) where the stage's shapes take
# its layout (`mx_gluon_layout.fits`): its own stages (the slots' ring) and register cap (0: the
# compiler's, 127 registers and 4 programs an SM at gpt-oss-20b's shapes, sm_90a offline). The
# probes it comes from ran fc1 and fc2 17-21% faster than the arm's tile (H100,
# docs/perf/2026-12-06-packed-mx/); on a GPU it gave the Triton tile's bits where the sums are
# exact (docs/perf/2026-12-07-ws-readonly/call1/).
MX_GLUON = True
GLUON_STAGES = 3
GLUON_MAX_REGISTERS = 0
# FP8's one-pass tile in Gluon (``Launch.gluon``, `fp8_gluon`) where the stage's shapes take its
# layout (`fp8_gluon_layout`, the same shapes as MXFP4's): the same loop, a thread's 32 bytes of
# each of its rows a 128-value step (two steps ahead: 16 KB a program in flight), on its own
# stages and register cap. sm_90a offline (triton 3.6): 130 registers uncapped (3 programs an SM),
# 128 capped with no spill and no wgmma serialised (4 an SM); the loop 214 instructions a step of
# 64 weight bytes a thread (3.3 a byte; the Triton one-pass tile 4.2). Measured on an H100 80GB
# HBM3 (no H200 lent; docs/perf/2026-12-07-gluon-gated/call2/), gpt-oss-20b EP2, the slower
# rank's step, against the Triton one-pass tile: 134.8 against 139.5 us at 16 tokens (-3.4%, six
# draws, faster in all six), 144.8 against 145.3 at 32 (-0.4%, faster in three of four draws),
# 146.7 against 147.7 at 64 (-0.6%, four of four); uncapped (3 an SM) +0.1% / +0.9% / +1.4%, 4
# stages -1.9% / -0.1% / -0.8% (two draws). FP8's gated cases with it on passed every check (204).
FP8_GLUON = True
FP8_GLUON_STAGES = 3
FP8_GLUON_MAX_REGISTERS = 128
# The FP8 one-pass tile steps 64 values at a time on 6 stages (PASS_GRID_FP8_BLOCK_K,
# PASS_GRID_FP8_STAGES) where it took 128 on 3: five steps' weights in flight behind the one in use
# (20 KB a program) against two (16 KB), at the same 6 programs an SM. sm_90a (offline,
# tools/sass_grouped_decode.py): 77 registers and no stack against 80 and 16 bytes spilled and
# reloaded in the loop, 32.8 KB of shared memory against 28.7, 4.2 instructions a weight byte
# against 3.3. Why: Nsight Compute's warp-state sampling of the 128-value tile at 64 tokens put 61%
# (fc1) and 67% (fc2) of all samples on the branch that polls the weights' TMA barrier
# (docs/perf/2026-12-05-h200-confirm/call4/). Measured on an H100 80GB HBM3 (no H200 lent),
# gpt-oss-20b EP2, the grouped step, the slower rank per routing draw, interleaved, three calls on
# two machines (docs/perf/2026-12-05-h200-confirm/call5/, call6/, call8/): faster in every draw of
# each, -2.0%, -2.4% and -2.5% at 16 tokens, -2.0%, -2.2% and -2.0% at 32, -1.8%, -1.8% and -1.7%
# at 64 (161.9 against 164.7 us in the third). Not taken: 64 values on 5 stages (mixed: -1.4%,
# +0.5%, -2.7%) or 7 (5 programs an SM: +6-7% at 32-64), 32 values on 10 or 12 stages (+8-12%), 128
# on 4 (+9-10%: 5 programs an SM); the looping tile (2-8 tokens) on 64 values and 6 or 8 stages
# (+0.0 to +2.8%). The fp32 sums group their products by 64 values instead of 128: the last bits
# differ from the 128-value tile's. MXFP4's one-pass tile keeps 128 values on 3 stages (its scale
# words need whole 128-value steps).
PASS_GRID_FP8_BLOCK_K = 64
PASS_GRID_FP8_STAGES = 6

# The tile asks for its epilogue's bias before its K loop (`Launch.early_bias`), not after it,
# where each program waited one more round trip before its stores. The same bits. Measured on the
# H200 (gpt-oss-20b EP2, two routing draws, both ranks, the slower rank's step;
# docs/perf/2026-12-04-early-loads/): faster at every tile count in both formats, FP8 0.6-1.5% at
# 2-64 tokens (133.9 against 134.7 us at 64), MXFP4 0.4-1.9% at 4-64. The one-pass tile at 80
# registers then keeps the bias in 8 more bytes of stack across the loop (sm_90a: 16 B, reloaded
# from L1 after it), the loop itself unchanged. The one-slot GEMV keeps it after the loop: mixed
# there (FP8 one token 40.4 and 44.5 against 39.0 and 46.0 us, MXFP4 2 tokens +2.6%).
TILE_EARLY_BIAS = True


# MXFP4 launches read the weights in `mx_rotated`'s layout (`Launch.mx_rotated`; the arm makes the
# copy once when it builds its stages, `grouped_decode.tiles_weights`), on both paths; the one-slot
# GEMV then capped at MXFP4_ROTATED_GEMV_REGISTERS, which keeps it at 5 programs an SM (sm_90a,
# offline: 128 registers uncapped, 96 with no spill). H200, gpt-oss-20b EP2, the grouped step, four
# routing draws, both ranks, the slower rank's step, against the natural layout
# (docs/perf/2026-12-05-rotated-layout/call1/ab_grouped.log): faster in every draw at every count,
# 42.02 against 47.01 us at 2 tokens (the GEMV, -10.6%), 67.97 against 72.88 at 4 (-6.7%), 84.30
# against 90.65 at 8, 104.05 against 110.97 at 16, 106.88 against 116.14 at 32 (-8.0%), 110.86
# against 119.21 at 64 (-7.0%). The same bits.
MXFP4_ROTATED = True
MXFP4_ROTATED_GEMV_REGISTERS = 96

# The one-slot GEMV's grid led by slots (`Launch.slot_grid`: program j serves slot j's expert where
# j is its first slot, one round trip of the routing before its weights, the next kernel launched
# once that is known) instead of by touched experts (`grouped_slots.touched_expert`: every
# expert's count and their running sum, then the pass's slot read again, before the weights).
# sm_90a, offline (`tools/sass_grouped_decode.py`, slots 1): FP8 fc1 74 registers uncapped (25
# programs an SM), 64 capped at GEMV_SLOT_GRID_FP8_REGISTERS with no spill (32, the sparse GEMV's);
# MXFP4 96 at its cap, no spill. The same bits. Measured on an H100 80GB HBM3 (2026-12-07, the
# device lent), gpt-oss-20b EP2, the grouped step, four routing draws, both ranks, the slower
# rank's step, interleaved (docs/perf/2026-12-07-one-token/call1/bench_fp8.log, bench_mxfp4.log):
# FP8 one token 35.8-36.3 us against 40.7 (-10.7% at 64 registers, -7.1% uncapped), MXFP4 one
# token 30.4 against 32.3 (-5.9%), two tokens 40.4 against 43.0 (-6.2%), faster in every draw;
# the gated scenario with it on passed every check (call1/checks_count.txt).
GEMV_SLOT_GRID = True
GEMV_SLOT_GRID_FP8_REGISTERS = 64

# The FP8 tile reads its weights in `fp8_placed`'s layout (`Launch.fp8_placed`; the arm makes the
# copy once when it builds its stages, `grouped_decode.tiles_weights`; it doubles the FP8 expert
# weights held). sm_90a (tools/sass_grouped_decode.py): the one-pass tile's weight loop 214
# instructions a step against 278, the integer ALU's 81 against 161, at the same 80 registers and
# 6 programs an SM; the looping tile 212 against 276. The same bits. Measured on an H100 80GB HBM3
# (the device lent on 2026-12-05; not yet on the H200), gpt-oss-20b EP2, the grouped step, three
# routing draws, both ranks, the slower rank's step, interleaved
# (docs/perf/2026-12-05-placed-fp8/call1/ab_placed.log): faster in every draw at every count,
# 57.0 against 64.1 us at 2 tokens (-11.1%), -6.3% at 4, -3.0% at 8, -2.1% at 16, -3.1% at 32,
# 171.4 against 177.3 at 64 (-3.3%); Nsight Compute at 64 tokens: fc1 38.3M instructions against
# 46.8M, 112.5 against 115.7 us.
FP8_PLACED = True


# The FP8 one-pass tile's weights packed box by box (`tile_packed`, ``Launch.fp8_packed``) where
# R (``reduction``) is whole steps. H100, 2026-12-06 (docs/perf/2026-12-06-wide-rows/call1):
# gpt-oss-20b EP2 step 5.3-5.7% faster at 16, 32 and 64 tokens on the mean of two draws, 5.1-6.1%
# in every draw and rank.
FP8_PACKED = True


# The MXFP4 tile's bytes packed box by box (`tile_packed` with a ragged last box,
# ``Launch.mx_packed``), one pass a program or its expert loop: [64 rows, 64 bytes] a box,
# gpt-oss-20b's 1,440-byte rows 22 boxes and a half. H100, 2026-12-06 (docs/perf/
# 2026-12-06-packed-mx/, two draws, both ranks, the slower rank's step), gpt-oss-20b EP2: the
# one-pass tile (call1) -17.6% at 16 tokens, -16.4% at 32, -14.7% at 64 on the mean, faster in
# every draw and rank, fc1 alone -19% to -28%, fc2 -5% to -19%; the expert loop (call2) -8.6% at 4
# tokens, -9.5% at 8, faster in every draw.
MX_PACKED = True

# The MXFP4 tile's scale bytes packed box by box too (``Launch.mx_packed_scales``: [64 rows, 4
# bytes] a box, a step's scales one run of 256 bytes instead of 64 words 96 bytes apart), one pass
# a program or its expert loop. H100, 2026-12-06 (docs/perf/2026-12-06-packed-scales/call1/, two
# draws, both ranks, the slower rank's step), gpt-oss-20b EP2, against the packed bytes with
# padded scale rows: -1.2% at 4 tokens, -1.9% at 8, -3.7% at 16, -1.9% at 32, -3.7% at 64 on the
# mean, faster in every draw; sm_90a (offline): 217 and 221 instructions a step (fc1, fc2)
# against 224 and 225.
MX_PACKED_SCALES = True

# The MXFP4 tile's values stored in its K order (``Launch.mx_dot_order``,
# `mx_dot_order.dot_order_mxfp4`), one pass a program or its expert loop, where the stage's R
# allows it (whole steps, or a last step of a power of two of at least 32 values): the slots'
# operand is then read as the pipeline copies it, instead of loaded, permuted and stored again
# every step. H100, 2026-12-06 (docs/perf/2026-12-06-packed-scales/call3/, two draws, both ranks,
# the slower rank's step), gpt-oss-20b EP2, against the packed bytes and scales in the natural
# order: -3.3% at 4 tokens, -8.4% at 8, -2.7% at 16, -1.5% at 32, -1.8% at 64 on the mean, faster
# in all 20 draw-and-rank cells. Offline (sm_90a, docs/perf/2026-12-06-packed-scales/offline/):
# the one-pass loop loses its 8 STS, its memory barrier and its wait for the tensor cores (its 8
# HGMMA overlap the next decode, each waiting with 7 in flight), at 261 instructions a step
# against 218 (descriptor, warpgroup and scale arithmetic).
MX_DOT_ORDER = True

# The MXFP4 tile's scale bytes biased (``Launch.mx_biased_scales``, `mx_rotated.biased_scales`:
# s + 126, so that the folded decode's multiplier is one shift of the byte), where the rotated
# tile folds its scales (every byte at most 128; the arm drops it otherwise,
# `grouped_decode.scales_launch`). Offline (sm_90a): the one-pass loop 249 instructions a step
# against 261 in the K order, 216 against 218 in the natural one. H100, 2026-12-07
# (docs/perf/2026-12-07-biased-scales/call1/, two draws, both ranks, the slower rank's step),
# gpt-oss-20b EP2, against the unbiased bytes in K order: -2.5% at 4 tokens, -1.7% at 8, -2.0% at
# 16, -1.9% at 32, -2.0% at 64 on the mean. The same bits.
MX_BIASED_SCALES = True


# fc2 waiting for fc1 expert by expert (`expert_ready`, ``Launch.expert_ready``) instead of for the
# whole of fc1, where both are the tile with the dependent launch: from one slot an expert
# (T * K / E; 4 tokens at gpt-oss-20b EP2) in both formats, and on MXFP4's one-pass tile at any
# count. Measured on H100s, 2026-12-06 (docs/perf/2026-12-06-expert-ready/ and
# docs/perf/2026-12-06-one-token/), gpt-oss-20b EP2, the slower rank's step:
# - FP8 one-pass tile (calls 6 and 7, three samples of two draws): -3.1% to -3.3% at 16 tokens,
#   -5.1% to -5.5% at 32, -4.6% to -4.9% at 64, faster in every draw. A timing ablation with no
#   wait at all (wrong outputs) bounded it at about 7% (call5).
# - FP8 looping tile (calls 7-9, eight draws): -5.6% to -6.8% at 4 tokens, faster in all eight;
#   -0.8% to -2.5% at 8, in seven of eight; +2.0% / +3.0% at 2 tokens (half a slot an expert),
#   faster in none: 2 tokens keep the whole-grid wait.
# - MXFP4 one-pass tile (calls 8 and 9): -5.6% / -6.0% at 16, -1.4% / -1.9% at 32, -3.0% / -3.1%
#   at 64, every draw.
# - MXFP4 looping tile (calls 0 and 3 of docs/perf/2026-12-06-one-token/, two draws each):
#   -6.3% / -7.0% at 4 tokens, -2.8% / -2.9% at 8, faster in all eight draws. MXFP4 takes the
#   GEMV below 4 tokens.
EXPERT_READY_FROM_SLOTS_PER_EXPERT = {"fp8": 1.0, "mxfp4": 1.0}


def paired_launches(
    fc1: Launch, fc2: Launch, fmt: str, slots_per_expert: float
) -> tuple[Launch, Launch]:
    """fc1's and fc2's default launches with fc2 waiting for fc1 expert by expert where the
    measurements say so (EXPERT_READY_FROM_SLOTS_PER_EXPERT): both the tile with the dependent
    launch, not on the persistent grid (`stream_k`), and one pass a program or (FP8) at least
    that many slots an expert (the Gluon tile, ``gluon``, keeps the same counters)."""
    tiles = all(f.path == "dot" and f.pdl and not f.stream_k for f in (fc1, fc2))
    one_pass = fc1.pass_grid and fc2.pass_grid
    least = EXPERT_READY_FROM_SLOTS_PER_EXPERT[fmt]
    if not tiles or not (one_pass or (least is not None and slots_per_expert >= least)):
        return fc1, fc2
    return replace(fc1, expert_ready="signal"), replace(fc2, expert_ready="wait")


def path_launch(
    path: str, fmt: str, *, columns: int, block_m: int | None = None, pdl: bool = False
) -> Launch:
    """A path's default blocks for a stage of ``columns`` output columns (N).

    ``gemv``: the sparse GEMV's measured tiles (docs/PERF.md; `sparse_launch.default_blocks`), one
    slot a pass unless ``block_m`` says more, 1,024 values a step divided by the slots (at least
    64), so that the slots' widened values fit in registers (`grouped_gemv`'s docstring: budget).
    ``dot``: 64 weight rows and 128 values a step, 16 slots a pass unless ``block_m`` says more,
    4 warps, 4 pipeline stages, at most 128 registers a thread (MXFP4: TILE_MXFP4_STAGES and
    TILE_MXFP4_MAX_REGISTERS), FP8 weights through TMA, the
    bias loaded before the K loop (TILE_EARLY_BIAS; `grouped_gemv`'s docstring: budget). Row
    blocks shrink to the largest power of two dividing N. MXFP4 on either path reads rotated
    weights (MXFP4_ROTATED; the GEMV then at most MXFP4_ROTATED_GEMV_REGISTERS registers), the
    FP8 tile placed ones where FP8_PLACED says so, the MXFP4 tile packed ones where MX_PACKED
    does, its scales packed where MX_PACKED_SCALES does and biased where MX_BIASED_SCALES does;
    the one-slot GEMV's grid led by slots where GEMV_SLOT_GRID says so (FP8 then capped at
    GEMV_SLOT_GRID_FP8_REGISTERS)."""
    fits = lambda bn: min(bn, columns & -columns)
    rotated = fmt == "mxfp4" and MXFP4_ROTATED
    if path == "dot":
        mx = fmt == "mxfp4"
        return Launch(path="dot", block_m=block_m or 16, block_n=fits(64), block_k=128,
                      num_warps=4, num_stages=TILE_MXFP4_STAGES if mx else 4, pdl=pdl,
                      tma=fmt == "fp8", early_bias=TILE_EARLY_BIAS,
                      max_registers=TILE_MXFP4_MAX_REGISTERS if mx else TILE_MAX_REGISTERS,
                      mx_rotated=rotated, fp8_placed=fmt == "fp8" and FP8_PLACED,
                      mx_packed=fmt == "mxfp4" and MX_PACKED,
                      mx_packed_scales=fmt == "mxfp4" and MX_PACKED_SCALES,
                      mx_biased_scales=rotated and MX_BIASED_SCALES)  # fmt: skip
    n, warps = (2, 1) if fmt == "fp8" else (16, 4)
    m = block_m or 1
    slots = GEMV_SLOT_GRID and m == 1
    registers = MXFP4_ROTATED_GEMV_REGISTERS if rotated else 0
    if slots and fmt == "fp8":
        registers = GEMV_SLOT_GRID_FP8_REGISTERS
    return Launch(path="gemv", block_m=m, block_n=fits(n), block_k=max(64, 1024 // m),
                  num_warps=warps, pdl=pdl, mx_rotated=rotated, max_registers=registers,
                  slot_grid=slots)  # fmt: skip


def one_pass_launch(tile: Launch, fmt: str) -> Launch:
    """The ``fmt`` tile ``tile`` running one pass a program, on the steps, stages and register
    cap measured for it: FP8's PASS_GRID_FP8_BLOCK_K values a step on PASS_GRID_FP8_STAGES
    stages, MXFP4's its own step on PASS_GRID_STAGES; capped at PASS_GRID_MAX_REGISTERS (FP8) and
    PASS_GRID_MXFP4_MAX_REGISTERS."""
    if fmt == "fp8":
        return replace(tile, pass_grid=True, block_k=PASS_GRID_FP8_BLOCK_K,
                       num_stages=PASS_GRID_FP8_STAGES,
                       max_registers=PASS_GRID_MAX_REGISTERS)  # fmt: skip
    return replace(tile, pass_grid=True, num_stages=PASS_GRID_STAGES,
                   max_registers=PASS_GRID_MXFP4_MAX_REGISTERS)  # fmt: skip


def gluon_launch(one: Launch, fmt: str = "mxfp4") -> Launch:
    """The ``fmt`` one-pass tile ``one`` in Gluon (``gluon``): MXFP4's on GLUON_STAGES and
    GLUON_MAX_REGISTERS, on the grid of one tile a program, its values in its own order (not
    ``mx_dot_order``'s); FP8's on FP8_GLUON_STAGES and FP8_GLUON_MAX_REGISTERS."""
    if fmt == "fp8":
        return replace(one, gluon=True, num_stages=FP8_GLUON_STAGES,
                       max_registers=FP8_GLUON_MAX_REGISTERS)  # fmt: skip
    return replace(one, gluon=True, num_stages=GLUON_STAGES, max_registers=GLUON_MAX_REGISTERS,
                   stream_k=0, split_k=1, mx_dot_order=False)  # fmt: skip


def triton_tile(gluon: Launch, reduction: int, fmt: str = "mxfp4") -> Launch:
    """The Triton one-pass tile in place of the Gluon launch ``gluon`` (`gluon_launch`'s inverse;
    MXFP4's values in its K order where R, ``reduction``, allows it): for a stage that cannot run
    the Gluon tile (no GPU, MXFP4 scales past FOLD_SCALES_UP_TO, x's rows off 16-byte
    boundaries)."""
    if fmt == "fp8":
        return replace(gluon, gluon=False, num_stages=PASS_GRID_FP8_STAGES,
                       max_registers=PASS_GRID_MAX_REGISTERS)  # fmt: skip
    one = replace(gluon, gluon=False, num_stages=PASS_GRID_STAGES,
                  max_registers=PASS_GRID_MXFP4_MAX_REGISTERS)  # fmt: skip
    return _dot_ordered(one, reduction)


def _dot_ordered(tile: Launch, reduction: int) -> Launch:
    """The MXFP4 tile with its values in its K order where MX_DOT_ORDER says so and the stage's
    R (``reduction``, 0: not said) takes the layout."""
    if not (MX_DOT_ORDER and tile.mx_rotated and reduction and fits(reduction, tile.block_k)):
        return tile
    return replace(tile, mx_dot_order=True)


def default_launch(
    fmt: str,
    *,
    tokens: int,
    top_k: int,
    experts: int,
    columns: int,
    pdl: bool = False,
    reduction: int = 0,
) -> Launch:
    """The launch the `grouped_decode` arm uses for a stage of ``columns`` output columns (N),
    from the shapes alone (never the routing): the one-slot GEMV at one token (its top-k experts
    are distinct: no expert holds two slots) and up to DOT_FROM_SLOTS_PER_EXPERT slots an expert
    (a second slot of an expert is a second pass over its tile, from L2), the tensor-core tile
    above (`path_launch`; from PASS_GRID_FROM_SLOTS_PER_EXPERT slots an expert, one pass a
    program, `one_pass_launch`), 16 slots a pass at every count: 32 slots a pass lost at
    32 and 64 tokens in both formats on the H200 (64 tokens, gpt-oss-20b EP2: FP8 220.8 against
    179.4 us, MXFP4 253.7 against 177.3; docs/perf/2026-12-01-integrity/bench_grouped_decode.log),
    a second pass over an expert's tile reading it from L2. A tile needs 16 rows, so an N with
    fewer takes the GEMV. A GEMV of several slots a pass is never chosen (`grouped_gemv`'s
    docstring: budget). FP8's one-pass tile reads its weights packed box by box (FP8_PACKED)
    where ``reduction`` (R, the stage's values a row; 0: not said) is whole steps of it; MXFP4's
    tile (one pass or the expert loop) at any R, its last box ragged (MX_PACKED), its values in
    its K order where MX_DOT_ORDER says so and R allows it, its one pass on the persistent grid
    where PASS_GRID_MXFP4_STREAM_K says so and R is at least one step; either format's one pass
    in Gluon where MX_GLUON (FP8_GLUON) says so and the shapes take its layout (`gluon_launch`;
    the arm keeps the Triton tile off the GPU)."""
    slots = tokens * top_k
    many = tokens > 1 and slots > DOT_FROM_SLOTS_PER_EXPERT[fmt] * experts
    if many and columns & -columns >= 16:
        tile = path_launch("dot", fmt, columns=columns, block_m=16, pdl=pdl)
        if slots >= PASS_GRID_FROM_SLOTS_PER_EXPERT * experts:
            one = one_pass_launch(tile, fmt)
            if fmt == "fp8" and FP8_PACKED and reduction and reduction % one.block_k == 0:
                one = replace(one, fp8_packed=True)
            stream = PASS_GRID_MXFP4_STREAM_K if fmt == "mxfp4" else 0
            if stream and one.mx_packed_scales and reduction >= one.block_k:
                one = replace(one, stream_k=stream)
            gluon = MX_GLUON if fmt == "mxfp4" else FP8_GLUON
            if gluon and gluon_fits(columns, reduction):
                return gluon_launch(one, fmt)  # the counters' roles: `paired_launches`, after
            return _dot_ordered(one, reduction)
        return _dot_ordered(tile, reduction)
    return path_launch("gemv", fmt, columns=columns, pdl=pdl)
