"""What a routing file looks like, told from its bytes without loading it, and the ``--format``
that would read it: the hint `importers.import_trace` adds when a format's reader refuses a
file.
"""

from __future__ import annotations

import io

import numpy as np

from moebench.routing.raw_files import sniff, zip_names
from moebench.routing.traces import META_KEY

# The kinds of file (raw_files.sniff) each format reads, and how its message names them.
READS: dict[str, tuple[frozenset[str], str]] = {
    "sglang-stat": (frozenset({"torch", "json"}), "a torch.save dump or JSON with logical_count"),
    "sglang-per-pass": (frozenset({"torch"}), "a torch.save dump of per_pass records"),
    "sglang-per-token": (frozenset({"torch"}), "a torch.save dump of per_token records"),
    "vllm-routed-experts": (frozenset({"npy"}), "an integer .npy array"),
    "vllm-eplb": (frozenset({"npy", "npz", "torch"}), "a .npy, .npz or torch.save file"),
    "counts": (frozenset({"npy", "csv"}), "a .csv or .npy count matrix"),
    "olmoe-counts": (frozenset({"json"}), "the OLMoE/Mixtral expert-count JSON"),
}
# Keys a torch.save, .npz or JSON file holds, and the format they point to (first match wins:
# SGLang's per_token records also hold a global_physical_count).
_KEYS = (
    (b"topk_ids_of_layer", "sglang-per-token", "SGLang per_token records"),
    (b"global_physical_count", "sglang-per-pass", "SGLang per_pass records"),
    (b"logical_count", "sglang-stat", "an SGLang stat dump (logical_count)"),
    (b"expert_load_window", "vllm-eplb", "vLLM EPLB load (expert_load_window)"),
    (b"expert_load_pass", "vllm-eplb", "vLLM EPLB load (expert_load_pass)"),
    (b"topk_counts", "olmoe-counts", "OLMoE/Mixtral expert counts (topk_counts)"),
)


def _keyed(raw: bytes, container: str, detail: str = "") -> tuple[str, tuple[str, ...]]:
    """What a container file holds, from the key names in its bytes (pickle and JSON store
    names as plain text; nothing is loaded)."""
    body = raw
    if container.startswith("a torch.save") and raw.startswith(b"PK"):
        body = _zip_entry(raw, "data.pkl") or raw
    for key, fmt, what in _KEYS:
        if key in body:
            return f"{what} in {container}", (fmt,)
    return container + detail, ()


def _zip_entry(raw: bytes, suffix: str) -> bytes | None:
    """The bytes of the zip entry whose name ends in ``suffix`` (bounded; None if unreadable)."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            info = next((i for i in z.infolist() if i.filename.endswith(suffix)), None)
            if info is None or info.file_size > 1 << 26:
                return None
            return z.read(info)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None


def looks_like(raw: bytes, experts: int | None = None) -> tuple[str, tuple[str, ...]] | None:
    """(what the file looks like, the formats that would read it) or None when moebench cannot
    tell; from the file's signature, an .npy header and key names, never by loading it. An
    integer [a, b, c] array is a count matrix when c is the number of ``experts`` (when known),
    else routed ids when its integers are narrow (vLLM returns int16), else either."""
    kind = sniff(raw)
    if kind == "npy":
        try:
            f = io.BytesIO(raw)
            version = np.lib.format.read_magic(f)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read(f)
        except (ValueError, EOFError, SyntaxError):
            return "a NumPy .npy file", ("counts", "vllm-eplb")
        what = f"a NumPy .npy array ({dtype} {list(shape)})"
        if dtype.hasobject or dtype.kind not in "iuf":
            return what, ()
        if dtype.kind in "iu" and len(shape) == 3:
            if experts is not None and shape[2] == experts:
                return what, ("counts", "vllm-eplb")
            if dtype.itemsize <= 2:
                return what, ("vllm-routed-experts",)
            return what, ("counts", "vllm-eplb", "vllm-routed-experts")
        return what, ("counts", "vllm-eplb") if len(shape) in (2, 3) else ()
    if kind == "npz":
        names = ", ".join(n.removesuffix(".npy") for n in zip_names(raw) or [])
        return _keyed(raw, "a NumPy .npz archive", f" ({names or 'empty'})")
    if kind == "torch":
        return _keyed(raw, "a torch.save file")
    if kind == "pickle":
        return (
            "a plain Python pickle, not a torch.save file; refused to unpickle it (moebench "
            "never loads pickled objects: save tensors with torch.save, arrays with np.save)",
            (),
        )
    if kind == "json":
        return _keyed(raw, "a JSON document")
    if kind == "csv":
        return "a CSV matrix of numbers", ("counts",)
    if kind == "parquet":
        if META_KEY in raw:
            return (
                "a moebench trace already (Parquet): it needs no import; use it as "
                "routing.path or with moebench trace stats",
                (),
            )
        return "a Parquet file (no --format reads Parquet)", ()
    if kind == "zip":
        return "a zip archive that is neither .npz nor torch.save", ()
    return None


def wrong_format_hint(
    msg: str, raw: bytes, where: str, fmt: str, experts: int | None = None
) -> str:
    """``msg`` (the reader's error) when the file is of a kind ``fmt`` reads and nothing points
    elsewhere; otherwise what the file looks like and the ``--format`` to try instead."""
    seen = looks_like(raw, experts)
    if seen is None:
        return msg
    what, formats = seen
    others = [f for f in formats if f != fmt]
    advice = f": try {' or '.join(f'--format {f}' for f in others)}" if others else ""
    kinds, reads = READS[fmt]
    if sniff(raw) not in kinds:
        return f"{where}: --format {fmt} reads {reads}, but the file looks like {what}{advice}"
    if fmt not in formats and others:
        return f"{msg}; the file looks like {what}{advice}"
    return msg
