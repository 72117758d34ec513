"""A comparison as a terminal table: plain text through rich, wrapped to the terminal's width.

Cells wrap only at spaces, so no number is ever split or cut to an ellipsis; text columns fold
inside a word only when nothing else fits, and when even that is too wide each row becomes a
block of ``name: value`` lines. Notes become numbered footnotes; the sections below the rows
are those of ``moebench.report.sections``.
"""

from __future__ import annotations

import io

from moebench.analysis.rows import Comparison
from moebench.report.model_sections import model_sections
from moebench.report.sections import (
    CRITICAL_PATH_NOTE,
    STEP_ONLY,
    aa_lines,
    display_rows,
    integrity_lines,
    noise_lines,
    pass_lines,
    reconciliation_lines,
    step_sections,
    title,
    workmodel_sections,
)

# The policy's evidence is a list of short cells: it may wrap as a text column (its words are
# a token count, a change and a decision, none longer than the fold floor but AMBIGUOUS).
_FOLDABLE = {"run", "case", "stage", "mode", "arm", "note", "series", "arm vs baseline",
             "evidence"}  # fmt: skip
_FOLD_MIN = 8


def _fit_widths(columns: list, body: list[list[str]], available: int) -> list[int] | None:
    """Column widths that fit ``available``: start from each column's natural width and narrow
    the one with the most slack. A figure column never gets narrower than its longest word, a
    text column than 8 characters (or its natural width). None when nothing fits."""
    texts = [[name, *(cells[i] for cells in body)] for i, (name, _) in enumerate(columns)]
    widths = [max(len(t) for t in col) for col in texts]
    floor = [
        min(w, _FOLD_MIN) if name in _FOLDABLE else max(len(x) for t in col for x in t.split())
        for (name, _), col, w in zip(columns, texts, widths, strict=True)
    ]
    # Wrap figures at their spaces first; fold identifiers only when that is not enough.
    for phase in (False, True):
        movable = [i for i, (name, _) in enumerate(columns) if (name in _FOLDABLE) == phase]
        while movable and sum(widths) > available:
            slack, i = max((widths[i] - floor[i], i) for i in movable)
            if slack <= 0:
                break
            widths[i] -= 1
    return widths if sum(widths) <= available else None


def render_table(comp: Comparison, width: int) -> str:
    """Title and legend as wrapped text, then the table; notes become numbered footnotes.

    Each column is at least as wide as its longest word, so cells wrap only at spaces: no number
    is ever split or cut to an ellipsis. When even that does not fit ``width``, each row is
    printed as a block of ``name: value`` lines instead of a table.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    columns, body = display_rows(comp)
    notes: dict[str, int] = {}
    for cells in body:
        note = cells[-1]
        cells[-1] = f"[{notes.setdefault(note, len(notes) + 1)}]" if note else ""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    say = lambda text: console.print(text, markup=False, highlight=False, overflow="fold")
    say(title(comp))
    say(CRITICAL_PATH_NOTE)
    widths = _fit_widths(columns, body, width - 2 * len(columns))  # 2: padding per column
    if not body and (comp.step is not None or comp.model is not None):
        say(STEP_ONLY)
    elif widths is not None:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for (name, right), w in zip(columns, widths, strict=True):
            table.add_column(name, justify="right" if right else "left", width=w, overflow="fold")
        for cells in body:
            table.add_row(*cells)
        console.print(table)
    else:
        key_width = max(len(name) for name, _ in columns)
        for cells in body:
            say("")
            for (name, _), cell in zip(columns, cells, strict=True):
                if cell:
                    say(f"{name:>{key_width}}: {cell}")
    if notes:
        say("")
    for note, n in notes.items():
        say(f"[{n}] {note}")
    say("")
    for line in (integrity_lines(comp) + aa_lines(comp) + noise_lines(comp)
                 + reconciliation_lines(comp) + pass_lines(comp)):  # fmt: skip
        say(line)
    for heading, note, header, cells in (
        workmodel_sections(comp) + step_sections(comp) + model_sections(comp)
    ):
        say("")
        say(f"{heading}: {note}")
        _print_cells(console, [(h, False) for h in header], cells, width)
    return console.file.getvalue()


def _print_cells(console, columns: list[tuple[str, bool]], body: list[list[str]], width: int):
    """A plain table that wraps only at spaces, or name: value blocks when even that is too wide."""
    from rich import box
    from rich.table import Table

    widths = _fit_widths(columns, body, width - 2 * len(columns))
    if widths is None:
        key_width = max(len(name) for name, _ in columns)
        for cells in body:
            console.print("", markup=False)
            for (name, _), cell in zip(columns, cells, strict=True):
                if cell:
                    console.print(f"{name:>{key_width}}: {cell}", markup=False, highlight=False,
                                  overflow="fold")  # fmt: skip
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for (name, right), w in zip(columns, widths, strict=True):
        table.add_column(name, justify="right" if right else "left", width=w, overflow="fold")
    for cells in body:
        table.add_row(*cells)
    console.print(table)
