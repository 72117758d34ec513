"""Raw routing files, read without model metadata: SGLang's ``stat`` JSON
(``{"logical_count": [[E] x layers]}``) and count matrices (.npy [layers, E] or [steps, layers, E],
.csv [layers, E]). Their ``model_id`` is None: they are not pinned to a model. ``load_any`` reads
either a raw file or a moebench Parquet trace (``moebench.routing.traces``).

Every read is bounded and safe: a regular file only, at most ``MAX_BYTES``; an .npy header is
checked before numpy reads anything, and pickled objects are never loaded. The importers of other
formats (``moebench.routing.importers``) share these readers.

Legend: S steps, L layers (of the trace), E experts.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
import zipfile
from pathlib import Path

import numpy as np

from moebench.core.errors import TraceError
from moebench.routing.traces import Trace, first_line, read_parquet, validate

MAX_BYTES = 1 << 31  # 2 GiB: a trace file larger than this is not read into memory


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes: a regular file only (never /dev/zero or a FIFO), read with a bound."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TraceError(f"{p}: not a regular file")
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise TraceError(f"{p}: cannot read trace ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise TraceError(f"{p}: more than {MAX_BYTES} bytes, more than moebench reads")
    return raw


def _check_npy_header(raw: bytes, where: str) -> None:
    """Refuse an .npy whose header declares objects or a shape its bytes do not hold, before
    numpy reads (or allocates) anything."""
    f = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise TraceError(f"{where}: .npy format version {version} is not supported")
    except (ValueError, EOFError, SyntaxError) as exc:
        raise TraceError(
            f"{where}: not a NumPy file moebench can read ({first_line(exc)})"
        ) from None
    if dtype.hasobject:
        raise TraceError(
            f"{where}: not a NumPy file moebench can read: expected integer or float "
            f"counts, got dtype {dtype.str} (pickled objects are never loaded)"
        )
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise TraceError(
            f"{where}: counts must be numbers: expected integer or float counts, "
            f"got dtype {dtype.str}"
        )
    if math.prod(shape) * dtype.itemsize != len(raw) - f.tell():
        raise TraceError(
            f"{where}: not a NumPy file moebench can read: truncated or padded .npy "
            f"(header declares shape {list(shape)})"
        )


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip with entries, an empty zip
PARQUET_MAGIC = b"PAR1"
# torch.save's legacy (non-zip) format: a protocol-2 pickle whose first object is this long.
TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def zip_names(raw: bytes) -> list[str] | None:
    """The entry names of a zip file (.npz, torch.save), or None when ``raw`` is not one."""
    if not raw.startswith(ZIP_MAGIC):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            return z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None


def sniff(raw: bytes) -> str | None:
    """What kind of file ``raw`` is, from its signature and never by loading it: ``npy``,
    ``npz``, ``torch`` (torch.save, zip or legacy), ``pickle`` (any other pickle), ``zip``,
    ``parquet``, ``json``, ``csv`` (lines of comma-separated numbers), or None."""
    if raw.startswith(NPY_MAGIC):
        return "npy"
    if raw.startswith(PARQUET_MAGIC):
        return "parquet"
    if raw.startswith(TORCH_LEGACY_MAGIC):
        return "torch"
    if raw[:1] == b"\x80":
        return "pickle"
    names = zip_names(raw)
    if names is None and raw.startswith(ZIP_MAGIC[0]):  # a damaged zip: its first entry's name
        names = [raw[30 : 30 + int.from_bytes(raw[26:28], "little")].decode("utf-8", "replace")]
    if names is not None:
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return "torch"
        return "npz" if names and all(n.endswith(".npy") for n in names) else "zip"
    try:
        text = raw[: 1 << 16].decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the 64 KiB mark is fine
        if exc.start < (1 << 16) - 4:
            return None
        text = raw[: exc.start].decode("utf-8")
    head = text.lstrip("\ufeff \t\r\n")
    if head[:1] in ("{", "["):
        return "json"
    lines = text.splitlines()
    if len(raw) > len(text.encode()):  # the last line may be cut at the 64 KiB mark
        lines = lines[:-1]
    rows = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")][:20]
    if rows and all(re.fullmatch(r"[\s\d.eE+\-]+(,[\s\d.eE+\-]+)*,?\s*", ln) for ln in rows):
        return "csv"
    return None


def npy_load(raw: bytes, where: str):
    """np.load that never unpickles: an ndarray (.npy) or a dict of ndarrays (.npz). A file
    with neither signature is refused before numpy sees it (numpy would try it as a pickle)."""
    if raw.startswith(NPY_MAGIC):
        _check_npy_header(raw, where)
    elif zip_names(raw) is None:
        raise TraceError(f"{where}: not a NumPy file moebench can read (no .npy or .npz signature)")
    try:
        out = np.load(io.BytesIO(raw), allow_pickle=False)
        if isinstance(out, np.lib.npyio.NpzFile):
            with out:
                return {k: out[k] for k in out.files}
        return out
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        reason = "it holds pickled objects" if "pickle" in str(exc) else first_line(exc)
        raise TraceError(f"{where}: not a NumPy file moebench can read ({reason})") from None


def count_array(a, where: str, name: str = "counts") -> np.ndarray:
    """A finite, non-negative [layers, E] or [steps, layers, E] array, as float64 [S, L, E]."""
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        raise TraceError(f"{where}: {name} is not a numeric array ({first_line(exc)})") from None
    if arr.dtype.kind not in "iuf":
        raise TraceError(f"{where}: {name} must be numbers, got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or 0 in arr.shape:
        raise TraceError(
            f"{where}: {name} must be [layers, experts] or [steps, layers, experts], "
            f"got shape {list(np.shape(a))}"
        )
    try:
        arr = arr.astype(np.float64)
    except OverflowError as exc:
        raise TraceError(f"{where}: {name} does not fit float64 ({first_line(exc)})") from None
    if not np.isfinite(arr).all():
        raise TraceError(f"{where}: {name} holds NaN or infinite values")
    if (arr < 0).any():
        raise TraceError(f"{where}: {name} holds negative counts")
    return arr


def read_json(raw: bytes, where: str):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{where}: malformed JSON ({first_line(exc)})") from None


def read_csv(raw: bytes, where: str) -> np.ndarray:
    try:
        a = np.loadtxt(io.StringIO(raw.decode("utf-8")), delimiter=",", comments="#", ndmin=2)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"{where}: malformed CSV count matrix ({first_line(exc)})") from None
    return a


def load_raw(path: str | os.PathLike) -> Trace:
    """A raw load file: SGLang ``stat`` JSON, or a .npy / .csv count matrix; not pinned."""
    p = Path(path)
    raw = read_bytes(p)
    where = str(p)
    suffix = p.suffix.lower()
    if suffix == ".json":
        doc = read_json(raw, where)
        if not isinstance(doc, dict) or "logical_count" not in doc:
            raise TraceError(f"{where}: expected a JSON object with 'logical_count'")
        counts, source = count_array(doc["logical_count"], where, "logical_count"), "sglang-stat"
    elif suffix == ".npy":
        a = npy_load(raw, where)
        if isinstance(a, dict):
            raise TraceError(f"{where}: an .npz archive; import it with moebench trace import")
        counts, source = count_array(a, where), "counts"
    elif suffix == ".csv":
        counts, source = count_array(read_csv(raw, where), where), "counts"
    else:
        raise TraceError(
            f"{where}: unknown trace type {suffix or '(no suffix)'}: use a moebench .parquet trace "
            f"(moebench trace import), SGLang stat .json, or a .npy/.csv count matrix"
        )
    return validate(
        Trace(
            kind="load", experts=counts.shape[2], layers=tuple(range(counts.shape[1])),
            counts_SLE=counts, source=f"{source}:{p.name}",
            source_sha256=hashlib.sha256(raw).hexdigest(),
        ),
        where,
    )  # fmt: skip


def load_any(path: str | os.PathLike) -> Trace:
    """A moebench Parquet trace (pinned) or a raw load file (not pinned)."""
    if Path(path).suffix.lower() == ".parquet":
        return read_parquet(path)
    return load_raw(path)
