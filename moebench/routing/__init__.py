"""Routing: which experts each token goes to, synthetic or recorded (docs/DESIGN.md section 10).

Start with ``synthetic`` (the seeded families, per-rank slices), then ``traces`` (moebench's
content-hashed trace file) and ``replay`` (a recorded load apportioned to one step's slots).
``raw_files`` reads load files without model metadata, ``importers`` what serving engines record,
``step_draws`` the routing of each (step, layer) of a model step, ``trace_stats`` load figures.
"""
