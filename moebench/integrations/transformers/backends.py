"""The experts backends the installed transformers offers: their names, where each is defined,
whether it can run on this machine, and how it takes the slots of experts that are not local.

Legend: T tokens, K top-k, E local experts, D hidden, F intermediate.

The names are ``"eager"`` (each experts class's own forward) and every key of
``transformers.integrations.moe.ALL_EXPERTS_FUNCTIONS``: transformers' own (``batched_mm``,
``grouped_mm``, and the Hub kernels ``deepgemm`` and ``sonicmoe``) and any another package has
registered in this process.

Non-local slots. moebench hands an arm global expert ids, the rank's experts being
[offset, offset + E). transformers' expert parallelism hands an experts module local ids, with
id E (one past the last local expert) and weight 0 for a slot whose expert is on another rank:
the sentinel. 5.17 (RouterParallel) and 5.24 (the EP implementations, which also set
``_is_expert_parallel`` on the module; 5.24's batched_mm and grouped_mm mask the sentinel only
then, 5.17's always) both use it, and ``hf:`` arms set the flag. Not every forward takes it: the
eager forward of every family in 5.17, and of gpt-oss in 5.24, one-hot encodes the ids over E
classes and fails on id E (on a GPU, a device-side assert). So each (backend, family) is probed
once, on the CPU with a tiny module: its output with sentinel slots against its output with
those slots moved to local expert 0 at weight 0, a form every forward computes exactly (0 times
a finite expert output is 0, and adding 0 changes no sum). ``SENTINEL`` where the two agree,
``CLAMP`` (the second form: the backend computes those slots on expert 0 and drops them, work
its time then includes) where the sentinel raises or disagrees. A backend that cannot run on a
CPU cannot be probed; on a GPU it gets the sentinel, the contract transformers' EP holds every
backend to (deepgemm and sonicmoe take it in both versions), and the reference gate judges the
result as it judges every arm.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass

import torch

from moebench.core.errors import clip
from moebench.core.numerics import TOLERANCE, calc_diff
from moebench.integrations.transformers import families

EAGER = "eager"
GROUPED_MM = "grouped_mm"
SENTINEL = "sentinel"
CLAMP = "clamp"
# The probe's module: widths that moebench's own arms take too (the moebench:<arm> round trip).
PROBE_WIDTH, PROBE_EXPERTS = 128, 4


def installed() -> bool:
    try:
        return importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):
        return False


def names() -> tuple[str, ...]:
    """Every experts backend of the installed transformers, ``eager`` first."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    return (EAGER, *(n for n in ALL_EXPERTS_FUNCTIONS if n != EAGER))


def function(name: str):
    """The forward a backend name dispatches to (None for ``eager``: the class's own)."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    return None if name == EAGER else ALL_EXPERTS_FUNCTIONS[name]


def origin(name: str) -> str:
    """Where the backend's forward is defined, and the distribution that ships it."""
    version = families.transformers_version()
    fn = function(name)
    if fn is None:
        return f"each experts class's own forward (transformers {version})"
    module = getattr(fn, "__module__", None) or type(fn).__module__
    where = f"{module}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    top = module.split(".")[0]
    if top == "transformers":
        return f"{where} (transformers {version})"
    dists = importlib.metadata.packages_distributions().get(top, [])
    shipped = ", ".join(f"{d} {importlib.metadata.version(d)}" for d in dists) or "no distribution"
    return f"{where} ({shipped}; registered in transformers {version})"


# What transformers' own grouped_mm forward must launch on a CUDA device, for the dispatch gate
# (moebench.gates.dispatch: shell patterns, since torch's kernels carry template arguments in
# their names): torch's grouped GEMM (torch.nn.functional.grouped_mm or torch._grouped_mm), its
# device-side setup kernel and the CUTLASS grouped-problem GEMM, seen under the profiler on the
# H200 (torch 2.11, CUDA 13.0, transformers 5.17) at every shape tried, prefill and decode, 1 to
# 512 tokens. Its fallback (a loop of plain matrix products, taken where torch's grouped GEMM
# cannot run) launches neither, and the gate fails it. batched_mm (torch.bmm) and eager (a
# loop of F.linear) launch whichever cuBLAS kernel cuBLAS's heuristics pick for the shape (on the
# H200 nvjet_sm90_tst_<tile>_<layout>, the tile by shape): nothing a declaration could name across
# shapes and CUDA versions, so they declare none and the gate skips them, as it does the Hub
# kernels and another package's backends, whose kernels moebench does not know.
TORCH_GROUPED_GEMM = ("*prepare_grouped_gemm_data*", "*cutlass*GroupProblemShape*")


