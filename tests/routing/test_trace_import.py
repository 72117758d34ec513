"""Every importer on a small file of its format, written here, and on corrupted copies of it.

A corrupted file (truncated, wrong dtype, wrong shape, a pickle payload) must give one TraceError
line naming the file, and a pickle payload must never run: each payload would create a marker
file if it were unpickled by a loader that executes code.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO

from moebench.core.errors import TraceError
from moebench.routing.importers import FORMATS, import_trace

V3 = "deepseek-ai/DeepSeek-V3"  # a preset id: 256 experts, top-8
REV = "e815299b0bcbac849fa540c768ef21845365c9eb"
L, E, T = 3, 256, 5


def rng():
    return np.random.default_rng(0)


def counts_LE() -> np.ndarray:
    c = rng().integers(0, 50, size=(L, E))
    c[0] = 0  # a dense layer, as DeepSeek's first layers
    return c


def topk_TLK(k: int = 8) -> np.ndarray:
    """Distinct ids per token and layer."""
    g = rng()
    return np.stack([np.stack([g.permutation(E)[:k] for _ in range(L)]) for _ in range(T)])


def torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def npy_bytes(a, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, **kw)
    return buf.getvalue()


def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


class Payload:
    """Unpickling this would run code: it writes the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


# --- one valid file per format (name, bytes), with what the import must give ---------------------

P2L = np.concatenate([np.arange(E), [0, 1]])[None].repeat(L, 0)  # 258 physical: experts 0, 1 twice


def sglang_stat_json() -> bytes:
    return json.dumps({"logical_count": counts_LE().astype(float).tolist()}).encode()


def sglang_stat_torch() -> bytes:
    steps = torch.from_numpy(np.stack([counts_LE(), counts_LE()])).int()
    return torch_bytes(
        {"rank": 0, "logical_count": steps, "average_utilization_rate_over_window": None}
    )


def sglang_per_pass() -> bytes:
    phys = np.concatenate([counts_LE(), np.full((L, 2), 7)], axis=1)  # replicas of 0 and 1
    phys[0] = 0
    rec = [
        {"forward_pass_id": i, "rank": 0, "gatherer_key": "primary",
         "global_physical_count": torch.from_numpy(phys).int()}
        for i in range(2)
    ]  # fmt: skip
    return torch_bytes({"records": rec, "last_physical_to_logical_map": torch.from_numpy(P2L)})


def sglang_per_token() -> bytes:
    ids = topk_TLK(6).transpose(1, 0, 2)  # [L, T, 6]: a top-6 model, slots 6 and 7 unused
    ids = np.concatenate([ids, np.full((L, T, 2), -1)], axis=2).astype(np.int32)
    ids[0] = -1  # a dense layer
    rec = [
        {"forward_pass_id": 0, "rank": 0, "input_ids": list(range(T)), "positions": list(range(T)),
         "extend_seq_lens": [T], "forward_mode": 1, "misc_objects": [],
         "topk_ids_of_layer": torch.from_numpy(ids),
         "global_physical_count": torch.zeros(L, E, dtype=torch.int32)},
    ]  # fmt: skip
    return torch_bytes(
        {"records": rec, "last_physical_to_logical_map": torch.arange(E).repeat(L, 1)}
    )


def vllm_routed() -> bytes:
    ids = topk_TLK().astype(np.int16)
    ids[:, 0, :] = -1  # a dense layer: no expert
    return npy_bytes(ids)


def vllm_eplb_npy() -> bytes:
    return npy_bytes(np.stack([counts_LE()] * 4))  # a window of 4 passes


def vllm_eplb_npz() -> bytes:
    phys = np.concatenate([counts_LE(), np.full((L, 2), 7)], axis=1)
    phys[0] = 0
    return npz_bytes(expert_load_window=phys[None], physical_to_logical_map=P2L)


def counts_csv() -> bytes:
    return ("# layers x experts\n" + "\n".join(",".join(map(str, r)) for r in counts_LE())).encode()


def counts_npy() -> bytes:
    return npy_bytes(counts_LE().astype(np.float32))


def olmoe_json() -> bytes:
    doc = {"layers": [0, 7, 15], "models": {V3: {"top_k": 8, "domains": {
        "arxiv": {"topk_counts": counts_LE()[[1, 2, 1]].tolist()},
        "c4": {"topk_counts": counts_LE()[[2, 1, 2]].tolist()}}}}}  # fmt: skip
    return json.dumps(doc).encode()


