"""The `scatter` stage's device kernels: the counting, placing, row-map and copy launches that
`moebench.kernels.scatter` runs in sequence (its docstring gives the tensors, the order the slots
keep, the launch plans and the overflow rule).
"""

import triton
import triton.language as tl


@triton.jit
def _scatter_count(
    ids_ptr, chunk_counts_ptr, slot_row_ptr, n_slots, expert_offset, n_experts, n_chunks,
    CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    # Grid (E, C): program (e, c) counts expert e's slots in chunk c of the T*K ids, a plain
    # reduction (no atomics, so the result is a pure function of the routing). The programs of
    # expert 0 also mark slots routed to other ranks' experts -1 in slot_row.
    e = tl.program_id(0)
    c = tl.program_id(1)
    total = tl.zeros((BLOCK_S,), dtype=tl.int32)
    for s0 in range(c * CHUNK, tl.minimum((c + 1) * CHUNK, n_slots), BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        ok = s < n_slots
        ids = tl.load(ids_ptr + s, mask=ok, other=-1).to(tl.int64) - expert_offset
        total += (ok & (ids == e)).to(tl.int32)
        if e == 0:
            foreign = ok & ((ids < 0) | (ids >= n_experts))
            tl.store(slot_row_ptr + s, tl.full((BLOCK_S,), -1, tl.int32), mask=foreign)
    tl.store(chunk_counts_ptr + e * n_chunks + c, tl.sum(total, axis=0))


@triton.jit
def _expert_start(
    chunk_counts_ptr, counts_ptr, ends_ptr, e, c, n_experts, n_chunks,
    ALIGNMENT: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    # From the per-(expert, chunk) counts: expert e's start (the exclusive prefix sum of aligned
    # counts: the endpoint contract), its count, its slots in chunks before c, its aligned count
    # and the aligned total of all experts (where the capacity tail begins). Program (e, 0) also
    # records the expert's count and end.
    ex = tl.arange(0, BLOCK_E)
    ch = tl.arange(0, BLOCK_C)
    grid_ok = (ex < n_experts)[:, None] & (ch < n_chunks)[None, :]
    per_chunk = tl.load(
        chunk_counts_ptr + ex[:, None] * n_chunks + ch[None, :], mask=grid_ok, other=0
    )
    counts = tl.sum(per_chunk, axis=1)
    aligned = (counts + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    start = tl.sum(tl.where(ex < e, aligned, 0), axis=0)
    count = tl.sum(tl.where(ex == e, counts, 0), axis=0)
    earlier = tl.sum(
        tl.sum(tl.where((ex == e)[:, None] & (ch < c)[None, :], per_chunk, 0), axis=1), axis=0
    )
    own_aligned = tl.sum(tl.where(ex == e, aligned, 0), axis=0)
    if c == 0:
        tl.store(counts_ptr + e, count)
        tl.store(ends_ptr + e, start + count)
    return start, count, earlier, own_aligned, tl.sum(aligned, axis=0)


@triton.jit
def _place(
    ids_ptr, row_src_ptr, slot_row_ptr, e, c, next_row, n_slots, expert_offset, rows,
    CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    # Place expert e's slots of chunk c from row next_row on: a cumulative sum keeps t*K + k
    # order. Rows past the buffer are never written (see the module docstring on overflow).
    # Returns the row after the chunk's last slot (it may pass the buffer).
    lane = tl.arange(0, BLOCK_S)
    for s0 in range(c * CHUNK, tl.minimum((c + 1) * CHUNK, n_slots), BLOCK_S):
        s = s0 + lane
        ids = tl.load(ids_ptr + s, mask=s < n_slots, other=-1)
        hit = (s < n_slots) & ((ids - expert_offset) == e)
        hit_i = hit.to(tl.int32)
        row = next_row + tl.cumsum(hit_i, axis=0) - 1
        fits = row < rows
        tl.store(slot_row_ptr + s, tl.where(fits, row, -1), mask=hit)
        tl.store(row_src_ptr + row, s, mask=hit & fits)
        next_row += tl.sum(hit_i, axis=0)
    return next_row


@triton.jit
def _scatter_assign(
    ids_ptr, chunk_counts_ptr, counts_ptr, ends_ptr, row_src_ptr, slot_row_ptr,
    n_slots, expert_offset, n_experts, n_chunks, rows,
    ALIGNMENT: tl.constexpr, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    # Grid (E, C): program (e, c) places expert e's slots of chunk c. Its first row is the
    # expert's start plus the expert's slots in earlier chunks; within the chunk a cumulative sum
    # keeps t*K + k order, so the whole placement is a stable counting sort and every chunk is
    # placed in parallel.
    e = tl.program_id(0)
    c = tl.program_id(1)
    start, count, earlier, own_aligned, total = _expert_start(
        chunk_counts_ptr, counts_ptr, ends_ptr, e, c, n_experts, n_chunks, ALIGNMENT, BLOCK_E,
        BLOCK_C,
    )  # fmt: skip
    _place(
        ids_ptr, row_src_ptr, slot_row_ptr, e, c, start + earlier, n_slots, expert_offset, rows,
        CHUNK, BLOCK_S,
    )  # fmt: skip


@triton.jit
def _scatter_assign_maps(
    ids_ptr, chunk_counts_ptr, counts_ptr, ends_ptr, row_expert_ptr, row_src_ptr, slot_row_ptr,
    x_ptr, xs_ptr, x_sf_ptr, xs_sf_ptr,
    n_slots, expert_offset, n_experts, n_chunks, rows, D, G4,
    stride_xt, stride_xd, stride_xsm, stride_xsd,
    stride_sft, stride_sfg, stride_xssfm, stride_xssfg,
    K: tl.constexpr, ALIGNMENT: tl.constexpr, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_M: tl.constexpr,
    COPY: tl.constexpr, HAS_SF: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_G4: tl.constexpr,
):  # fmt: skip
    # `_scatter_assign` and `_scatter_maps` in one launch (and, with COPY, `_scatter_copy` too).
    # Grid (E, C) as in `_scatter_assign`; the map rows are shared out so that every row of the
    # buffer is written by exactly one program: expert e's aligned span
    # [start, start + align(count)) by its C programs in BLOCK_M strides (expert e below end; -1
    # and row_src -1 in the padding), and the capacity tail [sum of aligned counts, M) by all E*C
    # programs (-1 in both maps).
    e = tl.program_id(0)
    c = tl.program_id(1)
    start, count, earlier, own_aligned, total = _expert_start(
        chunk_counts_ptr, counts_ptr, ends_ptr, e, c, n_experts, n_chunks, ALIGNMENT, BLOCK_E,
        BLOCK_C,
    )  # fmt: skip
    lane_m = tl.arange(0, BLOCK_M)
    minus1 = tl.full((BLOCK_M,), -1, tl.int32)
    end = start + count
    span_end = tl.minimum(start + own_aligned, rows)
    for m0 in range(start + c * BLOCK_M, span_end, n_chunks * BLOCK_M):
        m = m0 + lane_m
        ok = m < span_end
        live = m < end
        tl.store(row_expert_ptr + m, tl.where(live, e, -1), mask=ok)
        tl.store(row_src_ptr + m, minus1, mask=ok & ~live)
    n_programs = n_experts * n_chunks
    for m0 in range(total + (e * n_chunks + c) * BLOCK_M, rows, n_programs * BLOCK_M):
        m = m0 + lane_m
        ok = m < rows
        tl.store(row_expert_ptr + m, minus1, mask=ok)
        tl.store(row_src_ptr + m, minus1, mask=ok)

    first = start + earlier
    last = _place(
        ids_ptr, row_src_ptr, slot_row_ptr, e, c, first, n_slots, expert_offset, rows,
        CHUNK, BLOCK_S,
    )  # fmt: skip

    # COPY: the rows this program just placed are [first, last) (clipped to the buffer); their
    # slots are read back from row_src (written above by this program's threads: the barrier
    # makes them visible) and each row is copied from its token, BLOCK_R rows at a time. A token
    # with several local slots is read once per slot, and the work follows the routing (a hot
    # expert's rows are copied by its C programs only).
    if COPY:
        tl.debug_barrier()
        last = tl.minimum(last, rows)
        lane_r = tl.arange(0, BLOCK_R)
        d = tl.arange(0, BLOCK_D)
        for r0 in range(first, last, BLOCK_R):
            r = r0 + lane_r
            r_ok = r < last
            src = tl.load(row_src_ptr + r, mask=r_ok, other=0)
            t64 = (src // K).to(tl.int64)
            r64 = r.to(tl.int64)
            for d0 in range(0, D, BLOCK_D):
                dd = d0 + d
                mask = r_ok[:, None] & (dd < D)[None, :]
                vals = tl.load(
                    x_ptr + t64[:, None] * stride_xt + dd[None, :] * stride_xd, mask=mask
                )
                tl.store(
                    xs_ptr + r64[:, None] * stride_xsm + dd[None, :] * stride_xsd, vals, mask=mask
                )
            if HAS_SF:
                g = tl.arange(0, BLOCK_G4)
                mask = r_ok[:, None] & (g < G4)[None, :]
                words = tl.load(
                    x_sf_ptr + t64[:, None] * stride_sft + g[None, :] * stride_sfg, mask=mask
                )
                tl.store(
                    xs_sf_ptr + r64[:, None] * stride_xssfm + g[None, :] * stride_xssfg,
                    words,
                    mask=mask,
                )


@triton.jit
def _scatter_maps(
    counts_ptr,
    ends_ptr,
    row_expert_ptr,
    row_src_ptr,
    rows,
    n_experts,
    BLOCK_M: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    # Each row's expert from the endpoints: the expert whose [start, end) holds it, -1 for padding
    # and the capacity tail. The ranges are disjoint, so the max over experts picks the one.
    # `_scatter_assign` already wrote row_src of the live rows; the others get their -1 here.
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    in_buf = m < rows
    ex = tl.arange(0, BLOCK_E)
    counts = tl.load(counts_ptr + ex, mask=ex < n_experts, other=0)
    ends = tl.load(ends_ptr + ex, mask=ex < n_experts, other=0)
    starts = ends - counts
    inside = (m[:, None] >= starts[None, :]) & (m[:, None] < ends[None, :])
    expert = tl.max(tl.where(inside, ex[None, :], -1), axis=1)
    tl.store(row_expert_ptr + m, expert, mask=in_buf)
    tl.store(row_src_ptr + m, tl.full((BLOCK_M,), -1, tl.int32), mask=in_buf & (expert < 0))


@triton.jit
def _scatter_copy(
    x_ptr,
    xs_ptr,
    x_sf_ptr,
    xs_sf_ptr,
    slot_row_ptr,
    T,
    D,
    G4,
    stride_xt,
    stride_xd,
    stride_xsm,
    stride_xsd,
    stride_sft,
    stride_sfg,
    stride_xssfm,
    stride_xssfg,
    K: tl.constexpr,
    HAS_SF: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_G4: tl.constexpr,
):
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = t < T
    t64 = t.to(tl.int64)

    # A token is read only when one of its slots landed here (with expert parallelism most tokens
    # belong to other ranks). Slots of other ranks, and any that overflowed the buffer, have row -1.
    any_local = tl.zeros((BLOCK_T,), dtype=tl.int1)
    for k in tl.static_range(K):
        row = tl.load(slot_row_ptr + t * K + k, mask=t_ok, other=-1)
        any_local = any_local | (row >= 0)

    # Read the token tile once, then write it to the row of each local slot, k by k.
    d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    x_mask = any_local[:, None] & (d < D)[None, :]
    vals = tl.load(x_ptr + t64[:, None] * stride_xt + d[None, :] * stride_xd, mask=x_mask)
    for k in tl.static_range(K):
        row = tl.load(slot_row_ptr + t * K + k, mask=t_ok, other=-1)
        mask = (row >= 0)[:, None] & (d < D)[None, :]
        row64 = row.to(tl.int64)
        tl.store(xs_ptr + row64[:, None] * stride_xsm + d[None, :] * stride_xsd, vals, mask=mask)

    # fp8 pipeline: the token's packed scale words follow its row (strides may be M-major).
    if HAS_SF:
        if pid_d == 0:
            g = tl.arange(0, BLOCK_G4)
            g_ok = (g < G4)[None, :]
            words = tl.load(
                x_sf_ptr + t64[:, None] * stride_sft + g[None, :] * stride_sfg,
                mask=any_local[:, None] & g_ok,
            )
            for k in tl.static_range(K):
                row = tl.load(slot_row_ptr + t * K + k, mask=t_ok, other=-1)
                row64 = row.to(tl.int64)
                tl.store(
                    xs_sf_ptr + row64[:, None] * stride_xssfm + g[None, :] * stride_xssfg,
                    words,
                    mask=(row >= 0)[:, None] & g_ok,
                )