def launches(name: str) -> tuple[str, ...]:
    """The kernels backend ``name`` must launch on a CUDA device (empty: not known)."""
    from transformers.integrations import moe

    if name == GROUPED_MM and function(name) is moe.grouped_mm_experts_forward:
        return TORCH_GROUPED_GEMM
    return ()


@dataclass(frozen=True, kw_only=True)
class Probe:
    error: str | None  # why the backend cannot run on the CPU (None: it ran)
    mode: str  # SENTINEL | CLAMP


@functools.cache
def probe(name: str, family: str) -> Probe:
    """Run backend ``name`` on a tiny ``family`` module on the CPU (module docstring)."""
    fam = families.FAMILIES[family]
    D = F = PROBE_WIDTH
    E, T = PROBE_EXPERTS, 4
    g = torch.Generator().manual_seed(0)

    def randn(*shape, scale: float) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)

    module = families.build(fam, hidden=D, intermediate=F, experts=E, backend=name)
    biases = {}
    if fam.layout == families.GPT_OSS:
        biases = {"b13_E2F": randn(E, 2 * F, scale=0.5), "b2_ED": randn(E, D, scale=0.5)}
    w13, w2 = randn(E, 2 * F, D, scale=D**-0.5), randn(E, D, F, scale=F**-0.5)
    families.load(module, fam, w13=w13, w2_EDF=w2, interleaved=bool(biases), **biases)
    module._is_expert_parallel = True
    x_TD = randn(T, D, scale=1.0)
    ids_TK = torch.tensor([[0, E], [1, 2], [E, 3], [2, E]])
    w_TK = torch.rand(T, 2, generator=g).to(torch.bfloat16).masked_fill(ids_TK == E, 0)
    try:
        with torch.no_grad():
            clamped = module(x_TD, ids_TK.masked_fill(ids_TK == E, 0), w_TK)
    except Exception as exc:  # the backend's own reason (CUDA only, a missing package, ...)
        return Probe(error=_first_line(exc), mode=SENTINEL)
    try:
        with torch.no_grad():
            sentinel = module(x_TD, ids_TK, w_TK)
        agree = calc_diff(sentinel.float(), clamped.float()) <= TOLERANCE["bf16"]
    except Exception:
        agree = False
    return Probe(error=None, mode=SENTINEL if agree else CLAMP)


def non_local_mode(name: str, family: str) -> str:
    """How backend ``name`` gets non-local slots on a ``family`` module (module docstring)."""
    return probe(name, family).mode


def unavailable(name: str, family: str) -> str | None:
    """Why backend ``name`` cannot run on this machine, or None. Without CUDA: the CPU probe's
    error. With CUDA: the backend's own loadability gate where transformers defines one next to
    it (``is_deepgemm_loadable``, ``is_sonicmoe_loadable``: the ``kernels`` package, the GPU's
    architecture, the toolkit); anything else shows as the arm's error row before timing."""
    if not torch.cuda.is_available():
        error = probe(name, family).error
        return None if error is None else f"(no CUDA device) {error}"
    fn = function(name)
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    for attr in sorted(dir(module)) if module is not None else ():
        if attr.startswith("is_") and attr.endswith("_loadable"):
            try:
                getattr(module, attr)(raise_error=True)
            except TypeError:
                continue  # another signature: not a gate this module knows how to call
            except Exception as exc:
                return _first_line(exc)
    return None


def _first_line(exc: BaseException) -> str:
    text = clip(str(exc).strip().splitlines()[0] if str(exc).strip() else "", 200)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
