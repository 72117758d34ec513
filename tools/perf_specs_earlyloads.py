"""docs/PERF.md's generated tables of the thirteenth H200 session's second part (2026-12-04, issue
28): the decode GEMVs' epilogue loads asked for before their K loop (the sparse GEMV's bias and
FP8 scale, the grouped tile's bias), the sparse step's cost by local slots at one token, FP8's
sparse GEMV with fewer, larger programs, and the gated scenario on the new defaults.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Derived, Figure, Records, derive, over
from perf_specs_grouped import FORMATS, TOKENS

DAY = "2026-12-04-early-loads"
HIST = "[issue 28][h-i28l]"
SEEDS = range(6)
mean = lambda *v: sum(v) / len(v)  # noqa: E731


def _early_step(r: Records, log: str, prec: str, tokens: int, seed: int, rank: int, kind: str,
                what: str = "step_us") -> Figure:  # fmt: skip
    """``what`` of one step kind (``after``, ``early`` or ``rowsNwM``) on one rank of one draw in
    a log of `scratch/early_bench.py`."""
    head = rf"^{prec} T={tokens} seed={seed} rank={rank} slots=\d+ touched=\d+ {kind}: ok=True "
    return r.text(log, head + rf".* {what}=(\S+)")


def _mean_slowest(r: Records, log: str, prec: str, tokens: int, kind: str) -> Derived:
    """The mean over the draws of the slower rank's step."""
    worst = [derive(max, "{:.2f}", *(_early_step(r, log, prec, tokens, s, k, kind) for k in (0, 1)))
             for s in SEEDS]  # fmt: skip
    return derive(mean, "{:.2f}", *worst)


def _faster(r: Records, log: str, prec: str, tokens: int, kind: str, base: str) -> Derived:
    """In how many draws ``kind``'s slower rank beats ``base``'s."""
    pairs = []
    for s in SEEDS:
        for name in (kind, base):
            pairs.append(derive(max, "{:.2f}", *(_early_step(r, log, prec, tokens, s, k, name)
                                                 for k in (0, 1))))  # fmt: skip
    count = lambda *v: sum(v[i] < v[i + 1] for i in range(0, len(v), 2))  # noqa: E731
    return derive(count, "{:.0f} of six", *pairs)


def _launch_rows(r: Records, t: Table, log: str, prec: str, kinds, tokens) -> Table:
    """One row a launch (``kinds``: (kind as the log names it, label)), a cell a token count: the
    mean over the draws of the slower rank's step."""
    for kind, label in kinds:
        t.row(label, *(_mean_slowest(r, log, prec, n, kind) for n in tokens), history=HIST)
    return t


EARLY = f"{DAY}/call4/early.log"


def early_loads(r: Records) -> Table:
    t = Table(
        name="early_loads",
        caption="""\
The sparse decode step (fc1, fc2, combine; one CUDA graph, L2 flushed before each replay, us)
with the GEMV's epilogue loads (bias; FP8's expert scale) after the K loop, as the arm ran them,
against before it (`sparse_gemv(early_loads=True)`, now the default), the arm's PDL choice per
precision: `PYTHONPATH=$PWD:$PWD/tools python3 DIR/early_bench.py --tokens 1,2,4 --seeds
0,1,2,3,4,5 --rank 0,1` (fourth call; DIR the records' scratch/), six routing draws, both ranks;
each step checked against the reference and the sentinels, the early step bit for bit the
other's before timing. Derived: a cell = the mean over the six draws of the slower rank's step;
"change" = early / after - 1; "faster in" = the draws whose slower rank's step is faster early.""",
        columns=["precision", "tokens", "loads after the loop", "before it", "change",
                 "faster in"],
    )  # fmt: skip
    for prec, name in FORMATS:
        for tokens in (1, 2, 4):
            after = _mean_slowest(r, EARLY, prec, tokens, "after")
            early = _mean_slowest(r, EARLY, prec, tokens, "early")
            count = r.text(EARLY, rf"^{prec} T=({tokens}) seed=0 rank=0 .* after: ")
            t.row(name, count, after, early, over(early, after),
                  _faster(r, EARLY, prec, tokens, "early", "after"), history=HIST)  # fmt: skip
    return t