VALID = {
    # format: (file name, writer, kind, steps or tokens, top_k)
    "sglang-stat": ("stat.json", sglang_stat_json, "load", 1, 8),
    "sglang-stat/torch": ("stat.pt", sglang_stat_torch, "load", 2, 8),
    "sglang-per-pass": ("per_pass.pt", sglang_per_pass, "load", 2, 8),
    "sglang-per-token": ("per_token.pt", sglang_per_token, "token", T, 6),
    "vllm-routed-experts": ("routed.npy", vllm_routed, "token", T, 8),
    "vllm-eplb": ("eplb.npy", vllm_eplb_npy, "load", 4, 8),
    "vllm-eplb/npz": ("eplb.npz", vllm_eplb_npz, "load", 1, 8),
    "counts": ("counts.csv", counts_csv, "load", 1, 8),
    "counts/npy": ("counts.npy", counts_npy, "load", 1, 8),
    "olmoe-counts": ("olmoe.json", olmoe_json, "load", 1, 8),
}


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def run(fmt_key: str, path: Path, **kw):
    kw.setdefault("select", "arxiv" if fmt_key == "olmoe-counts" else None)
    return import_trace(path, fmt_key.split("/")[0], model_id=V3, revision=REV, **kw)


def test_every_format_is_covered():
    assert {k.split("/")[0] for k in VALID} == set(FORMATS)


@pytest.mark.parametrize("key", VALID)
def test_import_valid(tmp_path, key):
    name, writer, kind, size, top_k = VALID[key]
    t = run(key, write(tmp_path, name, writer()))
    assert (t.kind, t.experts, t.top_k, t.model_id, t.revision) == (kind, E, top_k, V3, REV)
    assert (t.steps if kind == "load" else t.tokens) == size
    assert name in t.source and len(t.source_sha256) == 64
    if key == "olmoe-counts":
        assert t.layers == (0, 7, 15)
        assert t.layer_counts(7).tolist() == counts_LE()[2].tolist()
        return
    assert t.layers == (0, 1, 2) and t.layer_counts(0).sum() == 0
    if kind == "load":
        want = counts_LE()[2].astype(float) * size
        if key in ("sglang-per-pass", "vllm-eplb/npz"):  # replicas of experts 0 and 1 folded in
            want[:2] += 7 * size
        assert t.layer_counts(2).tolist() == want.tolist()
    else:
        k = top_k
        assert t.topk_ids_TLK[:, 1:, :].tolist() == topk_TLK(k)[:, 1:, :].tolist()


def test_counts_need_a_top_k_unless_a_preset_says(tmp_path):
    p = write(tmp_path, "counts.npy", counts_npy())
    with pytest.raises(TraceError, match="pass --top-k"):
        import_trace(p, "counts", model_id="someone/unknown", revision="r1")
    t = import_trace(p, "counts", model_id="someone/unknown", revision="r1", top_k=4)
    assert t.top_k == 4 and t.experts == E


def test_token_traces_need_the_number_of_experts(tmp_path):
    p = write(tmp_path, "routed.npy", vllm_routed())
    with pytest.raises(TraceError, match="pass --experts"):
        import_trace(p, "vllm-routed-experts", model_id="someone/unknown", revision="r1")
    t = import_trace(p, "vllm-routed-experts", model_id="x/y", revision="r1", experts=300)
    assert t.experts == 300 and t.top_k == 8


# --- corrupted files -----------------------------------------------------------------------------


REFUSED = "refused to unpickle"


def raw_pickle(obj) -> bytes:
    return pickle.dumps(obj, protocol=2)  # the protocol torch's own pickles use


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


