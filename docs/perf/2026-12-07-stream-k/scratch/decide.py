"""Call 1's decision (call1.sh): from the bench's "slowest" summary of the persistent-grid
variants (16-64 tokens), the variant faster than the arm at every count with the lowest mean
change, printed as call2.sh's environment ("STREAM=6 REGS=80 STAGES=3"), or KEEP."""

import re
import sys

LINE = re.compile(r"^\s+w4a16\s+(\d+) grouped_decode dot m16 n64 k128 w4 s(\d+) pdl r(\d+) "
                  r"passes .* stream(\d+):.*mean ([\d.]+)\s+([+-][\d.]+)%", re.M)  # fmt: skip
COUNTS = (16, 32, 64)

text = open(sys.argv[1]).read()
changes: dict[tuple[int, int, int], dict[int, float]] = {}
for tokens, stages, regs, stream, _, change in LINE.findall(text):
    changes.setdefault((int(stream), int(regs), int(stages)), {})[int(tokens)] = float(change)
won = {k: c for k, c in changes.items() if sorted(c) == list(COUNTS) and max(c.values()) < 0}
for k, c in sorted(changes.items()):
    print(f"stream{k[0]} r{k[1]} s{k[2]}: {c}{' faster at every count' if k in won else ''}")
if won:
    best = min(won, key=lambda k: sum(won[k].values()))
    print(f"SET STREAM={best[0]} REGS={best[1]} STAGES={best[2]}")
else:
    print("KEEP")
