"""The core vocabulary, the bottom layer: it imports no other package of moebench.

Start with ``vocabulary`` (stage names, families, regimes, precisions, default baselines) and
``layout`` (the endpoint contract, docs/DESIGN.md section 2). ``reference`` is the single
plain-torch float32 truth, ``numerics`` the tolerances and the scale-free error, ``errors`` the one
``MoebenchError`` family, ``faults`` what went wrong in a case and when to stop, ``models`` the
model presets.
"""
