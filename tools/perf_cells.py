"""The pieces of a generated table of docs/PERF.md: cells made of record figures, and a Table.

A cell is words of the spec with figures put in (``fill``); the figures carry the records they
come from, so each row can name its sources, and the words are checked to hold no number of
their own: a number in a generated table is a figure of a record or derived from such figures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from perf_records import RecordError, Records, Value

# A number standing alone in a cell's own words ("3,072 rows", "22%"), not part of a name (fc1,
# v4-flash-ep8, 16x1): a generated cell may hold such a number only as a figure from a record.
_LOOSE_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w.])")


@dataclass(frozen=True)
class Piece:
    """A cell's text, the figures in it, and the words around them (the figures left out)."""

    text: str
    values: tuple[Value, ...] = ()
    words: str = ""


Cell = str | Value | Piece


def fill(template: str, *parts: Value | Piece) -> Piece:
    """``template`` with each ``{}`` replaced by the next figure's (or piece's) text."""
    words = template.split("{}")
    if len(words) != len(parts) + 1:
        raise ValueError(f"{template!r} has {len(words) - 1} slots for {len(parts)} values")
    text = words[0] + "".join(p.text + rest for p, rest in zip(parts, words[1:], strict=True))
    own = words[0] + "".join(
        (p.words if isinstance(p, Piece) else " ") + rest
        for p, rest in zip(parts, words[1:], strict=True)
    )
    values: list[Value] = []
    for part in parts:
        values += part.values if isinstance(part, Piece) else [part]
    return Piece(text, tuple(values), own)


def bold(value: Value | Piece) -> Piece:
    return fill("**{}**", value)


def _piece(cell: Cell) -> Piece:
    if isinstance(cell, Piece):
        return cell
    if isinstance(cell, str):
        return Piece(cell, (), cell)
    return Piece(cell.text, (cell,), " ")


@dataclass
class Table:
    """One generated block: a caption, the table (with its record column), the records' versions.

    ``columns`` are the table's own; "record" (a link to each record a row's figures come from)
    and, when any row has one, "history" (the journal section) are added after them.
    """

    name: str
    caption: str
    columns: list[str]
    rows: list[tuple[list[Piece], str]] = field(default_factory=list)

    def row(self, *cells: Cell, history: str = "") -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.name}: {len(cells)} cells for columns {self.columns}")
        pieces = [_piece(c) for c in cells]
        for piece in pieces:
            loose = _LOOSE_NUMBER.findall(piece.words)
            if loose:
                raise RecordError(f"{self.name}: {loose} in {piece.text!r} is not from a record")
        self.rows.append((pieces, history))

    def sources(self, pieces: Iterable[Piece]) -> list[str]:
        found: list[str] = []
        for piece in pieces:
            for value in piece.values:
                found += [s for s in value.sources if s not in found]
        return found

    def render(self, records: Records) -> str:
        history = any(h for _, h in self.rows)
        head = [*self.columns, "record", *(["history"] if history else [])]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for pieces, hist in self.rows:
            sources = self.sources(pieces)
            if not sources:
                raise RecordError(f"{self.name}: a row with no figure from a record: {pieces}")
            links = ", ".join(f"[{s}](perf/{s})" for s in sources)
            cells = [p.text for p in pieces] + [links] + ([hist] if history else [])
            lines.append("| " + " | ".join(cells) + " |")
        every = self.sources(p for pieces, _ in self.rows for p in pieces)
        return f"{self.caption.strip()}\n\n" + "\n".join(lines) + "\n\n" + _versions(records, every)


def _versions(records: Records, sources: list[str]) -> str:
    """One line: the machine and versions the table's records hold, and the commits they name."""
    machines: dict[str, dict[str, str]] = {}
    silent: list[str] = []
    for source in sources:
        machine, commit = records.versions(source)
        if not machine:
            silent.append(source)
            continue
        folder = str(Path(source).parent)
        commits = machines.setdefault(machine, {})
        if commit and folder not in commits:
            commits[folder] = commit
    parts = []
    for machine, commits in machines.items():
        named = ", ".join(f"{folder} at {commit}" for folder, commit in commits.items())
        parts.append(f"{machine} ({'run manifests: ' + named if named else 'log headers'})")
    if silent:
        parts.append("none recorded in " + ", ".join(silent))
    return "Versions as the records give them: " + "; ".join(parts) + "."
