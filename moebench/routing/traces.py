"""Routing traces: what a model's router did, as moebench stores, reads and summarises it.

Two kinds (docs/DESIGN.md section 10):

- ``load``: per layer, per expert token counts, optionally per step (``counts_SLE``, float64
  [steps, layers, E]; counts may be fractional, e.g. shares per prompt). Replayed by sampling
  per-token top-k ids whose histogram is the recorded one (``trace_replay``).
- ``token``: per token and layer, the top-k expert ids (``topk_ids_TLK``, int32 [T, layers, K],
  -1 for an unused slot) and optionally their router weights (``topk_weights_TLK``, float32, same
  shape). Replayed as recorded.

``layers`` holds the model's layer number of each position along the layer axis (a dense layer of
a recorded model is a layer whose counts are all zero).

moebench's own file is Parquet. A load trace has one row per (step, layer) with ``counts``
(list<float64> of E); a token trace one row per (token, layer) with ``topk_ids`` (list<int32> of K)
and, when recorded, ``topk_weights`` (list<float32>). The schema metadata key ``moebench.trace``
holds JSON: format, kind, model_id, revision, experts, top_k, layers, source, source_sha256 (the
imported file) and sha256 (of the content, see ``Trace.sha256``). A trace read back whose content
does not hash to its recorded sha256 is refused.

Raw files without model metadata (SGLang ``stat`` JSON, count matrices) are read by
``moebench.routing.raw_files``; the statistics of a layer's load are
``moebench.routing.trace_stats``.

Legend: S steps, L layers (of the trace), E experts, T tokens, K top-k.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from moebench.core.atomic import atomic_write
from moebench.core.errors import TraceError, clip, one_line
from moebench.core.models import PRESETS

KINDS = ("load", "token")
FORMAT = 1
META_KEY = b"moebench.trace"


@dataclass(frozen=True, kw_only=True, eq=False)  # arrays inside: identity, not value, equality
class Trace:
    kind: str
    experts: int
    layers: tuple[int, ...]
    top_k: int | None = None  # None: unknown (a raw load file)
    model_id: str | None = None  # None: not pinned to a model (a raw file)
    revision: str | None = None
    source: str = ""  # what it was imported from: format and file name
    source_sha256: str = ""
    counts_SLE: np.ndarray | None = field(default=None, repr=False)
    topk_ids_TLK: np.ndarray | None = field(default=None, repr=False)
    topk_weights_TLK: np.ndarray | None = field(default=None, repr=False)

    @cached_property
    def sha256(self) -> str:
        """sha256 of the content (kind, layers, shapes and array bytes), not of any file: a raw
        file and its Parquet import hash alike, whatever the metadata."""
        h = hashlib.sha256(f"moebench-trace-v{FORMAT}\0{self.kind}\0{self.experts}\0".encode())
        h.update(json.dumps(list(self.layers)).encode())
        for a in (self.counts_SLE, self.topk_ids_TLK, self.topk_weights_TLK):
            if a is not None:
                a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
                h.update(f"\0{a.dtype.str}{a.shape}\0".encode())
                h.update(a.tobytes())
        return h.hexdigest()

    @property
    def pinned(self) -> bool:
        return self.model_id is not None

    @property
    def steps(self) -> int:
        return 0 if self.counts_SLE is None else self.counts_SLE.shape[0]

    @property
    def tokens(self) -> int:
        return 0 if self.topk_ids_TLK is None else self.topk_ids_TLK.shape[0]

    def position(self, layer: int, where: str) -> int:
        """Index along the layer axis of the model layer ``layer``."""
        if layer not in self.layers:
            shown = _ranges(self.layers)
            raise TraceError(f"{where}: layer {layer} is not in the trace (layers {shown})")
        return self.layers.index(layer)

    def layer_counts(self, layer: int, where: str = "trace") -> np.ndarray:
        """float64 [E]: rows each expert received in ``layer`` (summed over steps)."""
        i = self.position(layer, where)
        if self.kind == "load":
            return self.counts_SLE[:, i, :].sum(axis=0)
        ids = self.topk_ids_TLK[:, i, :].ravel()
        return np.bincount(ids[ids >= 0], minlength=self.experts).astype(np.float64)

    def all_counts(self) -> np.ndarray:
        """float64 [L, E]: ``layer_counts`` of every layer."""
        return np.stack([self.layer_counts(layer) for layer in self.layers])

    def default_layer(self, where: str = "trace") -> int:
        """The first layer that routed anything (DeepSeek's first layers are dense)."""
        for layer, row in zip(self.layers, self.all_counts(), strict=True):
            if row.sum() > 0:
                return layer
        raise TraceError(f"{where}: every layer is empty")


def validate(t: Trace, where: str) -> Trace:
    """Shapes, dtypes and ranges of a trace; TraceError naming ``where`` when any is wrong."""
    if t.kind not in KINDS:
        raise TraceError(f"{where}: unknown trace kind {t.kind!r}")
    if not 1 <= t.experts <= 1 << 16:
        raise TraceError(f"{where}: number of experts {t.experts} out of range")
    if t.top_k is not None and not 1 <= t.top_k <= t.experts:
        raise TraceError(f"{where}: top_k {t.top_k} not in [1, experts = {t.experts}]")
    if not t.layers or len(set(t.layers)) != len(t.layers) or min(t.layers) < 0:
        raise TraceError(f"{where}: layer numbers must be distinct and >= 0")
    L, E = len(t.layers), t.experts
    if t.kind == "load":
        c = t.counts_SLE
        if c is None or t.topk_ids_TLK is not None:
            raise TraceError(f"{where}: a load trace holds counts only")
        if c.dtype != np.float64 or c.ndim != 3 or c.shape[1:] != (L, E) or c.shape[0] < 1:
            raise TraceError(
                f"{where}: counts must be float64 [steps, {L} layers, {E} experts], "
                f"got {c.dtype} {list(c.shape)}"
            )
        if not np.isfinite(c).all() or (c < 0).any():
            raise TraceError(f"{where}: counts must be finite and >= 0")
        return t
    ids, w = t.topk_ids_TLK, t.topk_weights_TLK
    if ids is None or t.counts_SLE is not None:
        raise TraceError(f"{where}: a token trace holds top-k ids (and weights) only")
    if ids.dtype != np.int32 or ids.ndim != 3 or ids.shape[1] != L or ids.shape[0] < 1:
        raise TraceError(
            f"{where}: topk_ids must be int32 [tokens, {L} layers, top_k], "
            f"got {ids.dtype} {list(ids.shape)}"
        )
    if t.top_k is None or ids.shape[2] != t.top_k:
        raise TraceError(f"{where}: topk_ids has {ids.shape[2]} slots, top_k is {t.top_k}")
    if ids.size and (ids.min() < -1 or ids.max() >= E):
        raise TraceError(f"{where}: expert ids must be in [0, {E}) or -1 for an unused slot")
    s = np.sort(ids, axis=2)
    dup = (s[:, :, 1:] == s[:, :, :-1]) & (s[:, :, 1:] >= 0)
    if dup.any():
        tok, pos = np.argwhere(dup.any(axis=2))[0]
        raise TraceError(
            f"{where}: token {tok} repeats an expert in layer {t.layers[pos]} (top-k ids must be "
            f"distinct)"
        )
    if w is not None:
        if w.dtype != np.float32 or w.shape != ids.shape:
            raise TraceError(
                f"{where}: topk_weights must be float32 {list(ids.shape)}, got {w.dtype} "
                f"{list(w.shape)}"
            )
        if not np.isfinite(w[ids >= 0]).all():
            raise TraceError(f"{where}: topk_weights must be finite")
    return t


def _ranges(layers: tuple[int, ...]) -> str:
    if list(layers) == list(range(layers[0], layers[0] + len(layers))):
        return f"{layers[0]}-{layers[-1]}"
    return ", ".join(map(str, layers))


# --- Parquet -------------------------------------------------------------------------------------


def meta_of(t: Trace) -> dict:
    return {
        "format": FORMAT, "kind": t.kind, "model_id": t.model_id, "revision": t.revision,
        "experts": t.experts, "top_k": t.top_k, "layers": list(t.layers), "source": t.source,
        "source_sha256": t.source_sha256, "sha256": t.sha256,
    }  # fmt: skip


def write_parquet(t: Trace, path: str | os.PathLike, *, overwrite: bool = True) -> None:
    """Write a pinned trace atomically (temp file in the same folder, fsync, rename), with the
    mode a plain ``open()`` gives under the umask. ``overwrite=False``: TraceError when ``path``
    exists, which is left untouched (``moebench trace import`` without ``--force``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not t.pinned or not t.revision or t.top_k is None:
        raise TraceError(f"{path}: a moebench trace needs a model id, a revision and a top_k")
    L = len(t.layers)
    layers = np.asarray(t.layers, dtype=np.int32)
    if t.kind == "load":
        S, E = t.steps, t.experts
        cols = {
            "step": pa.array(np.repeat(np.arange(S, dtype=np.int32), L)),
            "layer": pa.array(np.tile(layers, S)),
            "counts": pa.LargeListArray.from_arrays(
                pa.array(np.arange(0, S * L * E + 1, E, dtype=np.int64)),
                pa.array(t.counts_SLE.reshape(-1)),
            ),
        }
    else:
        T, K = t.tokens, t.top_k
        offsets = pa.array(np.arange(0, T * L * K + 1, K, dtype=np.int64))
        cols = {
            "token": pa.array(np.repeat(np.arange(T, dtype=np.int64), L)),
            "layer": pa.array(np.tile(layers, T)),
            "topk_ids": pa.LargeListArray.from_arrays(offsets, pa.array(t.topk_ids_TLK.ravel())),
        }
        if t.topk_weights_TLK is not None:
            cols["topk_weights"] = pa.LargeListArray.from_arrays(
                offsets, pa.array(t.topk_weights_TLK.ravel())
            )
    table = pa.table(cols).replace_schema_metadata({META_KEY: json.dumps(meta_of(t)).encode()})
    p = Path(path)
    try:
        atomic_write(p, lambda f: pq.write_table(table, f), overwrite=overwrite)
    except FileExistsError:
        raise TraceError(f"{p}: already exists; pass --force to replace it") from None
    except OSError as exc:
        raise TraceError(f"{p}: cannot write ({exc.strerror or exc})") from None


def replay_hint(model_id: str, revision: str) -> str:
    """How a scenario replays a trace recorded on ``model_id`` at ``revision``: by naming that
    revision. The same words end the import's warning and the scenario's pin error, so that the
    advice a user reads first is the one that later fixes the scenario."""
    preset = preset_revision(model_id)
    rev = revision if re.fullmatch(r"[\w./-]+", revision) else json.dumps(revision)
    example = f" (model: {{preset: {preset[0]}, revision: {rev}}})" if preset else ""
    return f"to replay this trace, set model.revision: {rev} in the scenario{example}"


def preset_revision(model_id: str) -> tuple[str, str] | None:
    """(preset name, pinned revision) of the preset whose ``id`` is ``model_id``, if any."""
    return next(((name, p["revision"]) for name, p in PRESETS.items() if p["id"] == model_id), None)


def read_meta(path: str | os.PathLike) -> dict:
    """The ``moebench.trace`` metadata of a Parquet trace, without reading its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: cannot read trace (no such file)") from None
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(f"{path}: not a Parquet file ({first_line(exc)})") from None
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise TraceError(f"{path}: a Parquet file without moebench trace metadata")
    try:
        meta = json.loads(raw)
    except ValueError:
        raise TraceError(f"{path}: malformed moebench trace metadata") from None
    want = {"format", "kind", "model_id", "revision", "experts", "top_k", "layers", "sha256"}
    if not isinstance(meta, dict) or not want <= set(meta):
        raise TraceError(f"{path}: moebench trace metadata lacks {sorted(want - set(meta))}")
    if meta["format"] != FORMAT:
        raise TraceError(f"{path}: trace format {meta['format']!r}, this moebench reads {FORMAT}")
    return meta


def read_parquet(path: str | os.PathLike) -> Trace:
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = read_meta(path)
    kind, L, E, K = meta["kind"], len(meta["layers"]), int(meta["experts"]), meta["top_k"]
    if kind not in KINDS:
        raise TraceError(f"{path}: unknown trace kind {kind!r}")
    try:
        table = pq.read_table(path)
        names = table.column_names
        want = ["step", "layer", "counts"] if kind == "load" else ["token", "layer", "topk_ids"]
        want += ["topk_weights"] if kind == "token" and "topk_weights" in names else []
        if names != want:
            raise TraceError(f"{path}: columns {names}, expected {want}")
        if not L or not table.num_rows or table.num_rows % L:
            raise TraceError(f"{path}: rows missing or out of order")
        n = table.num_rows // L  # steps or tokens
        grid = (np.repeat(np.arange(n), L), np.tile(meta["layers"], n))
        if not all(
            np.array_equal(table[c].to_numpy(), g) for c, g in zip(want[:2], grid, strict=True)
        ):
            raise TraceError(f"{path}: rows missing or out of order")
        if kind == "load":
            arrays = {"counts_SLE": _fixed_lists(table["counts"], E).reshape(n, L, E)}
        else:
            arrays = {
                f"{c}_TLK": _fixed_lists(table[c], K).astype(dtype).reshape(n, L, K)
                for c, dtype in (("topk_ids", np.int32), ("topk_weights", np.float32))
                if c in names
            }
    except TraceError:
        raise
    except (ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        raise TraceError(f"{path}: malformed moebench trace ({first_line(exc)})") from None
    t = validate(
        Trace(
            kind=kind, experts=E, layers=tuple(int(x) for x in meta["layers"]), top_k=K,
            model_id=meta["model_id"], revision=meta["revision"], source=meta.get("source", ""),
            source_sha256=meta.get("source_sha256", ""), **arrays,
        ),
        str(path),
    )  # fmt: skip
    if t.sha256 != meta["sha256"]:
        raise TraceError(f"{path}: content does not match its recorded sha256 (corrupted?)")
    return t


def _fixed_lists(column, n: int) -> np.ndarray:
    """The values of a list column whose every row holds exactly n non-null values."""
    import pyarrow.compute as pc

    col = column.combine_chunks()
    if col.null_count or (pc.list_value_length(col).to_numpy(zero_copy_only=False) != n).any():
        raise ValueError(f"every row must hold {n} values")
    values = col.flatten()
    if values.null_count:
        raise ValueError("null values inside a list")
    return values.to_numpy(zero_copy_only=False)


# torch's and numpy's advice to load a file unsafely (weights_only=False, allow_pickle=True,
# pickle.load) is never passed on: moebench never does, and a user should not be told to.
_UNSAFE_ADVICE = re.compile(
    r"unsafe|allow_pickle|weights_only|pickle\.load|trusted? (the )?source|arbitrary code|"
    r"add_safe_globals|safe_globals|if you trust|file an issue",
    re.IGNORECASE,
)


def first_line(exc: BaseException, limit: int = 160) -> str:
    """The first non-empty line of an exception's message for a one-line error: sentences that
    advise loading the file unsafely are dropped, and a long line is cut at a word boundary
    with "..." (``core.errors.clip``), never mid-word."""
    if not str(exc).strip():
        return type(exc).__name__
    sentences = re.split(r"(?<=[.!?])\s+", one_line(exc, first=True))
    kept = [x for x in sentences if not _UNSAFE_ADVICE.search(x)]
    return clip(" ".join(kept), limit) if kept else type(exc).__name__
