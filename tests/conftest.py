"""Tests run the real Triton kernels on the CPU through the interpreter.

The variable must be set before triton is imported anywhere, so it is set here, at collection.

Real expert-load files live in ../shared/traces beside the checkout (never copied into it); tests
that read them take the ``shared_traces`` fixture and skip, saying why, when it is absent.
"""

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]
# A git worktree sits deeper than the checkout it came from: every folder above the repo is tried.
SHARED_TRACES = next(
    (p / "shared" / "traces" for p in REPO.parents if (p / "shared" / "traces").is_dir()), None
)


def shared_traces_beside_repo() -> bool:
    """Whether scenarios' ``../../shared/traces/...`` paths resolve from this checkout."""
    return (REPO.parent / "shared" / "traces").is_dir()


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if SHARED_TRACES is None:
        pytest.skip("no shared/traces folder beside the repository or above it")
    return SHARED_TRACES
