"""The stored performance records under docs/perf/, read as figures that keep the record's text.

Three kinds of record are read, as the tools write them:

- reports of ``moebench compare --format markdown``: ``## Section`` headings, each with markdown
  tables (``Records.cell`` picks one cell of the one row that matches);
- logs of ``tools/bench_kernels.py`` and ``tools/bench_decode.py``: lines made only of
  ``key=value`` tokens (``Records.kv``), and for the lines a tool prints as sentences a regular
  expression whose one group is the figure (``Records.text``);
- JSON of ``tools/bench_exchange.py`` (``Records.json_row``).

Every lookup must find exactly one match, or it raises ``RecordError`` naming the file and the
selection: a figure is quoted from one place, never guessed. A ``Figure`` keeps the text as the
record writes it ("1,773.2", "-80.6% [-80.7, -80.3]") and the record's path, so a table row can
name its source. ``Derived`` is a number the tables compute from figures (a ratio, a fit), with
the figures it came from.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "docs" / "perf"

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
_KV_TOKEN = re.compile(r"[A-Za-z_][\w.]*=\S*")


class RecordError(Exception):
    """A selection that does not name exactly one figure of a stored record."""


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One figure as a stored record writes it, and the record's path under docs/perf/."""

    text: str
    source: str

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source,)

    def part(self, sep: str, index: int = 0, prefix: str = "") -> Figure:
        """One part of a figure that holds several: "330.2 / 330.3" split at " / "; with a
        prefix, the one part that starts with it, the prefix removed ("8: -3.1% FASTER")."""
        parts = self.text.split(sep)
        if prefix:
            parts = [p.removeprefix(prefix) for p in parts if p.startswith(prefix)]
            index = 0
            if len(parts) != 1:
                raise RecordError(
                    f"{self.source}: {len(parts)} parts of {self.text!r} start {prefix!r}"
                )
        return Figure(text=parts[index], source=self.source)

    def number(self) -> float:
        """The figure's leading number ("1,773.2" -> 1773.2, "-80.6% [...]" -> -80.6)."""
        found = _NUMBER.match(self.text.strip())
        if found is None:
            raise RecordError(f"{self.source}: {self.text!r} is not a number")
        return float(found.group().replace(",", ""))


@dataclass(frozen=True, kw_only=True)
class Derived:
    """A number computed from stored figures; the table's caption gives the formula."""

    text: str
    sources: tuple[str, ...]

    def number(self) -> float:
        return float(self.text.replace(",", "").rstrip("x%"))


Value = Figure | Derived


def derive(fn: Callable[..., float], fmt: str, *inputs: Value) -> Derived:
    """``fn`` of the inputs' numbers, written with ``fmt`` (e.g. ``"{:.2f}x"``)."""
    result = fn(*(v.number() for v in inputs))
    if not math.isfinite(result):
        raise RecordError(f"derived value is {result} from {[v.text for v in inputs]}")
    return Derived(text=fmt.format(result), sources=_sources(inputs))


def _sources(values: Sequence[Value]) -> tuple[str, ...]:
    found: list[str] = []
    for value in values:
        found += [s for s in value.sources if s not in found]
    return tuple(found)


def ratio(a: Value, b: Value) -> Derived:
    """a / b, written "1.23x"."""
    return derive(lambda x, y: x / y, "{:.2f}x", a, b)


def over(a: Value, b: Value) -> Derived:
    """How far ``a`` is above ``b``: 100 x (a / b - 1), written "+1.2%"."""
    return derive(lambda x, y: 100 * (x / y - 1), "{:+.1f}%", a, b)


def verdict(time: Value, target: Value) -> Derived:
    """Whether a time meets a target time: "met", or "missed by 3.20 us" (time - target)."""
    late = time.number() - target.number()
    text = "met" if late <= 0 else f"missed by {late:.2f} us"
    return Derived(text=text, sources=_sources([time, target]))


def percent(a: Value) -> Derived:
    """A fraction as a percentage: "0.672" -> "67%"."""
    return derive(lambda x: 100 * x, "{:.0f}%", a)


def count(a: Value) -> Derived:
    """A count as prose writes it: "3072" -> "3,072"."""
    return derive(lambda x: x, "{:,.0f}", a)


def parse_kv_lines(text: str) -> list[dict[str, str]]:
    """The lines made only of ``key=value`` tokens, as dicts (other lines are skipped)."""
    rows = []
    for line in text.splitlines():
        tokens = line.split()
        if tokens and all(_KV_TOKEN.fullmatch(t) for t in tokens):
            rows.append(dict(t.split("=", 1) for t in tokens))
    return rows


def _split_row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_report(text: str) -> dict[str, list[dict[str, str]]]:
    """Rows of every markdown table of a report, by the title of the ``##`` section they are in.

    A section's key is its title up to " (": "Model step (58 of 58 MoE layers)" -> "Model step";
    tables above the first section are under "".
    """
    sections: dict[str, list[dict[str, str]]] = {"": []}
    rows = sections[
        ""
    ]  # tables above the first section (reports of the first days have no sections)
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            rows = sections.setdefault(line[3:].split(" (")[0].strip(), [])
            header = None
        elif line.startswith("|"):
            cells = _split_row(line)
            if header is None:
                header = cells
            elif not all(set(c) <= set("-:") for c in cells):
                if len(cells) != len(header):
                    raise RecordError(f"a table row with {len(cells)} cells under {header}")
                rows.append(dict(zip(header, cells, strict=True)))
        else:
            header = None
    return sections