def one_token_slots(r: Records) -> Table:
    t = Table(
        name="one_token_slots",
        caption="""\
What the sparse step costs at one token by the slots a rank holds (0 to 4 of the token's top-4):
the fourth call's rows (`early_loads`' command; every draw and rank, the early step), us.
Derived: each cell = the mean over the rows with that many local slots (1 to 4 rows each);
"per slot" and "fixed" = the least-squares line of step against slots over every row (12 a
format); "75% needs" = the bytes of three slots (74.7 MB FP8) over 75% of the 4.27 TB/s copy
ceiling, minus "fixed": what three slots' weights would have to stream in if the fixed part
stayed (negative for MXFP4: its fixed part alone is longer than a step of its bytes at 75%).
Each further slot costs about an expert's bytes at the copy rate; the fixed part (the empty step:
fc1, fc2 and the combine reading only the routing, FP8's 17,280 one-warp programs against MXFP4's
2,160 of four warps) is what holds the one-token step from 75% of copy. (That the fixed part is
the empty programs' dispatch is ruled out by the fourteenth session's `token_programs`: a grid
without them halves the empty step and slows every step with work.)""",
        columns=["precision", "0 slots", "1", "2", "3", "4", "per slot", "fixed", "75% needs"],
    )  # fmt: skip
    for prec, name in FORMATS:
        rows = []
        for s in SEEDS:
            for k in (0, 1):
                slots = r.text(EARLY, rf"^{prec} T=1 seed={s} rank={k} slots=(\d+) .* early: ")
                rows.append((slots, _early_step(r, EARLY, prec, 1, s, k, "early")))
        cells = []
        for n in range(5):
            mine = [v for sl, v in rows if sl.number() == n]
            cells.append(derive(mean, "{:.2f}", *mine) if mine else "-")
        flat = [x for pair in rows for x in pair]

        def fit(*v: float, slope: bool) -> float:
            xs, ys = v[0::2], v[1::2]
            mx, my = mean(*xs), mean(*ys)
            b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
                (x - mx) ** 2 for x in xs
            )
            return b if slope else my - b * mx

        per = derive(lambda *v: fit(*v, slope=True), "{:.2f}", *flat)
        fixed = derive(lambda *v: fit(*v, slope=False), "{:.2f}", *flat)
        mb = r.text(EARLY, rf"^{prec} T=1 seed=0 rank=0 slots=3 .* early: .* step_us=(\S+) ")
        copy = r.text(EARLY, rf"^{prec} T=1 seed=0 rank=0 slots=3 .* early: .* of_copy=(\S+) ")
        # bytes of 3 slots / (0.75 copy) = step x of_copy / 0.75 (of_copy = bytes / step / copy)
        needs = derive(lambda u, c, f: u * c / 0.75 - f, "{:.2f}", mb, copy, fixed)
        t.row(name, *cells, per, fixed, needs, history=HIST)
    return t


ROWS = f"{DAY}/call5/rows.log"
ROW_KINDS = (("after", "one warp, two rows (loads after)"), ("early", "one warp, two rows (now)"),
             ("rows4w2", "two warps, four rows"), ("rows8w4", "four warps, eight rows"),
             ("rows16w8", "eight warps, sixteen rows"))  # fmt: skip


