"""Arm references -> arms: the one place that finds an arm, built-in or a user's (DESIGN 13).

A scenario's ``arms:`` entry is one of:

- a built-in name (``stock``): the table below, the one list of moebench's own arms;
- an import string ``package.module:ATTRIBUTE`` (``mypkg.moe:MY_ARM``), imported as Python
  imports anything: an installed package, one on ``PYTHONPATH``, or one in the scenario's folder
  (which is put on ``sys.path`` for it, as fastapi-cli does for an app);
- a file ``path/to/file.py:ATTRIBUTE``, relative to the scenario's folder, loaded as a module of
  its own (its folder put on ``sys.path``, so that it can import the files beside it);
- a name an installed package registers under the entry-point group ``moebench.arms``
  (``[project.entry-points."moebench.arms"] my_arm = "mypkg.moe:MY_ARM"``);
- ``hf:<backend>``: an experts backend of Hugging Face transformers (``hf:grouped_mm``, or
  ``hf:grouped_mm@gpt_oss`` to name the experts class), built by
  ``moebench.integrations.transformers``, loaded here by import string (``TRANSFORMERS``) like
  the built-in arms, so that a scenario without one never imports transformers. Such an arm
  depends on its scenario (the family of the other arms, the model, the activation decide the
  experts class it builds): the scenario binds it with ``bind``, which writes that ``Context``
  into the reference (``hf:grouped_mm?family=decode&model=gpt-oss-20b&activation=swiglu_oai``),
  and the bound reference is what the scenario keeps, so that every process that resolves it
  again (an isolated child, a torchrun rank, a resume) builds the same class. The arm's name is
  the reference without its context.

The attribute must be a ``moebench.arm.base.Arm``. moebench never imports the ``arms`` package
statically (import-linter checks it): the built-in arms are found here by import string, exactly
as a user's are, and a source tree run without installing finds them too, since ``arms`` sits
beside ``moebench`` on the path. Every mistake is an ``ArmError`` of one line; the scenario
loader prefixes the field (``arms[2]``).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from moebench.arm.base import Arm
from moebench.core.errors import MoebenchError, clip
from moebench.core.vocabulary import aa_twin

BUILTIN = {
    "stock": "arms.prefill.stock:ARM",
    "prefix_sum": "arms.prefill.prefix_sum:ARM",
    "prefix_sum_masked": "arms.prefill.prefix_sum_masked:ARM",
    "dense_decode": "arms.decode.dense_decode:ARM",
    "sparse_decode": "arms.decode.sparse_decode:ARM",
    "grouped_decode": "arms.decode.grouped_decode:ARM",
}
ENTRY_POINT_GROUP = "moebench.arms"
HF_PREFIX = "hf:"
TRANSFORMERS = "moebench.integrations.transformers.hf_arms:hf_arm"  # (text, Context) -> Arm
FILE_MODULE_PREFIX = "moebench_user_arm_"


class ArmError(MoebenchError):
    """An arm reference that names no arm (one line, without the field: the caller adds it)."""


CONTEXT_MARK = "?"  # hf:<backend>?<key>=<value>&...: a reference bound to its scenario


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a scenario knows when it resolves an arm that depends on it; an empty field is not
    known (``moebench arms`` without a scenario, ``run_arm``, a file arm's ``hf_arm(...)``)."""

    family: str = ""  # the family of the scenario's other arms (none: no other arm says)
    model: str = ""  # the model's preset
    activation: str = ""  # the scenario's activation

    def encode(self) -> str:
        return "&".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if getattr(self, f.name))  # fmt: skip

    @classmethod
    def decode(cls, ref: str, text: str) -> Context:
        known = {f.name for f in fields(cls)}
        parts = [p for p in text.split("&") if p]
        pairs = [p.partition("=") for p in parts]
        bad = [p for p, (k, eq, v) in zip(parts, pairs, strict=True)
               if k not in known or not eq or not v]  # fmt: skip
        if bad:
            raise ArmError(f"{ref!r}: {bad[0]!r} is not a context moebench binds "
                           f"({', '.join(sorted(known))}, as key=value)")  # fmt: skip
        return cls(**{k: v for k, _, v in pairs})


def bind(ref: str, context: Context) -> str:
    """``ref`` bound to the scenario's ``context`` where its arm depends on the scenario (an
    ``hf:`` reference); any other reference, and one bound already (the normalised document a
    manifest holds, parsed again), as it is. The bound reference is what the scenario keeps and
    every later ``resolve`` reads (module docstring)."""
    if kind_of(ref) != "transformers" or CONTEXT_MARK in ref:  # bound already: as it is
        return ref
    encoded = context.encode()
    return f"{ref}{CONTEXT_MARK}{encoded}" if encoded else ref


def builtin_names() -> tuple[str, ...]:
    return tuple(BUILTIN)


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The arms installed packages register (group ``moebench.arms``), by name."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def kind_of(ref: str) -> str:
    """``builtin``, ``transformers``, ``file``, ``import`` or ``entry point``: how ``ref`` names
    its arm."""
    if ref in BUILTIN:
        return "builtin"
    if ref.startswith(HF_PREFIX):
        return "transformers"
    if ":" in ref:
        target = ref.rsplit(":", 1)[0]
        return "file" if target.endswith(".py") or "/" in target or os.sep in target else "import"
    return "entry point"


