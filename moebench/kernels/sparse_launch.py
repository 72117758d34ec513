"""Which launch the sparse decode GEMV (`moebench.kernels.sparse_gemv`) takes by default: its
blocks and warps (`default_blocks`), its register cap and where its epilogue's loads go
(`default_registers`), the FP8 loop's forms by rows a program, how it loads the token
(`default_token_load`) and whether the step's kernels are dependent launches (`default_pdl`),
read from the format and the token count alone (never the routing), each constant with the
measurements that set it (on the H200 unless it says otherwise)."""

# From this many tokens the FP8 GEMV's one-warp program takes 4 rows at 512 bytes a row a step
# (the same 64 bytes a lane a step as 2 rows at 1,024): half the programs. H200, gpt-oss-20b EP2,
# the sparse step, six routing draws, both ranks, the slower rank's step: with the token through
# the row-broadcast tile 4.5% faster at 4 tokens (72.42 against 75.86 us), 9.8% at 8, 11.2% at 16,
# +0.6% at 2, +7.2% at one (docs/perf/2026-12-04-early-loads/); with the token loaded once
# (FP8_TOKEN_ONCE_FROM_ROWS) 3.8% faster than 2 rows at 2 tokens (42.76 against 44.47 us, all six
# draws), 1.6% slower at one (docs/perf/2026-12-04-token-programs/).
FP8_FOUR_ROWS_FROM_TOKENS = 2

# From this many rows a program the FP8 plain loop loads the token's values once a step and
# broadcasts them over its rows in registers (`_sparse_gemv_fp8`'s TOKEN_ONCE; the same bits).
# Measured as above: at 4 rows 4.4% faster at 4 tokens (69.23 against 72.39 us), 4.9% at 8, 5.4%
# at 16, all six draws each; at 2 rows (the values moved by warp shuffles) 1.3-1.6% slower at 1-2.
FP8_TOKEN_ONCE_FROM_ROWS = 4

# From this many rows a program the FP8 loop runs its whole steps unmasked and the step past R
# masked after them (`_sparse_gemv_fp8`'s WHOLE_STEPS; the same bits). H200, gpt-oss-20b EP2, the
# sparse step, six routing draws, both ranks, the slower rank's step, against every step masked
# (docs/perf/2026-12-04-unmasked-steps/): at 4 rows (2 tokens and up) faster in every draw, 2.0%
# at 2 tokens (42.23 against 43.09 us), 1.4% at 4, 1.5% at 8, 1.9% at 16; at 2 rows (one token)
# 1.7% slower (32.30 against 31.75), slower in five draws of six.
FP8_WHOLE_STEPS_FROM_ROWS = 4