def _one(found: Sequence, what: str):
    if len(found) != 1:
        raise RecordError(f"{what}: {len(found)} matches, need exactly one")
    return found[0]


class Records:
    """The records under one folder (docs/perf/ unless told), each file read once."""

    def __init__(self, root: Path = RECORDS) -> None:
        self.root = root
        self._texts: dict[str, str] = {}
        self._reports: dict[str, dict[str, list[dict[str, str]]]] = {}
        self._lines: dict[str, list[dict[str, str]]] = {}

    def read(self, path: str) -> str:
        if path not in self._texts:
            file = self.root / path
            if not file.is_file():
                raise RecordError(f"{path}: no such record under {self.root}")
            self._texts[path] = file.read_text(encoding="utf-8")
        return self._texts[path]

    def report(self, path: str) -> dict[str, list[dict[str, str]]]:
        if path not in self._reports:
            self._reports[path] = parse_report(self.read(path))
        return self._reports[path]

    def kv_lines(self, path: str) -> list[dict[str, str]]:
        if path not in self._lines:
            self._lines[path] = parse_kv_lines(self.read(path))
        return self._lines[path]

    def kv(self, path: str, field: str, **match: str | int) -> Figure:
        """``field`` of the one ``key=value`` line of ``path`` whose keys equal ``match``."""
        want = {k: str(v) for k, v in match.items()}
        rows = [r for r in self.kv_lines(path) if want.items() <= r.items()]
        row = _one(rows, f"{path}: lines with {want}")
        if field not in row:
            raise RecordError(f"{path}: the line with {want} has no {field}=")
        return Figure(text=row[field], source=path)

    def cell(self, path: str, section: str, column: str, **match: str) -> Figure:
        """``column`` of the one row of ``section``'s tables whose columns equal ``match``.

        Keyword names stand for columns; a column name with a space is passed as
        ``**{"arm vs baseline": ...}``.
        """
        sections = self.report(path)
        if section not in sections:
            raise RecordError(f"{path}: no section {section!r} (has {sorted(sections)})")
        rows = [r for r in sections[section] if match.items() <= r.items()]
        row = _one(rows, f"{path}, {section}: rows with {match}")
        if column not in row:
            raise RecordError(f"{path}, {section}: no column {column!r}")
        return Figure(text=row[column], source=path)

    def result(
        self, path: str, stage: str, arm: str, case: str = "c000", column: str = "median us"
    ) -> Figure:
        """One cell of a compare report's Results (the median us unless told).

        The reports of the first day have no sections: their one table is the results.
        """
        section = "Results" if "Results" in self.report(path) else ""
        return self.cell(path, section, column, case=case, stage=stage, arm=arm)

    def text(self, path: str, pattern: str) -> Figure:
        """Group 1 of the one match of ``pattern`` in ``path`` (a figure printed in a sentence)."""
        found = re.findall(pattern, self.read(path), flags=re.MULTILINE)
        return Figure(text=_one(found, f"{path}: {pattern!r}"), source=path)

    def ncu(self, path: str, kernel: int, metric: str) -> Figure:
        """``metric``'s value (its last column) for the ``kernel``-th kernel (from 0) an Nsight
        Compute log profiled, the log's kernels being the blocks under each
        ``  NAME (grid)x(block)`` header; exactly one line of that block names the metric."""
        blocks = re.split(r"^  \w+ \([\d, ]+\)x\([\d, ]+\).*$", self.read(path), flags=re.M)[1:]
        if not 0 <= kernel < len(blocks):
            raise RecordError(f"{path}: no kernel {kernel} (the log profiled {len(blocks)})")
        found = re.findall(rf"^\s+{re.escape(metric)}\s+.*?([\d.,]+)\s*$", blocks[kernel], re.M)
        return Figure(text=_one(found, f"{path}, kernel {kernel}: {metric!r}"), source=path)

    def json_row(self, path: str, field: str, **match: str) -> Figure:
        """``field`` of the one entry of the JSON's ``rows`` whose keys equal ``match``."""
        rows = json.loads(self.read(path))["rows"]
        row = _one([r for r in rows if match.items() <= r.items()], f"{path}: rows with {match}")
        return Figure(text=repr(row[field]), source=path)

    def json_meta(self, path: str, field: str) -> Figure:
        """``field`` of the JSON's ``meta``."""
        return Figure(text=str(json.loads(self.read(path))["meta"][field]), source=path)

    def versions(self, path: str) -> tuple[str, str]:
        """What a record says of the machine and versions it ran on, and of the code's commit.

        A report: its Runs table. A log of the bench tools: its first line (``torch GPU``), no
        commit. ("", "") for a file that records neither.
        """
        text = self.read(path)
        if path.endswith(".md"):
            runs = self.report(path).get("Runs", [])
            machine = {
                f"{r['machine'].removeprefix('GPU: ')}, torch {r['torch']}, triton {r['triton']}, "
                f"CUDA {r['cuda']}, driver {r['driver']}, Python {r['python']}"
                for r in runs
            }
            return "; ".join(sorted(machine)), ", ".join(sorted({r["commit"] for r in runs}))
        first = text.splitlines()[0].split(maxsplit=1) if text.strip() else []
        if len(first) == 2 and "+cu" in first[0]:
            return f"{first[1]}, torch {first[0]}", ""
        return "", ""
