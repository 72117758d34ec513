"""Importers: what serving engines record -> a pinned ``Trace`` (moebench's Parquet via the CLI).

Nothing here executes code from a file: torch files are read with ``torch.load(...,
weights_only=True)`` (tensors, lists, dicts and numbers only; a pickled object is refused), NumPy
files with ``allow_pickle=False``, JSON with ``json``. Every problem is one TraceError naming the
file.

Formats (the assumptions each makes are in its docstring; the SGLang ones follow
``python/sglang/srt/eplb/expert_distribution.py``):

- ``sglang-stat``: the ``stat`` / ``stat_approx`` dump, a torch file (or JSON, as SGLang's
  ``--init-expert-location`` also reads) holding ``logical_count`` [layers, E] or
  [steps, layers, E] -> load trace.
- ``sglang-per-pass``: the ``per_pass`` dump (torch): ``records`` of ``global_physical_count``
  [layers, physical experts] per forward pass, and ``last_physical_to_logical_map`` -> load trace,
  one step per forward pass.
- ``sglang-per-token``: the ``per_token`` dump (torch): records with ``topk_ids_of_layer``
  [layers, tokens, 8] (physical ids, -1 for an unused slot) -> token trace.
- ``vllm-routed-experts``: the routed-experts array vLLM returns per request, int
  [tokens, layers, top_k] (int16 as returned; any integer type), saved with ``np.save`` -> token
  trace.
- ``vllm-eplb``: EPLB expert load, ``expert_load_pass`` [layers, E] or ``expert_load_window``
  [window, layers, E]: a .npy array, or a .npz / torch dict holding one of those names and
  optionally ``physical_to_logical_map`` [layers, physical] -> load trace.
- ``counts``: a plain count matrix, .csv [layers, E] or .npy [layers, E] / [steps, layers, E].
- ``olmoe-counts``: the OLMoE/Mixtral expert-count JSON in ``../shared/traces``: ``--model``
  picks the model, ``--select`` the text domain -> load trace of its recorded layers.

Where the number of experts or top-k is not in the file it comes from the preset whose ``id``
is the model id (``models.PRESETS``), else from ``--experts`` / ``--top-k``.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from moebench.core.errors import TraceError, clip
from moebench.core.models import PRESETS
from moebench.routing.format_hints import wrong_format_hint
from moebench.routing.raw_files import (
    count_array,
    npy_load,
    read_bytes,
    read_csv,
    read_json,
    sniff,
)
from moebench.routing.traces import (
    Trace,
    first_line,
    preset_revision,
    replay_hint,
    validate,
)


def torch_load(raw: bytes, where: str):
    """torch.load that never runs code from the file (weights_only=True)."""
    import torch

    try:
        return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # whatever fails to unpickle safely is the file's fault
        text = str(exc)
        if "WeightsUnpickler error:" in text:  # torch's long advice; keep the reason only
            after = text.split("WeightsUnpickler error:", 1)[1]
            reason = next((ln.strip() for ln in after.splitlines() if ln.strip()), "")
            reason = clip(reason.split(". ", 1)[0].rstrip("."), 120) or "unsupported content"
            reason = f"refused to unpickle an object ({reason})"
        else:
            reason = first_line(exc)
        raise TraceError(
            f"{where}: not a torch file moebench can load safely (weights_only): {reason}"
        ) from None


def _is_torch(raw: bytes) -> bool:
    """A torch.save file, zip or legacy (either way read with weights_only); a .npz is a zip of
    .npy entries."""
    return sniff(raw) == "torch"


def _array(x, where: str, name: str) -> np.ndarray:
    """A tensor, ndarray or nested list as an ndarray."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as exc:
        raise TraceError(f"{where}: {name} is not an array ({first_line(exc)})") from None


def _field(doc, key: str, where: str):
    if not isinstance(doc, dict) or key not in doc:
        raise TraceError(f"{where}: expected a mapping with {key!r}")
    return doc[key]


def _int_array(x, where: str, name: str, ndim: int) -> np.ndarray:
    a = _array(x, where, name)
    if a.dtype.kind not in "iu":
        raise TraceError(f"{where}: {name} must be integers, got dtype {a.dtype}")
    if a.ndim != ndim or 0 in a.shape:
        raise TraceError(
            f"{where}: {name} must have {ndim} non-empty dimensions, got {list(a.shape)}"
        )
    return a.astype(np.int64)


