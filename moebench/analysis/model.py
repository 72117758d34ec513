"""The ``model`` regime's figures (issue 27): a whole model's measured TTFT and TPOT per arm, the
step's floor, the measured non-MoE time and the MoE share, goodput and the policy over batch
sizes (``analysis.model_goodput``), from the regime's rows and its manifest section.

Per (run, case, mode, arm), ``mode`` the decode step's (``graph``: one CUDA graph a step;
``eager``; never compared with each other):

- **TPOT**: every decode sample is one step of every sequence (blocks x steps of them): P50,
  P90, P99 with exact order-statistic intervals (``stats.quantile_interval``, uncorrected: they
  describe); a P99 interval needs 368 samples at 95%, and below that the figure stands alone with
  a note. Tokens per second: batch / mean TPOT.
- **TTFT**: the prefill samples (one a block), the median with its order-statistic interval.
- **Against the baseline** (an A/A copy: the arm it copies): TPOT paired by (block, step), TTFT
  by block, both arms having decoded the same tokens from the same context; the median of the
  paired ratios with ``stats.paired_change``'s exact interval at ``compare``'s corrected level
  (these cells count toward its correction), decided by ``stats.decide``.
- **Floor**: per decode sample, the bytes the step must read (the expert weights its routing
  touched, in the arm's format, from the row; the model's other parameters, the batch's rows of
  the embedding table, and the KV cache read and written, from the manifest) over the copy
  ceiling measured on the run's GPU (``core.ceilings.for_gpu`` of the manifest's ``gpu_name``),
  P50 over the samples; TPOT P50 over it. None on a CPU or on a GPU without a measured ceiling
  (another GPU's floor would give a ratio the run does not have).
- **Non-MoE time, measured**: the P50 TPOT of ``NO_EXPERTS`` (the experts backend that does no
  expert work) in the same case and mode; the MoE share of an arm is ``1 - non-MoE / TPOT`` at
  P50. ``NO_EXPERTS`` is a reference, never an arm compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moebench.analysis import stats
from moebench.analysis.goodput import clean_json
from moebench.analysis.step import Quantile, decide_paired
from moebench.core.ceilings import Ceilings, for_environment
from moebench.core.vocabulary import MODEL_DECODE, MODEL_PREFILL, NO_EXPERTS, Regime, aa_twin

QUANTILES = (0.5, 0.9, 0.99)
BATCH_KEY = "model_run.batch"
_NAN = math.nan


def split(samples: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(every other regime's samples, the model regime's): the model regime has cells of its own."""
    if samples.num_rows == 0:
        return samples, samples.slice(0, 0)
    is_model = pc.equal(samples["regime"], Regime.MODEL)
    return samples.filter(pc.invert(is_model)), samples.filter(is_model)


@dataclass(kw_only=True)
class Cell:
    """One (run, case, mode, arm): decode samples by (block, step), prefill samples by block."""

    device: str
    params: str
    decode: dict[tuple[int, int], float] = field(default_factory=dict)
    floor: dict[tuple[int, int], float] = field(default_factory=dict)  # us on the run's GPU
    ceiling: str = ""  # what the floor divides by ("H200 copy 4.27 TB/s"); "": no floor
    prefill: dict[int, float] = field(default_factory=dict)
    prefill_mode: str = "eager"  # its prefill samples' mode (graph: one CUDA graph)


def _case_setup(runs, run_id: str, case_id: str) -> dict:
    run = next((r for r in runs if r.run_id == run_id), None)
    section = run.manifest.get("model") if run is not None else None
    cases = section.get("cases") if isinstance(section, dict) else None
    got = cases.get(case_id) if isinstance(cases, dict) else None
    return got if isinstance(got, dict) else {}


def run_ceilings(runs, run_id: str) -> Ceilings | None:
    """The measured ceilings of the GPU run ``run_id`` ran on (its manifest's ``gpu_name``);
    None on a CPU, where the manifest names no GPU, or where moebench has none for it."""
    run = next((r for r in runs if r.run_id == run_id), None)
    return for_environment(run.manifest.get("environment")) if run is not None else None