CORRUPT = {
    # id: (format, file name, bytes maker(marker path), fragment of the message)
    "stat-json-truncated": ("sglang-stat", "s.json", lambda m: truncated(sglang_stat_json()),
                            "malformed JSON"),
    "stat-json-strings": ("sglang-stat", "s.json",
                          lambda m: b'{"logical_count": [["a", "b"], ["c", "d"]]}', "numbers"),
    "stat-json-1d": ("sglang-stat", "s.json", lambda m: b'{"logical_count": [1, 2, 3]}',
                     "[layers, experts]"),
    "stat-json-ragged": ("sglang-stat", "s.json", lambda m: b'{"logical_count": [[1, 2], [3]]}',
                         "not an array"),
    "stat-json-negative": ("sglang-stat", "s.json", lambda m: b'{"logical_count": [[1, -2]]}',
                           "negative"),
    "stat-json-no-key": ("sglang-stat", "s.json", lambda m: b'{"counts": [[1, 2]]}',
                         "'logical_count'"),
    "stat-torch-truncated": ("sglang-stat", "s.pt", lambda m: truncated(sglang_stat_torch()),
                             "weights_only"),
    "stat-torch-pickle": ("sglang-stat", "s.pt",
                          lambda m: torch_bytes({"logical_count": Payload(m)}), REFUSED),
    "stat-raw-pickle": ("sglang-stat", "s.pt", lambda m: raw_pickle(Payload(m)), REFUSED),
    "stat-wrong-experts": ("sglang-stat", "s.json", lambda m: b'{"logical_count": [[1, 2, 3]]}',
                           "the file has 3 experts, deepseek-ai/DeepSeek-V3 has 256"),
    "per-pass-truncated": ("sglang-per-pass", "p.pt", lambda m: truncated(sglang_per_pass()),
                           "weights_only"),
    "per-pass-pickle": ("sglang-per-pass", "p.pt",
                        lambda m: torch_bytes({"records": [Payload(m)]}), REFUSED),
    "per-pass-no-records": ("sglang-per-pass", "p.pt", lambda m: torch_bytes({"x": 1}),
                            "'records'"),
    "per-pass-bad-map": ("sglang-per-pass", "p.pt", lambda m: torch_bytes({
        "records": [{"global_physical_count": torch.ones(L, E + 2)}],
        "last_physical_to_logical_map": torch.zeros(L, E, dtype=torch.int64)}),
        "physical_to_logical_map is"),  # fmt: skip
    "per-token-float-ids": ("sglang-per-token", "t.pt", lambda m: torch_bytes({
        "records": [{"topk_ids_of_layer": torch.zeros(L, T, 8)}]}), "must be integers"),
    "per-token-2d": ("sglang-per-token", "t.pt", lambda m: torch_bytes({
        "records": [{"topk_ids_of_layer": torch.zeros(L, 8, dtype=torch.int32)}]}),
        "3 non-empty dimensions"),  # fmt: skip
    "per-token-repeats": ("sglang-per-token", "t.pt", lambda m: torch_bytes({
        "records": [{"topk_ids_of_layer": torch.zeros(L, T, 8, dtype=torch.int32)}]}),
        "repeats an expert"),  # fmt: skip
    "per-token-pickle": ("sglang-per-token", "t.pt", lambda m: raw_pickle({"records": Payload(m)}),
                         REFUSED),
    "routed-truncated": ("vllm-routed-experts", "r.npy", lambda m: truncated(vllm_routed()),
                         "not a NumPy file"),
    "routed-float": ("vllm-routed-experts", "r.npy",
                     lambda m: npy_bytes(topk_TLK().astype(np.float32)), "must be integers"),
    "routed-2d": ("vllm-routed-experts", "r.npy",
                  lambda m: npy_bytes(topk_TLK()[:, 0].astype(np.int16)), "3 non-empty dimensions"),
    "routed-out-of-range": ("vllm-routed-experts", "r.npy",
                            lambda m: npy_bytes(topk_TLK().astype(np.int16) + 300), ">= 256"),
    "routed-object-pickle": ("vllm-routed-experts", "r.npy",
                             lambda m: npy_bytes(np.array([Payload(m)], dtype=object),
                                                 allow_pickle=True), "not a NumPy file"),
    "routed-raw-pickle": ("vllm-routed-experts", "r.npy", lambda m: raw_pickle(Payload(m)),
                          REFUSED),
    "eplb-truncated": ("vllm-eplb", "e.npy", lambda m: truncated(vllm_eplb_npy()),
                       "not a NumPy file"),
    "eplb-strings": ("vllm-eplb", "e.npy", lambda m: npy_bytes(np.array([["a", "b"]])),
                     "must be numbers"),
    "eplb-4d": ("vllm-eplb", "e.npy", lambda m: npy_bytes(np.ones((1, 1, L, E))),
                "[steps, layers, experts]"),
    "eplb-npz-no-key": ("vllm-eplb", "e.npz", lambda m: npz_bytes(load=np.ones((L, E))),
                        "'expert_load_window' or 'expert_load_pass'"),
    "eplb-torch-pickle": ("vllm-eplb", "e.pt",
                          lambda m: torch_bytes({"expert_load_pass": Payload(m)}), REFUSED),
    "eplb-object-pickle": ("vllm-eplb", "e.npy",
                           lambda m: npy_bytes(np.array([Payload(m)], dtype=object),
                                               allow_pickle=True), "not a NumPy file"),
    "counts-csv-text": ("counts", "c.csv", lambda m: b"1,2\nthree,4\n", "malformed CSV"),
    "counts-csv-ragged": ("counts", "c.csv", lambda m: b"1,2,3\n4,5\n", "malformed CSV"),
    "counts-csv-wrong-experts": ("counts", "c.csv", lambda m: b"1,2,3\n4,5,6\n",
                                 "the file has 3 experts"),
    "counts-npy-truncated": ("counts", "c.npy", lambda m: truncated(counts_npy()),
                             "not a NumPy file"),
    "counts-npy-bool": ("counts", "c.npy", lambda m: npy_bytes(np.ones((L, E), bool)),
                        "must be numbers"),
    "counts-npy-nan": ("counts", "c.npy", lambda m: npy_bytes(np.full((L, E), np.nan)), "NaN"),
    "counts-npy-pickle": ("counts", "c.npy",
                          lambda m: npy_bytes(np.array([Payload(m)], dtype=object),
                                              allow_pickle=True), "not a NumPy file"),
    "olmoe-truncated": ("olmoe-counts", "o.json", lambda m: truncated(olmoe_json()),
                        "malformed JSON"),
    "olmoe-other-model": ("olmoe-counts", "o.json",
                          lambda m: olmoe_json().replace(V3.encode(), b"x/other"), "no model"),
    "olmoe-wrong-layers": ("olmoe-counts", "o.json",
                           lambda m: olmoe_json().replace(b"[0, 7, 15]", b"[0, 7]"), "'layers'"),
}  # fmt: skip


