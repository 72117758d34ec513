"""Importing a script of tools/ in a test: tools/ on the path for the import only (a tool
imports its sibling modules, e.g. bench_grouped_decode's copy_ceiling, when it is imported)."""

import importlib
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def tool(name: str) -> ModuleType:
    """tools/NAME.py as a module."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(REPO / "tools"))


def tiny_decode(tokens: int, arms: str) -> str:
    """A decode scenario small enough for the interpreter (gpt-oss-like MXFP4 with swiglu_oai,
    8 experts over EP2 x TP2 simulated ranks): ``tokens`` a rank, ``arms`` its YAML list's items."""
    return f"""\
name: tiny-decode
model: {{id: tiny, hidden: 128, intermediate: 64, experts: 8, top_k: 2}}
topology: {{ep: 2, dp: 1, tp: 2, mode: simulated}}
routing: {{family: uniform, seed: 0}}
shape: {{tokens_per_rank: {tokens}}}
arms: [{arms}]
precision: w4a16
activation: swiglu_oai
"""
