"""Hostile inputs, shared by tests/cli/test_hostile.py and tools/fuzz_scenarios.py.

Two families, each a hypothesis strategy and a checker that states the contract:

- scenario documents: the smoke scenario mutated (wrong types, huge and negative numbers, NaN and
  inf, deep nesting, unicode keys and values, deletions and additions), then perhaps truncated or
  prefixed with deep nesting, plus raw YAML attacks (object-building tags, alias bombs, control
  characters, invalid UTF-8 bytes). ``check_scenario`` loads the bytes like the CLI does: either a
  scenario comes out and plans, or one MoebenchError with a one-line message naming the file.
- trace files: an SGLang ``logical_count`` JSON or a ``.npy`` count matrix, mutated the same way,
  truncated, with forged headers (huge shapes, object and string dtypes, pickles) or replaced by
  random bytes. ``check_trace`` loads them like a trace scenario does: finite non-negative counts,
  or one TraceError naming the file.

Anything else (another exception, a multi-line message, a message without the file) fails.
"""

from __future__ import annotations

import copy
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import yaml
from hypothesis import strategies as st

from moebench.core.errors import MoebenchError, TraceError
from moebench.plan.cases import plan
from moebench.routing.synthetic import load_trace_counts, synthesize
from moebench.spec.load import load_scenario
from moebench.spec.sweep import expand

REPO = Path(__file__).resolve().parents[1]
VALID = yaml.safe_load((REPO / "scenarios" / "smoke.yaml").read_text())
VALID["sweep"] = {"routing.seed": [0, 1]}
PLAN_LIMIT = 1 << 22  # plan scenarios whose routing draws at most this many numbers (fast)
MAX_MESSAGE = 2000

# Text without lone surrogates (YAML cannot write them), but with every other plane: RTL marks,
# zero-width joiners, emoji, NUL and other control characters.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # far past int64
    | st.integers(min_value=-3, max_value=300)  # near the edges of every range
    | st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**63, -(2**63), 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
    | st.sampled_from(
        [
            "fp8",
            "trace",
            "formula",
            "tight",
            "stock",
            "deepseek-v4-flash",
            "act",
            "shape.alignment",
            "../../etc/passwd",
            "/dev/zero",
            "名前",
            "\u202e",
        ]
    )
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


def _paths(d, prefix=()):
    yield prefix
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, (*prefix, k))


def _nested(depth: int, leaf) -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@st.composite
def mutated_documents(draw) -> str:
    """The smoke scenario with one to four fields replaced, deleted, added or nested deeply."""
    d = copy.deepcopy(VALID)
    paths = [p for p in _paths(d) if p]
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        parent = d
        for k in path[:-1]:
            parent = parent.get(k) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "nest"]))
        if action == "replace":
            parent[path[-1]] = draw(junk)
        elif action == "delete":
            parent.pop(path[-1], None)
        elif action == "add":
            parent[draw(TEXT)] = draw(junk)
        else:
            parent[path[-1]] = _nested(draw(st.integers(1, 60)), parent.get(path[-1]))
    text = yaml.safe_dump(d, allow_unicode=draw(st.booleans()), sort_keys=False)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # truncated anywhere
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.sampled_from(["[", "{a: ", "- ", "? "])) * draw(st.integers(1, 5000)) + text
    return text


