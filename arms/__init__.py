"""The arms: one module each, listed in one literal dict. Arms compose kernels; they know no runner.

Each arm module defines NAME, FAMILY (``prefill``: the capacity-buffer pipeline of
`arms.pipeline`; ``decode``: `arms.decode`), KERNELS (the kernels it launches, for people),
LAUNCHES ({precision: Triton kernel function names its stages launch}) and FORBIDDEN (names they
must not launch), both checked under the profiler by `moebench.dispatch_gate`, SOURCES (the files
it is built from, hashed into provenance) and build(workspace) -> stages.
"""

from arms import dense_decode, prefix_sum, prefix_sum_masked, sparse_decode, stock

ARMS = {
    "stock": stock,
    "prefix_sum": prefix_sum,
    "prefix_sum_masked": prefix_sum_masked,
    "dense_decode": dense_decode,
    "sparse_decode": sparse_decode,
}
