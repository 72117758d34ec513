"""The correctness gates, run for every case, rank and arm before anything is timed
(docs/DESIGN.md section 5).

Start with ``rank`` (``gate_rank``: every gate of one rank, in order), then ``checks`` (reference,
NaN poison, sentinels, cross-arm). ``graph`` and ``dispatch`` need a GPU; ``fresh`` is the
fresh-input gate after timing; ``distributed`` and ``layers`` check a whole layer and every layer
of a model step; ``families`` is what each arm family needs to be built and checked.
"""
