"""The bridge to Hugging Face transformers' experts interface, both ways (docs/TRANSFORMERS.md).

- In: ``hf:<backend>`` in a scenario's ``arms:`` is transformers' experts backend as a moebench
  arm (``hf_arms``: the module of the scenario's architecture, moebench's weights in its layout,
  non-local slots as that transformers version takes them; ``families``, ``backends``).
- Out: ``register()`` puts moebench's arms into transformers' ``ALL_EXPERTS_FUNCTIONS`` as
  ``moebench:<arm>``, so that ``model.set_experts_implementation("moebench:<arm>")`` runs a
  model with one (``register``).

Importing this package does not import transformers (the extra ``moebench[transformers]``);
every function that needs it imports it when called, so an ``hf:`` reference without it is one
line that says what to install.
"""

from moebench.integrations.transformers.hf_arms import HF_PREFIX, hf_arm
from moebench.integrations.transformers.register import (
    MOEBENCH_PREFIX,
    ExpertsForward,
    prepare,
    register,
)

__all__ = ["HF_PREFIX", "MOEBENCH_PREFIX", "ExpertsForward", "hf_arm", "prepare", "register"]
