"""moebench's built-in arms: ``prefill/`` (the capacity-buffer pipeline: ``stock``,
``prefix_sum``, ``prefix_sum_masked``) and ``decode/`` (``dense_decode``, ``sparse_decode``,
``grouped_decode``).

Each arm module defines one value, ``ARM = moebench.arm.base.Arm(...)``, of the staged contract:
its name, family and one-line summary; ``build(workspace) -> stages`` (argument-free closures over
moebench's workspace for the family, ``moebench.arm.prefill.Workspace`` or
``moebench.arm.decode.Workspace``); its weight-byte and work models; ``kernels`` (what it launches,
for people); ``launches`` ({precision: Triton kernel function names its stages launch}) and
``forbidden`` (names they must not launch), both checked under the profiler by
``moebench.gates.dispatch``. What the arms of a family share is in its ``pipeline.py``; start
reading at ``prefill/pipeline.py``. Arms compose moebench's kernels over the workspace; they import
no harness. moebench finds them by import string (``moebench.arm.registry.BUILTIN``), exactly as
it finds a user's arm, and their sources are the import closure of the defining module
(``moebench.run.closure``), hashed into the provenance.
"""
