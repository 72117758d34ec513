"""Integrity of an arm's inputs: nothing an arm receives may change under it (docs/DESIGN.md 15).

An arm is untrusted code, the built-in ones included. Every input it is handed (tokens, scales,
routing, weights: the tensors of its ``Problem``) is fingerprinted before the first arm runs,
and verified after each of the arm's calls, or after each of its turns in a timing block: a
change names the arm that made it (gate ``inputs_unchanged``), the pristine inputs are put back
before any other arm runs, and nobody else is blamed. References are computed from pristine
inputs only (before any arm runs, or after the inputs were verified).

A fingerprint is a position-weighted checksum of every 32-bit word of a tensor's bytes, computed
on its device in chunks (``CHUNK`` words at a time, so the temporaries stay small): any change of
a bit changes it, and so does moving values around, which a plain sum would miss. Restoring
needs the values, so the guard keeps a pristine copy of each input on the host, or takes a
``rebuild`` that makes the inputs again from their seed (a model step's weights, whose host
copy would be the whole model).

The timing loads an input set before every sample, its token rows in a new order (``load`` with
``rows``). That path does no host-to-device copy and no synchronisation: the rotated inputs of
each set are copied to the device once (``_device``, fingerprinted then), a load gathers its rows
from there, and what it wrote is checked when the inputs are next verified (after the arm's
turn: the tensors against the same gather, bitwise, and the device copies against their
fingerprints, so that an arm that wrote into them is named too). The host time between samples
is time the device idles, and an idle device lowers its clock (``measure.clock``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from moebench.results.rows import Check

CHUNK = 1 << 24  # words a chunk: 128 MiB of int64 temporaries at most
_GATHERED = object()  # an input a permuted load wrote: checked against its gather, not a print
_MULT = 0x9E3779B1  # an odd 32-bit multiplier: word i weighs (i * _MULT + 1) mod 2^32


def fingerprint(t: torch.Tensor) -> int:
    """A checksum of every bit of ``t`` and of where each bit is (module docstring)."""
    flat = t.detach().contiguous().view(-1).view(torch.uint8)
    pad = (-flat.numel()) % 4
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    words = flat.view(torch.int32)
    total = torch.zeros((), dtype=torch.int64, device=t.device)
    for start in range(0, words.numel(), CHUNK):
        w = words[start : start + CHUNK].to(torch.int64)
        i = torch.arange(start, start + w.numel(), dtype=torch.int64, device=t.device)
        weight = (i * _MULT + 1) & 0xFFFFFFFF
        total += (w * weight).sum()  # int64 wraps around: a checksum, not a number
    return int(total) ^ (t.numel() << 1)


def input_tensors(problem: Any) -> dict[str, torch.Tensor]:
    """The tensors an arm receives in its problem, by field name."""
    out = {}
    for f in dataclasses.fields(problem):
        v = getattr(problem, f.name)
        if isinstance(v, torch.Tensor):
            out[f.name] = v
    return out


class InputGuard:
    """The pristine state of one problem's inputs, and how to restore it (module docstring).

    State 0 is the problem as built. ``add_set`` adds another state of some of the inputs (new
    tokens and routing for the timing to rotate through); ``load`` writes a state into the same
    tensors (their addresses stay, so prepared arms and captured graphs read it), with its token
    rows in another order when given one (the MoE acts on each token alone, so the reference of
    the permuted state is the permuted reference), and checks compare with the state loaded."""

    def __init__(self, problem: Any, *, rebuild: Callable[[], Any] | None = None,
                 rebuilt: tuple[str, ...] = ()):  # fmt: skip
        """``rebuild``: a callable giving a problem whose ``rebuilt`` inputs (the weights) are
        the pristine values, so that only the others are copied to the host."""
        self.problem = problem
        self.tensors = input_tensors(problem)
        self._rebuild = rebuild
        self._rebuilt = set(rebuilt) if rebuild is not None else set()
        copies = {k: t.detach().to("cpu", copy=True) for k, t in self.tensors.items()
                  if k not in self._rebuilt}  # fmt: skip
        self._sets: list[dict[str, torch.Tensor] | None] = [copies]
        self._prints = [{k: fingerprint(t) for k, t in self.tensors.items()}]
        self.current = 0
        self._loaded = dict(self._prints[0])  # the fingerprints of what is in the tensors now
        self._permuted = False
        self._device: dict[tuple[int, str], torch.Tensor] = {}  # (set, input) -> a device copy
        self._device_prints: dict[tuple[int, str], int] = {}
        self._gathered: tuple[int, torch.Tensor] | None = None  # (set, rows) of a permuted load

    @property
    def sets(self) -> int:
        return len(self._sets)

    def add_set(self, values: dict[str, torch.Tensor]) -> int:
        """Another state of the inputs named in ``values`` (the others as in state 0); returns its
        index."""
        self._sets.append({k: v.detach().clone() for k, v in values.items()})
        prints = dict(self._prints[0])
        prints.update({k: fingerprint(v) for k, v in values.items()})
        self._prints.append(prints)
        return len(self._sets) - 1

    def load(self, i: int, rows: torch.Tensor | None = None) -> None:
        """Write state ``i`` into the problem's tensors, its token rows in the order ``rows``
        (int64 [T], a permutation) when given: only what differs from what is there now. With
        ``rows``, from the device copies, with no synchronisation (module docstring)."""
        if rows is None and not self._permuted:
            names = [k for k in self.tensors if self._prints[i][k] != self._loaded[k]]
            self._write(i, names)
            self._loaded.update({k: self._prints[i][k] for k in names})
            self._gathered = None
        elif rows is None:
            names = self.permutable(i)
            self._write(i, names)
            self._loaded.update({k: self._prints[i][k] for k in names})
            self._gathered = None
        else:
            names = self.permutable(i)
            on = rows.to(next(iter(self.tensors.values())).device, non_blocking=True)
            for k in names:
                self.tensors[k].copy_(self._on_device(i, k)[on])
                self._loaded[k] = _GATHERED
            self._gathered = (i, on)
        self.current, self._permuted = i, rows is not None

    def _on_device(self, i: int, k: str) -> torch.Tensor:
        """Input ``k`` of state ``i`` on the tensors' device, copied there once."""
        got = self._device.get((i, k))
        if got is None:
            own = self._sets[i] if i else None
            src = own[k] if own is not None and k in own else self._sets[0][k]
            got = self._device[(i, k)] = src.to(self.tensors[k].device, copy=True)
            self._device_prints[(i, k)] = fingerprint(got)
        return got

    def permutable(self, i: int) -> list[str]:
        """The inputs a load may reorder: those with a row a token, which state ``i`` or state
        0 rotates (tokens, their scales, routing ids and weights)."""
        rotated = set(self._sets[i]) if i and self._sets[i] is not None else set()
        for j in range(1, len(self._sets)):
            rotated |= set(self._sets[j])
        return [k for k in self.tensors if k in rotated]

    def _write(self, i: int, names: list[str], rows: torch.Tensor | None = None) -> None:
        if not names:
            return
        base = dict(self._sets[0])
        if any(k in self._rebuilt for k in names):
            base.update({k: v for k, v in input_tensors(self._rebuild()).items()
                         if k in self._rebuilt})  # fmt: skip
        for k in names:
            src = self._sets[i][k] if i and k in self._sets[i] else base[k]
            src = src.to(self.tensors[k].device)
            if rows is not None:
                src = src[rows.to(src.device)]
            self.tensors[k].copy_(src)

    def accept(self, names: list[str]) -> None:
        """The harness itself wrote new values into ``names`` (a model step's routing): they are
        state 0 from now on."""
        for k in names:
            self._sets[0][k] = self.tensors[k].detach().to("cpu", copy=True)
            self._prints[0][k] = self._loaded[k] = fingerprint(self.tensors[k])
            self._device.pop((0, k), None)

    def changed(self) -> list[str]:
        """The inputs whose contents differ from what was loaded, and the device copies of the
        sets (named ``<input> (input set i)``) that differ from what was copied."""
        bad = []
        for k, t in self.tensors.items():
            if self._loaded[k] is _GATHERED:
                i, rows = self._gathered
                if not torch.equal(t, self._on_device(i, k)[rows]):
                    bad.append(k)
            elif fingerprint(t) != self._loaded[k]:
                bad.append(k)
        for (i, k), t in list(self._device.items()):
            if fingerprint(t) != self._device_prints[(i, k)]:
                del self._device[(i, k)]  # copied again from the host when next loaded
                bad.append(f"{k} (input set {i})")
        return bad

    def restore(self, names: list[str] | None = None) -> None:
        """Write state 0 back into the same tensors (the pristine inputs), or, for ``names``,
        what was loaded there: a timed sample's permuted state is rewritten by the next load."""
        if names is not None:  # the inputs themselves (a device copy is copied again anyway)
            names = [k for k in names if k in self.tensors]
        if names is None or self._permuted:  # back to state 0, the reordered rows included
            fix = set(self.tensors) if names is None else {*names, *self.permutable(0)}
            self._write(0, [k for k in self.tensors if k in fix])
            self._loaded.update({k: self._prints[0][k] for k in fix})
            self.current, self._permuted, self._gathered = 0, False, None
        else:
            self._write(self.current, names)
        left = self.changed()
        if left:
            raise RuntimeError(f"the inputs {left} could not be restored")

    def check(self, arm: str, during: str) -> Check | None:
        """None when nothing changed; else the failing ``inputs_unchanged`` row of ``arm``, the
        inputs already restored."""
        bad = self.changed()
        if not bad:
            return None
        self.restore(bad)
        return Check(
            name="inputs_unchanged",
            status="fail",
            detail=f"{arm} changed its inputs {', '.join(bad)} during {during}; the pristine "
            "inputs were restored before any other arm ran",
        )

    def verified(self, arm: str, during: str) -> Check:
        """The ``inputs_unchanged`` row of ``arm`` after ``during``: pass, or fail (restored)."""
        bad = self.check(arm, during)
        if bad is not None:
            return bad
        return Check(name="inputs_unchanged", status="pass",
                     detail=f"every input tensor bitwise unchanged after {during} "
                     f"({len(self.tensors)} tensors fingerprinted)")  # fmt: skip


