"""Planning: every case of a scenario with its routing, capacity and ranks, checked before any work
and before the run folder exists.

Start with ``cases`` (``plan``, ``PlannedCase``), then ``inputs`` (one rank's seeded tokens,
weights and routing as an arm's ``Problem``, and its reference); ``steps`` plans a ``step`` regime
case (its layers, token groups and memory).
"""
