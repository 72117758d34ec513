"""Stored runs -> claims: cells, medians, intervals and decisions; reads only results, times nothing
(docs/DESIGN.md section 9, "From rows to claims").

Start with ``compare`` (``compare_runs``), then ``blocks`` (each block's critical path, what every
claim is made over) and ``stats`` (intervals whose coverage holds at the blocks used). ``against``
compares a run with a baseline run; ``step``, ``goodput`` and ``policy`` read the model step;
``workmodel`` and ``ledger`` set the work against the measured ceilings.
"""
