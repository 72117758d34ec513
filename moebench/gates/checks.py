"""Correctness gates (docs/DESIGN.md section 5, gates 1-4), run before anything is timed.

Each gate returns a Check; the runner turns them into rows of the `checks` table. An arm with any
check not `pass` or `skip` is a mismatch: it is not timed (unless --allow-mismatch) and the run
exits 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from moebench.arm.decode import Workspace as DecodeWorkspace
from moebench.arm.prefill import FP8, Workspace
from moebench.core.layout import live_row_mask
from moebench.core.numerics import (
    TOLERANCE,
    bitwise_compare,
    calc_diff,
    diff_of,
    diff_sums,
    nonfinite,
)
from moebench.results.rows import Check

POISON_WORD = 0x7F7F7F7F


@dataclass(frozen=True, kw_only=True)
class Capture:
    """What one eager run left in the workspace, copied for cross-arm comparison."""

    y_TD: torch.Tensor
    live_M: torch.Tensor
    a_live: torch.Tensor
    a_sf_live: torch.Tensor | None
    ends_E: torch.Tensor


def capture(ws: Workspace) -> Capture:
    p = ws.problem
    live = live_row_mask(ws.ends_E, p.alignment, p.capacity_rows)
    return Capture(
        y_TD=ws.y_TD.clone(),
        live_M=live,
        a_live=ws.a_MF[live].clone(),
        a_sf_live=ws.a_sf_MG4[live].clone() if ws.a_sf_MG4 is not None else None,
        ends_E=ws.ends_E.clone(),
    )


@dataclass(frozen=True, kw_only=True)
class WholeCapture:
    """What a whole-FFN arm's gated run left: its output (it has no moebench workspace)."""

    y_TD: torch.Tensor


def check_reference(
    y_TD: torch.Tensor, ref_TD: torch.Tensor, precision: str, *, expect_output: bool = False
) -> Check:
    """The output within the precision's tolerance of the float32 reference (scale-free error).
    ``expect_output``: non-zero tokens route to local experts, so an all-zero reference can only
    come from changed inputs, and agreeing with it is never a pass."""
    return reference_pending(y_TD, ref_TD, precision, expect_output=expect_output)()


def reference_pending(
    y_TD: torch.Tensor, ref_TD: torch.Tensor, precision: str, *, expect_output: bool = False
) -> Callable[[], Check]:
    """``check_reference`` in two halves: the sums it needs queued on the device now (``y_TD``
    may be overwritten as soon as they run), the verdict when the returned call reads them (one
    synchronisation). The timing checks every sample's output this way and reads the verdicts
    after the arm's turn: no host wait between samples."""
    sums = torch.cat([
        (~torch.isfinite(y_TD.float())).sum().double()[None],
        (ref_TD != 0).any().double()[None],
        diff_sums(y_TD, ref_TD),
    ])  # fmt: skip

    def verdict() -> Check:
        bad, ref_any, denom, dot = sums.tolist()
        if bad:
            return Check(name="reference", status="fail", detail=f"{int(bad)} non-finite outputs")
        if expect_output and not ref_any:
            return Check(name="reference", status="fail",
                         detail="the reference is all zero although non-zero tokens route to "
                         "local experts: it was computed from changed inputs")  # fmt: skip
        return _within(diff_of(denom, dot), precision)

    return verdict


def _within(err: float, precision: str) -> Check:
    tol = TOLERANCE[precision]
    ok = err <= tol
    return Check(
        name="reference",
        status="pass" if ok else "fail",
        error=err,
        detail=f"calc_diff {err:.3e} {'<=' if ok else '>'} tolerance {tol:g} ({precision})",
    )


def check_nan_poison(y_TD: torch.Tensor, poisoned: str = "padding rows") -> Check:
    """The run started with NaN/0x7F poison in every buffer it writes (padding rows included);
    none may reach an output."""
    bad = nonfinite(y_TD)
    return Check(
        name="nan_poison",
        status="pass" if bad == 0 else "fail",
        detail=f"{poisoned} held NaN poison; outputs finite"
        if bad == 0
        else f"{bad} output elements are non-finite",
    )


def _is_poison(t: torch.Tensor) -> torch.Tensor:
    """Per-row bool: every element of the row still holds its poison."""
    if t.dtype == FP8:
        return (t.view(torch.uint8) == 0x7F).all(dim=1)
    if t.is_floating_point():
        return torch.isnan(t).all(dim=1)
    return (t == POISON_WORD).all(dim=1)


