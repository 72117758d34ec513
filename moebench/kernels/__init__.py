"""Triton kernels, one stage per file, each with a thin launcher. Kernels know no arm."""