@pytest.mark.parametrize("case", CORRUPT)
def test_corrupted_files_fail_in_one_line_without_running_code(tmp_path, case):
    fmt, name, make, fragment = CORRUPT[case]
    marker = tmp_path / "payload-ran"
    path = write(tmp_path, name, make(marker))
    with pytest.raises(TraceError) as info:
        import_trace(
            path, fmt, model_id=V3, revision=REV, select="arxiv" if fmt == "olmoe-counts" else None
        )
    msg = str(info.value)
    assert len(msg.splitlines()) == 1 and msg.startswith(f"{path}: "), msg
    assert fragment in msg, msg
    assert not marker.exists(), "a pickle payload was executed"


def test_option_errors(tmp_path):
    p = write(tmp_path, "c.npy", counts_npy())
    with pytest.raises(TraceError, match="--format: expected one of"):
        import_trace(p, "nvidia", model_id=V3, revision=REV)
    with pytest.raises(TraceError, match="--revision"):
        import_trace(p, "counts", model_id=V3, revision=" ")
    with pytest.raises(TraceError, match="--select: only read by"):
        import_trace(p, "counts", model_id=V3, revision=REV, select="arxiv")
    with pytest.raises(TraceError, match="routes top-8, --top-k says 6"):
        import_trace(write(tmp_path, "r.npy", vllm_routed()), "vllm-routed-experts",
                     model_id=V3, revision=REV, top_k=6)  # fmt: skip
    with pytest.raises(TraceError, match="cannot read trace"):
        import_trace(tmp_path / "missing.npy", "counts", model_id=V3, revision=REV)


def test_olmoe_shared_file(shared_traces):
    path = (
        shared_traces
        / "olmoe-mixtral-expert-counts"
        / "olmoe_mixtral_expert_counts_layers0_7_15.json"
    )
    t = import_trace(path, "olmoe-counts", model_id="allenai/OLMoE-1B-7B-0924",
                     revision="unpinned", select="arxiv")  # fmt: skip
    assert (t.experts, t.top_k, t.layers) == (64, 8, (0, 7, 15))
    c = t.layer_counts(7)
    assert 2.5 <= c.max() / c.mean() <= 7.8  # the README's range for OLMoE
    mixtral = import_trace(path, "olmoe-counts", model_id="mistralai/Mixtral-8x7B-v0.1",
                           revision="unpinned", select="c4")  # fmt: skip
    assert (mixtral.experts, mixtral.top_k) == (8, 2)
    m = mixtral.layer_counts(15)
    assert 1.0 < m.max() / m.mean() <= 1.33


def test_mixtral_copy_in_the_project():
    """The Apache-2.0 Mixtral file copied under traces/ (per-prompt shares: one step each)."""
    path = REPO / "traces" / "mixtral-mmlu-abstract_algebra.npy"
    assert hashlib.sha256(path.read_bytes()).hexdigest() in (REPO / "traces" / "NOTICE").read_text()
    t = import_trace(path, "counts", model_id="mistralai/Mixtral-8x7B-v0.1", revision="unpinned")
    assert (t.steps, len(t.layers), t.experts, t.top_k) == (100, 32, 8, 2)  # top-2: the preset's
    assert np.allclose(t.counts_SLE.sum(axis=2), 1.0, atol=1e-5)


