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
