"""Real ranks under torchrun (docs/DESIGN.md section 7): the process group (NCCL on GPUs, gloo on
the CPU), phases after which the ranks agree, gathering rows to rank 0, the torchrun launcher.

Start with ``world``; ``exchange`` is the all-to-all dispatch and combine in fixed worst-case
slots.
"""
