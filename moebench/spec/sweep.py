"""A scenario's sweep -> its cases: the product of the sweep's lists, first key varying slowest.

Sweeps apply to the document as written; the scenario itself carries each swept field's first
value (what the document says for a swept field is replaced), and every case is validated as a
whole scenario. A case's id names its index and swept values, safe as a file name.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from typing import Any

from moebench.core.errors import ScenarioError
from moebench.spec import fields as yf
from moebench.spec.build import build_scenario
from moebench.spec.schema import CASE_ID_MAX, MAX_TEXT, Case, Scenario, to_plain
from moebench.spec.sections import Origin


def expand(scenario: Scenario) -> list[Case]:
    """The cases of a scenario: the product of its sweep lists, first key varying slowest."""
    if not scenario.sweep:
        return [Case(case_id="c000", index=0, scenario=scenario, params=())]
    label = scenario.path or "<string>"
    try:
        raw = yf.load_yaml(scenario.text, MAX_TEXT)
        return list(validated_cases(scenario, raw, Origin(path=scenario.path, text=scenario.text)))
    except yf.Invalid as exc:
        raise ScenarioError(yf.format_error(label, exc)) from None


def with_field(doc: dict, dotted: str, value: Any) -> dict:
    """A copy of the document with one field set (sections copied, never mutated in place)."""
    doc = dict(doc)
    if "." not in dotted:
        doc[dotted] = to_plain(value)
        return doc
    section, key = dotted.split(".")
    current = doc.get(section)
    if isinstance(current, str) and section in ("model", "routing"):
        current = {"preset" if section == "model" else "family": current}
    current = dict(current) if isinstance(current, dict) else {}
    current[key] = to_plain(value)
    doc[section] = current
    return doc


def _id_value(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple | list):
        return "_".join(_id_value(x) for x in v)
    return repr(v) if isinstance(v, float) else str(v)


def _case_id(index: int, n: int, params: tuple[tuple[str, Any], ...]) -> str:
    width = max(3, len(str(n - 1)))
    parts = [f"c{index:0{width}d}"]
    parts += [f"{p.rsplit('.', 1)[-1]}={_id_value(v)}" for p, v in params]
    return re.sub(r"[^A-Za-z0-9._=-]", "_", "-".join(parts))[:CASE_ID_MAX]


def first_case(raw: dict, sweep: tuple[tuple[str, tuple], ...]) -> dict:
    """The document with every swept field set to its sweep's first value, sweep removed."""
    doc = dict(raw)
    doc.pop("sweep", None)
    for dotted, values in sweep:
        doc = with_field(doc, dotted, values[0])
    return doc


def swept_path(field_path: str, swept: list[str]) -> str | None:
    """The swept path a failing field belongs to (``measure.ranks[1]`` -> ``measure.ranks``)."""
    for p in swept:
        if field_path == p or field_path.startswith((f"{p}[", f"{p}.")):
            return p
    return None


def validated_cases(scenario: Scenario, raw: dict, origin: Origin) -> Iterator[Case]:
    """Yield the validated cases of a swept scenario, built from its document as written.

    A failing case is blamed on the swept value at the failing field's path, or on the only swept
    field when there is one (case 0 is the scenario itself and was validated already).
    """
    base = first_case(raw, scenario.sweep)
    paths = [p for p, _ in scenario.sweep]
    sizes = [len(values) for _, values in scenario.sweep]
    n = math.prod(sizes)
    for index, picks in enumerate(itertools.product(*(range(k) for k in sizes))):
        params = tuple((p, values[i]) for (p, values), i in zip(scenario.sweep, picks, strict=True))
        doc = base
        for p, v in params:
            doc = with_field(doc, p, v)
        case_id = _case_id(index, n, params)
        try:
            s = build_scenario(doc, origin)
        except yf.Invalid as exc:
            inner = f"{exc.path}: {exc.message}"
            blame = swept_path(exc.path, paths) or (paths[0] if len(paths) == 1 else None)
            if blame is not None:
                i = picks[paths.index(blame)]
                raise yf.Invalid(f"sweep.{blame}[{i}]", f"{inner} (case {case_id})") from None
            where = ", ".join(f"{p}={_id_value(v)}" for p, v in params)
            raise yf.Invalid("sweep", f"case {case_id} ({where}): {inner}") from None
        yield Case(case_id=case_id, index=index, scenario=s, params=params)
