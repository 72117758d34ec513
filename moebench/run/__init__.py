"""Running a scenario: the case loops that drive plan -> gates -> measure -> results, and the run's
life around them (docs/DESIGN.md sections 7 and 8).

Start with ``start`` (the scenario's topology picks the case loop), then ``lifecycle`` (pins,
opening or resuming the folder, the tally, finishing). ``isolate`` and ``child`` run a case in a
child process; ``closure`` and ``provenance`` find which code ran; ``lock`` writes a scenario's
pins.
"""
