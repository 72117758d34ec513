"""The FP8 tile's weight loop compiled for sm_90a without a GPU (triton 3.6 on the CPU), the
natural layout beside `fp8_placed`'s, at the arm's two tile launches (the expert loop at 2-8
tokens, one pass a program from 16), with the loop's instructions by opcode: what the placed
decode removes (the byte permutes, half the shifts and masks) and what it adds (a left shift the
compiler makes a multiply, on the FMA pipe).

Usage: PYTHONPATH=$PWD:$PWD/tools /tmp/t36/bin/python \
    docs/perf/2026-12-05-placed-fp8/scratch/sass_placed.py OUT > offline/sass_placed.log
"""

from __future__ import annotations

import collections
import os
import re
import sys

import sass_grouped_decode as sgd
import triton

# (name, spec without the placed field): the arm's launches (grouped_launch.default_launch).
LAUNCHES = [
    ("expert loop, 4 stages, 128 registers (2-8 tokens)", "dot:fp8:16:64:128:4:4:8:tma:128:0:1:1:1:0"),
    ("one pass a program, 3 stages, 80 registers (16-64 tokens)",
     "dot:fp8:16:64:128:4:3:64:tma:80:1:1:1:1:0"),
]  # fmt: skip
# The SM sub-partition's pipes as the CUDA guide's throughput table groups them: the integer
# ALU (bit ops, shifts, permutes, selects, compares) at 16 lanes a cycle, the FMA pipe (fp32 and
# bf16x2 arithmetic, integer multiplies) at 32 (16 for IMAD).
ALU = ("LOP3", "PRMT", "SHF", "SEL", "ISETP", "IADD3", "LEA", "PLOP3", "VIADD")
FMA = ("HMUL2", "IMAD", "FFMA", "FMUL", "FADD", "HFMA2")


def opcodes(sass_path: str) -> collections.Counter:
    body = sgd.weight_loop_body(open(sass_path).read())
    return collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t.strip()).split()[0] for t in body)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    print(f"triton {triton.__version__}, sm_90a, gpt-oss-20b shapes (fc1 and fc2)")
    for name, spec in LAUNCHES:
        print(f"\n== {name}")
        for placed in (0, 1):
            sgd.grouped(f"{spec}:{placed}", out)
            for stage in ("fc1", "fc2"):
                path = f"{out}/grouped_{spec.replace(':', '_')}_{placed}_{stage}.sass"
                ops = opcodes(path)
                alu = sum(n for op, n in ops.items() if op.startswith(ALU))
                fma = sum(n for op, n in ops.items() if op.startswith(FMA))
                top = ", ".join(f"{op} {n}" for op, n in ops.most_common(8))
                print(
                    f"  {'placed ' if placed else 'natural'} {stage}: {sum(ops.values())} a "
                    f"step; integer ALU {alu}, FMA pipe {fma}; {top}",
                    flush=True,
                )


if __name__ == "__main__":
    main(sys.argv[1])