def expects_output(problem: Any) -> bool:
    """Whether some token of ``problem`` routes a non-zero weight to a local expert with a
    non-zero row: then its reference cannot be all zero, and an all-zero reference means the
    inputs were wiped."""
    ids = problem.topk_ids_TK.to(torch.int64) - problem.expert_offset
    local = (ids >= 0) & (ids < problem.local_experts) & (problem.topk_weights_TK != 0)
    rows = local.any(dim=1)
    if not bool(rows.any()):
        return False
    x = problem.x_TD[rows]
    return bool((x.view(torch.uint8) != 0).any()) if x.numel() else False


# --------------------------------------------------------------------------- times that cannot be


def floor_bytes(problem: Any, weight_fields: tuple[str, ...]) -> int:
    """The bytes any implementation of this rank's FFN must move at least once, from the problem
    alone (not from an arm's own model): every local expert some slot routes to, all its weight
    tensors; every token with a local slot, read (with its scales); the output, written."""
    ids = problem.topk_ids_TK.to(torch.int64) - problem.expert_offset
    local = (ids >= 0) & (ids < problem.local_experts)
    hit = torch.zeros(problem.local_experts, dtype=torch.bool, device=ids.device)
    hit[ids[local]] = True
    n_hit = int(hit.sum())
    weights = 0
    for f in weight_fields:
        t = getattr(problem, f, None)
        if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[0] == problem.local_experts:
            weights += n_hit * (t.numel() // t.shape[0]) * t.element_size()
    rows = local.any(dim=1)
    n_rows = int(rows.sum())
    T, D = problem.x_TD.shape
    tokens = n_rows * D * problem.x_TD.element_size()
    scales = getattr(problem, "x_sf_TG4", None)
    if isinstance(scales, torch.Tensor):
        tokens += n_rows * (scales.numel() // T) * scales.element_size()
    return weights + tokens + T * D * 2  # the output: bf16 [T, D]


def physical_floor(samples: list[dict], floor_us: float, how: str) -> Check:
    """``physical_floor``: no sample of ``samples`` may take less than ``floor_us`` (the bytes
    that must move over the GPU's measured copy ceiling); one that does measured something else
    than the problem (work that escaped the timer, a result not computed), so the cell is
    IMPOSSIBLE, never FASTER."""
    below = [s["time_us"] for s in samples if s["time_us"] < floor_us]
    if below:
        return Check(name="physical_floor", status="fail", error=min(below),
                     detail=f"IMPOSSIBLE: {len(below)} of {len(samples)} samples below the "
                     f"physical floor of {floor_us:.2f} us ({how}), fastest "
                     f"{min(below):.2f} us")  # fmt: skip
    fastest = min((s["time_us"] for s in samples), default=math.nan)
    return Check(name="physical_floor", status="pass", error=fastest,
                 detail=f"every sample at or above the physical floor of {floor_us:.2f} us "
                 f"({how}); fastest {fastest:.2f} us")  # fmt: skip


def host_clock(events_us: list[float], host_us: list[float]) -> Check:
    """``host_clock`` of an eager arm on the GPU: the device events around its calls against a
    synchronised host clock around the same calls. Work launched on another stream escapes the
    events, not the host clock: the host median may exceed the events' by the host's own launch
    and synchronisation cost (``HOST_SLACK_US``) and half the events' time, no more."""
    ev, host = sorted(events_us)[len(events_us) // 2], sorted(host_us)[len(host_us) // 2]
    allowed = ev * 1.5 + HOST_SLACK_US
    ok = host <= allowed
    return Check(name="host_clock", status="pass" if ok else "fail", error=host - ev,
                 detail=f"median {ev:.1f} us by device events, {host:.1f} us by a synchronised "
                 f"host clock ({'within' if ok else 'beyond'} {allowed:.1f} us)"
                 + ("" if ok else ": work escaped the events (another stream?)"))  # fmt: skip


HOST_SLACK_US = 200.0  # a synchronised host clock's own cost around an eager call, generously
