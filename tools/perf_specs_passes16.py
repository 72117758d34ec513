"""docs/PERF.md's generated tables of the twelfth H200 session (2026-12-03, issue 28): FP8's
grouped tile one pass a program from 16 tokens, and what was measured slower (the slots' operand
loaded in the dot's K order; deeper pipelines and fewer registers for the one-pass tile).

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table, fill
from perf_records import Derived, Figure, Records, derive, over
from perf_specs_rows import RUN_COLUMNS, run_rows

DAY = "2026-12-03-passes"
HIST = "[issue 28][h-i28q]"
DRAW_NAMES = "ABCDEF"  # routing.seed 0 (the scenario's) to 5
LOOP = "default"  # the arm's launch when the bench ran: the expert loop at 8 and 16 tokens
ONE_PASS = {"w8a16": "dot m16 n64 k128 w4 s3 pdl tma r80 passes",
            "w4a16": "dot m16 n64 k128 w4 s3 pdl r80 passes"}  # fmt: skip
mean = lambda *v: sum(v) / len(v)  # noqa: E731


def _step(r: Records, path: str, prec: str, tokens: int, seed: int, rank: int, variant: str,
          what: str = "step_us") -> Figure:  # fmt: skip
    """``what`` of the grouped arm's row for that launch in a bench log whose rows name their
    routing seed and rank."""
    head = rf"^precision={prec} tokens={tokens} seed={seed} rank={rank} .* "
    row = rf"arm=grouped_decode variant={variant} weight_bytes=.* {what}=(\S+)"
    return r.text(path, head + row)


def _slowest(r: Records, path: str, prec: str, tokens: int, seed: int, variant: str) -> Derived:
    return derive(max, "{:.1f}", *(_step(r, path, prec, tokens, seed, k, variant) for k in (0, 1)))


SIXTEEN = f"{DAY}/call3/sixteen.log"


def sixteen_token_pass(r: Records) -> Table:
    t = Table(
        name="sixteen_token_pass",
        caption="""\
