"""Samples of the ``step`` regime grouped into per-step critical paths (issue 17).

One cell is a (run, case, mode, arm). For each step s and block b, with ``m[l, r]`` the median
over iterations of layer l on rank r (stage ``ffn``, ``layer`` >= 0):

- ``c_l = max_r m[l, r]``: the layer's critical path (EP ranks meet at every layer's all-to-all,
  so the slowest rank sets each layer), and the model step ``S = sum_l c_l``;
- ``R = max_r sum_l m[l, r]``: the slowest rank's own sum over layers (``S - R >= 0``);
- ``G = max_r`` of the median of the rank's stage ``step`` samples (the whole step as one graph).

A block where some rank of the cell misses some layer of the cell is left out (its critical path
is unknown); ``G`` needs every rank. Each figure of a step is the median over its complete
blocks. Everything is done on integer keys with numpy, as in ``moebench.analysis.blocks``: a
model of 58 layers on 8 ranks over 64 steps holds millions of samples.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moebench.core.vocabulary import WHOLE_FFN, WHOLE_STEP

REGIME = "step"
_NAN = float("nan")


def split(samples: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(every other regime's samples, the step regime's): the step regime has cells of its own."""
    if samples.num_rows == 0:
        return samples, samples.slice(0, 0)
    is_step = pc.equal(samples["regime"], REGIME)
    return samples.filter(pc.invert(is_step)), samples.filter(is_step)


def without_whole_steps(samples: pa.Table) -> pa.Table:
    """Every row but a rank's whole step (stage ``step``), whose live rows are a sum over the
    layers: what a case's live rows per rank may be read from."""
    if samples.num_rows == 0:
        return samples
    return samples.filter(pc.invert(pc.equal(samples["stage"], WHOLE_STEP)))


@dataclass(frozen=True, kw_only=True)
class Series:
    """Per-step figures of one (run, case, mode, arm), steps in order."""

    device: str
    steps: np.ndarray
    s: np.ndarray  # model step time
    r: np.ndarray  # slowest rank's own sum
    tax: np.ndarray
    g: np.ndarray  # graph step (NaN where not measured)
    tokens_per_rank: np.ndarray
    layers: tuple[int, ...]
    c: np.ndarray  # [steps, layers] critical path per layer
    n_ranks: int
    n_blocks: int
    incomplete: int
    params: str  # the case's sweep values, JSON


