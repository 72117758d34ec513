"""Atomic file writes: a temp file beside the target, fsynced, renamed into place, the folder
fsynced, so that a reader only ever sees a whole file (docs/DESIGN.md section 9).

The temp file is created with ``os.open(..., 0o666)``, so the file ends with the mode a plain
``open()`` would give under the process umask (0644 under umask 022, 0600 under 077), not the
0600 that ``tempfile.mkstemp`` hard-codes: results and traces are files to share, and whoever wants
them private sets the umask. The temp name starts with ``.`` and ends in ``.tmp`` (a run's
resume removes such leftovers).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_temp(path: Path) -> tuple[int, Path]:
    """A new, exclusive temp file beside ``path`` whose mode the umask decides."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temp file beside {path}")


def atomic_write(
    path: Path, write: Callable[[BinaryIO], object], *, overwrite: bool = True
) -> None:
    """Call ``write(binary_file)`` on a temp file beside ``path``, fsync it and move it to
    ``path``. ``overwrite=False`` never replaces an existing ``path`` (FileExistsError, the old
    file untouched), even if one appears while ``write`` runs: the temp file is hard-linked to
    ``path``, which fails when it exists. OSError propagates; no temp file is left behind."""
    path = Path(path)
    fd, tmp = _open_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _link_new(tmp: Path, path: Path) -> None:
    """Move ``tmp`` to ``path`` unless ``path`` exists. A file system without hard links falls
    back to a check then a rename (a file created in between would be replaced)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(path):
            raise FileExistsError(17, "File exists", str(path)) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)