def resolve(ref: str, base_dir: str | os.PathLike | None = None) -> Arm:
    """The arm ``ref`` names (module docstring); an A/A copy (``stock~aa``) resolves to the arm
    it copies. ``base_dir``: the folder a file reference is relative to (the scenario's)."""
    ref = aa_twin(ref) or ref
    if not isinstance(ref, str) or not ref.strip():
        raise ArmError(f"an arm reference must be a non-empty string, got {ref!r}")
    kind = kind_of(ref)
    if kind == "builtin":
        arm = _attribute(BUILTIN[ref], *BUILTIN[ref].split(":"), "builtin")
        return arm
    if kind == "transformers":
        return _transformers(ref)
    if kind == "entry point":
        eps = entry_points()
        if ref not in eps:
            known = list(BUILTIN) + sorted(eps)
            # A near miss of a known name (``grouped-decode``, ``sparse_decod``) is named first.
            near = difflib.get_close_matches(ref.replace("-", "_"), known, n=1, cutoff=0.75)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ArmError(
                f"unknown arm {ref!r}: {hint}not a built-in arm, an installed entry point "
                f"({ENTRY_POINT_GROUP}), '{HF_PREFIX}<backend>' (a transformers experts "
                f"backend), 'module:ATTRIBUTE' or 'file.py:ATTRIBUTE'; known: {', '.join(known)}"
            )
        module, attr = (
            eps[ref].value.split(":", 1) if ":" in eps[ref].value else (eps[ref].value, "")
        )
        return _attribute(ref, module.strip(), attr.strip(), "entry point")
    target, attr = ref.rsplit(":", 1)
    if not attr.isidentifier():
        raise ArmError(f"{ref!r}: {attr!r} after ':' is not a Python name")
    if kind == "file":
        path = Path(target)
        if not path.is_absolute():
            path = Path(base_dir or ".") / path
        return _from_file(ref, path, attr)
    if base_dir is not None and _not_importable(target.split(".")[0]):
        _on_path(Path(base_dir))
    return _attribute(ref, target, attr, "import")


def _not_importable(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


def _on_path(folder: Path) -> None:
    """Put ``folder`` on ``sys.path`` (once) so that a user's module finds the modules beside it."""
    entry = str(folder.resolve())
    if entry not in sys.path:
        sys.path.insert(0, entry)


def _check(ref: str, obj: object, module: str, origin: str) -> Arm:
    if not isinstance(obj, Arm):
        raise ArmError(
            f"{ref!r} is a {type(obj).__name__}, not a moebench.arm.base.Arm "
            "(define ARM = Arm(name=..., family=..., ...))"
        )
    if origin != "builtin" and obj.name in BUILTIN:
        raise ArmError(
            f"{ref!r} defines an arm named {obj.name!r}, the name of a built-in arm; "
            "give it a name of its own"
        )
    return obj.with_origin(origin, module)


def _attribute(ref: str, module: str, attr: str, origin: str) -> Arm:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ArmError(f"{ref!r}: cannot import {module!r}: {_first_line(exc)}") from None
    except Exception as exc:  # the user's module raised while importing
        raise ArmError(f"{ref!r}: importing {module!r} raised {_first_line(exc)}") from None
    if not attr or not hasattr(mod, attr):
        raise ArmError(f"{ref!r}: module {module!r} has no attribute {attr!r}")
    return _check(ref, getattr(mod, attr), module, origin)


def _transformers(ref: str) -> Arm:
    """The ``hf:`` arm, in the context its reference is bound to (its maker raises the ArmError
    of a bad name, of a class the context cannot take or of a backend that cannot run here, one
    line naming the reference)."""
    name, _, encoded = ref.partition(CONTEXT_MARK)
    context = Context.decode(name, encoded)
    module, attr = TRANSFORMERS.split(":")
    make = getattr(importlib.import_module(module), attr)
    return _check(name, make(name[len(HF_PREFIX) :], context), module, "transformers")


def _from_file(ref: str, path: Path, attr: str) -> Arm:
    if not path.is_file():
        raise ArmError(f"{ref!r}: no such file {path}")
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    name = FILE_MODULE_PREFIX + digest  # one module per file, reused on the next resolution
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, resolved)
        if spec is None or spec.loader is None:
            raise ArmError(f"{ref!r}: {path} is not a Python file")
        mod = importlib.util.module_from_spec(spec)
        _on_path(resolved.parent)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:
            del sys.modules[name]
            raise ArmError(f"{ref!r}: loading {path} raised {_first_line(exc)}") from None
    if not hasattr(mod, attr):
        raise ArmError(f"{ref!r}: {path} has no attribute {attr!r}")
    return _check(ref, getattr(mod, attr), name, "file")


def _first_line(exc: BaseException) -> str:
    text = clip(str(exc), 200)  # at a word boundary, never mid-word
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
