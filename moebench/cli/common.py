"""What the commands share: the consoles, the scenario argument, one-line errors, and the choice
of the Triton interpreter on a machine without a GPU."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from moebench.core.errors import MoebenchError, one_line

out = Console()
err = Console(stderr=True, highlight=False, soft_wrap=True)

DEFAULT_WIDTH = 120  # columns of the default output; --width asks for more
ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.", show_default=False)]


def use_interpreter_without_gpu() -> None:
    """Without a GPU the Triton kernels run in the interpreter, which must be chosen before
    triton is first imported."""
    import torch

    if not torch.cuda.is_available() and "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The interpreter computes through numpy, which warns about the NaN poison the gates plant
        # in padding rows on purpose; those warnings are not the user's business.
        warnings.filterwarnings(
            "ignore", category=RuntimeWarning, module="triton.runtime.interpreter"
        )


def fail(exc: MoebenchError) -> typer.Exit:
    err.print(f"moebench: error: {one_line(exc, first=True)}", markup=False)
    return typer.Exit(2)


def load(path: Path):
    from moebench.spec.load import load_scenario

    return load_scenario(path)
