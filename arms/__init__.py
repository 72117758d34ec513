"""The arms: one module each, listed in one literal dict. Arms compose kernels; they know no runner.

Each arm module defines NAME, KERNELS (the kernels it launches), SOURCES (the files it is built
from, hashed into provenance) and build(workspace) -> stages.
"""

from arms import prefix_sum, prefix_sum_masked, stock

ARMS = {
    "stock": stock,
    "prefix_sum": prefix_sum,
    "prefix_sum_masked": prefix_sum_masked,
}
