"""Provenance: which code ran (source hashes) and where (environment). docs/DESIGN.md section 8."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

from moebench.arm.base import Arm
from moebench.core.errors import MoebenchError, SourceDriftError
from moebench.core.version import __version__
from moebench.run.closure import closure_of, combined_hash

REPO_ROOT = Path(__file__).resolve().parents[2]


def arm_provenance(arms: dict[str, Arm]) -> dict[str, dict]:
    """{name: provenance} of ``arms``: the hash a scenario pins, the files of the arm's import
    closure with their sha256 (paths relative to the repository where they lie in it, else to the
    arm's folder: ``Closure.name``), the installed distributions it reaches (version, sha256 of
    RECORD), the data files it declares (``data``, named the same way), the kernels it declares,
    its contract and where it came from (``moebench.run.closure``)."""
    out = {}
    for name, arm in arms.items():
        mod = sys.modules.get(arm.module)
        file = Path(mod.__file__) if mod is not None and getattr(mod, "__file__", None) else None
        roots = [REPO_ROOT] + ([file.parent] if file is not None else [])
        c = closure_of(arm.module, roots=roots, file=file, data=data_paths(name, arm, file))
        out[name] = {
            "hash": combined_hash(c),
            "files": _named(c, c.files),
            "distributions": dict(sorted(c.distributions.items())),
            "data": _named(c, c.data),
            "kernels": list(arm.kernels),
            "contract": arm.contract,
            "origin": arm.origin,
            "module": arm.module,
        }
    return out


def data_paths(name: str, arm: Arm, file: Path | None) -> tuple[Path, ...]:
    """The data files ``arm`` declares, as absolute paths (a relative one is relative to the
    folder of the module that defines it); MoebenchError naming the arm and the file when one
    is not there."""
    out = []
    for declared in arm.data_files:
        path = Path(declared).expanduser()
        if not path.is_absolute():
            if file is None:
                raise MoebenchError(f"arm {name!r}: data_files: {str(declared)!r} is relative, "
                                    f"and module {arm.module!r} has no folder")  # fmt: skip
            path = file.parent / path
        if not path.is_file():
            raise MoebenchError(f"arm {name!r}: data_files: {str(declared)!r} is not a file "
                                f"({path})")  # fmt: skip
        out.append(path)
    return tuple(out)


def _named(c, digests: dict[Path, str]) -> dict[str, str]:
    return dict(sorted((c.name(p), d) for p, d in digests.items()))


def differences(was: dict, now: dict) -> list[str]:
    """What changed between two provenance records of one arm: files changed, added or no
    longer reached, data files changed, added or no longer declared, distributions upgraded,
    added or gone (empty when the details are unknown)."""
    out = []
    before, after = was.get("files") or {}, now.get("files") or {}
    out += [f"{f} changed" for f in sorted(before.keys() & after.keys()) if before[f] != after[f]]
    out += [f"{f} is new in its import closure" for f in sorted(after.keys() - before.keys())]
    out += [f"{f} is no longer reached" for f in sorted(before.keys() - after.keys())]
    before, after = was.get("data") or {}, now.get("data") or {}
    out += [f"data file {f} changed" for f in sorted(before.keys() & after.keys())
            if before[f] != after[f]]  # fmt: skip
    out += [f"data file {f} is newly declared" for f in sorted(after.keys() - before.keys())]
    out += [f"data file {f} is no longer declared" for f in sorted(before.keys() - after.keys())]
    db, da = was.get("distributions") or {}, now.get("distributions") or {}
    for d in sorted(db.keys() | da.keys()):
        x, y = db.get(d), da.get(d)
        if x is None:
            out.append(f"distribution {d} {y['version']} is new")
        elif y is None:
            out.append(f"distribution {d} {x['version']} is no longer reached")
        elif x != y:
            how = (
                f"{x['version']} -> {y['version']}"
                if x["version"] != y["version"]
                else (f"{x['version']}, files changed")
            )
            out.append(f"distribution {d} {how}")
    return out


def check_pins(
    pins: dict[str, str], sources: dict[str, dict], *, allow_drift: bool, lock: dict | None = None
) -> list[str]:
    """Compare pinned arm hashes with the code about to run (``sources``: ``arm_provenance``).
    ``lock``: the per-file record ``moebench lock`` wrote beside the scenario, which lets a drift
    name the file or distribution that changed.

    Returns the drift messages (for the manifest) when ``allow_drift``; raises otherwise.
    """
    drift = []
    for arm, want in sorted(pins.items()):
        have = sources.get(arm, {}).get("hash")
        if have is None:
            continue  # the scenario validator rejects pins for arms that are not run
        if have != want:
            recorded = (lock or {}).get("arms", {}).get(arm, {})
            what = differences(recorded, sources[arm]) if recorded.get("hash") == want else []
            why = f": {'; '.join(what[:3])}" if what else ""
            drift.append(
                f"arm {arm!r}: sources hash {have[:16]}... but the scenario pins "
                f"{want[:16]}...{why}"
            )
    if drift and not allow_drift:
        raise SourceDriftError(
            drift[0] + " (run `moebench lock` to re-pin, or pass --allow-source-drift)"
        )
    return drift


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