def floor_bytes(setup: dict, weight_bytes: float, step: int) -> float:
    """The bytes decode step ``step`` must read and write (module docstring); NaN unknown."""
    try:
        B, C = int(setup["batch"]), int(setup["context"])
        kv = sum(
            B * (min(int(k["slots"]), C + step + 1) if k.get("slots") else C + step + 1)
            * int(k["bytes_per_token"]) + B * int(k["bytes_per_token"])
            for k in setup["kv"]
        )  # fmt: skip
        rest = int(setup["step_bytes"]) + B * int(setup["row_bytes"])
    except (KeyError, TypeError, ValueError):
        return _NAN
    return (weight_bytes if weight_bytes >= 0 else _NAN) + rest + kv


def cells(samples: pa.Table, runs, warnings: list[str]) -> dict[tuple, Cell]:
    """The model regime's samples by (run, case, mode, arm)."""
    out: dict[tuple, Cell] = {}
    if samples.num_rows == 0:
        return out
    cols = ("run_id", "case_id", "arm", "stage", "mode", "block", "step", "time_us",
            "weight_bytes", "device", "params")  # fmt: skip
    data = {c: samples[c].to_pylist() for c in cols}
    modes: dict[tuple, str] = {}
    for i in range(samples.num_rows):  # each arm's decode mode keys its prefill too
        if data["stage"][i] == MODEL_DECODE:
            modes[(data["run_id"][i], data["case_id"][i], data["arm"][i])] = data["mode"][i]
    setups: dict[tuple, dict] = {}
    ceilings: dict[str, Ceilings | None] = {}
    bad = 0
    for i in range(samples.num_rows):
        run_id, case_id, arm = data["run_id"][i], data["case_id"][i], data["arm"][i]
        t = data["time_us"][i]
        if not (isinstance(t, float) and math.isfinite(t) and t > 0):
            bad += 1
            continue
        mode = modes.get((run_id, case_id, arm), data["mode"][i])
        key = (run_id, case_id, mode, arm)
        cell = out.get(key)
        if cell is None:
            cell = out[key] = Cell(device=data["device"][i], params=data["params"][i])
        if data["stage"][i] == MODEL_PREFILL:
            cell.prefill[data["block"][i]] = t
            cell.prefill_mode = data["mode"][i]
            continue
        where = (data["block"][i], data["step"][i])
        cell.decode[where] = t
        setup = setups.setdefault((run_id, case_id), _case_setup(runs, run_id, case_id))
        if run_id not in ceilings:
            ceilings[run_id] = run_ceilings(runs, run_id)
        ceil = ceilings[run_id] if cell.device == "cuda" else None
        if ceil is not None:
            cell.floor[where] = ceil.floor_us(floor_bytes(setup, data["weight_bytes"][i], where[1]))
            cell.ceiling = f"{ceil.name} copy {ceil.copy_tbs:g} TB/s"
    if bad:
        warnings.append(f"model regime: {bad} samples with a non-finite or non-positive time "
                        "ignored")  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True, kw_only=True)
class ModelRow:
    """One (run, case, mode, arm) of the model regime; NO_EXPERTS's row is the non-MoE time."""

    run_id: str
    case_id: str
    mode: str
    arm: str
    baseline: str
    status: str  # ok | unchecked | mismatch | reference (NO_EXPERTS)
    batch: int
    context: int
    prompt: int
    label: str  # the model as built (layers kept said)
    n_blocks: int
    n_steps: int  # decode samples
    tpot_p50: Quantile | None
    tpot_p90: Quantile | None
    tpot_p99: Quantile | None
    tpot_mean_us: float
    tokens_per_s: float
    ttft: Quantile | None
    ttft_mode: str  # the prefill's mode: graph (one CUDA graph) or eager (host launches in it)
    floor_us: float  # P50 over the decode samples; NaN: no measured ceiling for the run's GPU
    floor_ceiling: str  # what it divides by ("H200 copy 4.27 TB/s"); "": none
    tpot_over_floor: float
    non_moe_us: float  # NO_EXPERTS's P50 TPOT in the same case and mode
    moe_us: float  # TPOT P50 - non-MoE
    moe_share: float
    change: dict  # TPOT against the baseline
    ttft_change: dict
    reason: str = ""
    decode_us: tuple[float, ...] = field(default=(), repr=False)
    params: str = field(default="", repr=False)

    @property
    def is_aa(self) -> bool:
        return aa_twin(self.arm) is not None

    def as_dict(self) -> dict[str, Any]:
        def q(x: Quantile | None) -> dict | None:
            if x is None:
                return None
            ci = None if math.isnan(x.low_us) else [x.low_us, x.high_us]
            return clean_json({"us": x.us, "ci": ci, "coverage": x.coverage, "note": x.note})

        def change(c: dict) -> dict:
            ci = (
                None
                if math.isnan(c.get("ci_low_pct", _NAN))
                else [c["ci_low_pct"], c["ci_high_pct"]]
            )
            return clean_json({"pct": c.get("change_pct", _NAN), "ci": ci,
                               "decision": c.get("decision", ""), "reason": c.get("reason", ""),
                               "n_paired": c.get("n_paired", 0)})  # fmt: skip

        return clean_json({
            "run_id": self.run_id, "case_id": self.case_id, "mode": self.mode, "arm": self.arm,
            "baseline": self.baseline, "status": self.status, "reason": self.reason,
            "batch": self.batch, "context": self.context, "prompt": self.prompt,
            "model": self.label, "n_blocks": self.n_blocks, "n_steps": self.n_steps,
            "tpot": {"p50": q(self.tpot_p50), "p90": q(self.tpot_p90), "p99": q(self.tpot_p99),
                     "mean_us": self.tpot_mean_us},
            "tokens_per_s": self.tokens_per_s, "ttft": q(self.ttft), "ttft_mode": self.ttft_mode,
            "floor": {"us": self.floor_us, "ceiling": self.floor_ceiling or None,
                      "tpot_over_floor": self.tpot_over_floor},
            "non_moe": {"us": self.non_moe_us, "measured_by": NO_EXPERTS, "moe_us": self.moe_us,
                        "moe_share": self.moe_share},
            "change": change(self.change), "ttft_change": change(self.ttft_change),
        })  # fmt: skip


