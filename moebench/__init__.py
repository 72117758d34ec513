"""moebench: prove that a Mixture-of-Experts FFN change is faster, where, and why."""

import importlib

from moebench.core.version import __version__

__all__ = ["__version__", "run_arm"]


def __getattr__(name: str):
    """``moebench.run_arm`` (moebench.api.run_arm), loaded on first use so that ``import moebench``
    loads no kernels, and an arm's import closure does not reach the API through this package."""
    if name == "run_arm":
        return importlib.import_module("moebench.api").run_arm
    raise AttributeError(f"module 'moebench' has no attribute {name!r}")
