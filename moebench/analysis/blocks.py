"""Samples grouped into cells and blocks: the per-block critical paths a comparison pairs.

One cell is a (run, case, regime, stage, mode, arm). Inside it, for each block b and rank r,
``m[b, r]`` is the median of that rank's iterations in that block and the block's critical path
is ``c[b] = max_r m[b, r]``; a block where some rank of the cell has no samples is left out.
Everything is done on integer codes with numpy (a sweep holds millions of samples), and the
result is one ``Group`` per cell: what ``moebench.analysis.compare`` pairs and decides on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moebench.results.reader import Run

_KEY = ("run_id", "case_id", "regime", "stage", "mode", "arm")


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """Integer codes and the values they stand for, for one string column."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def _segment_medians(key: np.ndarray, values: np.ndarray):
    """Median of ``values`` per distinct int64 ``key``: (sorted keys, medians, counts)."""
    order = np.lexsort((values, key))
    key, values = key[order], values[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(values)])
    medians = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2
    return key[starts], medians, counts


def _combine(codes: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 per tuple of small non-negative codes (mixed radix)."""
    out = np.zeros(len(codes[0]), dtype=np.int64)
    for c, n in zip(codes, sizes, strict=True):
        out = out * n + c
    return out


def _with_mode(table: pa.Table) -> pa.Table:
    """The samples with a ``mode`` column: as stored, or "" for a run that does not record it.
    Samples timed on rotated weight copies (``weights`` cold) get ``-cold`` on their mode, so
    that cold and warm figures are never pooled into one cell."""
    if "mode" in table.column_names:
        mode = pc.fill_null(table["mode"], "")
        table = table.drop_columns(["mode"])
    else:
        mode = pa.array([""] * table.num_rows, pa.string())
    if "weights" in table.column_names:
        is_cold = pc.equal(pc.fill_null(table["weights"], ""), "cold")
        mode = pc.if_else(is_cold, pc.binary_join_element_wise(mode, "cold", "-"), mode)
    return table.append_column("mode", mode)


def concat_samples(runs: list[Run]) -> pa.Table:
    tables = [_with_mode(r.samples) for r in runs]
    return pa.concat_tables(tables, promote_options="permissive")


@dataclass(frozen=True, kw_only=True)
class Group:
    """Timing of one (run, case, regime, stage, mode, arm)."""

    device: str
    n_samples: int
    rank_medians: dict[int, float]
    critical: dict[int, float]  # block -> critical path over ranks
    incomplete_blocks: int


def _sum_duplicates(group, rank, block, iteration, time, sizes):
    """Sum samples that share (group, rank, block, iteration); returns the reduced arrays and
    the groups where that happened."""
    its, it = np.unique(iteration, return_inverse=True)
    key = _combine([group, rank, block, it], [*sizes, len(its)])
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(uniq) == len(key):
        return group, rank, block, time, set()
    summed = np.bincount(inverse, weights=time, minlength=len(uniq))
    counts = np.bincount(inverse, minlength=len(uniq))
    doubled = set(group[first[counts > 1]].tolist())
    return group[first], rank[first], block[first], summed, doubled


def timing_groups(samples: pa.Table, warnings: list[str]) -> dict[tuple, Group]:
    if samples.num_rows == 0:
        return {}
    time = samples["time_us"].to_numpy()
    bad = ~np.isfinite(time) | (time <= 0)
    if bad.any():
        warnings.append(f"{int(bad.sum())} samples with a non-finite or non-positive time ignored")
        samples = samples.filter(pa.array(~bad))
        time = time[~bad]
    names = (*_KEY, "device")
    k = len(_KEY)
    encoded = [_codes(samples[n]) for n in names]
    codes = [c.astype(np.int64) for c, _ in encoded]
    sizes = [len(values) for _, values in encoded]
    # Dense integers: one per (run, case, regime, stage, mode, arm), per rank, per block.
    first, group = np.unique(_combine(codes[:k], sizes[:k]), return_index=True,
                             return_inverse=True)[1:]  # fmt: skip
    ranks, rank = np.unique(samples["rank"].to_numpy(), return_inverse=True)
    blocks, block = np.unique(samples["block"].to_numpy(), return_inverse=True)
    n_groups, n_ranks, n_blocks = len(first), len(ranks), len(blocks)

    label = [tuple(encoded[j][1][codes[j][i]] for j in range(k)) for i in first]
    devices = defaultdict(set)
    for gd in np.unique(_combine([group, codes[k]], [n_groups, sizes[k]])).tolist():
        devices[gd // sizes[k]].add(encoded[k][1][gd % sizes[k]])

    n_raw = np.bincount(group, minlength=n_groups)
    group, rank, block, time, doubled = _sum_duplicates(
        group, rank, block, samples["iteration"].to_numpy(), time, [n_groups, n_ranks, n_blocks]
    )
    odd = sorted({label[g] for g in doubled if label[g][2] != "profile"})
    if odd:
        shown = ", ".join(f"{c} {r}/{s} {a}" for _, c, r, s, _, a in odd[:3])
        warnings.append(
            f"{len(odd)} cell(s) hold several samples for one (rank, block, iteration) outside "
            f"the profile regime; summed as kernels of one stage: {shown}"
        )

    key_r, rank_med, _ = _segment_medians(_combine([group, rank], [n_groups, n_ranks]), time)
    key_b, block_med, _ = _segment_medians(
        _combine([group, block, rank], [n_groups, n_blocks, n_ranks]), time
    )
    g_r, r_r = key_r // n_ranks, ranks[key_r % n_ranks]
    g_b, b_b = key_b // (n_blocks * n_ranks), blocks[key_b // n_ranks % n_blocks]
    # Segments come out sorted by group first, so each group's segments are one slice.
    at_r = np.searchsorted(g_r, np.arange(n_groups + 1))
    at_b = np.searchsorted(g_b, np.arange(n_groups + 1))

    out = {}
    for g in range(n_groups):
        sr, sb = slice(at_r[g], at_r[g + 1]), slice(at_b[g], at_b[g + 1])
        rank_medians = dict(zip(r_r[sr].tolist(), rank_med[sr].tolist(), strict=True))
        per_block: dict[int, list[float]] = defaultdict(list)
        for b, m in zip(b_b[sb].tolist(), block_med[sb].tolist(), strict=True):
            per_block[b].append(m)
        # A block is complete when every rank that this arm has anywhere has samples in it.
        complete = {b: max(ms) for b, ms in per_block.items() if len(ms) == len(rank_medians)}
        dev = devices[g]
        out[label[g]] = Group(
            device=dev.pop() if len(dev) == 1 else "mixed",
            n_samples=int(n_raw[g]),
            rank_medians=rank_medians,
            critical=complete,
            incomplete_blocks=len(per_block) - len(complete),
        )
    return out
