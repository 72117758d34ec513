"""The scenario tests' base document and their parse/fail helpers."""

from __future__ import annotations

import copy

import pytest
import yaml

from moebench.core.errors import ScenarioError
from moebench.spec.load import parse_scenario
from moebench.spec.schema import Scenario

# A small valid document every rule test mutates: custom model, EP2, everything else default.
BASE = {
    "name": "t",
    "model": {"id": "x/tiny", "hidden": 256, "intermediate": 256, "experts": 8, "top_k": 2},
    "topology": {"ep": 2},
    "shape": {"tokens_per_rank": 8, "alignment": 16},
}


def doc(**sections) -> dict:
    """BASE with sections merged in (a section set to None is removed)."""
    d = copy.deepcopy(BASE)
    for key, value in sections.items():
        if value is None:
            d.pop(key, None)
        elif isinstance(value, dict) and isinstance(d.get(key), dict):
            d[key] = {**d[key], **value}
        else:
            d[key] = value
    return d


def parse(d: dict, path: str | None = "case.yaml") -> Scenario:
    return parse_scenario(yaml.safe_dump(d, sort_keys=False), path=path)


def fails(d: dict | str, field: str, *fragments: str, path: str = "case.yaml") -> str:
    """Parse, expect a one-line ScenarioError that names the file and ``field: ``."""
    text = d if isinstance(d, str) else yaml.safe_dump(d, sort_keys=False)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, path=path)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1, msg
    assert msg.startswith(f"{path}: "), msg
    assert f" {field}: " in f" {msg}" if field else True, msg
    for fragment in fragments:
        assert fragment in msg, msg
    return msg
