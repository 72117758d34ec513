"""docs/PERF.md's generated tables of the third H200 session of 2026-12-02: the grouped decode's
FP8 tile widened by bit placement (issue 28): the A/B of the conversion, the read-only kernel at
the tile's access pattern (the second method), the bench at every token count beside the last
session's, and the scenario run with every gate.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Piece, Table, fill
from perf_records import Figure, Records, over
from perf_specs_grouped import FORMATS, TOKENS, read_floor, summary
from perf_specs_serving import BENCH as BENCH_BEFORE

DAY = "2026-12-02-decode-kernel"
AB = f"{DAY}/ab_conversion.log"
READ = f"{DAY}/read_pattern.log"
BENCH = f"{DAY}/bench_grouped_decode.log"
RUN = f"{DAY}/gpt-oss-20b-decode-grouped.md"
HIST = "[issue 28][h-i28k]"
BEFORE_TOKENS = (1, 32, 64)  # the counts the last session's bench timed


def fp8_conversion(r: Records) -> Table:
    t = Table(
        name="fp8_conversion",
        caption="""\
The FP8 step of the grouped arm (fc1 + fc2, gpt-oss-20b EP2 rank 0's shapes with random routing,
one CUDA graph, L2 flushed before each replay, median of 40 replays interleaved; `scratch/mb.py`
of the records, which times a kernel beside the repository's): e4m3 widened to bf16 by triton's
`.to(tl.bfloat16)` (through fp16, one F2F a value on the SMs' conversion pipe; the kernel of
f9dec49) against bit placement (`jit.e4m3_to_bf16`, as committed), on the tile of 64 values a
step and 6 stages (outputs bitwise equal on the GPU), and bit placement on 128 values a step with
4 and 5 stages (the sums in another order: within 0.004 of the 64-value outputs). "default then":
the arm's own launch at f9dec49 (the GEMV at one token, the tiles at 4 to 64), with the old
conversion. Derived: "same launch" = bit placement / F2F - 1 on the 64-value tile. This harness
times each replay with its launch, so its figures sit 5-15 us above the bench's (`grouped_now`).""",
        columns=[
            "tokens",
            "64 values, 6 stages: F2F",
            "bit placement",
            "same launch",
            "bit placement, 128 values, 4 stages",
            "128 values, 5 stages",
            "default then",
        ],
    )

    def us(tokens: int, spec: str) -> Figure:
        return r.kv(AB, "step_us", fmt="fp8", tokens=tokens, spec=spec)

    for tokens in (1, 4, 8, 16, 32, 64):
        old, new = us(tokens, "base:16:64:64:4:6"), us(tokens, "nat:16:64:64:4:6")
        t.row(
            r.kv(AB, "tokens", fmt="fp8", tokens=tokens, spec="base:16:64:64:4:6"),
            old,
            new,
            over(new, old),
            us(tokens, "nat:16:64:128:4:4"),
            us(tokens, "nat:16:64:128:4:5"),
            us(tokens, "gemv:0:0:0:0:0"),
            history=HIST,
        )
    return t


def read_pattern(r: Records) -> Table:
    t = Table(
        name="read_pattern",
        caption="""\
The second method: a kernel that only reads gpt-oss-20b's fc1 weights of 16 experts (265 MB of
FP8, `scratch/rd.py`: each program a block of rows, a step a [rows, bytes] tile, XOR-summed so
nothing is dropped; one launch after an L2 flush, median of 20), at the tile's access pattern (64
rows, 64 or 128 bytes of each row a step) and with longer runs of a row. 64 bytes a row a step,
the pattern of the FP8 tile before this session, reads at 75% of the copy ceiling in registers and
62% through a 6-stage cp.async pipeline (the tile's); 128 bytes reach 77-80%, 256-1,024 bytes
80-82%. "stages" is the loop's `num_stages`: 0 leaves the compiler's default, which compiles to
plain loads into registers (LDG in the sm_90a SASS), a count to a cp.async pipeline through
shared memory (LDGSTS). GB/s and the share of the 4.27 TB/s copy ceiling as the tool prints
them.""",
        columns=["rows a program", "bytes a row a step", "stages", "us", "GB/s, of copy"],
    )
    for bn, bk, stages, warps in (
        (64, 64, 0, 4),
        (64, 64, 6, 4),
        (64, 128, 0, 4),
        (64, 128, 4, 4),
        (64, 256, 3, 4),
        (64, 512, 0, 4),
        (16, 1024, 0, 4),
        (2, 1024, 0, 1),
    ):
        line = rf"^read bn={bn} bk={bk} sub=1 stages={stages} warps={warps}: "

        def field(pattern: str, line: str = line) -> Figure:
            return r.text(READ, line + pattern)

        t.row(
            r.text(READ, rf"^read bn=({bn}) bk={bk} sub=1 stages={stages} warps={warps}: "),
            r.text(READ, rf"^read bn={bn} bk=({bk}) sub=1 stages={stages} warps={warps}: "),
            r.text(READ, rf"^read bn={bn} bk={bk} sub=1 stages=({stages}) warps={warps}: "),
            field(r"(\S+) us, "),
            fill("{}, {}", field(r"\S+ us, (\d+) GB/s"), field(r".* \((\d+%) of copy\)$")),
            history=HIST,
        )
    return t


