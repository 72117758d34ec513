"""Arm names -> arms. The built-in arms are found the way a user's arm is: by import string.

moebench never imports the ``arms`` package statically (import-linter checks it): the harness
depends on the interface in ``moebench.arm``, the arms depend on moebench, never the reverse.
The table below is the one list of built-in arms; an arm module states its own family, kernels
and sources. A source tree run without installing finds them too, since ``arms`` sits beside
``moebench`` on the path.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from moebench.core.vocabulary import aa_twin

BUILTIN = {
    "stock": "arms.prefill.stock",
    "prefix_sum": "arms.prefill.prefix_sum",
    "prefix_sum_masked": "arms.prefill.prefix_sum_masked",
    "dense_decode": "arms.decode.dense_decode",
    "sparse_decode": "arms.decode.sparse_decode",
}


def builtin_names() -> tuple[str, ...]:
    return tuple(BUILTIN)


def resolve(name: str) -> ModuleType:
    """The arm named ``name``; an A/A copy (``stock~aa``) resolves to the arm it copies.
    KeyError for a name that is not an arm."""
    return importlib.import_module(BUILTIN[aa_twin(name) or name])


def family(name: str) -> str:
    return resolve(name).FAMILY