def _to_logical(phys_SLP: np.ndarray, p2l, where: str, experts: int | None) -> np.ndarray:
    """Counts per physical expert -> per logical expert, summing replicas (SGLang, vLLM EPLB)."""
    if p2l is None:
        return phys_SLP
    m = _int_array(p2l, where, "physical_to_logical_map", 2)
    if m.shape != phys_SLP.shape[1:]:
        raise TraceError(
            f"{where}: physical_to_logical_map is {list(m.shape)}, counts are "
            f"[layers, physical] = {list(phys_SLP.shape[1:])}"
        )
    E = experts or int(m.max()) + 1
    if m.min() < 0 or m.max() >= E:
        raise TraceError(f"{where}: physical_to_logical_map names experts outside [0, {E})")
    S, L, _ = phys_SLP.shape
    out = np.zeros((S, L, E))
    for layer in range(L):
        np.add.at(out[:, layer, :], (slice(None), m[layer]), phys_SLP[:, layer, :])
    return out


def _ids_to_logical(ids: np.ndarray, p2l, where: str, experts: int | None) -> np.ndarray:
    """[L, T, K] physical ids -> logical ids (-1 stays -1)."""
    if p2l is None:
        return ids
    m = _int_array(p2l, where, "last_physical_to_logical_map", 2)
    if m.shape[0] != ids.shape[0] or ids.max() >= m.shape[1]:
        raise TraceError(
            f"{where}: topk ids do not fit last_physical_to_logical_map {list(m.shape)}"
        )
    E = experts or int(m.max()) + 1
    if m.min() < 0 or m.max() >= E:
        raise TraceError(f"{where}: last_physical_to_logical_map names experts outside [0, {E})")
    layer = np.arange(ids.shape[0])[:, None, None]
    return np.where(ids >= 0, m[layer, np.maximum(ids, 0)], -1)


def _token_trace(ids_TLK: np.ndarray, where: str, experts: int | None) -> Trace:
    """Token trace from int ids [T, L, K] with -1 for unused slots; slot columns unused by every
    token are dropped (SGLang records 8 slots whatever the model's top-k)."""
    if ids_TLK.min() < -1:
        raise TraceError(f"{where}: expert ids must be >= 0, or -1 for an unused slot")
    used = (ids_TLK >= 0).any(axis=(0, 1))
    if not used.any():
        raise TraceError(f"{where}: no slot holds an expert id")
    ids_TLK = ids_TLK[:, :, used]
    if experts is None:
        raise TraceError(f"{where}: the file does not say how many experts; pass --experts")
    if ids_TLK.max() >= experts:
        raise TraceError(f"{where}: expert id {int(ids_TLK.max())} >= {experts} experts")
    return Trace(
        kind="token", experts=experts, layers=tuple(range(ids_TLK.shape[1])),
        top_k=int(used.sum()), topk_ids_TLK=ids_TLK.astype(np.int32),
    )  # fmt: skip


def _load_trace(counts_SLE: np.ndarray, layers=None) -> Trace:
    return Trace(
        kind="load", experts=counts_SLE.shape[2],
        layers=tuple(layers) if layers is not None else tuple(range(counts_SLE.shape[1])),
        counts_SLE=counts_SLE,
    )  # fmt: skip


def _records(doc, where: str) -> list[dict]:
    records = _field(doc, "records", where)
    if not isinstance(records, list) or not records:
        raise TraceError(f"{where}: 'records' must be a non-empty list")
    if not all(isinstance(r, dict) for r in records):
        raise TraceError(f"{where}: every record must be a mapping")
    return records


# --- the formats -------------------------------------------------------------------------------


def sglang_stat(raw: bytes, where: str, opts: dict) -> Trace:
    """``{"logical_count": [layers][E]}`` JSON, or SGLang's torch ``stat`` dump
    (``dict(rank, logical_count=int tensor [steps, layers, E], ...)``)."""
    doc = read_json(raw, where) if sniff(raw) == "json" else torch_load(raw, where)
    counts = count_array(
        _array(_field(doc, "logical_count", where), where, "logical_count"), where, "logical_count"
    )
    return _load_trace(counts)


