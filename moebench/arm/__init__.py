"""The arm interface: what every arm, built-in or a user's, hands the harness (docs/DESIGN.md
sections 3 and 13).

Start with ``base`` (``Arm``, ``Stage``, ``Prepared``: the staged and whole-FFN contracts), then
``prefill`` and ``decode`` (each family's ``Problem`` and ``Workspace``). ``registry`` holds the
table of built-in arms and resolves every arm reference; ``assemble`` turns either contract into
the workspace and stages that the gates and the timing see.
"""