# --- a file given the wrong --format --------------------------------------------------------------

# Advice to load a file unsafely, as torch and numpy word it; moebench never passes it on.
UNSAFE = re.compile(
    r"unsafe|allow_pickle|weights_only\W+(set to\W+)?False|pickle\.load|trust", re.I
)
# (file's format, --format given) pairs that read the same content: no error, nothing to say.
SAME_CONTENT = {
    ("vllm-eplb", "counts"), ("counts", "vllm-eplb"),  # an .npy [steps, layers, E] of counts
    ("sglang-per-token", "sglang-per-pass"),  # per_token records also hold their load
}  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("key", VALID)
def test_a_wrong_format_names_the_right_one_and_never_advises_unsafe_loading(tmp_path, key, fmt):
    name, writer, *_ = VALID[key]
    right = key.split("/")[0]
    if fmt == right:
        return  # test_import_valid
    path = write(tmp_path, name, writer())
    try:
        import_trace(path, fmt, model_id=V3, revision=REV,
                     select="arxiv" if fmt == "olmoe-counts" else None)  # fmt: skip
    except TraceError as exc:
        msg = str(exc)
        assert len(msg.splitlines()) == 1 and msg.startswith(f"{path}: "), msg
        assert not UNSAFE.search(msg), msg
        suggested = re.findall(r"--format ([\w-]+)", msg.split(": try ", 1)[-1])
        assert right in suggested and fmt not in suggested, msg
    else:
        assert (right, fmt) in SAME_CONTENT


@pytest.mark.parametrize(
    "name, data, fmt, what",
    [
        # a raw pickle given to a NumPy format: numpy would advise allow_pickle=True
        ("p.npy", lambda: pickle.dumps({"a": 1}), "counts",
         "looks like a plain Python pickle, not a torch.save file; refused to unpickle it"),
        # a moebench trace given to the importer
        ("t.parquet", None, "counts", "looks like a moebench trace already (Parquet)"),
        # CSV without a .csv name is still read as CSV by counts
        ("c.txt", lambda: b"# layers x experts\n" + counts_csv(), "sglang-stat",
         "looks like a CSV matrix of numbers: try --format counts"),
        # JSON of an SGLang stat dump given to a NumPy format
        ("s.json", sglang_stat_json, "vllm-eplb",
         "--format vllm-eplb reads a .npy, .npz or torch.save file, but the file looks like an "
         "SGLang stat dump (logical_count) in a JSON document: try --format sglang-stat"),
        # an int16 [tokens, layers, top_k] array read as counts: ids, not counts
        ("r.npy", vllm_routed, "counts", "looks like a NumPy .npy array (int16 [5, 3, 8]): "
         "try --format vllm-routed-experts"),
        # a per_pass torch dump given as stat
        ("p.pt", sglang_per_pass, "sglang-stat", "expected a mapping with 'logical_count'; the "
         "file looks like SGLang per_pass records in a torch.save file: try --format "
         "sglang-per-pass"),
    ],
)  # fmt: skip
def test_wrong_format_messages(tmp_path, name, data, fmt, what):
    if data is None:
        from moebench.routing.traces import write_parquet

        write_parquet(run("counts/npy", write(tmp_path, "c.npy", counts_npy())), tmp_path / name)
        path = tmp_path / name
    else:
        path = write(tmp_path, name, data())
    with pytest.raises(TraceError) as info:
        import_trace(path, fmt, model_id=V3, revision=REV)
    msg = str(info.value)
    assert what in msg and len(msg.splitlines()) == 1 and not UNSAFE.search(msg), msg


def test_a_csv_without_a_csv_name_imports_as_counts(tmp_path):
    t = import_trace(write(tmp_path, "c.txt", counts_csv()), "counts", model_id=V3, revision=REV)
    assert t.layer_counts(2).tolist() == counts_LE()[2].astype(float).tolist()


def test_a_pickle_named_npy_is_refused_without_numpys_advice(tmp_path):
    """`trace stats` reads by suffix: a pickle named .npy never reaches np.load's pickle path."""
    from moebench.routing.raw_files import load_raw

    marker = tmp_path / "payload-ran"
    with pytest.raises(TraceError) as info:
        load_raw(write(tmp_path, "x.npy", raw_pickle(Payload(marker))))
    msg = str(info.value)
    assert msg.endswith("x.npy: not a NumPy file moebench can read (no .npy or .npz signature)")
    assert not marker.exists()