def sglang_per_pass(raw: bytes, where: str, opts: dict) -> Trace:
    """``dict(records=[dict(forward_pass_id, rank, global_physical_count=[layers, P]), ...],
    last_physical_to_logical_map=[layers, P])``; records of one forward pass (from several
    ranks) are summed into one step, steps in forward-pass order."""
    doc = torch_load(raw, where)
    steps: dict = {}
    for i, r in enumerate(_records(doc, where)):
        c = count_array(
            _array(_field(r, "global_physical_count", where), where, "global_physical_count"),
            where, f"records[{i}].global_physical_count",
        )  # fmt: skip
        if c.shape[0] != 1:
            raise TraceError(f"{where}: records[{i}].global_physical_count must be [layers, P]")
        key = r.get("forward_pass_id", i)
        if key in steps and steps[key].shape != c[0].shape:
            raise TraceError(f"{where}: records of forward pass {key} differ in shape")
        steps[key] = steps[key] + c[0] if key in steps else c[0]
    shapes = {v.shape for v in steps.values()}
    if len(shapes) != 1:
        raise TraceError(f"{where}: records differ in shape {sorted(shapes)}")
    phys = np.stack([steps[k] for k in sorted(steps, key=_sort_key)])
    return _load_trace(
        _to_logical(phys, doc.get("last_physical_to_logical_map"), where, opts["experts"])
    )


def _sort_key(k):
    return (0, k) if isinstance(k, int) else (1, str(k))


def sglang_per_token(raw: bytes, where: str, opts: dict) -> Trace:
    """Records with ``topk_ids_of_layer`` int [layers, tokens, 8] (physical ids, -1 unused);
    tokens of every record are concatenated in record order."""
    doc = torch_load(raw, where)
    parts = []
    for i, r in enumerate(_records(doc, where)):
        ids = _int_array(
            _field(r, "topk_ids_of_layer", where), where, f"records[{i}].topk_ids_of_layer", 3
        )
        if parts and ids.shape[::2] != parts[0].shape[::2]:
            raise TraceError(
                f"{where}: records[{i}].topk_ids_of_layer is {list(ids.shape)}, records[0] "
                f"{list(parts[0].shape)}: layers and slots must agree"
            )
        parts.append(ids)
    ids_LTK = np.concatenate(parts, axis=1)
    p2l = doc.get("last_physical_to_logical_map")
    E = opts["experts"]
    if E is None and p2l is not None:
        E = int(_array(p2l, where, "last_physical_to_logical_map").max()) + 1
    ids_LTK = _ids_to_logical(ids_LTK, p2l, where, E)
    return _token_trace(ids_LTK.transpose(1, 0, 2), where, E)


def vllm_routed_experts(raw: bytes, where: str, opts: dict) -> Trace:
    """An integer .npy [tokens, layers, top_k] (vLLM returns int16; -1 marks an unused slot)."""
    a = npy_load(raw, where)
    if isinstance(a, dict):
        raise TraceError(f"{where}: expected one .npy array, got an .npz archive")
    ids = _int_array(a, where, "routed experts", 3)
    return _token_trace(ids, where, opts["experts"])


def vllm_eplb(raw: bytes, where: str, opts: dict) -> Trace:
    """EPLB load: a .npy [layers, E] / [window, layers, E], or a .npz / torch dict with
    ``expert_load_window`` or ``expert_load_pass`` and optionally ``physical_to_logical_map``."""
    doc = torch_load(raw, where) if _is_torch(raw) else npy_load(raw, where)
    if isinstance(doc, dict):
        key = next((k for k in ("expert_load_window", "expert_load_pass") if k in doc), None)
        if key is None:
            raise TraceError(f"{where}: expected 'expert_load_window' or 'expert_load_pass'")
        counts = count_array(_array(doc[key], where, key), where, key)
        p2l = doc.get("physical_to_logical_map")
    else:
        counts, p2l = count_array(_array(doc, where, "expert load"), where, "expert load"), None
    return _load_trace(_to_logical(counts, p2l, where, opts["experts"]))


def counts_matrix(raw: bytes, where: str, opts: dict) -> Trace:
    """CSV [layers, E] (comma separated, '#' comments; a .csv name or text that reads as such) or
    .npy [layers, E] / [steps, layers, E]."""
    if where.lower().endswith(".csv") or sniff(raw) == "csv":
        return _load_trace(count_array(read_csv(raw, where), where))
    a = npy_load(raw, where)
    if isinstance(a, dict):
        raise TraceError(f"{where}: expected one .npy array, got an .npz archive")
    return _load_trace(count_array(a, where))


