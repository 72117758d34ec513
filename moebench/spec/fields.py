"""Checks for values read from YAML: each returns the value or raises `Invalid` with the field's
dotted path and a message made to be read on one line (the scenario loader turns it into a
``ScenarioError`` naming the file). Loading is safe: tags that would build objects are refused,
never executed, and duplicate keys are errors.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from moebench.core.errors import clip, one_line


class Invalid(Exception):
    """A validation failure at a field path; becomes a ScenarioError with the file's name."""

    def __init__(self, path: str, message: str):
        super().__init__(path, message)
        self.path = path
        self.message = message


def format_error(label: str, exc: Invalid) -> str:
    return one_line(
        f"{label}: {exc.path}: {exc.message}" if exc.path else f"{label}: {exc.message}"
    )


class _SafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that also rejects duplicate keys in a mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {show(key)}", key_node.start_mark
                    )
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, max_chars: int) -> Any:
    """The document in ``text``, refused (one `Invalid`) when malformed, unsafe or longer than
    ``max_chars`` characters."""
    if not isinstance(text, str):
        raise Invalid("", f"expected YAML text, got {type(text).__name__}")
    if len(text) > max_chars:
        raise Invalid("", f"too large for a scenario ({len(text)} characters, at most {max_chars})")
    try:
        return yaml.load(text, Loader=_SafeLoader)  # a SafeLoader: tags never build objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = ", ".join(x for x in (exc.context, exc.problem) if x) or "malformed YAML"
        constructing = isinstance(exc, yaml.constructor.ConstructorError)
        kind = "YAML error" if constructing else "YAML syntax error"
        hint = " (tags that build objects are never allowed)" if "constructor" in problem else ""
        raise Invalid("", f"{kind}{where}: {problem}{hint}") from None
    except yaml.YAMLError as exc:
        raise Invalid("", f"YAML error: {exc}") from None
    except RecursionError:
        raise Invalid("", "YAML error: nested too deeply") from None
    except (ValueError, OverflowError, TypeError) as exc:
        detail = clip(str(exc).split(";")[0], 100)
        raise Invalid("", f"YAML error: a value cannot be read ({detail})") from None


# --- type checks -------------------------------------------------------------------------------


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list | tuple):
        return "list"
    if isinstance(v, dict):
        return "mapping"
    return type(v).__name__


def show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if v.bit_length() <= 64 else f"<an integer of {v.bit_length()} bits>"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        r = repr(v)
        return r if len(r) <= 60 else r[:56] + "...'"
    return f"<{type_name(v)}>"


def describe(v: Any) -> str:
    if v is None or isinstance(v, bool | int | float | str):
        return f"{type_name(v)} {show(v)}"
    return f"a {type_name(v)}"


def join(path: str, key: Any) -> str:
    k = key if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", key) else show(key)
    return f"{path}.{k}" if path else k


def integer(v: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise Invalid(path, f"expected an integer, got {describe(v)}")
    if not lo <= v <= hi:
        raise Invalid(path, f"must be between {lo} and {hi}, got {show(v)}")
    return v


def number(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise Invalid(path, f"expected a number, got {describe(v)}")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise Invalid(path, f"must be a finite number, got {show(v)}")
    return f


def string(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise Invalid(path, f"expected a string, got {describe(v)}")
    return v


def text(v: Any, path: str) -> str:
    """A non-empty one-line string (names, ids, revisions)."""
    s = string(v, path)
    if not s.strip() or not s.isprintable() or len(s) > 200:
        raise Invalid(path, f"must be non-empty one-line printable text (<= 200), got {show(s)}")
    return s


def choice(v: Any, path: str, choices: tuple[str, ...]) -> str:
    s = string(v, path)
    if s not in choices:
        raise Invalid(path, f"must be one of {', '.join(choices)}; got {show(s)}")
    return s


def boolean(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise Invalid(path, f"expected a boolean (true or false), got {describe(v)}")
    return v


def sequence(v: Any, path: str) -> list | tuple:
    if not isinstance(v, list | tuple):
        raise Invalid(path, f"expected a list, got {describe(v)}")
    if not v:
        raise Invalid(path, "must not be empty")
    return v


def choices(v: Any, path: str, choices: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(sequence(v, path)):
        item = choice(item, f"{path}[{i}]", choices)
        if item in out:
            raise Invalid(f"{path}[{i}]", f"{show(item)} is listed twice")
        out.append(item)
    return tuple(out)


def section(v: Any, path: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(v, dict):
        raise Invalid(path, f"expected a mapping, got {describe(v)}")
    for k in v:
        if not isinstance(k, str):
            raise Invalid(path, f"keys must be strings, got {describe(k)}")
        if k not in keys:
            raise Invalid(join(path, k), f"unknown key; expected one of {', '.join(keys)}")
    return v