def p50_of(values) -> float:
    """The P50 every figure of the regime uses (an order statistic, as the intervals are)."""
    return float(np.quantile(np.asarray(values, dtype=float), 0.5, method="inverted_cdf"))


def _quantile(values: np.ndarray, q: float, alpha: float, unit: str) -> Quantile | None:
    if len(values) == 0:
        return None
    point = float(np.quantile(values, q, method="inverted_cdf"))
    ci = stats.quantile_interval(values, q, alpha)
    if ci is None:
        need = stats.quantile_needed(q, alpha)
        note = (f"P{q * 100:g} of n={len(values)} {unit}: no {(1 - alpha) * 100:g}% interval "
                f"below {need}")  # fmt: skip
        return Quantile(q=q, us=point, low_us=_NAN, high_us=_NAN, coverage=_NAN, note=note)
    return Quantile(q=q, us=point, low_us=ci[0], high_us=ci[1], coverage=ci[2], note="")


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """The model regime before the correction is known: cells, and pairs awaiting intervals."""

    cells: dict[tuple, Cell]
    runs: tuple
    status: dict
    baseline: str

    def pairs(self) -> dict[tuple, tuple[np.ndarray, np.ndarray] | dict]:
        """Per (cell key, "decode" | "prefill"): the paired values against the reference, or
        the change fields that say why there are none."""
        out: dict[tuple, Any] = {}
        for key, cell in self.cells.items():
            run_id, case_id, mode, arm = key
            ref = aa_twin(arm) or self.baseline
            if arm in (ref, NO_EXPERTS) or self._status(run_id, case_id, arm)[0] == "mismatch":
                continue
            base = self.cells.get((run_id, case_id, mode, ref))
            ref_status = self._status(run_id, case_id, ref)
            for stage, mine in ((MODEL_DECODE, cell.decode), (MODEL_PREFILL, cell.prefill)):
                if not mine:
                    continue
                if ref_status[0] == "mismatch":
                    out[(key, stage)] = {"reason": f"baseline {ref!r} failed its checks"}
                    continue
                theirs = None if base is None else (
                    base.decode if stage == MODEL_DECODE else base.prefill)  # fmt: skip
                if not theirs:
                    other = [k[2] for k in self.cells if k[:2] == key[:2] and k[3] == ref]
                    why = (f"{ref!r} ran {other[0]}, this arm {mode}: not compared" if other
                           else f"no baseline {ref!r} samples")  # fmt: skip
                    out[(key, stage)] = {"reason": why}
                    continue
                both = sorted(mine.keys() & theirs.keys())
                if len(both) < 2:
                    out[(key, stage)] = {"decision": "AMBIGUOUS", "n_paired": len(both),
                                         "reason": f"{len(both)} paired sample(s)"}  # fmt: skip
                    continue
                out[(key, stage)] = (np.array([mine[k] for k in both]),
                                     np.array([theirs[k] for k in both]))  # fmt: skip
        return out

    def _status(self, run_id: str, case_id: str, arm: str) -> tuple[str, str]:
        return self.status.get((run_id, case_id, arm), ("unchecked", "no correctness checks"))

    @property
    def comparisons(self) -> int:
        return sum(not isinstance(v, dict) for v in self.pairs().values())


