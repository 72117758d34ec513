"""Provenance: which code ran (source hashes) and where (environment). docs/DESIGN.md section 8."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from pathlib import Path

from moebench.arm import registry
from moebench.core.errors import SourceDriftError
from moebench.core.version import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_hashes(paths: tuple[Path, ...]) -> dict[str, str]:
    """{path relative to the repository: sha256} for an arm's source files."""
    return {_rel(p): file_sha256(p) for p in sorted(paths)}


def combined_hash(files: dict[str, str]) -> str:
    """One sha256 over (path, file hash) pairs: the value a scenario pins per arm."""
    h = hashlib.sha256()
    for rel, digest in sorted(files.items()):
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()


def arm_provenance(names: tuple[str, ...]) -> dict[str, dict]:
    """{arm: {hash, files, kernels}} for the arms ``names`` (their sources hashed now)."""
    out = {}
    for name in names:
        arm = registry.resolve(name)
        files = source_hashes(arm.SOURCES)
        out[name] = {
            "hash": combined_hash(files),
            "files": files,
            "kernels": list(arm.KERNELS),
        }
    return out


def check_pins(pins: dict[str, str], actual: dict[str, str], *, allow_drift: bool) -> list[str]:
    """Compare pinned arm hashes with the code about to run.

    Returns the drift messages (for the manifest) when ``allow_drift``; raises otherwise.
    """
    drift = []
    for arm, want in sorted(pins.items()):
        have = actual.get(arm)
        if have is None:
            continue  # the scenario validator rejects pins for arms that are not run
        if have != want:
            drift.append(
                f"arm {arm!r}: sources hash {have[:16]}... but the scenario pins {want[:16]}..."
            )
    if drift and not allow_drift:
        raise SourceDriftError(
            drift[0] + " (run `moebench lock` to re-pin, or pass --allow-source-drift)"
        )
    return drift


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def git_state() -> dict:
    """Commit and dirty flag of the checkout moebench runs from (empty when not a git tree)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": "", "dirty": None}
    return {"commit": commit, "dirty": dirty if commit else None}


def environment() -> dict:
    """Versions and hardware: what `moebench env` prints and every manifest records."""
    import torch
    import triton

    env = {
        "moebench": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda or "",
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "gpu_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "",
        "driver": _driver_version(),
        **git_state(),
    }
    return env


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else ""