def _any_poison(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == FP8:
        return (t.view(torch.uint8) == 0x7F).any(dim=1)
    return torch.isnan(t).any(dim=1)


def check_sentinels(ws: Workspace, cap: Capture, *, masked_act: bool) -> list[Check]:
    """Live rows of the activation output overwritten; padding untouched by the masked kernel."""
    checks = []
    unwritten = int(_any_poison(ws.a_MF[cap.live_M]).sum())
    checks.append(
        Check(
            name="sentinel_live",
            status="pass" if unwritten == 0 else "fail",
            detail=f"{int(cap.live_M.sum())} live rows written"
            if unwritten == 0
            else f"{unwritten} live rows still hold poison",
        )
    )
    if not masked_act:
        checks.append(
            Check(
                name="sentinel_padding",
                status="skip",
                detail="dense activation writes every row by design",
            )
        )
        return checks
    pad = ~cap.live_M
    touched = int((~_is_poison(ws.a_MF[pad])).sum())
    if ws.a_sf_MG4 is not None:
        touched += int((~_is_poison(ws.a_sf_MG4[pad])).sum())
    checks.append(
        Check(
            name="sentinel_padding",
            status="pass" if touched == 0 else "fail",
            detail=f"{int(pad.sum())} padding rows keep their poison"
            if touched == 0
            else f"{touched} padding rows (data or scales) were written",
        )
    )
    return checks


def check_cross_arm(base: str, caps: dict[str, Capture]) -> dict[str, list[Check]]:
    """Every arm against the first: endpoints, live activation bytes, live scales, outputs."""
    ref = caps[base]
    out: dict[str, list[Check]] = {}
    for arm, cap in caps.items():
        if arm == base:
            continue
        rows = []
        pairs = [
            ("cross_arm_ends", cap.ends_E, ref.ends_E),
            ("cross_arm_act", cap.a_live, ref.a_live),
        ]
        if cap.a_sf_live is not None:
            pairs.append(("cross_arm_scales", cap.a_sf_live, ref.a_sf_live))
        pairs.append(("cross_arm_output", cap.y_TD, ref.y_TD))
        for name, a, b in pairs:
            if a.shape != b.shape:
                rows.append(
                    Check(
                        name=name,
                        status="fail",
                        detail=f"shape {tuple(a.shape)} vs {tuple(b.shape)} of {base}",
                    )
                )
                continue
            r = bitwise_compare(a, b)
            rows.append(
                Check(
                    name=name,
                    status="pass" if r.equal else "fail",
                    detail=f"vs {base}: {r.describe()}",
                )
            )
        out[arm] = rows
    return out


# --------------------------------------------------------------------------- decode family


@dataclass(frozen=True, kw_only=True)
class DecodeCapture:
    """What one eager decode run left: its output, copied."""

    y_TD: torch.Tensor


def capture_decode(ws: DecodeWorkspace) -> DecodeCapture:
    return DecodeCapture(y_TD=ws.y_TD.clone())


def check_decode_sentinels(ws: DecodeWorkspace) -> list[Check]:
    """Every row the step must write (local slots; every (expert, token) for the dense arm) was
    written, and (sparse) the rows of non-local slots still hold their NaN poison: their programs
    left before writing anything."""
    must = ws.written_rows()
    a_nan, o_nan = torch.isnan(ws.a.float()), torch.isnan(ws.o.float())
    unwritten = int((a_nan.any(dim=-1) | o_nan.any(dim=-1))[must].sum())
    checks = [Check(
        name="sentinel_live", status="pass" if unwritten == 0 else "fail",
        detail=f"{int(must.sum())} rows of a and o written" if unwritten == 0
        else f"{unwritten} rows that must be written still hold poison",
    )]  # fmt: skip
    if ws.layout == "ETD":
        checks.append(Check(name="sentinel_nonlocal", status="skip",
                            detail="dense computes every (expert, token) by design"))  # fmt: skip
        return checks
    touched = int((~(a_nan.all(dim=-1) & o_nan.all(dim=-1)))[~must].sum())
    checks.append(Check(
        name="sentinel_nonlocal", status="pass" if touched == 0 else "fail",
        detail=f"{int((~must).sum())} non-local slots keep their poison" if touched == 0
        else f"{touched} non-local slots were written",
    ))  # fmt: skip
    return checks


def check_cross_arm_close(
    base: str, caps: dict[str, DecodeCapture], precision: str
) -> dict[str, list[Check]]:
    """Every arm's output against the first arm's within the precision's tolerance (the decode
    arms accumulate in different orders, so bitwise equality is not expected)."""
    ref = caps[base].y_TD.float()
    out = {}
    for arm, cap in caps.items():
        if arm == base:
            continue
        err = calc_diff(cap.y_TD.float(), ref)
        ok = err <= TOLERANCE[precision]
        out[arm] = [Check(
            name="cross_arm_output", status="pass" if ok else "fail", error=err,
            detail=f"vs {base}: calc_diff {err:.3e} {'<=' if ok else '>'} "
            f"{TOLERANCE[precision]:g} (different accumulation order)",
        )]  # fmt: skip
    return out