FP8's grouped tile at 8 and 16 tokens a rank: its expert loop (4 stages, 128 registers; the arm's
launch when this ran) against one pass a program (3 stages, 80 registers; the arm's launch from 32
tokens then, from 16 now), six routing draws (`routing.seed` 0, the scenario's, to 5: A to F) on
both ranks: `tools/bench_grouped_decode.py --tokens 8,16 --seeds 0,1,2,3,4,5 --rank 0,1 --variants
dot:-:-:-:-:4:-:1:96:-,dot:-:-:-:-:3:-:1:96:-,dot:-:-:-:-:3:-:1:80:- --variant-tokens 8,16` (third
call, at 75fbb14's tree; each step checked against the reference and the sentinels before it is
timed; the step of fc1, fc2 and the combine as one graph, L2 flushed before each replay, us).
Derived: each cell = the slower of the two ranks' steps (a step of EP waits for its slowest rank);
"change" = one pass / loop - 1; the mean row = the mean over the six draws. At 16 tokens one pass
wins in five draws by 3.5-4.1% and loses 0.6% in one (draw B, whose second rank is the faster
one); at 8 it loses in every draw, so the arm takes one pass from 16 tokens (58818ef). MXFP4 ran
one pass from 16 tokens already; its variants here are in the log.""",
        columns=["draw", "16 tokens: loop (before)", "one pass (now)", "change",
                 "8 tokens: loop (now)", "one pass", "change"],
    )  # fmt: skip
    cols: dict[int, list[list]] = {16: [[], []], 8: [[], []]}
    for seed in range(6):
        cells = []
        for tokens in (16, 8):
            loop = _slowest(r, SIXTEEN, "w8a16", tokens, seed, LOOP)
            one = _slowest(r, SIXTEEN, "w8a16", tokens, seed, ONE_PASS["w8a16"])
            cols[tokens][0].append(loop)
            cols[tokens][1].append(one)
            cells += [loop, one, over(one, loop)]
        t.row(DRAW_NAMES[seed], *cells, history=HIST)
    cells = []
    for tokens in (16, 8):
        a = derive(mean, "{:.1f}", *cols[tokens][0])
        b = derive(mean, "{:.1f}", *cols[tokens][1])
        cells += [a, b, over(b, a)]
    t.row("mean", *cells, history=HIST)
    return t


STAGES = f"{DAY}/call2/stages.log"
DEPTHS = ("s4 pdl {tma}r80", "s4 pdl {tma}r96", "s5 pdl {tma}r80")


def pass_depth(r: Records) -> Table:
    t = Table(
        name="pass_depth",
        caption="""\
The one-pass tile's pipeline depth: 3 stages and 80 registers (the arm's, 6 programs an SM)
against 4 stages with 80 or 96 registers and 5 stages with 80 (sm_90a, FP8: 41 KB of shared
memory a program at 4 stages, 5 programs an SM), at 16, 32 and 64 tokens, two routing draws on
both ranks: `tools/bench_grouped_decode.py --tokens 16,32,64 --seeds 0,1 --rank 0,1 --variants
dot:-:-:-:-:4:-:1:80:-,dot:-:-:-:-:4:-:1:96:-,dot:-:-:-:-:5:-:1:80:- --variant-tokens 16,32,64`
(second call, 75fbb14's tree: FP8 at 16 tokens then ran the expert loop, its "arm's" cell). Each
cell the mean over the two draws of the slower rank's step, us, as the tool printed it. Derived:
"change" = the variant / the arm's - 1. Deeper pipelines are slower for FP8 at 32 and 64 tokens
(3-14%) and within 0.3% or slower for MXFP4: the one-pass tile keeps 3 stages.""",
        columns=["precision, tokens", "arm's", "4 stages, 80", "change", "4 stages, 96", "change",
                 "5 stages, 80", "change"],
    )  # fmt: skip
    return _variant_means(r, t, STAGES, DEPTHS)


def _variant_means(r: Records, t: Table, path: str, launches: tuple[str, ...]) -> Table:
    """Rows of the bench's summary in ``path``: per format and count, the arm's mean over the
    draws of the slower rank's step, and each one-pass launch's (``launches``: stages, pdl,
    registers, "{tma}" where FP8's says tma) with its change against it."""
    for prec, name in (("w8a16", "FP8"), ("w4a16", "MXFP4")):
        tma = "tma " if prec == "w8a16" else ""
        for tokens in (16, 32, 64):
            head = rf"^  {prec} +{tokens} grouped_decode "
            arm = r.text(path, head + r"default: .* mean (\S+)$")
            cells: list = [arm]
            for launch in launches:
                full = "dot m16 n64 k128 w4 " + launch.format(tma=tma) + " passes"
                v = r.text(path, head + full + r": .* mean (\S+) ")
                cells += [v, over(v, arm)]
            label = r.text(path, rf"^  {prec} +({tokens}) grouped_decode default:")
            t.row(fill(f"{name}, {{}}", label), *cells, history=HIST)
    return t


REGS = f"{DAY}/call7/regs.log"
REGISTERS = ("s3 pdl {tma}r72", "s3 pdl {tma}r64", "s2 pdl {tma}r64")


def pass_registers(r: Records) -> Table:
    t = Table(
        name="pass_registers",
        caption="""\
More programs an SM for the one-pass tile: its 80 registers a thread (the arm's: 6 programs an
SM) against 72 (7 an SM), 64 on 3 stages (7: shared memory holds no more) and 64 on 2 stages (8),
at 16, 32 and 64 tokens, two routing draws on both ranks: `tools/bench_grouped_decode.py --tokens
16,32,64 --seeds 0,1 --rank 0,1 --variants
dot:-:-:-:-:3:-:1:72:-,dot:-:-:-:-:3:-:1:64:-,dot:-:-:-:-:2:-:1:64:- --variant-tokens 16,32,64`
(seventh call, 4b27327's tree: the arm one pass a program from 16 tokens in both formats). Each
cell as in `pass_depth`. Derived: "change" = the variant / the arm's - 1. sm_90a (offline): the
caps spill, FP8 at 72 registers 40-56 bytes of stack and 15-19 local loads and stores, at 64 88-96
bytes and 36-38. Every variant slower, by 6-12% at 72 registers and 22-47% at 64: the sixth
program an SM is the last that pays.""",
        columns=["precision, tokens", "arm's", "72, 3 stages", "change", "64, 3 stages", "change",
                 "64, 2 stages", "change"],
    )  # fmt: skip
    return _variant_means(r, t, REGS, REGISTERS)


WIDE = f"{DAY}/call8/wide.log"
ROWS128 = "dot m16 n128 k128 w8 s3 pdl tma r80 passes"
K256 = "dot m16 n64 k256 w4 s2 pdl tma r128 passes"


def pass_shapes(r: Records) -> Table:
    t = Table(
        name="pass_shapes",
        caption="""\
Other shapes for FP8's one-pass tile at 32 and 64 tokens, fc1 and fc2 each alone (the kernel
regime, us; rank 1, two routing draws): 128 rows a program on 8 warps (two warpgroups, 74-78
registers, 3 programs an SM; fc2's 2,880 rows take 64-row blocks, so fc2 runs 64 rows on 8 warps)
and 256 values a step on 2 stages, 128 registers (4 programs an SM, 40 bytes of stack; sm_90a,
offline), against the arm's 64 rows, 128 values, 3 stages, 80 registers:
`tools/bench_grouped_decode.py --tokens 16,32,64 --seeds 0,1 --rank 0,1 --variants
dot:-:128:-:8:3:-:1:80:-,dot:-:128:-:8:4:-:1:80:-,dot:-:-:256:-:2:-:1:128:- --variant-tokens
16,32,64` (eighth call, 62f7c43's tree). Derived: "change" = the variant / the arm's - 1. fc1 on
128 rows is 2-5% slower (4 stages alike, in the log), 256 values a step 30-31% slower; the whole
step slower with every one in both formats (22-33% and 31-89%, the log's summary).""",
        columns=["tokens, draw", "fc1: arm's", "128 rows, 8 warps", "change", "256 values",
                 "change", "fc2: arm's", "64 rows on 8 warps", "256 values"],
    )  # fmt: skip
    for tokens, words in ((64, "sixty-four"), (32, "thirty-two")):
        for seed in (0, 1):
            at = lambda v, w: _step(r, WIDE, "w8a16", tokens, seed, 1, v, w)  # noqa: E731
            f1 = at("default", "fc1_us")
            wide, k256 = at(ROWS128, "fc1_us"), at(K256, "fc1_us")
            t.row(f"{words}, {DRAW_NAMES[seed]}", f1, wide, over(wide, f1), k256, over(k256, f1),
                  at("default", "fc2_us"), at(ROWS128, "fc2_us"), at(K256, "fc2_us"),
                  history=HIST)  # fmt: skip
    return t


XORDER = f"{DAY}/call1/new1.log"


def x_dot_order(r: Records) -> Table:
    t = Table(
        name="x_dot_order",
        caption="""\
The slots' operand loaded in the dot's K order by its pointers (`call1/xorder.diff`, not kept):
the compiled FP8 tile then copies it asynchronously straight into the tensor cores' shared-memory
operand (sm_90a SASS: no store of it from registers, its MMAs left in flight across steps) but in
4-byte pieces (8 copies a thread a step against 2 of 16 bytes), 355 instructions a step against
276. `tools/bench_grouped_decode.py --tokens 8,32,64 --seeds 0,1 --rank 1` on that tree (first
call; the A/B's run of the tree before it failed to start: `call1/old1.log`), against the arm's
launch in the second call (`--rank 0,1`, the same draws), rank 1, us. Derived: "change" = dot
order / the arm's - 1. FP8 slower by 8-10%; MXFP4, whose decode had to give each register word a
byte's two nibbles (natural K pairs) for the same load, failed the reference gate at 128 values a
step (64 passed; not investigated: a reading is that the asm's pack of four bytes does not
share one scale there) and was not timed. Not shipped.""",
        columns=["precision, tokens, draw", "the arm's (second call)", "dot order (first call)",
                 "change", "fc1 / fc2, the arm's", "fc1 / fc2, dot order"],
    )  # fmt: skip
    for tokens in (64, 32):
        for seed in (0, 1):
            base = _step(r, STAGES, "w8a16", tokens, seed, 1, "default")
            new = _step(r, XORDER, "w8a16", tokens, seed, 1, "default")
            t.row(f"FP8, {'sixty-four' if tokens == 64 else 'thirty-two'}, {DRAW_NAMES[seed]}",
                  base, new, over(new, base),
                  fill("{} / {}", _step(r, STAGES, "w8a16", tokens, seed, 1, "default", "fc1_us"),
                       _step(r, STAGES, "w8a16", tokens, seed, 1, "default", "fc2_us")),
                  fill("{} / {}", _step(r, XORDER, "w8a16", tokens, seed, 1, "default", "fc1_us"),
                       _step(r, XORDER, "w8a16", tokens, seed, 1, "default", "fc2_us")),
                  history=HIST)  # fmt: skip
    mx = r.text(XORDER, r"^precision=w4a16 tokens=64 seed=0 rank=1 .* arm=grouped_decode "
                        r"variant=default .* diff=(\S+) ok=False")  # fmt: skip
    t.row("MXFP4, sixty-four, A", "", fill("failed the reference gate (diff {})", mx), "", "", "",
          history=HIST)  # fmt: skip
    return t


RUN = f"{DAY}/call4/gpt-oss-20b-decode-grouped.md"


def passes_run(r: Records) -> Table:
    t = Table(
        name="passes_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (`tools/gpu_run.sh`, EP2
simulated, both ranks, 13 blocks of 20; 240 s; fourth call) on 58818ef's tree (FP8's tile one pass
a program from 16 tokens; the run manifest names 75fbb14: the device's copy of git's HEAD lagged):
every correctness gate and integrity check passed (952 pass, 112 skip, none failed;
`call4/gpt-oss-20b-decode-grouped.run-tail.txt`). The `ffn` regime, median us of the slowest rank
as `moebench compare` printed them. Derived: "MXFP4 / FP8, best arm" = the faster of MXFP4's
sparse and grouped steps over the faster of FP8's. FP8's grouped step at 16 tokens: 128.6 us
against 134.5 in the eleventh session's run (`rank_run`; fc1 79.5 against 81.4, fc2 47.1 against
50.9), every other count within about 1% of it; grouped FASTER than dense at every count in both
formats; the policy unchanged (FP8 sparse up to 4 tokens, MXFP4 up to 2 and the SAME at 4,
grouped above).""",
        columns=RUN_COLUMNS,
    )
    return run_rows(r, t, RUN, history=HIST)


STEP_NOW = f"{DAY}/call4/step16.md"
STEP_BEFORE = "2026-12-03-rank/step/gpt-oss-20b-decode-step-grouped.md"


def passes_step(r: Records) -> Table:
    t = Table(
        name="passes_step",
        caption="""\
