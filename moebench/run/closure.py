"""An arm's sources, found rather than listed: the import closure of its module (DESIGN 8, 13).

Starting from the module that defines the arm, every ``import`` and ``from ... import`` of every
Python file reached is followed (read from the files' syntax trees, so the closure is the same
whatever was imported before, and an import inside a function counts too). A module whose file
lies in a source tree (this repository, a user's folder, a loose package on ``sys.path``) is
hashed and followed; a module of an installed distribution (torch, triton, or an engine such as
vllm) is recorded as that distribution, name, version and the sha256 of its RECORD (of its file
list when it has none), and not followed; the standard library is left out. The hash an arm is
pinned to covers all of it, so that appending a comment to any file the arm's code reaches, or
upgrading a package it imports, changes the pin, and a file no arm reaches does not. The data
files an arm declares (``Arm.data_files``: a tuned config it reads) are hashed beside its code.

A file is named in the pin relative to the first source root that holds it (the repository, then
the arm's folder, then a loose package's): the pin covers a file's content and where it sits in
its tree, never where the tree lies, so an identical copy of a user's arm folder elsewhere pins
the same and a changed byte is named by that relative path.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

SITE_DIRS = ("site-packages", "dist-packages")
# moebench and its built-in arms are hashed file by file even when installed (a root can then be
# a site-packages folder, where every other package is a distribution, not a source tree).
OWN = ("moebench", "arms")


@dataclass(kw_only=True)
class Closure:
    files: dict[Path, str] = field(default_factory=dict)  # absolute path -> sha256
    # distribution name -> {version, record_sha256}
    distributions: dict[str, dict[str, str]] = field(default_factory=dict)
    data: dict[Path, str] = field(default_factory=dict)  # a declared data file -> sha256
    # The source roots, in the order searched: the given ones, then loose packages on sys.path.
    roots: list[Path] = field(default_factory=list)

    def name(self, path: Path) -> str:
        """``path`` as the pin names it: relative to the first root that holds it (module
        docstring); absolute only when no root holds it (a data file declared by an absolute
        path outside them)."""
        for root in self.roots:
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        return str(path)


def closure_of(
    module: str, *, roots: list[Path], file: Path | None = None, data: tuple[Path, ...] = ()
) -> Closure:
    """The import closure of ``module`` (``file``: its path when it was loaded from a file rather
    than found by name), and the ``data`` files it declares (absolute paths; each must exist).
    ``roots``: source folders searched first, in order (the repository, the arm file's folder);
    other names are looked up on ``sys.path`` without importing them."""
    roots = [Path(r).resolve() for r in roots]
    out = Closure(roots=roots)  # _find appends a loose package's folder to the same list
    for path in data:
        path = Path(path).resolve()
        out.data[path] = hashlib.sha256(path.read_bytes()).hexdigest()
    queue: list[tuple[str, Path | None]] = [(module, Path(file).resolve() if file else None)]
    seen: set[str] = set()
    while queue:
        name, path = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        if path is None:
            path = _find(name, roots, out)
        if path is None:
            continue
        out.files[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imports(path, package):
            parts = imported.split(".")
            for i in range(1, len(parts) + 1):  # a.b.c runs a/__init__, a/b/__init__, a/b/c
                queue.append((".".join(parts[:i]), None))
    return out


def combined_hash(c: Closure, rel=None) -> str:
    """One sha256 over the closure's files (as ``rel`` names them; by default ``Closure.name``),
    distributions and data files."""
    rel = rel or c.name
    h = hashlib.sha256()
    for name, digest in sorted((rel(p), d) for p, d in c.files.items()):
        h.update(f"{name}\0{digest}\n".encode())
    for name, d in sorted(c.distributions.items()):
        h.update(f"dist:{name}\0{d['version']}\0{d['record_sha256']}\n".encode())
    for name, digest in sorted((rel(p), d) for p, d in c.data.items()):
        h.update(f"data:{name}\0{digest}\n".encode())
    return h.hexdigest()


def _find(name: str, roots: list[Path], out: Closure) -> Path | None:
    """The source file of module ``name``, or None (stdlib, a distribution, or not found: a
    distribution is recorded in ``out``)."""
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return None
    for root in roots:
        if top not in OWN and any(part in SITE_DIRS for part in root.parts):
            continue
        found = _in_root(root, name)
        if found is not None:
            return found
        if (root / top).is_dir() or (root / f"{top}.py").is_file():
            return None  # a name the source tree holds but not as a module (an attribute)
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    origin = Path(spec.origin).resolve()
    dists = _distributions().get(top)
    if top not in OWN and dists and any(part in SITE_DIRS for part in origin.parts):
        for dist in dists:
            out.distributions.setdefault(dist, _dist_record(dist))
        return None
    # A loose package on sys.path (not installed): its folder is a source root like the others.
    base = origin.parent.parent if origin.name == "__init__.py" else origin.parent
    roots.append(base)
    return _in_root(base, name)


def _in_root(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _imports(path: Path, package: str) -> list[str]:
    """Module names ``path`` imports (absolute; ``from a import b`` gives ``a`` and ``a.b``: b may
    be a submodule, and a name that is not one is dropped by ``_find``)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            if prefix:
                out.append(prefix)
                out += [f"{prefix}.{a.name}" for a in node.names if a.name != "*"]
    return out


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@functools.cache
def _dist_record(dist: str) -> dict[str, str]:
    """Version and the sha256 of the distribution's RECORD (or of its file list without one)."""
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return {"version": "", "record_sha256": ""}
    record = d.read_text("RECORD")
    if record is None:
        record = "\n".join(sorted(str(f) for f in (d.files or ())))
    digest = hashlib.sha256(record.encode()).hexdigest()
    return {"version": d.version or "", "record_sha256": digest}
