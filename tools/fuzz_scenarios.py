"""Fuzz the scenario loader and the trace loader outside pytest, and count what happened.

    python tools/fuzz_scenarios.py [--scenarios 10000] [--traces 10000] [--cli 1000] [--seed 0]

Documents and trace files come from the hypothesis strategies in tests/hostile.py (mutated valid
documents, YAML attacks, random text and bytes; mutated, truncated and forged JSON and .npy
traces). Each one is loaded (and, when valid and small, planned) exactly as the CLI does; the
contract is that it either loads or fails with one MoebenchError line naming the file. ``--cli``
more documents go through the real ``moebench validate`` command, which must exit 0, or exit 2
with a single ``moebench: error:`` line and no traceback. Prints the counts; exits 1 when any
input broke the contract (its traceback is printed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("TRITON_INTERPRET", "1")

import hostile  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402


def fuzz(name: str, strategy, check, n: int, rng_seed: int) -> tuple[Counter, list[str]]:
    counts: Counter = Counter()
    broken: list[str] = []
    if n <= 0:
        return counts, broken

    @seed(rng_seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(example):
        with tempfile.TemporaryDirectory() as folder:
            try:
                counts[check(example, Path(folder))] += 1
            except Exception:
                counts["CONTRACT BROKEN"] += 1
                broken.append(f"{name} input {example!r:.300}\n{traceback.format_exc()}")

    started = time.monotonic()
    one()
    print(f"{name}: {sum(counts.values())} inputs in {time.monotonic() - started:.0f} s")
    return counts, broken


def check_trace(example, folder: Path) -> str:
    return hostile.check_trace(*example, folder)


def check_cli(document, folder: Path) -> str:
    from typer.testing import CliRunner

    from moebench.cli.app import app

    path = folder / "fuzz.yaml"
    path.write_bytes(document if isinstance(document, bytes) else document.encode("utf-8"))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert "Traceback" not in result.output, result.output[-2000:]
    if result.exit_code == 0:
        return "exit 0"
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("moebench: error: "), result.output[-2000:]
    return "exit 2, one line"


def summary(name: str, counts: Counter, top: int = 12) -> None:
    total = sum(counts.values())
    ok = {k: v for k, v in counts.items() if not k.startswith("rejected")}
    rejected = total - sum(ok.values())
    print(
        f"\n{name}: {total} inputs; "
        + ", ".join(f"{k} {v}" for k, v in sorted(ok.items()))
        + f", rejected {rejected}"
    )
    for reason, n in Counter(
        {k: v for k, v in counts.items() if k.startswith("rejected")}
    ).most_common(top):
        print(f"  {n:6d}  {reason}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=10_000)
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--cli", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    results = [
        (
            "scenario documents",
            fuzz(
                "scenario documents",
                hostile.scenario_documents,
                hostile.check_scenario,
                args.scenarios,
                args.seed,
            ),
        ),
        (
            "trace files",
            fuzz("trace files", hostile.trace_files(), check_trace, args.traces, args.seed),
        ),
        (
            "moebench validate",
            fuzz(
                "moebench validate", hostile.scenario_documents, check_cli, args.cli, args.seed + 1
            ),
        ),
    ]
    broken = []
    for name, (counts, failures) in results:
        summary(name, counts)
        broken += failures
    for text in broken[:10]:
        print("\n" + text)
    print(f"\ncontract broken by {len(broken)} input(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