def olmoe_counts(raw: bytes, where: str, opts: dict) -> Trace:
    """``d["models"][model]["domains"][domain]["topk_counts"]`` [layers][E], layers in
    ``d["layers"]``; the model is ``--model``, the domain ``--select``."""
    doc = read_json(raw, where)
    models = _field(doc, "models", where)
    model = opts["model_id"]
    if not isinstance(models, dict) or model not in models:
        have = ", ".join(models) if isinstance(models, dict) else "none"
        raise TraceError(f"{where}: no model {model!r} (has {have})")
    m = models[model]
    domains = _field(m, "domains", where)
    domain = opts["select"]
    if domain is None and isinstance(domains, dict) and len(domains) == 1:
        domain = next(iter(domains))
    if not isinstance(domains, dict) or domain not in domains:
        have = ", ".join(domains) if isinstance(domains, dict) else "none"
        raise TraceError(f"{where}: pick a domain of {model} with --select ({have})")
    counts = count_array(_field(domains[domain], "topk_counts", where), where, "topk_counts")
    layers = _field(doc, "layers", where)
    if not isinstance(layers, list) or len(layers) != counts.shape[1]:
        raise TraceError(f"{where}: 'layers' does not match topk_counts' {counts.shape[1]} layers")
    t = _load_trace(counts, layers=layers)
    return replace(t, top_k=m.get("top_k"), source=f"olmoe-counts[{domain}]")


FORMATS: dict[str, Callable[[bytes, str, dict], Trace]] = {
    "sglang-stat": sglang_stat,
    "sglang-per-pass": sglang_per_pass,
    "sglang-per-token": sglang_per_token,
    "vllm-routed-experts": vllm_routed_experts,
    "vllm-eplb": vllm_eplb,
    "counts": counts_matrix,
    "olmoe-counts": olmoe_counts,
}


def import_trace(
    src: str | Path,
    fmt: str,
    *,
    model_id: str,
    revision: str,
    top_k: int | None = None,
    experts: int | None = None,
    select: str | None = None,
) -> Trace:
    """Read ``src`` in format ``fmt`` and pin it to ``model_id`` at ``revision``. When the
    format's reader refuses the file, the error says what the file looks like and which
    ``--format`` would read it (``wrong_format_hint``)."""
    if fmt not in FORMATS:
        raise TraceError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    for name, v in (("--model", model_id), ("--revision", revision)):
        if not v or not v.strip() or not v.isprintable() or len(v) > 200:
            raise TraceError(f"{name}: must be non-empty one-line printable text, got {v!r}")
    if select is not None and fmt != "olmoe-counts":
        raise TraceError(f"--select: only read by --format olmoe-counts, not {fmt}")
    preset = next((p for p in PRESETS.values() if p["id"] == model_id), None)
    if experts is None and preset is not None:
        experts = preset["experts"]
    p = Path(src)
    where = str(p)
    raw = read_bytes(p)
    opts = {"experts": experts, "model_id": model_id, "select": select}
    try:
        t = FORMATS[fmt](raw, where, opts)
        if experts is not None and t.experts != experts:
            origin = f"{model_id} has" if preset is not None else "--experts says"
            raise TraceError(f"{where}: the file has {t.experts} experts, {origin} {experts}")
        if t.top_k is not None and top_k is not None and t.top_k != top_k:
            raise TraceError(f"{where}: the file routes top-{t.top_k}, --top-k says {top_k}")
        k = t.top_k or top_k or (preset["top_k"] if preset is not None else None)
        if k is None:
            raise TraceError(
                f"{where}: the file does not say the top-k of {model_id}; pass --top-k"
            )
        t = replace(
            t, top_k=k, model_id=model_id, revision=revision,
            source=f"{t.source or fmt}:{p.name}", source_sha256=hashlib.sha256(raw).hexdigest(),
        )  # fmt: skip
        return validate(t, where)
    except TraceError as exc:
        raise TraceError(wrong_format_hint(str(exc), raw, where, fmt, experts)) from None


def revision_warning(model_id: str, revision: str) -> str | None:
    """A one-line warning when ``model_id`` is a preset's and ``revision`` is not the one it
    pins. Such a trace is legitimate (recorded on another commit of the model), but a scenario
    naming the preset replays it only with ``model.revision`` overridden; the warning says so,
    in the words of the scenario's pin error (``traces.replay_hint``)."""
    pinned = preset_revision(model_id)
    if pinned is None or pinned[1] == revision:
        return None
    name, rev = pinned
    return (
        f"--revision {revision} is not the revision preset {name} pins ({rev}); "
        f"{replay_hint(model_id, revision)}"
    )
