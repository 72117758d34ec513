"""Small traces and scenario text shared by the trace tests (test_traces, test_traces_cli)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import yaml

from moebench.routing.traces import Trace, validate

MODEL = {"id": "x/tiny", "revision": "r1", "hidden": 128, "intermediate": 128, "experts": 8,
         "top_k": 2}  # fmt: skip


def load_trace(**kw) -> Trace:
    g = np.random.default_rng(1)
    counts = g.integers(0, 100, size=(2, 3, 8)).astype(np.float64)
    counts[:, 0] = 0
    t = Trace(kind="load", experts=8, layers=(0, 1, 5), top_k=2, model_id="x/tiny", revision="r1",
              source="counts:c.npy", counts_SLE=counts)  # fmt: skip
    return validate(replace(t, **kw), "test")


def token_trace(weights: bool = True, **kw) -> Trace:
    g = np.random.default_rng(2)
    ids = np.stack([np.stack([g.permutation(8)[:2] for _ in range(2)]) for _ in range(6)])
    ids = ids.astype(np.int32)
    ids[4, 1, 1] = -1  # an unused slot
    w = g.random(ids.shape, dtype=np.float32) if weights else None
    t = Trace(kind="token", experts=8, layers=(3, 4), top_k=2, model_id="x/tiny", revision="r1",
              topk_ids_TLK=ids, topk_weights_TLK=w)  # fmt: skip
    return validate(replace(t, **kw), "test")


def scenario_text(path: str, **model) -> str:
    return yaml.safe_dump({
        "name": "t", "model": {**MODEL, **model}, "topology": {"ep": 2},
        "routing": {"source": "trace", "path": path, "layer": 1},
        "shape": {"tokens_per_rank": 8, "alignment": 16},
    })  # fmt: skip