def fewer_programs(r: Records) -> Table:
    t = Table(
        name="fewer_programs",
        caption="""\
FP8's sparse GEMV with fewer, larger programs, each warp its own rows (1,024 bytes a row a step
as the default; `scratch/warp_rows.py`, its tile [2, rows, 32, 16] a step): `early_bench.py
--tokens 1,2,4 --seeds 0,1,2,3,4,5 --rank 0,1 --precisions w8a16 --rows 2:1,4:2,8:4,16:8` (fifth
call), each step checked against the reference and the sentinels (the rows kernels sum a row's
lanes in another order: held to the tolerance, not bitwise). "empty step": draw B's rank 0, which
holds no slot at one token (the three kernels reading only the routing). Derived: a step cell =
the mean over the six draws of the slower rank's step, us. Fewer programs cut the empty step
from 17.2 to 8.0 us, but every step with work is slower: a warp's two rows in a larger program
wait for its neighbours.""",
        columns=["launch", "empty step", "1 token", "2 tokens", "4 tokens"],
    )  # fmt: skip
    for kind, label in ROW_KINDS:
        empty = _early_step(r, ROWS, "w8a16", 1, 1, 0, kind)
        cells = [_mean_slowest(r, ROWS, "w8a16", tokens, kind) for tokens in (1, 2, 4)]
        t.row(label, empty, *cells, history=HIST)
    return t


BIAS = f"{DAY}/call7/eb.log"


def _bench_step(r: Records, prec: str, tokens: int, seed: int, rank: int, variant: str) -> Figure:
    head = rf"^precision={prec} tokens={tokens} seed={seed} rank={rank} .* "
    row = rf"arm=grouped_decode variant={variant} weight_bytes=.* step_us=(\S+)"
    return r.text(BIAS, head + row)


def _variant(r: Records, prec: str, tokens: int) -> str:
    """The early-bias variant's name at that count, as the log writes it."""
    found = r.text(BIAS, rf"^precision={prec} tokens={tokens} seed=0 rank=0 .* "
                         r"arm=grouped_decode variant=(.+ eb) weight_bytes=")  # fmt: skip
    return found.text


def early_bias(r: Records) -> Table:
    t = Table(
        name="early_bias",
        caption="""\
The grouped decode's step with the epilogue's bias loaded after the K loop (the arm's launch when
this ran) against before it (`Launch.early_bias`; now the tile's default, TILE_EARLY_BIAS):
`PYTHONPATH=$PWD python3 tools/bench_grouped_decode.py OUT --tokens 1,2,4,8,16,32,64 --seeds 0,1
--rank 0,1 --variants=-:-:-:-:-:-:-:-:-:-:1 --variant-tokens 1,2,4,8,16,32,64` (seventh call),
each step checked against the reference and the sentinels before it is timed. Derived: a cell =
the mean over the two draws of the slower rank's step, us; "change" = early / after - 1. The
tile (2 tokens up for FP8, 4 up for MXFP4) is faster early at every count in both formats; the
one-slot GEMV (below) is mixed, and keeps the bias after its loop.""",
        columns=["tokens", "FP8 after", "FP8 before the loop", "change", "MXFP4 after",
                 "MXFP4 before the loop", "change"],
    )  # fmt: skip
    for tokens in TOKENS:
        cells = []
        for prec, _ in FORMATS:
            variant = _variant(r, prec, tokens).replace("+", r"\+")
            sides = []
            for v in ("default", variant):
                worst = [derive(max, "{:.1f}", *(_bench_step(r, prec, tokens, s, k, v)
                                                 for k in (0, 1))) for s in (0, 1)]  # fmt: skip
                sides.append(derive(mean, "{:.1f}", *worst))
            cells += [sides[0], sides[1], over(sides[1], sides[0])]
        count = r.text(BIAS, rf"^precision=w8a16 tokens=({tokens}) seed=0 rank=0 .* "
                             r"arm=grouped_decode variant=default ")  # fmt: skip
        t.row(count, *cells, history=HIST)
    return t


RUN_NOW = f"{DAY}/call8/gpt-oss-20b-decode-grouped.md"
RUN_BEFORE = "2026-12-03-passes/call4/gpt-oss-20b-decode-grouped.md"


