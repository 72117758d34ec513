"""`moebench lock`: write the arms' current source hashes into a scenario's expect_sources.

The YAML is edited as text so that the user's comments and layout survive: an existing top-level
``expect_sources`` block is replaced, otherwise one is appended. The result is parsed again before
it replaces the file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from moebench.core.errors import MoebenchError
from moebench.plan.cases import plan
from moebench.run.provenance import arm_provenance
from moebench.spec.load import load_scenario, parse_scenario

_TOP_KEY = re.compile(r"^expect_sources\s*:")


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


def write_pins(path: Path) -> dict[str, str]:
    s = load_scenario(path)
    plan(s)  # a scenario that cannot run should not be pinned
    pins = {a: v["hash"] for a, v in arm_provenance(s.arms).items()}
    lines = _strip_block(s.text.splitlines())
    while lines and not lines[-1].strip():
        lines.pop()
    block = [
        "",
        "# Written by `moebench lock`: the sha256 of each arm's sources.",
        "expect_sources:",
    ]
    block += [f"  {arm}: {h}" for arm, h in pins.items()]
    text = "\n".join(lines + block) + "\n"
    parse_scenario(text, path=str(path))
    tmp = path.with_name(f".{path.name}.lock-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise MoebenchError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return pins