def default_blocks(fmt: str, tokens: int = 1) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, warps) for ``tokens`` tokens, measured on the H200 at gpt-oss-20b
    decode shapes (docs/PERF.md, 2026-11-30, logs in docs/perf/2026-11-30-kernels/; FP8 from
    FP8_FOUR_ROWS_FROM_TOKENS tokens: 4 rows at 512 bytes, 2026-12-04).

    FP8: one warp a program for 2 rows, 1,024 weight bytes a row a step (two 16-byte loads a lane
    in flight per row): gate_up 19.5-19.9 us and down 12.9-13.0 us at one token, against 21.6-22.0
    and 13.4-13.7 for 8 rows on 4 warps and 23.4 / 14.9 for the first default (16 rows, 512 /
    1,024 bytes). Latency-bound (Nsight Compute: DRAM 48%); many small programs keep more of
    the GPU busy to the end. A row's lane sums differ by blocks only in the last fp32 bits.

    MXFP4 (with the group-major tile, `sparse_gemv(group_major=...)`, on by default for MXFP4):
    16 rows on 4 warps, 1,024 values (512 bytes) a row a step: gate_up 21.2-21.3 us and down
    14.3-14.5 at one token (20.5 / 13.7 with the PTX bit-select of kernels.jit), against
    24.2 / 15.9 for the row-major tile at 512 values, the earlier default (docs/PERF.md,
    2026-12-01 second session). 2,048 values a step works on 42% padding at R = 2,880 and was
    slower (28.3 / 18.2)."""
    if fmt != "fp8":
        return 16, 1024, 4
    if tokens >= FP8_FOUR_ROWS_FROM_TOKENS:
        return 4, 512, 1
    return 2, 1024, 1


# From this many tokens the MXFP4 GEMV is capped at MXFP4_CAPPED_REGISTERS registers a thread and
# loads its bias after the K loop: 6 programs an SM against 5 at 95 registers (sm_90a, offline: no
# spill; with the bias before the loop the cap spills it). H200, gpt-oss-20b EP2, the sparse step,
# six routing draws, both ranks, the slower rank's step, against the default then (uncapped, bias
# before the loop; docs/perf/2026-12-04-unmasked-steps/): faster in every draw at 4 tokens (71.91
# against 72.82 us, -1.2%) and 8 (-1.6%); at 2 tokens +0.4%, at one +2.6%. Capped with the bias
# before the loop: +0.3% at 4, +5.2% at one. The same bits.
MXFP4_CAPPED_FROM_TOKENS = 4
MXFP4_CAPPED_REGISTERS = 80


def default_registers(fmt: str, tokens: int = 1) -> tuple[int, bool]:
    """(max_registers, early_loads) for ``tokens`` tokens: no cap and the epilogue's loads before
    the K loop, but MXFP4 from MXFP4_CAPPED_FROM_TOKENS (measured on the H200)."""
    if fmt == "mxfp4" and tokens >= MXFP4_CAPPED_FROM_TOKENS:
        return MXFP4_CAPPED_REGISTERS, False
    return 0, True


# The MXFP4 GEMV reads its weights in `mx_rotated`'s layout (`sparse_gemv(mx_rotated=True)`; the
# arm makes the rotated copy once when it builds its stages) and loads the token's words as
# 16-byte quads of inline PTX (``token_load="quads"``, where the token rows are 16-byte aligned,
# `token_quads_fit`), at every token count. H200, gpt-oss-20b EP2, the sparse step, six routing
# draws, both ranks, the slower rank's step, against the natural layout and the broadcast load
# (docs/perf/2026-12-05-rotated-layout/call1/ab_sparse.log): faster in every draw at every count,
# 26.82 against 31.28 us at one token (-14.3%), 35.26 against 42.58 at 2 (-17.2%), 60.70 against
# 71.83 at 4 (-15.5%), 101.94 against 120.95 at 8 (-15.7%); rotated with the broadcast load
# 27.96, 37.45, 63.21 and 105.37 (the quads faster than it in every draw). The same bits.
MXFP4_ROTATED = True

# From this many tokens the FP8 GEMV (4 rows a program, the token once a step) loads the token's
# values as 16-byte quads of inline PTX in the weights' layout (``token_load="quads"``: no shared
# memory, no barrier; sm_90a 253 instructions a step against 290). H200, gpt-oss-20b EP2, the
# sparse step, six routing draws, both ranks, the slower rank's step
# (docs/perf/2026-12-05-rotated-layout/call2/ab_fp8.log): faster in every draw at 2-16 tokens,
# 40.70 against 42.14 us at 2 (-3.4%), 66.67 against 68.63 at 4 (-2.9%), 108.80 against 112.69
# at 8, 200.78 against 208.75 at 16; at one token (2 rows, the row-broadcast tile) slower, 33.12
# against 31.77 (32.33 capped at 64 registers). The same bits.
FP8_QUADS_FROM_TOKENS = 2


def default_token_load(fmt: str, tokens: int = 1) -> str:
    """How the GEMV loads the token's values for ``tokens`` tokens (`sparse_gemv`'s
    ``token_load``), where the token rows fit 16-byte loads (`token_quads_fit`; ``broadcast``
    otherwise): MXFP4 ``quads`` at every count (with the rotated layout, above), FP8 ``quads``
    from FP8_QUADS_FROM_TOKENS."""
    if fmt == "mxfp4" or tokens >= FP8_QUADS_FROM_TOKENS:
        return "quads"
    return "broadcast"


def token_quads_fit(*rows) -> bool:
    """Whether bf16 token rows (tensors whose last dimension is a row, unit stride) can be read
    as 16-byte quads (``token_load="quads"``): each base and row stride on a 16-byte boundary."""
    return all(t.data_ptr() % 16 == 0 and all(s % 8 == 0 for s in t.stride()[:-1]) for t in rows)


# Programmatic dependent launch of the step's GEMVs and combine (moebench/kernels/jit.py: on the
# GPU each kernel starts while the one before it in the step's graph finishes, reads only routing
# and weights until it has waited for it, and writes the same bits). MXFP4 takes it at every
# count: H200, one token of gpt-oss-20b, the step 33.1 against 34.8 us without (issue 19). FP8
# takes it up to FP8_PDL_LOCAL_TOKENS tokens, each GEMV program letting the next kernel launch
# once its slot is known local (`sparse_gemv(pdl_trigger="local")`; a program that returns at
# once counts as having let it): the launch that fills the SMs with the next kernel's one-warp
# programs while this one's local programs still read. H100 80GB HBM3 (no H200 was lent to
# measure it), gpt-oss-20b EP2, the sparse step, both ranks, the slower rank's step, on the mean
# over the draws: at one token 34.18 against 35.76 us and 34.29 against 35.86 (-4.4% each), faster
# in all twelve draws of two calls (docs/perf/2026-12-05-ready-slots/call3,
# docs/perf/2026-12-05-h200-confirm/call1); at 2 tokens -0.6% (3 of 6 draws, the second of those
# calls), -2.1% (3 of 4, docs/perf/2026-12-06-sparse-ready/call1) and -2.9% (51.19 against 52.71,
# 5 of 8, call6); at 4 tokens -1.2% (5 of 6), -1.4% (3 of 4) and -1.2% (88.56 against 89.66, 6 of
# 8). Faster on the mean in every call; the draws it slows (draw C, routing.seed 2, in each call
# at 2 and 4 tokens) by up to 4.3%. Above 4 tokens the grouped arm is FP8's faster one. With every
# program letting it at its start, FP8 was slower on the H200 at one token (34.5-36.4 against 33.4
# us, issue 19; the eighteenth session read why: with no local slot the two launches took 22.5 us
# against 18.5, the dependent launch over 17,280 one-warp programs).
FP8_PDL_LOCAL_TOKENS = 4


def default_pdl(fmt: str, tokens: int = 1) -> tuple[bool, str]:
    """(pdl, pdl_trigger) of the sparse step's kernels for ``tokens`` tokens (`sparse_gemv`'s
    arguments; the combine takes ``pdl`` too): MXFP4 dependent launches triggered at each
    program's start, FP8 up to FP8_PDL_LOCAL_TOKENS tokens triggered once the slot is local,
    FP8 above it plain launches (measured, above)."""
    if fmt == "mxfp4":
        return True, "start"
    if tokens <= FP8_PDL_LOCAL_TOKENS:
        return True, "local"
    return False, "start"


# The GEMV's programs may serve the local (token, slot) pairs first in launch order, those past
# their count leaving last (`sparse_gemv(local_first=True)`, `gemv_parts.program_expert`), for at
# most this many pairs (each program reads the whole routing: 64 ids, 256 bytes). Off: H100 80GB
# HBM3, gpt-oss-20b EP2, the sparse step, four routing draws, both ranks, the slower rank's step
# (docs/perf/2026-12-06-one-token/call1): slower at every count in both formats, FP8 +5.1% at one
# token (35.02 against 33.31 us; +3.9% in the draw whose third slot of four is remote); measured
# again against the arm's own launches (docs/perf/2026-12-06-sparse-ready/call9; the first call's
# other rows had other launches besides), FP8 +2.5% at 2 tokens and +4.3% at 4, MXFP4 +1.7%,
# +2.4% and +5.1% at 1, 2 and 4. Every program's read of the whole routing costs more than the
# remote slots' programs between the local ones do. The same bits.
LOCAL_FIRST_MAX_SLOTS = 64


def default_local_first(fmt: str, tokens: int = 1) -> bool:
    """Whether the GEMV serves the local (token, slot) pairs first (`sparse_gemv`'s
    ``local_first``) for ``tokens`` tokens: never (measured slower, above)."""
    return False