def early_run(r: Records) -> Table:
    t = Table(
        name="early_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (`tools/gpu_run.sh`, EP2
simulated, both ranks, 13 blocks of 20; 220 s; eighth call) on 444d178's tree (the sparse GEMV's
early loads and the tile's early bias by default; the run manifest names 7f01c05, dirty: the
device's copy of git's HEAD lagged) against the twelfth session's run of the same scenario
(`passes_run`): every correctness gate and integrity check passed (952 pass, 112 skip, none
failed). The `ffn` regime, median us of the slowest rank as `moebench compare` printed them.
Derived: "change" = now / before - 1. The dense arm, whose code did not change, moved by up to
+6.6% between the two runs (FP8 at 1-32 tokens), so these changes across days are not the
kernels' alone: the interleaved A/Bs above (`early_loads`, `early_bias`) are what measure them.
The sparse steps are lower now at 1-4 tokens in both formats and at every MXFP4 count, the
grouped steps within -1.4% to +2.3%.""",
        columns=["precision", "tokens", "dense before", "dense now", "change", "sparse before",
                 "sparse now", "change", "grouped before", "grouped now", "change"],
    )  # fmt: skip
    for f, (prec, name) in enumerate(FORMATS):
        for i, tokens in enumerate(TOKENS):
            count, cells = _run_pair(r, RUN_BEFORE, RUN_NOW, f * len(TOKENS) + i, prec, tokens)
            t.row(name, count, *cells, history=HIST)
    return t


def _run_pair(r: Records, before_run: str, now_run: str, index: int, prec: str,
              tokens: int) -> tuple[Figure, list]:  # fmt: skip
    """The token count of case ``index`` and each decode arm's ``ffn`` median in two runs of the
    gated scenario (before, now, change)."""
    case = f"c{index:03d}-precision={prec}-tokens_per_rank={tokens}"
    cells: list = []
    for arm in ("dense_decode", "sparse_decode", "grouped_decode"):
        before = r.result(before_run, "ffn", arm, case)
        now = r.result(now_run, "ffn", arm, case)
        cells += [before, now, over(now, before)]
    head = rf"^\| c{index:03d}-precision={prec}-tokens_per_rank=({tokens}) "
    return r.text(now_run, head + r"\| ffn \| graph \| dense_decode \|"), cells


BLOCKS = (f"{DAY}/call9/blocks.log", f"{DAY}/call10/blocks2.log")
BLOCK_KINDS = (
    ("early", "two rows, a kilobyte a row a step (before)"),
    ("n4k512w1", "four rows, half a kilobyte (now from four tokens)"),
    ("n2k512w1", "two rows, half a kilobyte"),
    ("n4k1024w1", "four rows, a kilobyte"),
    ("n8k512w1", "eight rows, half a kilobyte"),
    ("n2k2048w1", "two rows, two kilobytes"),
)


def four_rows(r: Records) -> Table:
    t = Table(
        name="four_rows",
        caption="""\
