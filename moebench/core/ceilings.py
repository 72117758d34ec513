"""The measured ceilings of the GPUs moebench draws floors against, one record a GPU model as the
driver names it (docs/PERF.md, "Measured ceilings of the H200" and "of the H100 80GB HBM3";
`tools/measure_ceilings.py` measures another the same way).

A floor is the least time some work can take on that GPU: its bytes at the device-copy ceiling
(bytes read plus bytes written, as a copy kernel counts them) or its FLOPs at the dense matrix
rate of its precision, whichever is larger. The work ledger, the work model, the reports and the
benchmarks in tools/ all read the figures from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Ceilings:
    name: str
    copy_tbs: float  # device copy, TB/s of bytes read + written (a copy kernel)
    tflops: dict[str, float] = field(default_factory=dict)  # dense 8192-cube products
    l2_bytes: int = 0  # what a warm replay may find in L2 instead of device memory
    measured: str = ""  # when and how

    @property
    def copy_gbps(self) -> float:
        return self.copy_tbs * 1000.0

    def floor_us(self, bytes_moved: float, flops: float = 0.0, precision: str = "bf16") -> float:
        """The least microseconds of ``bytes_moved`` device bytes and ``flops`` at ``precision``
        (fp8 at the fp8 rate, anything else at the bf16 rate)."""
        rate = self.tflops["fp8" if precision == "fp8" else "bf16"]
        return max(bytes_moved / (self.copy_tbs * 1e6), flops / (rate * 1e6))


H200 = Ceilings(
    name="H200",
    copy_tbs=4.27,
    tflops={"fp8": 1286.0, "bf16": 687.0},
    l2_bytes=60 * 2**20,
    measured="2026-11-29, torch 2.11 + cu130: torch copy of large tensors, and 8192-cube "
    "torch._scaled_mm (fp8) and torch.mm (bf16)",
)

# The H100 SXM5 (the driver's "NVIDIA H100 80GB HBM3"): its own model, not the PCIe or NVL
# cards, whose memory differs (2.0 and 3.9 TB/s by their datasheets against this one's 3.35).
# docs/perf/2026-12-07-h100-ceilings/call1/ceilings.json: five copies' medians 2.966-2.974.
H100_SXM = Ceilings(
    name="H100 80GB HBM3",
    copy_tbs=2.97,
    tflops={"fp8": 1366.0, "bf16": 762.0},
    l2_bytes=50 * 2**20,
    measured="2026-12-07, torch 2.11 + cu130, driver 580.159.04: tools/measure_ceilings.py "
    "(torch copy of 2 x 1 GiB, 8192-cube torch._scaled_mm (fp8) and torch.mm (bf16))",
)

# Matched as a substring of the driver's name, the longest key first, so a model's own record
# wins over a family's bound below.
GPUS = {"H200": H200, "H100 80GB HBM3": H100_SXM}

# GPUs with no ceilings measured here whose device copy and L2 are below a measured GPU's (by
# their datasheets: every H100, SXM, PCIe or NVL, has less memory bandwidth and 50 MB of L2
# against the H200's 4.8 TB/s and 60 MiB). That GPU's ceilings bound theirs from above: enough
# for a check that refuses a time faster than any such GPU allows (`bound_for_gpu`), never for a
# floor or a fraction reported as theirs. The SXM card has its own (H100_SXM), found first.
BOUNDED_BY = {"H100": H200}


def for_gpu(name: str) -> Ceilings | None:
    """The ceilings measured on the GPU that ``name`` (as the driver reports it) names, None
    when moebench has none for it (no floor is then drawn)."""
    return next((GPUS[k] for k in sorted(GPUS, key=len, reverse=True) if k in name), None)


def for_environment(env: object) -> Ceilings | None:
    """`for_gpu` of a run manifest's ``environment`` (its ``gpu_name``); None where it names no
    GPU (a CPU run, or a manifest older than the field)."""
    name = env.get("gpu_name") if isinstance(env, dict) else None
    return for_gpu(name) if isinstance(name, str) and name else None


def bound_for_gpu(name: str) -> Ceilings | None:
    """Ceilings at least as high as those of the GPU ``name`` names: its own measured ones, or
    those of a measured GPU that bounds it from above (BOUNDED_BY); None for any other GPU (a
    faster one than any measured could pass a bound drawn from them)."""
    own = for_gpu(name)
    return own or next((c for key, c in BOUNDED_BY.items() if key in name), None)