ATTACKS = [
    "!!python/object/apply:os.system ['touch /tmp/moebench-pwned']\n",
    "name: !!python/object/new:builtins.open ['/tmp/moebench-pwned', 'w']\n",
    "name: !!python/name:os.system\n",
    "model: !!binary aGVsbG8=\n",
    "name: !!set {a, b}\n",
    "name: 2026-11-29\n",
    "name: &a [*a]\n",  # a self-referencing alias
    "a: &a ['x','x','x','x','x','x','x','x','x']\n"
    + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "description: *i\n",  # billion laughs
    "<<: {name: x}\n<<: {name: y}\n",
    "? [complex, key]\n: value\n",
    "name: x\nname: y\n",  # duplicate keys
    "name: \x00\x07\x1b[31m\n",
    "\ufeff\ufeffname: bom\n",
    "name: x\r\nmodel: y\r\n",
    "\t\tname: tabs\n",
    "%YAML 1.1\n%TAG ! tag:evil,2026:\n--- !evil\nname: x\n",
    "--- a\n--- b\n",  # two documents
    "name: " + "9" * 5000 + "\n",  # an integer too long to convert
    "shape: {tokens_per_rank: 1e999999}\n",
    "x" * 100_000,
    "[" * 20_000,
    "{a: " * 3000,
    "- " * 3000,
]


@st.composite
def raw_texts(draw) -> str | bytes:
    """Hand-written YAML attacks, perhaps truncated, and random text or bytes."""
    kind = draw(st.sampled_from(["attack", "attack", "text", "bytes"]))
    if kind == "attack":
        text = draw(st.sampled_from(ATTACKS))
        return text[: draw(st.integers(0, len(text)))] if draw(st.booleans()) else text
    if kind == "text":
        return draw(TEXT)
    return draw(st.binary(max_size=200))  # invalid UTF-8 most of the time


scenario_documents = st.one_of(mutated_documents(), mutated_documents(), raw_texts())


def _one_line(exc: BaseException, label: str) -> str:
    msg = str(exc)
    assert isinstance(exc, MoebenchError), f"{type(exc).__name__} escaped: {msg[:300]}"
    assert "\n" not in msg and "\r" not in msg, f"multi-line message: {msg[:300]!r}"
    assert len(msg) <= MAX_MESSAGE, f"message of {len(msg)} characters"
    assert label in msg, f"message does not name {label}: {msg[:300]}"
    return msg


def _reason(msg: str, path: Path) -> str:
    """What a rejection says, without the file, numbers and quoted values (for counting)."""
    text = msg.removeprefix(f"{path}: ")
    text = re.split(r": | \(|, got|; expected", text)[0]
    return re.sub(r"\d+", "N", text)[:60]


def check_scenario(document: str | bytes, folder: Path) -> str:
    """Load and plan ``document`` as the CLI would; returns ``valid``, ``valid (not planned:
    large)`` or ``rejected: <first words>``. AssertionError when the contract is broken."""
    path = folder / "fuzz.yaml"
    path.write_bytes(document if isinstance(document, bytes) else document.encode("utf-8"))
    try:
        s = load_scenario(path)
        draws = max(
            c.scenario.shape.tokens_per_rank * c.scenario.topology.dp * c.scenario.model.experts
            for c in expand(s)
        )
        if draws > PLAN_LIMIT:
            return "valid (not planned: large)"
        plan(s)
    except Exception as exc:
        return "rejected: " + _reason(_one_line(exc, str(path)), path)
    return "valid"


# --- trace files ---------------------------------------------------------------------------------

SGLANG = {"logical_count": [[0.0] * 8, [3.0, 0.0, 7.0, 1.0, 0.0, 2.0, 9.0, 4.0]]}