FP8's sparse GEMV (one warp a program, the epilogue loads early) with other rows a program and
bytes a row a step: `early_bench.py --tokens 1,2,4 --seeds 0,1,2,3,4,5 --rank 0,1 --precisions
w8a16 --blocks 4:1024:1,4:512:1,2:2048:1,8:512:1` (ninth call) and `--tokens 4,8,16 --blocks
4:512:1,2:512:1` (tenth call), each step checked against the reference and the sentinels (other
blocks sum a row's lanes in another order: held to the tolerance). Derived: a cell = the mean
over the six draws of the slower rank's step, us; at 4 tokens from the tenth call. Four rows at
512 bytes a step (the same 64 bytes a lane a step, half the programs; each token value loaded
once for four rows, as read then: triton 3.6 loads it once a row, `token_once`) win from 4 tokens
in every draw and lose at one token; the arm took them from 4 tokens (bbf7325), from 2 since the
fourteenth session (FP8_FOUR_ROWS_FROM_TOKENS).""",
        columns=["launch", "1 token", "2 tokens", "4 tokens", "8 tokens", "16 tokens"],
    )  # fmt: skip
    for kind, label in BLOCK_KINDS:
        cells: list = []
        for tokens in (1, 2):
            cells.append(_mean_slowest(r, BLOCKS[0], "w8a16", tokens, kind)
                         if kind not in ("n2k512w1",) else "-")  # fmt: skip
        for tokens in (4, 8, 16):
            if kind in ("early", "n4k512w1", "n2k512w1"):
                cells.append(_mean_slowest(r, BLOCKS[1], "w8a16", tokens, kind))
            elif tokens == 4:
                cells.append(_mean_slowest(r, BLOCKS[0], "w8a16", tokens, kind))
            else:
                cells.append("-")
        t.row(label, *cells, history=HIST)
    return t


RUN_FOUR = f"{DAY}/call11/gpt-oss-20b-decode-grouped.md"


def four_rows_run(r: Records) -> Table:
    t = Table(
        name="four_rows_run",
        caption="""\
`scenarios/gpt-oss-20b-decode-grouped.yaml` through `moebench run` (eleventh call, 213 s) on
bbf7325's tree (the sparse FP8 GEMV's four rows from 4 tokens; the manifest names 7f01c05, dirty)
against the eighth call's run of the same day (444d178): every correctness gate and integrity
check passed (952 pass, 112 skip, none failed). The `ffn` regime, median us of the slowest rank
as `moebench compare` printed them. Derived: "change" = now / before - 1. Only FP8's sparse step
changed beyond 2% (its launch from 4 tokens); dense, whose code did not change, within 2%. The
policy is unchanged (FP8 sparse up to 4 tokens, now 11.5% faster than grouped there).""",
        columns=["tokens", "FP8 dense before", "now", "change", "FP8 sparse before", "now",
                 "change", "FP8 grouped before", "now", "change"],
    )  # fmt: skip
    for i, tokens in enumerate(TOKENS):
        count, cells = _run_pair(r, RUN_NOW, RUN_FOUR, i, "w8a16", tokens)
        t.row(count, *cells, history=HIST)
    return t


STEP_NOW = f"{DAY}/call12/step4.md"
STEP_BEFORE = "2026-12-03-rank/step/gpt-oss-20b-decode-step-grouped.md"


def four_rows_step(r: Records) -> Table:
    t = Table(
        name="four_rows_step",
        caption="""\
The step regime with FP8 at 4 and 8 tokens: `docs/perf/2026-12-04-early-loads/scratch/step4.yaml`
(`scenarios/gpt-oss-20b-decode-step-grouped.yaml` at 4 and 8 tokens, FP8 only) through `moebench
run` (twelfth call, 76 s, bbf7325's tree: the sparse FP8 GEMV's four rows from 4 tokens, the
early epilogue loads) against the eleventh session's full run at 4 tokens (`rank_step`; that run
has no 8-token case): gpt-oss-20b's 24 MoE layers, each with its own weights and a seeded uniform
routing per step and layer, EP2 simulated, one step = the sum over layers of each layer's slowest
rank; 40 steps a case; every gate of the new run passed (82 pass, 10 skip). P50 and P90 of the
step with their exact 95% order-statistic intervals, us. Derived: "change" = now / before - 1.
At 4 tokens sparse_decode, the policy's FP8 arm there, is 4.1% lower at the median, the
intervals apart, and 5.7% below grouped_decode in the same run; grouped is unchanged; dense, whose
code did not change, is 4.3% higher (a drift between days, as in `early_run`). At 8 tokens
grouped stays the faster (2,445.4 against 3,047.8).""",
        columns=["case, arm", "P50 before", "P50 now", "change", "P90 before", "P90 now",
                 "change"],
    )  # fmt: skip
    plan = (("four", 4, "c001", "c000"), ("eight", 8, None, "c001"))
    return step_rows(r, t, STEP_BEFORE, STEP_NOW, plan, HIST)


def step_rows(r: Records, t: Table, before_run: str, now_run: str, plan, history: str) -> Table:
    """FP8 step-regime rows, one an (token count, decode arm): P50 and P90 before, now and their
    change, from two runs' "Model step" sections. ``plan``: (the count in words, tokens, the
    case's index before or None where that run has no such case, its index now)."""
    for words, tokens, before_case, now_case in plan:
        case = f"-precision=w8a16-tokens_per_rank={tokens}"
        for arm in ("sparse_decode", "grouped_decode", "dense_decode"):
            cells: list = []
            for column in ("P50 us", "P90 us"):
                n = r.cell(now_run, "Model step", column, case=now_case + case, arm=arm)
                if before_case is None:
                    cells += ["-", n, "-"]
                    continue
                b = r.cell(before_run, "Model step", column, case=before_case + case, arm=arm)
                cells += [b, n, over(n, b)]
            t.row(f"FP8, {words} tokens, {arm}", *cells, history=history)
    return t