def grouped_now(r: Records) -> Table:
    t = Table(
        name="grouped_now",
        caption="""\
`tools/bench_grouped_decode.py` at every token count of the sweep (gpt-oss-20b EP2 rank 0, 16
local experts, top-4; each step one CUDA graph, L2 flushed before each replay, every step checked
against the reference and the sentinels before it was timed), each arm's default launch, beside
the grouped default of the last session's bench (table `grouped_launches`; it timed 1, 32 and 64
tokens). Dense decode takes the same bit-placement conversion since this session. "% copy" is the
bench's share of the 4.27 TB/s copy ceiling over the arm's weight bytes (the touched experts');
"read floor" the bench's fastest read of those bytes, with its share of the ceiling as a
fraction. Derived: "change" = grouped now / grouped before - 1. Issue 28's targets: grouped faster
than dense at every count (met in both formats), MXFP4 faster than FP8 at every count (met at 1
and 2 tokens only: FP8's tile gained, MXFP4's did not), >= 85% of copy at 32 and 64 tokens (FP8
65% and 63%, MXFP4 33% and 31%: missed).""",
        columns=[
            "precision, tokens",
            "dense us",
            "sparse us",
            "grouped us, % copy",
            "grouped before us",
            "change",
            "read floor us, of copy",
        ],
    )
    for prec, _ in FORMATS:
        for tokens in TOKENS:
            now = summary(r, BENCH, prec, tokens, "grouped")
            before: Figure | str = ""
            change: Piece | str = ""
            if tokens in BEFORE_TOKENS:
                before = summary(r, BENCH_BEFORE, prec, tokens, "grouped")
                change = fill("{}", over(now, before))
            t.row(
                fill(f"{prec}, {{}}", r.text(BENCH, rf"^{prec}\s+({tokens})\s+\d+\s+\d+\s+")),
                summary(r, BENCH, prec, tokens, "dense"),
                summary(r, BENCH, prec, tokens, "sparse"),
                fill("{}, {}", now, summary(r, BENCH, prec, tokens, "grouped %copy")),
                before,
                change,
                _floor(r, prec, tokens),
                history=HIST,
            )
    return t


def _floor(r: Records, prec: str, tokens: int) -> Piece | str:
    if tokens not in (1, 64):  # the bench read the floor at 1 and 64 tokens (--floor 1,64)
        return ""
    return read_floor(r, BENCH, prec, tokens)


def grouped_run(r: Records) -> Table:
    t = Table(
        name="grouped_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` with every gate and integrity
defence (EP2 simulated, both ranks; 13 blocks of 20; every correctness gate passed, and the 84
checks of each integrity defence), the `ffn` regime, median us of the slowest rank, and the
grouped arm's change against dense_decode with its Bonferroni-corrected interval and decision, as
`moebench compare` printed them. The run's crossover table: dense is faster from no count in
either format for the grouped arm, from 16 tokens for the sparse arm; the policy: sparse up to 4
tokens (FP8) or 8 (MXFP4), grouped above.""",
        columns=["case", "dense_decode", "sparse_decode", "grouped_decode", "grouped vs dense"],
    )
    for i, (prec, tokens) in enumerate((p, t) for p, _ in FORMATS for t in TOKENS):
        case = f"c{i:03d}-precision={prec}-tokens_per_rank={tokens}"

        def ffn(arm: str, column: str = "median us", case: str = case) -> Figure:
            return r.result(RUN, "ffn", arm, case, column)

        t.row(
            r.cell(RUN, "Results", "case", case=case, stage="ffn", arm="dense_decode"),
            ffn("dense_decode"),
            ffn("sparse_decode"),
            ffn("grouped_decode"),
            fill("{} {}", ffn("grouped_decode", "change [CI]"), ffn("grouped_decode", "result")),
            history=HIST,
        )
    return t


TABLES = [grouped_now, fp8_conversion, read_pattern, grouped_run]