def _npy(array: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.save(f, array, allow_pickle=True)
    return f.getvalue()


class Unpickled:
    """An object whose unpickling opens a file for writing (it must never happen)."""

    marker = Path("/tmp/moebench-unpickled")

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _forged_header(data: bytes, header: str) -> bytes:
    """A .npy with its header dict replaced (version 1.0, 64-byte aligned)."""
    body = data[data.index(b"\n") + 1 :]
    text = header + " " * (-(len(header) + 11) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin-1") + body


@st.composite
def trace_files(draw) -> tuple[str, bytes, int | None]:
    """(suffix, bytes, layer) of a hostile load trace."""
    layer = draw(st.none() | st.integers(-3, 3) | st.sampled_from([2**31, 2**70, -(2**63)]))
    kind = draw(st.sampled_from(["json", "json", "npy", "npy", "bytes"]))
    if kind == "bytes":
        return draw(st.sampled_from([".json", ".npy", ""])), draw(st.binary(max_size=300)), layer
    if kind == "json":
        doc = copy.deepcopy(SGLANG)
        for _ in range(draw(st.integers(0, 3))):
            action = draw(st.sampled_from(["entry", "row", "whole", "key", "nest"]))
            rows = doc.get("logical_count")
            if action in ("entry", "row") and not (isinstance(rows, list) and len(rows) == 2):
                continue
            if action == "entry" and isinstance(rows[0], list) and len(rows[0]) == 8:
                rows[0][draw(st.integers(0, 7))] = draw(junk)
            elif action == "row":
                rows[draw(st.integers(0, 1))] = draw(junk)
            elif action == "whole":
                doc["logical_count"] = draw(junk)
            elif action == "key":
                doc = {draw(TEXT): doc} if draw(st.booleans()) else draw(junk)
                break
            else:
                doc["logical_count"] = _nested(draw(st.integers(1, 5000)), 1.0)
        try:
            data = json.dumps(doc, allow_nan=True).encode()
        except (ValueError, TypeError, RecursionError):
            data = b"{}"
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
        return ".json", data, layer
    array = np.array(
        SGLANG["logical_count"],
        dtype=draw(st.sampled_from(["<f8", ">f4", "<i8", "|u1", "<f2", "<c16", "|b1"])),
    )
    data = _npy(array)
    action = draw(st.sampled_from(["valid", "truncate", "header", "object", "strings", "values"]))
    if action == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif action == "header":
        shape = draw(
            st.sampled_from(
                [
                    "(2, 8)",
                    "(16,)",
                    "(2, 8, 1)",
                    "(0, 8)",
                    "(2, -8)",
                    "(1 << 40, 8)",
                    "(99999999999, 99999999999)",
                    "()",
                    "(" * 150 + ")" * 150,
                    "'x'",
                ]
            )
        )
        descr = draw(st.sampled_from(["'<f8'", "'|O'", "'<U3'", "[('a', '<f8')]", "'<V8'", "42"]))
        data = _forged_header(
            data, f"{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}"
        )
    elif action == "object":
        data = _npy(np.array([[Unpickled(), 1.0]], dtype=object))
    elif action == "strings":
        data = _npy(np.array([["1", "2"], ["3", "x"]]))
    elif action == "values":
        value = draw(st.sampled_from([np.nan, np.inf, -1.0, 1e308, -0.0, 5e-324]))
        data = _npy(np.array([[1.0, value, 2.0]]))
    return ".npy", data, layer


def check_trace(suffix: str, data: bytes, layer: int | None, folder: Path) -> str:
    """Load a trace as a trace scenario does; ``loaded`` or ``rejected: ...``."""
    path = folder / f"trace{suffix}"
    path.write_bytes(data)
    try:
        counts, sha = load_trace_counts(path, layer)
        assert counts.dtype == np.float64 and counts.ndim == 1 and len(sha) == 64
        assert np.isfinite(counts).all() and (counts >= 0).all() and counts.sum() > 0
        experts = counts.size
        top_k = min(2, int((counts > 0).sum()))
        r = synthesize(
            family="trace",
            tokens=16,
            experts=experts,
            top_k=top_k,
            ep=1,
            trace_path=str(path),
            trace_layer=layer,
        )
        assert r.topk_ids_TK.shape == (16, top_k) and int(r.topk_ids_TK.max()) < experts
        assert math.isclose(float(r.topk_weights_TK.sum()), 16, rel_tol=1e-4)
    except AssertionError:
        raise
    except Exception as exc:
        assert isinstance(exc, TraceError), f"{type(exc).__name__} escaped: {str(exc)[:300]}"
        return "rejected: " + _reason(_one_line(exc, str(path)), path)
    finally:
        assert not Unpickled.marker.exists(), "a pickle was loaded"
    return "loaded"
