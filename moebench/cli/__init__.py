"""The command line: ``moebench`` (``python -m moebench.cli``). The app lives in ``app``."""

from moebench.cli.app import app, main

__all__ = ["app", "main"]
