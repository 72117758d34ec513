"""moebench meets other runtimes here: today Hugging Face transformers' experts interface
(``moebench.integrations.transformers``, docs/TRANSFORMERS.md; the shared design, section 16).

Where it sits among the layers (``pyproject.toml``, import-linter): just above ``moebench.plan``.
The bridge uses the arm interface (``moebench.arm``: the registry, the contracts, the workspaces),
the builders of a rank's problem (``moebench.plan.inputs``: the quantisation a precision asks
for, written once) and the core (the reference, the tolerances, the presets), and never the
harness above them (gates, timing, results, the run loops): it is either an arm the harness runs
like any other, or a forward that a transformers model calls. Nothing in moebench imports it
statically except the CLI, which lists the backends: the registry, in the ``arm`` layer below it,
loads the ``hf:`` arms by import string, exactly as it loads the built-in arms, so that a scenario
naming no ``hf:`` arm never imports transformers.
"""
