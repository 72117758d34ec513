"""fc1 of the grouped FP8 step for Nsight Compute: the arm's one-pass launch (64 rows a program)
or 128 rows a program on 4 warps with no register cap (``wide``), placed weights as the arm hands
them, gpt-oss-20b EP2 shapes, 64 tokens of random routing (tools/ncu_kernels.py's problem).
Three launches (the first compiles). Usage (GPU): python3 ncu_wide.py arm|wide"""

import sys
from dataclasses import replace

import torch

from moebench.kernels.fp8_placed import place_e4m3
from moebench.kernels.grouped_gemv import grouped_gemv
from moebench.kernels.grouped_launch import default_launch

dev = torch.device("cuda")
torch.manual_seed(0)
E, E_ALL, K, D, F, T = 16, 32, 4, 2880, 2880, 64
w1 = place_e4m3((torch.randn(E, 2 * F, D, device=dev) * 0.5).to(torch.float8_e4m3fn))
s1 = torch.rand(E, device=dev) * 0.01 + 0.001
b1 = (torch.randn(E, 2 * F, device=dev) * 0.1).to(torch.bfloat16)
ids = torch.stack([torch.randperm(E_ALL, device=dev)[:K] for _ in range(T)]).int()
x = torch.randn(T, D, device=dev).to(torch.bfloat16)
a = torch.empty(T, K, F, device=dev, dtype=torch.bfloat16)
l1 = default_launch("fp8", columns=2 * F, tokens=T, top_k=K, experts=E, pdl=True)
assert l1.fp8_placed and l1.pass_grid, l1
if sys.argv[1] == "wide":
    l1 = replace(l1, block_n=128, max_registers=0)
print(l1)
for _ in range(3):
    grouped_gemv(x, ids, w1, s1, b1, a, expert_offset=0, launch=l1, glu="swiglu_oai")
torch.cuda.synchronize()
