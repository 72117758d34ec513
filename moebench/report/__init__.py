"""Reports: a comparison from ``moebench.analysis`` as a terminal table, Markdown, CSV, JSON and
PNG figures.

Start with ``render`` (the choice of format), then ``sections`` (the text the table and the
Markdown report share). ``cpu_view`` is what a CPU run shows first; ``plots`` and ``step_plots``
draw the figures, on helpers from ``canvas``; ``against`` renders a before/after comparison.
"""
