"""`make ci-bench`: the gating benchmark, as pytest-benchmark's --benchmark-compare-fail or asv do.

On a GPU it runs ``scenarios/ci-gate.yaml`` (every gate must pass: exit 1 otherwise), then
compares every cell with the same cell of the stored baseline run of that kind of GPU,
``baselines/<gpu>/`` (a committed run folder, small Parquet), and exits 1 on a cell significantly
slower than the baseline by more than 5% (`moebench compare NEW --against BASE
--fail-on-regression 5`). With no stored baseline for the GPU it says so, prints how to store
this run as one, and gates on correctness only.

On the CPU the Triton interpreter's timings say nothing about a GPU, so there is no timing gate:
it runs the quicker ``scenarios/smoke.yaml``, gates on correctness (every gate of every arm must
pass) and says that the timing gate was skipped.

    python tools/ci_bench.py RESULTS_DIR [--threshold PCT]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
THRESHOLD_PCT = 5.0


def moebench(*args: str) -> int:
    return subprocess.run([sys.executable, "-m", "moebench.cli", *args], cwd=REPO).returncode


def gpu_slug() -> str | None:
    """``nvidia-h200`` for an NVIDIA H200, None without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    return re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(0).lower()).strip("-")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--threshold", type=float, default=THRESHOLD_PCT)
    args = parser.parse_args()
    shutil.rmtree(args.results, ignore_errors=True)
    slug = gpu_slug()
    scenario = "scenarios/ci-gate.yaml" if slug else "scenarios/smoke.yaml"
    code = moebench("run", scenario, "--results", str(args.results))
    if code != 0:
        print(f"moebench ci-bench: {scenario} failed (exit {code}): a gate failed or a case "
              "could not run", file=sys.stderr)  # fmt: skip
        return 1
    (run,) = sorted(args.results.iterdir())
    if moebench("compare", str(run), "--format", "markdown") != 0:
        return 1
    if slug is None:
        print("moebench ci-bench: CPU: every gate passed; the timing gate is skipped on the CPU "
              "(Triton interpreter timings are not comparable with anything)")  # fmt: skip
        return 0
    stored = sorted((REPO / "baselines" / slug).glob("*/manifest.json"))
    if not stored:
        print(f"moebench ci-bench: no stored baseline run for {slug} in baselines/{slug}/: the "
              f"timing gate is skipped; store this run there to gate the next one: "
              f"cp -r {run} baselines/{slug}/")  # fmt: skip
        return 0
    base = stored[-1].parent
    code = moebench("compare", str(run), "--against", str(base), "--fail-on-regression",
                    f"{args.threshold:g}")  # fmt: skip
    if code == 0:
        print(f"moebench ci-bench: {slug}: no cell slower than {base.name} by more than "
              f"{args.threshold:g}%")  # fmt: skip
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(main())