def _medians(key: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median of ``values`` per distinct ``key``: (sorted keys, medians)."""
    if len(key) == 0:
        return key, values
    order = np.lexsort((values, key))
    key, values = key[order], values[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(values)])
    return key[starts], (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2


def _dense(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, the index of each value among them), as np.unique gives them; by a
    count over the range when it is small (steps, layers, ranks), which needs no sort."""
    values = values.astype(np.int64)
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span > 4 * len(values) + 1024:
        return np.unique(values, return_inverse=True)
    present = np.bincount(values - low, minlength=span) > 0
    index = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, index[values - low]


def _group_max(key: np.ndarray, values: np.ndarray):
    """(distinct keys, max, count) per key."""
    uniq, inverse = np.unique(key, return_inverse=True)
    top = np.full(len(uniq), -np.inf)
    np.maximum.at(top, inverse, values)
    return uniq, top, np.bincount(inverse, minlength=len(uniq))


def _is(samples: pa.Table, stage: str) -> np.ndarray:
    return pc.equal(samples["stage"], stage).to_numpy(zero_copy_only=False)


def series(samples: pa.Table, warnings: list[str]) -> dict[tuple[str, str, str, str], Series]:
    """The step regime's samples as per-step figures per (run, case, mode, arm)."""
    if samples.num_rows == 0:
        return {}
    time = samples["time_us"].to_numpy()
    bad = ~np.isfinite(time) | (time <= 0)
    if bad.any():
        warnings.append(f"step regime: {int(bad.sum())} samples with a non-finite or "
                        "non-positive time ignored")  # fmt: skip
        samples, time = samples.filter(pa.array(~bad)), time[~bad]
    # One integer per (run, case, mode, arm), and the device and params each cell has.
    names = ("run_id", "case_id", "mode", "arm", "device", "params")
    encoded = [pc.dictionary_encode(samples[n].combine_chunks()) for n in names]
    codes = [e.indices.to_numpy(zero_copy_only=False).astype(np.int64) for e in encoded]
    values = [e.dictionary.to_pylist() for e in encoded]
    cell = np.zeros(samples.num_rows, dtype=np.int64)
    for c, v in zip(codes[:4], values[:4], strict=True):
        cell = cell * len(v) + c
    cells_u, g = _dense(cell)
    labels = []
    for c in cells_u.tolist():
        parts = []
        for v in reversed(values[:4]):
            c, k = divmod(c, len(v))
            parts.append(v[k])
        labels.append(tuple(reversed(parts)))
    devices: dict[int, set] = defaultdict(set)
    params: dict[int, str] = {}
    extra = (g * len(values[4]) + codes[4]) * len(values[5]) + codes[5]
    for x in _dense(extra)[0].tolist():
        rest, par = divmod(x, len(values[5]))
        gi, dev = divmod(rest, len(values[4]))
        devices[gi].add(values[4][dev])
        params[gi] = min(params.get(gi, values[5][par]), values[5][par])
    st_u, st = _dense(samples["step"].to_numpy())
    bl_u, bl = _dense(samples["block"].to_numpy())
    ly_u, ly = _dense(samples["layer"].to_numpy())
    rk_u, rk = _dense(samples["rank"].to_numpy())
    ns, nb, nl, nr = len(st_u), len(bl_u), len(ly_u), len(rk_u)
    layer = samples["layer"].to_numpy()
    tokens = samples["tokens_per_rank"].to_numpy().astype(float)
    g, st, bl, ly, rk = (a.astype(np.int64) for a in (g, st, bl, ly, rk))
    gsb_all = (g * ns + st) * nb + bl

    # m[g, s, b, l, r]: the median over iterations of one layer on one rank.
    ffn = _is(samples, WHOLE_FFN) & (layer >= 0)
    key, m = _medians(gsb_all[ffn] * nl * nr + ly[ffn] * nr + rk[ffn], time[ffn])
    rank_of, gsbl = key % nr, key // nr
    gsb = gsbl // nl
    u_gsbl, c, n_r = _group_max(gsbl, m)  # c_l: the slowest rank sets the layer
    u_gsb, inverse = np.unique(u_gsbl // nl, return_inverse=True)
    s = np.bincount(inverse, weights=c, minlength=len(u_gsb))
    cells = np.bincount(inverse, weights=n_r, minlength=len(u_gsb))
    u_gsbr, inv_r = np.unique(gsb * nr + rank_of, return_inverse=True)
    rank_sum = np.bincount(inv_r, weights=m, minlength=len(u_gsbr))
    r = np.full(len(u_gsb), -np.inf)
    np.maximum.at(r, np.searchsorted(u_gsb, u_gsbr // nr), rank_sum)
    # A block is complete when every rank of the cell has every layer of the cell.
    n_layers = np.bincount(np.unique(u_gsbl // (ns * nb * nl) * nl + u_gsbl % nl) // nl,
                           minlength=len(labels))  # fmt: skip
    n_ranks = np.bincount(np.unique(key // (ns * nb * nl * nr) * nr + rank_of) // nr,
                          minlength=len(labels))  # fmt: skip
    group_of = u_gsb // (ns * nb)
    complete = cells == n_layers[group_of] * n_ranks[group_of]

    # G: a rank's whole step as one graph; the slowest rank's median, every rank present.
    whole = _is(samples, WHOLE_STEP)
    g_val = np.full(len(u_gsb), _NAN)
    if whole.any():
        key_w, m_w = _medians(gsb_all[whole] * nr + rk[whole], time[whole])
        u_w, top, count = _group_max(key_w // nr, m_w)
        at = np.searchsorted(u_gsb, u_w)
        ok = (at < len(u_gsb)) & (u_gsb[np.minimum(at, len(u_gsb) - 1)] == u_w)
        full = ok & (count == n_ranks[u_w // (ns * nb)])
        g_val[at[full]] = top[full]

    # Per step: the median over its complete blocks.
    gs = u_gsb[complete] // nb
    gs_keys, s_step = _medians(gs, s[complete])
    _, r_step = _medians(gs, r[complete])
    _, tax_step = _medians(gs, (s - r)[complete])
    has_g = complete & ~np.isnan(g_val)
    g_keys, g_step = _medians(u_gsb[has_g] // nb, g_val[has_g])
    blocks_per_step = np.bincount(np.searchsorted(gs_keys, gs), minlength=len(gs_keys))
    keep = complete[np.searchsorted(u_gsb, u_gsbl // nl)]
    cl_keys, c_step = _medians((u_gsbl[keep] // (nb * nl)) * nl + u_gsbl[keep] % nl, c[keep])
    tok_keys, tok_max, _ = _group_max(g * ns + st, tokens)

    out = {}
    for gi, name in enumerate(labels):
        run_id, case_id, mode, arm = name
        here = gs_keys // ns == gi
        if not here.any():
            warnings.append(f"{run_id}/{case_id} step regime arm {arm}: no complete step (some "
                            "rank misses some layer in every block); left out")  # fmt: skip
            continue
        steps_idx = gs_keys[here] % ns
        layer_ids = sorted({int(ly_u[x % nl]) for x in cl_keys[cl_keys // (ns * nl) == gi]})
        column = {lid: j for j, lid in enumerate(layer_ids)}
        cmat = np.full((len(steps_idx), len(layer_ids)), _NAN)
        row_at = {int(si): i for i, si in enumerate(steps_idx)}
        mine = cl_keys // (ns * nl) == gi
        for k, v in zip(cl_keys[mine].tolist(), c_step[mine].tolist(), strict=True):
            i = row_at.get(k // nl % ns)
            if i is not None:
                cmat[i, column[int(ly_u[k % nl])]] = v
        gmap = dict(zip(g_keys.tolist(), g_step.tolist(), strict=True))
        tmap = dict(zip(tok_keys.tolist(), tok_max.tolist(), strict=True))
        step_keys = gs_keys[here].tolist()
        dev = devices[gi]
        out[(run_id, case_id, mode, arm)] = Series(
            device=dev.pop() if len(dev) == 1 else "mixed", steps=st_u[steps_idx],
            s=s_step[here], r=r_step[here], tax=tax_step[here],
            g=np.array([gmap.get(k, _NAN) for k in step_keys]),
            tokens_per_rank=np.array([tmap[k] for k in step_keys]),
            layers=tuple(layer_ids), c=cmat, n_ranks=int(n_ranks[gi]),
            n_blocks=int(blocks_per_step[here].max()),
            incomplete=int((~complete & (group_of == gi)).sum()), params=params[gi],
        )  # fmt: skip
    return out
