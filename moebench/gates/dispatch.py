"""Dispatch gate (docs/DESIGN.md 5, gate 6): the kernels that ran are those the arm declares.

Every arm, built-in or a user's, declares on its ``Arm`` value (``moebench.arm.base``)
``launches`` ({precision: kernel function names its stages launch}) and ``forbidden`` (names they
must never launch); ``declared`` reads them, and with ``gemm: torch`` forbids moebench's own
grouped-GEMM kernels instead of expecting them. Under ``torch.profiler`` with CUDA activity the
arm's stages run once; every declared name must appear among the device kernels and no forbidden
one may. An arm that declares no launches for the precision gets a ``skip`` row. The masked arm
thereby proves it launched the masked activation and not the dense one, the stock arm that it
launched no masked kernel, and the fp8 prefix-sum arms that their GEMMs are the persistent
live-tile kernel.

An expected entry may name alternatives, ``"a|b"``: a stage whose launch is chosen per case (the
masked activation's grid or persistent schedule) must launch one of them. A name may be a shell
pattern (``*prepare_grouped_gemm_data*``): torch's CUTLASS kernels carry their template arguments
in the name, so an arm that runs them (transformers' ``grouped_mm``) declares what every
instantiation's name holds.

Limits, stated in each row: a kernel name carries no constexpr values, so ``PSUM`` of
``_grouped_gemm_fp8``/``_grouped_gemm_bf16`` cannot be seen; and a launcher that returns early on
an empty buffer launches nothing, which the gate reports as a missing kernel.

On the CPU the Triton interpreter runs kernels as Python and launches no device kernels: one
``skip`` row says so.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import sys
from collections.abc import Iterable

import torch

from moebench.arm.base import Arm, run_all
from moebench.results.rows import Check

GEMM_KERNELS = ("_grouped_gemm_fp8", "_grouped_gemm_fp8_live", "_grouped_gemm_bf16")


def declared(
    arm: Arm, precision: str, gemm: str = "triton"
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(expected, forbidden) kernel function names of ``arm`` at ``precision``. With ``gemm:
    torch`` the GEMMs are torch._grouped_mm (cuBLAS/CUTLASS names, not ours): none of moebench's
    grouped-GEMM kernels may run, and the rest of the declaration stands."""
    launches = tuple(arm.launches.get(precision, ()))
    forbidden = tuple(arm.forbidden)
    if gemm == "torch":
        launches = tuple(k for k in launches if k not in GEMM_KERNELS)
        forbidden = tuple(dict.fromkeys((*forbidden, *GEMM_KERNELS)))
    return launches, forbidden


def base_name(kernel: str) -> str:
    """The Triton function name of a profiled kernel name: Triton 3 names the entry after the
    function; older versions appended a signature such as ``_0d1d2d``, removed here."""
    return re.sub(r"_\d+d[\dcde]*$", "", kernel.strip())


def judge(expected: Iterable[str], forbidden: Iterable[str], ran: Iterable[str]) -> Check:
    """The ``dispatch`` row for the set of kernel names that ran."""
    names = {base_name(k) for k in ran}

    # An entry "a|b" is satisfied by either kernel: a stage whose launch is chosen per case from
    # the routing (the masked activation's schedule) declares its alternatives; each is a name or
    # a shell pattern (without * ? [ a pattern matches its name only).
    def launched(entry: str) -> bool:
        return any(fnmatch.fnmatchcase(n, alt) for alt in entry.split("|") for n in names)

    missing = [k for k in expected if not launched(k)]
    bad = [k for k in forbidden if launched(k)]
    if missing or bad:
        parts = []
        if missing:
            parts.append(f"declared but not launched: {', '.join(missing)}")
        if bad:
            parts.append(f"forbidden but launched: {', '.join(bad)}")
        return Check(name="dispatch", status="fail", detail="; ".join(parts))
    return Check(
        name="dispatch", status="pass",
        detail=f"launched {', '.join(expected)}; none of {', '.join(forbidden) or '-'} "
        "(constexpr switches such as PSUM are not visible in kernel names)",
    )  # fmt: skip


def dispatch(arm: Arm, stages, precision: str, device: torch.device, gemm: str = "triton") -> Check:
    """Run ``stages`` once under the profiler and judge the kernel names. The row's detail also
    names the Triton JIT functions that launched with their ``cache_key`` (the hash Triton
    compiles under: source and dependencies), so the provenance shows the kernels that ran."""

    expected, forbidden = declared(arm, precision, gemm)
    if not expected:
        return Check(name="dispatch", status="skip",
                     detail=f"arm declares no launches for precision {precision}")  # fmt: skip
    if device.type != "cuda":
        return Check(name="dispatch", status="skip",
                     detail="CPU run: the Triton interpreter launches no device kernels "
                     "(the gate runs on the GPU)")  # fmt: skip
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_all(stages)
        torch.cuda.synchronize()
    ran = {
        e.name for e in prof.events()
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
    }  # fmt: skip
    verdict = judge(expected, forbidden, ran)
    keys = jit_cache_keys({base_name(k) for k in ran})
    if keys:
        listed = ", ".join(f"{name} {key[:16]}" for name, key in sorted(keys.items()))
        verdict = dataclasses.replace(verdict, detail=f"{verdict.detail}; JIT cache keys: {listed}")
    return verdict


def jit_cache_keys(names: set[str]) -> dict[str, str]:
    """{kernel name: Triton cache_key} of the JIT functions named ``names`` among the modules
    loaded now (a kernel that is not a Triton function, e.g. cuBLAS, has none)."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # triton is a dependency; without it there is nothing to report
        return {}
    out = {}
    for mod in list(sys.modules.values()):
        for name in names - set(out):
            fn = getattr(mod, name, None)
            if isinstance(fn, JITFunction):
                try:
                    out[name] = str(fn.cache_key)
                except Exception:  # a key that cannot be computed here is not reported
                    continue
    return out
