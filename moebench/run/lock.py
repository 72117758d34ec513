"""`moebench lock`: write the arms' current source hashes into a scenario's expect_sources.

The YAML is edited as text so that the user's comments and layout survive: an existing top-level
``expect_sources`` block (and the comment lock wrote above it) is replaced, otherwise one is
appended. The result is parsed again before it replaces the file. Beside the scenario,
``NAME.lock.json`` records what each hash covers (every file of the arm's import closure, the
distributions it reaches, the data files it declares), so that a later drift can name what
changed. Files are named as the pin names them (relative to the repository or to the arm's
folder, ``moebench.run.closure``): a scenario and its arm folder copied elsewhere keep their pins.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from moebench.core.errors import MoebenchError
from moebench.plan.cases import plan, run_arms
from moebench.run.provenance import arm_provenance
from moebench.spec.load import load_scenario, parse_scenario
from moebench.spec.schema import Scenario

_TOP_KEY = re.compile(r"^expect_sources\s*:")
_COMMENT = "# Written by `moebench lock`: each arm's sources hash (what it covers: NAME.lock.json)."


def _strip_block(lines: list[str]) -> list[str]:
    """Drop a top-level expect_sources key and the indented lines under it."""
    kept, skipping = [], False
    for line in lines:
        if _TOP_KEY.match(line):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        skipping = False
        kept.append(line)
    return kept


def lock_path(scenario_path: str | Path) -> Path:
    """The lock file beside a scenario: ``name.yaml`` -> ``name.lock.json``."""
    p = Path(scenario_path)
    return p.with_name(p.stem + ".lock.json")


def read_lock(s: Scenario) -> dict | None:
    """What ``moebench lock`` recorded beside the scenario (per arm: its hash, every file of its
    import closure, the distributions it reaches and the data files it declares), or None when
    there is none or it cannot be read (then a drift is still refused, only without naming the
    file)."""
    if s.path is None:
        return None
    try:
        doc = json.loads(lock_path(s.path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("arms"), dict) else None


def write_pins(path: Path) -> dict[str, str]:
    """Pin each arm's hash into the scenario's ``expect_sources`` and record, in the lock file
    beside it, what the hash covers; returns {arm: hash}."""
    s = load_scenario(path)
    plan(s)  # a scenario that cannot run should not be pinned
    sources = arm_provenance(run_arms(s))
    pins = {a: v["hash"] for a, v in sources.items()}
    lines = [ln for ln in _strip_block(s.text.splitlines()) if ln.strip() != _COMMENT]
    while lines and not lines[-1].strip():
        lines.pop()
    block = ["", _COMMENT, "expect_sources:"]
    block += [f"  {arm}: {h}" for arm, h in pins.items()]
    text = "\n".join(lines + block) + "\n"
    parse_scenario(text, path=str(path))
    keys = ("hash", "files", "distributions", "data", "origin", "module")
    record = {"scenario": s.name, "arms": {a: {k: v[k] for k in keys} for a, v in sources.items()}}
    _replace(lock_path(path), json.dumps(record, indent=1, sort_keys=True) + "\n")
    _replace(path, text)
    return pins


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.lock-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise MoebenchError(f"{path}: cannot write ({exc.strerror or exc})") from None
