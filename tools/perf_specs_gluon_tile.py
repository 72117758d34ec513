"""docs/PERF.md's generated tables of the twenty-sixth session (2026-12-06, issue 28), on an H100
80GB HBM3 (asked for an H200 or an H100; the device lent an H100): the MXFP4 grouped tile's
weight loop written in Gluon (triton 3.6's lower-level language), a probe beside the arm's tile.

As in perf_specs_latest.py: every figure a lookup in a stored record, every derived number a
``derive`` with its formula in the caption, no number of a cell's own.
"""

from __future__ import annotations

from perf_cells import Table
from perf_records import Records, derive, over
from perf_specs_placed import WORDS

DAY = "2026-12-06-gluon-tile"
HIST = "[issue 28][h-i28gt]"
H100 = "**H100 80GB HBM3** (the device lent an H100), driver 580.159.04"
CALL1 = f"{DAY}/call1/probe.log"
CASES = ((32, 0), (64, 0), (32, 1), (64, 1))
DRAWS = {0: "A", 1: "B"}
HEAD = r"^T={} seed={} rank=0 \S+ \S+ block_m=16 "


def gluon_probe(r: Records) -> Table:
    t = Table(
        name="gluon_probe",
        caption=f"""\
{H100}, torch 2.11.0+cu130, triton 3.6.0. The MXFP4 grouped tile's fc1 and fc2 launches (the
arm's: 64 rows, 128 values a step, 16 slots a pass, one pass a program, 3 stages, 80 registers,
the rotated layout) against the probe of its weight loop in Gluon
(`docs/perf/{DAY}/scratch/mx_gluon.py`, 3 stages of slots, the explicit barrier: "s3 b1"): the
weights loaded straight into the wgmma's A registers from a host layout that decodes into each
thread's fragment, the slots gathered by cp.async into the shared memory the wgmma reads, the
wgmma asynchronous with the next step's decode behind it. The probe is the weight loop only (no
bias, no GLU; fp32 out, which writes more than the arm's bf16). gpt-oss-20b EP2 rank 0, routing
draws A and B (the scenario's routing.seed 0 and 1), on the scenario's own weights and
activations: `bash docs/perf/{DAY}/scratch/call1.sh` (first call). Each probe launch checked
first against an fp32 reference of the dequantised weights (max error over max magnitude at most
1.53e-06, the log's "probe max error" lines) and bitwise against the first variant's output; then
all timed interleaved (`moebench.measure.bench.time_interleaved`: each a CUDA graph, L2 flushed
before every replay, 8 rounds of 4). Cells: us as the log prints them; "of copy" the log's share
of the copy ceiling measured at its start (2.97 TB/s), over the touched experts' e2m1 values and
e8m0 scales; "change" = probe fc1+fc2 / the arm's - 1. The probe is 17-21% faster in every case,
and still short of the 85% target.""",
        columns=["tokens", "draw", "arm fc1", "arm fc2", "probe fc1", "probe fc2",
                 "arm fc1+fc2", "probe fc1+fc2", "change", "arm of copy", "probe of copy"],
    )  # fmt: skip
    for tokens, seed in CASES:
        head = HEAD.format(tokens, seed)

        def stage(who: str, head=head) -> object:
            return r.text(CALL1, head + who + r": (\S+) us,")

        total = head + r"probe s3 b1 fc1\+fc2 "
        probe = r.text(CALL1, total + r"(\S+) us")
        arm = r.text(CALL1, total + r".* against the arm's (\S+) ")
        t.row(WORDS[tokens], DRAWS[seed], stage("arm fc1"), stage("arm fc2"),
              stage("probe s3 b1 fc1"), stage("probe s3 b1 fc2"), arm, probe, over(probe, arm),
              r.text(CALL1, total + r".* against the arm's \S+ \((\S+)\)$"),
              r.text(CALL1, total + r"\S+ us \((\S+) of copy\)"), history=HIST)  # fmt: skip
    return t


def _variant_rows(r: Records, t: Table, log: str, variants: tuple[tuple[str, str], ...]) -> None:
    """A row a variant of ``log``: its fc1+fc2 in the four cases, and the change of their sum
    against the first variant's."""

    def total(tag: str, tokens: int, seed: int):
        return r.text(log, HEAD.format(tokens, seed) + rf"probe {tag} fc1\+fc2 (\S+) us")

    base = [total(variants[0][0], tk, s) for tk, s in CASES]
    for tag, words in variants:
        cells = [total(tag, tk, s) for tk, s in CASES]
        change = derive(lambda *v: 100 * (sum(v[:4]) / sum(v[4:]) - 1), "{:+.1f}%",
                        *cells, *base)  # fmt: skip
        t.row(words, *cells, change, history=HIST)


VARIANTS = (("s3 b1", "three stages, barrier"), ("s4 b1", "four stages, barrier"),
            ("s6 b1", "six stages, barrier"),
            ("s4 b0", "four stages, no explicit barrier"))  # fmt: skip