The step regime at 16 tokens: `docs/perf/2026-12-03-passes/scratch/step16.yaml`
(`scenarios/gpt-oss-20b-decode-step-grouped.yaml` at 16 tokens only) through `moebench run`
(fourth call, 79 s, 58818ef's tree: FP8 one pass a program) against the same case of the
eleventh session's full run (`rank_step`, the expert loop): gpt-oss-20b's 24 MoE layers, each
with its own weights and a seeded uniform routing per step and layer, EP2 simulated, one step =
the sum over layers of each layer's slowest rank; 40 steps a case; every gate of the new run
passed (82 pass, 10 skip). P50 and P90 of the step with their exact 95% order-statistic
intervals, us. Derived: "change" = now / before - 1. FP8's grouped step 3.1% lower at the median
and 3.4% at P90, the intervals apart; MXFP4's (one pass in both runs) and both dense steps within
their intervals.""",
        columns=["precision, arm", "P50 before", "P50 now", "change", "P90 before", "P90 now",
                 "change"],
    )  # fmt: skip
    section = "Model step"
    cases = {"w8a16": ("c002", "c000"), "w4a16": ("c007", "c001")}
    for prec, name in (("w8a16", "FP8"), ("w4a16", "MXFP4")):
        before_case = f"{cases[prec][0]}-precision={prec}-tokens_per_rank=16"
        now_case = f"{cases[prec][1]}-precision={prec}-tokens_per_rank=16"
        for arm in ("grouped_decode", "dense_decode"):
            cells: list = []
            for column in ("P50 us", "P90 us"):
                b = r.cell(STEP_BEFORE, section, column, case=before_case, arm=arm)
                n = r.cell(STEP_NOW, section, column, case=now_case, arm=arm)
                cells += [b, n, over(n, b)]
            t.row(f"{name}, {arm}", *cells, history=HIST)
    return t


TABLES = [
    sixteen_token_pass,
    passes_run,
    passes_step,
    pass_depth,
    pass_registers,
    pass_shapes,
    x_dot_order,
]
