"""Reading a scenario: a YAML file or string -> a validated ``Scenario``, its sweep checked case by
case; and a validated copy of a scenario with fields changed.

Loading is safe: YAML tags that would build objects are rejected, never executed; duplicate keys
are errors. Every mistake becomes one ``ScenarioError`` on one line that names the file and the
field path, e.g. ``smoke.yaml: shape.alignment: must be a power of two >= 16, got 100``.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import yaml

from moebench.core.errors import ScenarioError, one_line
from moebench.spec import fields as yf
from moebench.spec.build import build_scenario
from moebench.spec.schema import MAX_TEXT, SWEEPABLE, Scenario, to_plain
from moebench.spec.sections import Origin, optional_section, sweep_section
from moebench.spec.sweep import first_case, swept_path, validated_cases, with_field


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read and validate a scenario file."""
    label = str(path)
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ScenarioError(f"{label}: not a regular file")
            raw = f.read(4 * MAX_TEXT + 1)  # a bounded read: /dev/zero is not a scenario
    except OSError as exc:
        raise ScenarioError(one_line(f"{label}: cannot read ({exc.strerror or exc})")) from None
    if len(raw) > 4 * MAX_TEXT:
        raise ScenarioError(f"{label}: too large ({len(raw)} bytes) for a scenario")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{label}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    return parse_scenario(text.removeprefix("\ufeff"), path=label)


def parse_scenario(text: str, *, path: str | os.PathLike | None = None) -> Scenario:
    """Validate a scenario; ``path`` names it in errors and anchors relative trace paths."""
    label = str(path) if path is not None else "<string>"
    try:
        raw = yf.load_yaml(text, MAX_TEXT)
        if not isinstance(raw, dict):
            got = "an empty document" if raw is None else yf.describe(raw)
            raise yf.Invalid("", f"expected a mapping at the top level, got {got}")
        sweep = sweep_section(optional_section(raw, "sweep"))
        origin = Origin(path=path, text=text)
        if not sweep:
            return build_scenario(raw, origin)
        first = first_case(raw, sweep)
        try:
            base = build_scenario({**first, "sweep": raw["sweep"]}, origin)
        except yf.Invalid as exc:  # case 0 is the scenario itself
            blame = swept_path(exc.path, [p for p, _ in sweep])
            if blame is not None:
                raise yf.Invalid(f"sweep.{blame}[0]", f"{exc.path}: {exc.message}") from None
            raise
        for _ in validated_cases(base, raw, origin):  # every case is validated as a whole scenario
            pass
        return base
    except yf.Invalid as exc:
        raise ScenarioError(yf.format_error(label, exc)) from None


def scenario_with(scenario: Scenario, **changes: Any) -> Scenario:
    """A validated copy with fields changed by dotted path (``**{"shape.tokens_per_rank": 4}``;
    ``shape__tokens_per_rank=4`` also works). A changed field leaves the sweep. The result's text is
    the changed document, so its sha256 differs from the file's."""
    label = scenario.path or "<string>"
    try:
        raw = yf.load_yaml(scenario.text, MAX_TEXT)
        if not isinstance(raw, dict):
            raise yf.Invalid("", "the scenario's text is not a mapping")
        for key, value in changes.items():
            dotted = key.replace("__", ".")
            if dotted not in SWEEPABLE:
                raise yf.Invalid(
                    dotted,
                    f"not a field that can be changed; expected one of {', '.join(SWEEPABLE)}",
                )
            raw = with_field(raw, dotted, to_plain(value))
            if isinstance(raw.get("sweep"), dict):
                raw["sweep"] = {k: v for k, v in raw["sweep"].items() if k != dotted}
                if not raw["sweep"]:
                    del raw["sweep"]
    except yf.Invalid as exc:
        raise ScenarioError(yf.format_error(label, exc)) from None
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    return parse_scenario(text, path=scenario.path)