def gluon_probe_variants(r: Records) -> Table:
    t = Table(
        name="gluon_probe_variants",
        caption=f"""\
{H100}. The probe's launch options in the same call as `gluon_probe` (the same command, cases
and checks; every variant's output bitwise equal to the first's): the depth of the slots' copy
ring (stages) and whether the explicit barrier after the async-proxy fence is kept (the
compiler's own barrier after the copies' wait stays either way). Cells: fc1+fc2 us as the log
prints them; "change" = the variant's fc1+fc2 summed over the four cases / s3 b1's sum - 1.
Within 3% of each other: the ring's depth and the barrier are not what holds the loop.""",
        columns=["variant", "thirty-two, A", "sixty-four, A", "thirty-two, B", "sixty-four, B",
                 "change"],
    )  # fmt: skip

    _variant_rows(r, t, CALL1, VARIANTS)
    return t


CALL3 = f"{DAY}/call3/probe3.log"
NCU = f"{DAY}/call3/ncu_fc1.txt"
ABLATIONS = (("s3 b1 r0", "the probe (registers one step ahead)"),
             ("s4 b1 r1", "weights by cp.async, four stages"),
             ("s6 b1 r1", "weights by cp.async, six stages"),
             ("s3 b1 r0 place-only", "decode's placement alone (timing only, wrong values)"),
             ("s3 b1 r0 n96", "capped at ninety-six registers"))  # fmt: skip


def gluon_probe_ablations(r: Records) -> Table:
    t = Table(
        name="gluon_probe_ablations",
        caption=f"""\
{H100}. What holds the probe, third call (`bash docs/perf/{DAY}/scratch/call3.sh`, the same cases,
checks and timing as `gluon_probe`): each step's weights and scale words through a cp.async ring
in the step's copy group, STAGES - 2 steps ahead of their decode (`RING`; offline 55 KB of shared
memory, 4 programs an SM); the decode cut to its placement (no scale, no multiply: 8 of its 14
instructions a word; wrong values, so timed without the check); and the probe capped at 96
registers (5 programs an SM offline, no spills, but ptxas then waits on every wgmma). Every
checked variant bitwise equal to the first's output. Cells: fc1+fc2 us as the log prints them;
"change" = the variant's sum over the four cases / the probe's - 1. Nsight Compute on the
probe's fc1 at 64 tokens (draw A) in the same call: `gluon_probe_ncu`.""",
        columns=["variant", "thirty-two, A", "sixty-four, A", "thirty-two, B", "sixty-four, B",
                 "change"],
    )  # fmt: skip

    _variant_rows(r, t, CALL3, ABLATIONS)
    return t


NCU_ROWS = (("Duration", r"^\s+Duration\s+us\s+(\S+)$", "us"),
            ("DRAM throughput", r"^\s+DRAM Throughput\s+%\s+(\S+)$", "% of peak"),
            ("SM active cycles", r"^\s+SM Active Cycles\s+cycle\s+(\S+)$", "cycles"),
            ("Elapsed cycles", r"^\s+Elapsed Cycles\s+cycle\s+(\S+)$", "cycles"),
            ("Warps active a scheduler", r"of (\S+) active warps per scheduler", "warps"),
            ("Warps eligible a scheduler", r"^\s+Eligible Warps Per Scheduler\s+warp\s+(\S+)$",
             "warps"),
            ("Issued a scheduler a cycle", r"^\s+Issued Warp Per Scheduler\s+(\S+)$", "warps"),
            ("Cycles between two issues", r"^\s+Warp Cycles Per Issued Instruction\s+cycle\s+"
             r"(\S+)$", "cycles"),
            ("of which waiting on an L1TEX load", r"spends (\S+) cycles being stalled waiting "
             r"for a scoreboard", "cycles"),
            ("Theoretical occupancy", r"^\s+Theoretical Occupancy\s+%\s+(\S+)$", "%"),
            ("Block limit by registers", r"^\s+Block Limit Registers\s+block\s+(\S+)$",
             "programs"))  # fmt: skip


def gluon_probe_ncu(r: Records) -> Table:
    t = Table(
        name="gluon_probe_ncu",
        caption=f"""\
{H100}. Nsight Compute on the probe's fc1 (its first launch, 64 tokens, draw A: `ncu
--clock-control none -k regex:mx_probe --launch-count 1 --section WarpStateStats --section
SchedulerStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis`, third
call). Cells as the report prints them. Read: the warps wait on their loads (half of the cycles
between two issues are a scoreboard wait on a global load), four warps a scheduler are too few to
cover it (the registers allow 4 programs an SM), and the SMs sit idle for the last tenth of the
launch (active against elapsed cycles: the partial last wave).""",
        columns=["metric", "value", "unit"],
    )  # fmt: skip
    for name, pattern, unit in NCU_ROWS:
        t.row(name, r.text(NCU, pattern), unit, history=HIST)
    return t


TABLES = (gluon_probe, gluon_probe_variants, gluon_probe_ablations, gluon_probe_ncu)
