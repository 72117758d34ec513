"""Call 1's decision (call1.sh): from the bench's "slowest" summary of the register variants, per
regime (the expert loop at 4-8 tokens, one pass a program at 16-64), the variant faster than the
arm at every count of its regime with the lowest mean change; printed as the constants of
moebench/kernels/grouped_launch.py that make it the arm's default ("SET NAME VALUE"), or KEEP."""

import re
import sys

LINE = re.compile(r"^\s+w4a16\s+(\d+) grouped_decode dot m16 n64 k128 w4 s(\d+) pdl r(\d+) "
                  r"(passes )?.*mean ([\d.]+)\s+([+-][\d.]+)%", re.M)  # fmt: skip
REGIMES = {
    "loop": ((4, 8), "TILE_MXFP4_STAGES", "TILE_MXFP4_MAX_REGISTERS"),
    "one pass": ((16, 32, 64), "PASS_GRID_STAGES", "PASS_GRID_MXFP4_MAX_REGISTERS"),
}

text = open(sys.argv[1]).read()
changes: dict[tuple[str, int, int], dict[int, float]] = {}
for tokens, stages, regs, passes, _, change in LINE.findall(text):
    regime = "one pass" if passes else "loop"
    changes.setdefault((regime, int(stages), int(regs)), {})[int(tokens)] = float(change)
for regime, (counts, stages_name, regs_name) in REGIMES.items():
    mine = {k: c for k, c in changes.items() if k[0] == regime}
    won = {k: c for k, c in mine.items() if sorted(c) == list(counts) and max(c.values()) < 0}
    for k, c in sorted(mine.items()):
        print(f"{regime}: s{k[1]} r{k[2]} {c}{' faster at every count' if k in won else ''}")
    if not won:
        print(f"KEEP {regime}")
        continue
    best = min(won, key=lambda k: sum(won[k].values()) / len(counts))
    print(f"SET {stages_name} {best[1]}")
    print(f"SET {regs_name} {best[2]}")
