"""moebench's built-in arms: ``prefill/`` (the capacity-buffer pipeline) and ``decode/``.

Each arm module defines NAME, FAMILY, KERNELS (the kernels it launches, for people), LAUNCHES
({precision: Triton kernel function names its stages launch}) and FORBIDDEN (names they must not
launch), both checked under the profiler by ``moebench.gates.dispatch``, SOURCES (the files it is
built from, hashed into provenance) and build(workspace) -> stages. Arms compose moebench's
kernels over the workspace of ``moebench.arm``; they know no runner. moebench finds them by
import string (``moebench.arm.registry``), exactly as it finds a user's arm.
"""