MX_BLOCKS = f"{DAY}/call13/mxblocks.log"
MX_KINDS = (
    ("early", "sixteen rows, four warps (the default)"),
    ("n32k1024w4", "thirty-two rows, four warps"),
    ("n32k1024w8", "thirty-two rows, eight warps"),
    ("n16k512w4", "sixteen rows, four warps, half the step"),
    ("n64k512w8", "sixty-four rows, eight warps, half the step"),
)


def mxfp4_blocks(r: Records) -> Table:
    t = Table(
        name="mxfp4_blocks",
        caption="""\
MXFP4's sparse GEMV with more rows a program, as FP8's four rows (`four_rows`): `early_bench.py
--tokens 2,4,8 --seeds 0,1,2,3,4,5 --rank 0,1 --precisions w4a16 --blocks
32:1024:4,32:1024:8,16:512:4,64:512:8 --blocks-precisions w4a16` (thirteenth call; a step is
1,024 values of a row, 512 bytes, or half that), each step checked against the reference and the
sentinels. Derived: a cell =
the mean over the six draws of the slower rank's step, us. None is faster at 2 or 4 tokens, where
MXFP4's sparse step is the policy's arm; 64 rows on 8 warps is 1.9% faster at 8 tokens, where
grouped is the policy's. Not shipped.""",
        columns=["launch", "2 tokens", "4 tokens", "8 tokens"],
    )  # fmt: skip
    return _launch_rows(r, t, MX_BLOCKS, "w4a16", MX_KINDS, (2, 4, 8))


FC2 = f"{DAY}/call14/fc2blocks.log"
FC2_KINDS = (
    ("early", "two rows, a kilobyte a row a step (the default)"),
    ("fc2n4k512w1", "four rows, half a kilobyte"),
    ("fc2n4k1024w1", "four rows, a kilobyte"),
    ("fc2n8k512w1", "eight rows, half a kilobyte"),
)


def fc2_rows(r: Records) -> Table:
    t = Table(
        name="fc2_rows",
        caption="""\
At 1 and 2 tokens, where FP8's sparse GEMV keeps 2 rows a program, fc2 alone with more rows (fc1
as the default): `early_bench.py --tokens 1,2 --seeds 0,1,2,3,4,5 --rank 0,1 --precisions w8a16
--fc2-blocks 4:512:1,4:1024:1,8:512:1` (fourteenth call), each step checked against the
reference and the sentinels. Derived: a cell = the mean over the six draws of the slower rank's
step, us. Every other fc2 launch is slower: not shipped.""",
        columns=["fc2's launch", "1 token", "2 tokens"],
    )  # fmt: skip
    return _launch_rows(r, t, FC2, "w8a16", FC2_KINDS, (1, 2))


TABLES = [
    early_loads,
    one_token_slots,
    fewer_programs,
    four_rows,
    fc2_rows,
    mxfp4_blocks,
    early_bias,
    early_run,
    four_rows_run,
    four_rows_step,
]
