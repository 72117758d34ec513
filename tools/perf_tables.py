"""Write docs/PERF.md's current tables from the stored records under docs/perf/, or check them.

    python tools/perf_tables.py           # rewrite every generated table in docs/PERF.md
    python tools/perf_tables.py --check   # exit 1, naming each table, if PERF.md differs

A generated table sits between ``<!-- perf_tables: NAME -->`` and ``<!-- /perf_tables -->``; the
tables themselves are written in the ``perf_specs_*.py`` modules beside this one (with
``perf_cells.py``), every figure a lookup in a stored record (``perf_records.py``) and every
derived number computed from such figures, with its formula in the caption. Each row names the
records its figures come from; a line under the table gives the versions those records hold.
Figures that no stored record holds are not written here: PERF.md keeps them as prose outside
the markers, each with its journal section. tests/docs/test_perf_tables.py runs the check.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

import perf_specs_biased
import perf_specs_confirm
import perf_specs_decode
import perf_specs_earlyloads
import perf_specs_expert_ready
import perf_specs_ffn
import perf_specs_fold
import perf_specs_fused
import perf_specs_fusedgrid
import perf_specs_gluon_arm
import perf_specs_gluon_gated
import perf_specs_gluon_tile
import perf_specs_grouped
import perf_specs_h100
import perf_specs_hf
import perf_specs_integrity
import perf_specs_kernel
import perf_specs_latest
import perf_specs_lowcounts
import perf_specs_model
import perf_specs_one_token
import perf_specs_packed
import perf_specs_packed_mx
import perf_specs_packed_scales
import perf_specs_passes
import perf_specs_passes16
import perf_specs_placed
import perf_specs_prefetch
import perf_specs_prefill
import perf_specs_rank
import perf_specs_ready
import perf_specs_rotated
import perf_specs_rows
import perf_specs_runs
import perf_specs_serving
import perf_specs_slot_grid
import perf_specs_sparse_ready
import perf_specs_stream
import perf_specs_stream_k
import perf_specs_timeline
import perf_specs_tokenprograms
import perf_specs_unmasked
import perf_specs_ws_gluon
from perf_cells import Table
from perf_records import REPO, RecordError, Records

PERF_MD = REPO / "docs" / "PERF.md"
# PERF.md's order: the latest sessions first, newest on top (2026-12-07's, 2026-12-06's,
# 2026-12-05's, 2026-12-04's, 2026-12-03's, 2026-12-02's eight, issues 24-28, then the ceilings and
# issue 19), then the areas, then the runs of issues 15-18.
SPECS = [
    perf_specs_slot_grid,
    perf_specs_gluon_gated,
    perf_specs_gluon_arm,
    perf_specs_ws_gluon,
    perf_specs_h100,
    perf_specs_stream_k,
    perf_specs_biased,
    perf_specs_packed_scales,
    perf_specs_packed_mx,
    perf_specs_gluon_tile,
    perf_specs_sparse_ready,
    perf_specs_one_token,
    perf_specs_expert_ready,
    perf_specs_packed,
    perf_specs_timeline,
    perf_specs_confirm,
    perf_specs_placed,
    perf_specs_ready,
    perf_specs_rotated,
    perf_specs_unmasked,
    perf_specs_tokenprograms,
    perf_specs_earlyloads,
    perf_specs_fusedgrid,
    perf_specs_passes16,
    perf_specs_rank,
    perf_specs_prefetch,
    perf_specs_fold,
    perf_specs_lowcounts,
    perf_specs_passes,
    perf_specs_fused,
    perf_specs_stream,
    perf_specs_rows,
    perf_specs_kernel,
    perf_specs_serving,
    perf_specs_model,
    perf_specs_integrity,
    perf_specs_grouped,
    perf_specs_hf,
    perf_specs_latest,
    perf_specs_prefill,
    perf_specs_ffn,
    perf_specs_decode,
    perf_specs_runs,
]
_BLOCK = re.compile(
    r"(?P<open><!-- perf_tables: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /perf_tables -->)",
    re.DOTALL,
)


def tables(records: Records) -> list[Table]:
    """Every generated table, in PERF.md's order."""
    return [build(records) for module in SPECS for build in module.TABLES]


def render_all(records: Records) -> dict[str, str]:
    out: dict[str, str] = {}
    for table in tables(records):
        if table.name in out:
            raise ValueError(f"two tables named {table.name}")
        out[table.name] = table.render(records) + "\n"
    return out


def differences(text: str, generated: dict[str, str]) -> list[str]:
    """What in PERF.md's text differs from the generated tables (one line a table) and the
    tables' history links that do not resolve."""
    found = {m["name"]: m["body"] for m in _BLOCK.finditer(text)}
    problems = [f"{name}: no block in PERF.md" for name in generated if name not in found]
    problems += [f"{name}: a block no table generates" for name in found if name not in generated]
    for name, body in found.items():
        if name in generated and body != generated[name]:
            problems.append(f"{name}: differs from what the records give")
    return problems + broken_links(text, generated)


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def broken_links(text: str, generated: dict[str, str]) -> list[str]:
    """History links of the generated tables that PERF.md does not define or that name no
    heading of docs/perf/HISTORY.md."""
    pairs = re.findall(r"^\[(h-[\w-]+)\]: perf/HISTORY\.md#(\S+)$", text, re.MULTILINE)
    defined = dict(pairs)
    history = (PERF_MD.parent / "perf" / "HISTORY.md").read_text(encoding="utf-8")
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", history, re.MULTILINE)}
    # Markdown takes a reference's first definition: a second one silently points elsewhere.
    times = Counter(k for k, _ in pairs)
    problems = [f"[{k}] is defined {n} times" for k, n in sorted(times.items()) if n > 1]
    for ref in sorted(
        {r for body in generated.values() for r in re.findall(r"\]\[(h-[\w-]+)\]", body)}
    ):
        if ref not in defined:
            problems.append(f"[{ref}] is used by a table but not defined")
        elif defined[ref] not in anchors:
            problems.append(f"[{ref}] points at #{defined[ref]}, no heading of HISTORY.md")
    return problems


def rewrite(text: str, generated: dict[str, str]) -> str:
    def body(match: re.Match) -> str:
        return match["open"] + generated.get(match["name"], match["body"]) + match["close"]

    return _BLOCK.sub(body, text)


def check(perf_md: Path = PERF_MD, records: Records | None = None) -> list[str]:
    """The differences between ``perf_md`` and the records (empty when they agree)."""
    return differences(perf_md.read_text(encoding="utf-8"), render_all(records or Records()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify, write nothing")
    parser.add_argument("--perf-md", type=Path, default=PERF_MD)
    args = parser.parse_args(argv)
    try:
        generated = render_all(Records())
    except RecordError as err:
        print(f"perf_tables: {err}", file=sys.stderr)
        return 2
    text = args.perf_md.read_text(encoding="utf-8")
    if not args.check:
        text = rewrite(text, generated)
        args.perf_md.write_text(text, encoding="utf-8")
    # What writing cannot mend: a table with no block, a block with no table, a broken link.
    problems = differences(text, generated)
    for problem in problems:
        print(f"perf_tables: {args.perf_md.name}: {problem}", file=sys.stderr)
    if not args.check:
        print(f"perf_tables: tables written to {args.perf_md}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
