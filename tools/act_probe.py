"""A probe of the masked activation's grid schedule (not shipped), shared by
`tools/bench_kernels.py` (part ``act_full``: timed on the GPU) and `tools/offline_sass.py`
(compiled for sm_90a on a machine without a GPU)."""

import triton
import triton.language as tl

from moebench.kernels.act_quant import _block_end, _load_item, _store_item


@triton.jit
def _act_grid_probe(h_ptr, out_ptr, sf_ptr, ends_ptr, M, F, E, stride_hm, stride_om, stride_sm,
                    stride_sw, ALIGNMENT: tl.constexpr, BLOCK_ROWS: tl.constexpr,
                    BLOCK_E: tl.constexpr, GROUPS: tl.constexpr, EAGER: tl.constexpr,
                    LOOKUP: tl.constexpr):  # fmt: skip
    # Probes of the masked grid schedule (not shipped): EAGER loads the block's rows before the
    # endpoint lookup; LOOKUP False skips the lookup (end = M: right only on a buffer with every
    # row live), so the pair splits the masked kernel's extra time into the lookup and the rest.
    row0 = tl.program_id(0) * BLOCK_ROWS
    g0 = tl.program_id(1) * GROUPS
    if EAGER:
        gate, up = _load_item(h_ptr, row0, M, g0, F, stride_hm, BLOCK_ROWS, GROUPS)
    if LOOKUP:
        end = _block_end(ends_ptr, row0, M, E, ALIGNMENT, BLOCK_E)
    else:
        end = M
    if row0 < end:
        if not EAGER:
            gate, up = _load_item(h_ptr, row0, end, g0, F, stride_hm, BLOCK_ROWS, GROUPS)
        _store_item(gate, up, out_ptr, sf_ptr, row0, end, g0, F, stride_om, stride_sm, stride_sw,
                    "silu", True, False, BLOCK_ROWS, GROUPS)  # fmt: skip
