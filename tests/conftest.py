"""Tests run the real Triton kernels: compiled where a GPU is visible, under the Triton
interpreter where none is.

The choice must be made before triton is imported anywhere, so it is made here, at collection:
``TRITON_INTERPRET=1`` when no GPU is visible. A value already in the environment is kept
(``TRITON_INTERPRET=1`` on a GPU machine runs everything in the interpreter, as on a CPU), and
torch is imported to ask only when there is none (importing torch does not import triton). The
kernel tests pick their device from the variable (``tests/kernels``: CUDA unless it is 1).

``make test`` (and ``test-slow``, ``test-all``) set the variable to 1 on any machine, as CI runs:
the tests outside ``tests/kernels`` build CPU tensors, which only the interpreter takes.
``make test-gpu`` runs the tests marked ``gpu`` with the variable unset, so compiled on the GPU:
every test of ``tests/kernels`` and of a file named ``*_gpu.py`` is marked here, and a GPU test in
another file says ``@pytest.mark.gpu`` (and skips itself without a GPU, as the ``*_gpu.py`` files
do).

Real expert-load files live in ../shared/traces beside the checkout (never copied into it); tests
that read them take the ``shared_traces`` fixture and skip, saying why, when it is absent.
"""

import os
from pathlib import Path

import pytest

if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

REPO = Path(__file__).resolve().parents[1]
KERNEL_TESTS = REPO / "tests" / "kernels"
# A git worktree sits deeper than the checkout it came from: every folder above the repo is tried.
SHARED_TRACES = next(
    (p / "shared" / "traces" for p in REPO.parents if (p / "shared" / "traces").is_dir()), None
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: run compiled on the GPU by `make test-gpu` (tests/kernels, *_gpu.py files)"
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(item.path)
        if path.is_relative_to(KERNEL_TESTS) or path.stem.endswith("_gpu"):
            item.add_marker(pytest.mark.gpu)


def shared_traces_beside_repo() -> bool:
    """Whether scenarios' ``../../shared/traces/...`` paths resolve from this checkout."""
    return (REPO.parent / "shared" / "traces").is_dir()


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if SHARED_TRACES is None:
        pytest.skip("no shared/traces folder beside the repository or above it")
    return SHARED_TRACES