def prepare(samples: pa.Table, runs, status: dict, baseline: str, warnings: list[str]) -> Prepared:
    return Prepared(cells=cells(samples, runs, warnings), runs=tuple(runs), status=status,
                    baseline=baseline)  # fmt: skip


def rows(p: Prepared, alpha: float, threshold: float, confidence: float) -> list[ModelRow]:
    """Every (run, case, mode, arm) with its changes at the corrected ``alpha``."""
    pairs = p.pairs()
    level = 1 - confidence
    out = []
    for key in sorted(p.cells):
        run_id, case_id, mode, arm = key
        cell, setup = p.cells[key], _case_setup(p.runs, run_id, case_id)
        ref = aa_twin(arm) or p.baseline
        st, why = ("reference", "") if arm == NO_EXPERTS else p._status(run_id, case_id, arm)
        changes = []
        for stage in (MODEL_DECODE, MODEL_PREFILL):
            pair = pairs.get((key, stage))
            if arm == ref:
                changes.append({"decision": "baseline"})
            elif pair is None or isinstance(pair, dict):
                changes.append(pair or {})
            else:
                changes.append(decide_paired(*pair, alpha, threshold, "samples"))
        decode = np.array(list(cell.decode.values()))
        none = p.cells.get((run_id, case_id, mode, NO_EXPERTS))
        non_moe = p50_of(list(none.decode.values())) if none and none.decode else _NAN
        batch = int(setup.get("batch", 0)) or None
        p50 = _quantile(decode, 0.5, level, "steps")
        floors = np.array([v for v in cell.floor.values() if not math.isnan(v)])
        floor = float(np.median(floors)) if len(floors) else _NAN
        mean = float(np.mean(decode)) if len(decode) else _NAN
        if st == "mismatch":
            changes = [{}, {}]
        out.append(ModelRow(
            run_id=run_id, case_id=case_id, mode=mode, arm=arm, baseline=ref, status=st,
            reason=why, batch=batch or 0, context=int(setup.get("context", -1)),
            prompt=int(setup.get("prompt", -1)), label=_label(setup),
            n_blocks=len({b for b, _ in cell.decode} | set(cell.prefill)), n_steps=len(decode),
            tpot_p50=p50 if st != "mismatch" else None,
            tpot_p90=_quantile(decode, 0.9, level, "steps") if st != "mismatch" else None,
            tpot_p99=_quantile(decode, 0.99, level, "steps") if st != "mismatch" else None,
            tpot_mean_us=mean, tokens_per_s=batch * 1e6 / mean if batch and mean else _NAN,
            ttft=_quantile(np.array(list(cell.prefill.values())), 0.5, level, "blocks"),
            ttft_mode=cell.prefill_mode,
            floor_us=floor, floor_ceiling=cell.ceiling,
            tpot_over_floor=p50.us / floor if p50 and floor > 0 else _NAN,
            non_moe_us=non_moe, moe_us=p50.us - non_moe if p50 and arm != NO_EXPERTS else _NAN,
            moe_share=1 - non_moe / p50.us if p50 and p50.us > 0 and arm != NO_EXPERTS else _NAN,
            change=changes[0], ttft_change=changes[1], decode_us=tuple(decode.tolist()),
            params=cell.params,
        ))  # fmt: skip
    return out


def _label(setup: dict) -> str:
    """The model as built: its label and the layers kept, "gpt-oss-20b (4 of 24 layers)"."""
    if not setup:
        return ""
    kept, of = setup.get("layers"), setup.get("model_layers")
    return f"{setup.get('label', '')} ({kept} of {of} layers)"


def without_verdicts(rows_: list[ModelRow], reason: str) -> list[ModelRow]:
    """Decisions and their intervals blanked (CPU timings decide nothing); figures kept."""

    def blank(c: dict) -> dict:
        return c if c.get("decision") == "baseline" or not c else {"reason": reason}

    return [replace(r, change=blank(r.change), ttft_change=blank(r.ttft_change)) for r in rows_]
