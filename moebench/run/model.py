"""The ``model`` regime: a whole transformers model of a preset, each arm as its experts backend,
its prefill (TTFT) and decode steps (TPOT) timed (issue 27; docs/DESIGN.md section 14).

A case is one unit of the case sequence (``run.case``), on the simulated topology (one device):

1. Inputs. The model at the preset's real shapes with random weights
   (``integrations.transformers.model``: built on the meta device, materialised once on this
   one), its decode cache filled with ``context`` tokens a sequence (``ModelRunner.fill_context``),
   the reference's (transformers' ``eager`` experts) logits of the prompt and of the first
   ``check_steps`` decode steps; with ``model_run.routing: trace`` every layer's routing of every
   step drawn from the layer's recorded load (``routing.step_draws``), the same for every arm.
2. Gates, before anything is timed, per arm and for the no-work backend (``NO_EXPERTS``): its
   decode step captured as one CUDA graph (on the GPU, where the arm allows it; otherwise run
   eagerly, ``mode: eager``, and said so in a ``capture`` row); then its prefill and
   ``check_steps`` decode steps run eagerly with every experts call recorded, and each layer's
   output held to transformers' eager experts on that call's own inputs within the precision's
   tolerance (``model_experts``: where an arm's numerics are judged); the captured steps' logits
   held to the eager steps' of the same arm (``model_graph``: the timed call computes what was
   checked); and the logits of the prompt and of the steps through the very call that will be timed
   held to the reference's (``model_prefill``, ``model_decode``). Over a whole model two correct
   implementations' logits drift apart (bf16 rounding, amplified layer after layer: on the H200
   transformers' own grouped_mm was 3e-4 to 8e-4 from eager in Qwen3-30B-A3B's 24 layers, up to
   0.125 in gpt-oss-20b's, where the no-work backend is 0.22 to 0.59 away), so the logits'
   tolerance is the larger of the precision's and half the no-work backend's distance from the
   reference (``LOGITS_SHARE``): the logits say the model as a whole is right, the layers say the
   arm's arithmetic is. When the no-work backend is not that far from the reference, no logits can
   show that an arm computed its experts (``power`` fails), and every arm fails.
3. Timing (``measure.sampling``): each block, in the Williams order, every arm and the no-work
   backend once: the prefill (a sample of stage ``prefill``: one CUDA graph where the decode
   step is one and ``model_run.prefill_graph`` holds, else eager), then ``decode_steps`` decode
   steps from the same context, each a sample of stage ``decode`` (``step`` its index).
4. After timing: every timed arm on fresh inputs (other prompt and decode tokens written into the
   same tensors), held as in 2 (``fresh_experts``, ``fresh_graph``, ``fresh_prefill``,
   ``fresh_decode``).

The model's expert weights are fingerprinted after each arm's gates and each of its turns in a
block: an arm that wrote them (a bf16 prefill arm reads the model's own tensors) fails
``weights_unchanged``, leaves the rotation, and the layers it changed are written again from
their seeds before another arm runs (docs/DESIGN.md section 15).

A sample's ``weight_bytes`` are the expert weights the call read (the experts its routing touched
in every MoE layer, in the arm's own weight format); the rest of a step's floor (the other
parameters, the KV cache) is in the manifest's ``model`` section, per case.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from moebench.arm.registry import HF_PREFIX
from moebench.core import faults
from moebench.core.families import facts
from moebench.core.numerics import TOLERANCE, calc_diff, nonfinite
from moebench.core.vocabulary import MODEL_DECODE, MODEL_PREFILL, NO_EXPERTS, Regime
from moebench.integrations.transformers import model as hf_model
from moebench.integrations.transformers.families import GPT_OSS
from moebench.integrations.transformers.serving import ModelRunner
from moebench.measure.sampling import Blocks, Probe, sample_blocks
from moebench.plan.cases import columns, run_arms
from moebench.results.rows import CaseRows, Check
from moebench.routing.step_draws import StepRouting, trace_layer_map
from moebench.routing.synthetic import rank_statistics
from moebench.run.case import CaseContext
from moebench.run.model_plan import PlannedModel
from moebench.spec.schema import Scenario

POWER = 10.0  # the no-work backend must differ from the reference by this many tolerances
# The logits' tolerance as a share of the no-work backend's distance from the reference: a random
# gpt-oss-20b of 24 layers amplifies bf16 rounding until correct arms' logits (each layer within
# 2e-5 of eager on its own inputs) are up to 0.21 of that distance from the reference (H200,
# transformers' own grouped_mm included); the logits say that the experts ran in every layer,
# the layers judge the arithmetic.
LOGITS_SHARE = 0.5
# The gates' names (each layer's experts, the captured step, the prompt's and the steps' logits),
# before timing and after it on fresh tokens.
MODEL_GATES = ("model_experts", "model_graph", "model_prefill", "model_decode")
FRESH_GATES = ("fresh_experts", "fresh_graph", "fresh_prefill", "fresh_decode")


@dataclass(frozen=True)
class Errors:
    """One backend's distances from the reference on one set of tokens (``ModelRun._compare``)."""

    prefill: float  # the prompt's last logits, through the timed call
    decode: float  # the worst decode step's logits, through the timed call
    experts: float = 0.0  # the worst experts call against eager experts on its own inputs
    where: str = ""  # which layer and call that was
    graph: float | None = None  # captured steps against the same arm's eager steps (None: eager)


@dataclass(kw_only=True)
class ModelHeld:
    runner: ModelRunner
    cols: dict
    backends: dict[str, str]  # arm (and NO_EXPERTS) -> its experts backend
    ref_prefill: torch.Tensor
    ref_decode: list[torch.Tensor]
    calls: dict[str, Callable[[], None]] = field(default_factory=dict)  # arm -> its decode call
    modes: dict[str, str] = field(default_factory=dict)  # arm -> graph | eager
    prefills: dict[str, Callable[[], None]] = field(default_factory=dict)  # arm -> its prefill
    prefill_modes: dict[str, str] = field(default_factory=dict)  # arm -> graph | eager
    power: str = ""  # why the gates cannot tell an arm from none ("" when they can)
    limits: tuple[float, float] = (0.0, 0.0)  # the logits' tolerance (prefill, decode)
    weights: tuple[int, ...] = ()  # the experts' fingerprint as built
    changed: set[str] = field(default_factory=set)  # arms that wrote the model's weights


class ModelRun:
    """The model regime of one case (``run.case.CaseRegime``; module docstring)."""

    def __init__(self, p, topology, ctx: CaseContext):
        s = p.case.scenario
        self.p, self.topology, self.ctx, self.scenario = p, topology, ctx, s
        self.run = s.model_run
        self.arms = run_arms(s, ctx.options.aa)
        self.names = (*self.arms, NO_EXPERTS)
        self.plan = p.plan if isinstance(p, PlannedModel) else hf_model.plan(s)
        self.router = _router(s)
        label = self.router.label() if self.router else "the model's own router (random weights)"
        cols = columns(p.case, ctx.run_id, tokens_per_rank=self.run.batch, capacity_rows=0,
                       routing_label=label)  # fmt: skip
        self.cols = {**cols, "rank": 0, "live_rows": self.run.batch * s.model.top_k}

    def rows(self) -> CaseRows:
        return CaseRows()

    def units(self):
        return [0]

    def label(self, unit) -> str:
        return f"case {self.p.case.case_id} (batch {self.run.batch})"

    def current_cols(self) -> dict:
        return self.cols

    # ----------------------------------------------------------------- 1. inputs

    def inputs(self, unit, out: CaseRows) -> ModelHeld | None:
        s, run, device = self.scenario, self.run, self.topology.device
        try:
            model = hf_model.build(self.plan, s, device, s.routing.seed)
            self.ctx.stop.check("building the model")
            runner = ModelRunner(model, self.plan, batch=run.batch, context=run.context,
                                 prompt=run.prompt, steps=run.decode_steps, device=device,
                                 seed=s.routing.seed, draws=self._draws(device))  # fmt: skip
            runner.fill_context(s.routing.seed)
            runner.use("eager")  # the reference: the model's own experts forward
            ref_prefill, ref_decode = (
                runner.run_prefill(),
                runner.run_decode(runner.decode, run.check_steps),
            )
            backends = {a: hf_model.backend_of(arm, s.precision, s.shape.alignment)
                        for a, arm in self.arms.items()}  # fmt: skip
            backends[NO_EXPERTS] = hf_model.register_no_experts()
        except faults.CaseTimeout:
            raise
        except Exception as exc:  # out of memory building the model: every arm's row
            self.topology.recover(out, self.cols, self.names, "inputs", exc)
            return None
        sha = self.router.trace.sha256 if self.router is not None else ""
        for layer, routes in runner.routes.items():  # the reference's first decode step
            ids = routes[MODEL_DECODE][0].cpu()
            out.routing.append({"run_id": self.cols["run_id"], "case_id": self.cols["case_id"],
                                "routing": self.cols["routing"], "tokens_per_rank": run.batch,
                                "trace_sha256": sha,
                                "step": 0, "layer": layer,
                                **rank_statistics(ids, rank=0, ep=1, local_experts=s.model.experts,
                                                  capacity_rows=ids.numel())})  # fmt: skip
        return ModelHeld(runner=runner, cols=self.cols, backends=backends,
                         ref_prefill=ref_prefill, ref_decode=ref_decode,
                         weights=runner.fingerprint())  # fmt: skip

    def _draws(self, device) -> dict | None:
        """{(layer, phase): (ids, weights)} of a trace, every decode step and the prefill."""
        if self.router is None:
            return None
        run, out = self.run, {}
        for layer in self.plan.moe_layers:
            steps = [self.router.draw(1 + i, layer, run.batch) for i in range(run.decode_steps)]
            out[(layer, MODEL_DECODE)] = (
                torch.stack([d.topk_ids_TK.long() for d in steps]).to(device),
                torch.stack([d.topk_weights_TK for d in steps]).to(device),
            )
            d = self.router.draw(0, layer, run.batch * run.prompt)
            out[(layer, MODEL_PREFILL)] = (d.topk_ids_TK.long().to(device),
                                           d.topk_weights_TK.to(device))  # fmt: skip
        return out

    # ----------------------------------------------------------------- 2. gates

    def gates(self, held: ModelHeld, out: CaseRows) -> list[str]:
        tol = TOLERANCE[self.scenario.precision]
        errors: dict[str, Errors] = {}
        for name in self.names[::-1]:  # the no-work backend first: the gates' power
            self.ctx.stop.check(f"gates of {name}")
            try:
                self._prepare_call(held, name, out)
                errors[name] = self._compare(held, name, held.ref_prefill, held.ref_decode)
            except faults.CaseTimeout:
                raise
            except Exception as exc:
                self.topology.recover(out, held.cols, [name], "model_gates", exc)
            self._weights_unchanged(held, name, "its gates", out)
        held.limits = (tol, tol)
        none = errors.get(NO_EXPERTS)
        if none is not None:
            weakest = min(none.prefill, none.decode)
            held.limits = (max(tol, none.prefill * LOGITS_SHARE),
                           max(tol, none.decode * LOGITS_SHARE))  # fmt: skip
            held.power = "" if weakest > POWER * tol else (
                f"the logits without expert work are within {weakest:.3g} of the reference "
                f"({POWER:g} x the tolerance {tol:g} is needed): this check cannot tell an arm "
                "from none")  # fmt: skip
            out.add(held.cols, NO_EXPERTS, Check(
                name="power", status="fail" if held.power else "pass", error=weakest,
                detail=held.power or f"the logits without expert work differ by {weakest:.3g} "
                                     f"(>= {POWER:g} x tolerance {tol:g})"))  # fmt: skip
        passed = []
        for name in self.arms:
            if name not in errors:
                continue
            rows = self._gate_rows(held, errors[name], MODEL_GATES, "")
            for row in rows:
                out.add(held.cols, name, row)
            ok = all(r.status == "pass" for r in rows)
            if (ok and name not in held.changed) or self.ctx.options.allow_mismatch:
                passed.append(name)
        return [*passed, *([NO_EXPERTS] if NO_EXPERTS in errors else [])]

    def _gate_rows(self, held: ModelHeld, e: Errors, names: tuple[str, str, str, str],
                   tokens: str) -> list[Check]:  # fmt: skip
        """The rows of one arm's errors ``e``: each layer's experts, the captured steps against
        the eager ones, the logits (module docstring); ``tokens`` says which tokens ran."""
        tol = TOLERANCE[self.scenario.precision]
        power = held.power
        rows = [Check(name=names[0],
                      status="pass" if e.experts <= tol else "fail", error=e.experts,
                      detail=f"worst: {e.where}" + ("" if e.experts <= tol else
                                                    f"; tolerance {tol:g}") + tokens)]  # fmt: skip
        if e.graph is not None:
            good = e.graph <= tol
            rows.append(Check(name=names[1],
                              status="pass" if good else "fail", error=e.graph,
                              detail="captured steps against the same arm's eager steps" + (
                                  "" if good else f"; tolerance {tol:g}") + tokens))  # fmt: skip
        for gate, err, limit in zip(names[2:], (e.prefill, e.decode), held.limits, strict=True):
            good = err <= limit and not power
            why = (f"tolerance {limit:.3g}: the larger of {tol:g} and {LOGITS_SHARE:g} x the "
                   f"no-work backend's distance{tokens}")  # fmt: skip
            rows.append(Check(name=gate, status="pass" if good else "fail", error=err,
                              detail=power or why))  # fmt: skip
        return rows

    def _prepare_call(self, held: ModelHeld, name: str, out: CaseRows) -> None:
        """The arm's decode call: its step captured as one CUDA graph where it can be, else the
        eager step, with a ``capture`` row saying which; and its prefill call, captured too where
        the step is and ``model_run.prefill_graph`` holds (replayed after ``reset_prefill``)."""
        runner, clock = held.runner, self.ctx.clock
        runner.use(held.backends[name])
        arm = self.arms.get(name)
        allowed = self.scenario.measure.graph and (arm is None or arm.graph)
        held.calls[name], held.modes[name] = runner.decode, "eager"
        held.prefills[name], held.prefill_modes[name] = runner.prefill, "eager"
        if not clock.cuda:
            return
        if not allowed:
            why = "measure.graph is false" if not self.scenario.measure.graph else (
                f"{name} declares no CUDA graph")  # fmt: skip
            out.add(held.cols, name, Check(name="capture", status="skip", detail=f"eager: {why}"))
            return
        try:
            warm = min(max(1, self.scenario.measure.warmup), self.run.decode_steps)
            runner.run_decode(runner.decode, warm)  # builds the arm's buffers, compiles
            runner.restore_context()
            held.calls[name] = clock.capture(runner.decode)
            held.modes[name] = "graph"
        except Exception as exc:
            self._eager(held, name, out, "the step", exc)
            return
        finally:
            runner.restore_context()
        what = "one CUDA graph a decode step"
        if self.run.prefill_graph and MODEL_PREFILL in self.run.stages:
            try:
                runner.run_prefill()  # builds the arm's buffers of the prompt's token count
                runner.reset_prefill()
                held.prefills[name] = clock.capture(runner.prefill)
                held.prefill_modes[name] = "graph"
                what += ", one the prefill"
            except Exception as exc:  # the step stays captured; the prefill runs eagerly
                held.prefills[name] = runner.prefill
                self._eager(held, name, out, "the prefill", exc)
        out.add(held.cols, name, Check(name="capture", status="pass", detail=what))

    def _eager(self, held: ModelHeld, name: str, out: CaseRows, what: str, exc: Exception) -> None:
        """A capture that failed on a healthy device: that call of ``name`` runs eagerly, and a
        ``capture`` row says why (an unhealthy device ends the case)."""
        if not faults.device_healthy(self.topology.device):
            raise exc
        out.add(held.cols, name, Check(
            name="capture", status="skip",
            detail=f"eager: {what} could not be captured ({faults.describe(exc)})"))  # fmt: skip

    def _compare(self, held: ModelHeld, name: str, ref_prefill, ref_decode) -> Errors:
        """``name``'s distances from the reference (``Errors``; NaN or inf in its logits is an
        infinite error): its prefill and ``len(ref_decode)`` decode steps run eagerly with each
        experts call recorded, then the steps again through its timed call when that is a
        captured graph."""
        runner = held.runner
        runner.use(held.backends[name])
        runner.record = {} if name != NO_EXPERTS else None
        try:
            got = runner.run_prefill()
            eager = runner.run_decode(runner.decode, len(ref_decode))
            record = runner.record
        finally:
            runner.record = None
        steps, graph = eager, None
        if held.modes[name] == "graph":
            steps = runner.run_decode(held.calls[name], len(ref_decode))
            graph = max(_error(g, e) for g, e in zip(steps, eager, strict=True))
        if held.prefill_modes.get(name) == "graph":  # the captured prompt against the eager one
            eager_prefill = got
            runner.reset_prefill()
            held.prefills[name]()
            got = runner.prefill_BV.float()
            graph = max(graph or 0.0, _error(got, eager_prefill))
        experts, where = runner.experts_error(record, _error) if record else (0.0, "")
        runner.use(held.backends[name])
        return Errors(prefill=_error(got, ref_prefill),
                      decode=max(_error(g, r) for g, r in zip(steps, ref_decode, strict=True)),
                      experts=experts, where=where, graph=graph)  # fmt: skip

    def end_to_end(self, held: ModelHeld, timed: list[str], out: CaseRows) -> list[str]:
        return timed

    # ----------------------------------------------------------------- 3. timing

    def time(self, held: ModelHeld, timed: list[str], out: CaseRows) -> list[str]:
        probes = {name: [self._probe(held, name)] for name in timed}
        timed, _ = sample_blocks(
            timed, probes, blocks=Blocks(count=self.scenario.measure.blocks), iterations=1,
            clock=self.ctx.clock, cols=held.cols, arm_cols={}, out=out.samples,
            stop=self.ctx.stop, where=f"case {self.p.case.case_id}",
            on_fail=self.topology.on_fail(out, held.cols, "timing"),
            after_turn=lambda name, block: self._weights_unchanged(
                held, name, f"its samples of block {block}", out),
        )  # fmt: skip
        self.ctx.progress.step(f"{self.p.case.case_id} timed")
        for name in timed:
            if name not in held.changed:
                out.add(held.cols, name, Check(name="weights_unchanged", status="pass",
                                               detail="the experts' weights as built after "
                                                      "every gate and timed turn"))  # fmt: skip
        return timed

    def _weights_unchanged(self, held: ModelHeld, name: str, when: str, out: CaseRows) -> bool:
        """Whether ``name`` left the model's expert weights as built in its ``when``; a change is
        its ``weights_unchanged`` failure, and the layers it changed are written again from their
        seeds, so that no other arm runs on them (docs/DESIGN.md section 15)."""
        now = held.runner.fingerprint()
        changed = [layer for layer, v in now.items() if v != held.weights[layer]]
        if not changed:
            return name not in held.changed
        s = self.scenario
        hf_model.restore_experts(held.runner.model, self.plan, s, changed, self.topology.device,
                                 s.routing.seed)  # fmt: skip
        held.changed.add(name)
        out.add(
            held.cols,
            name,
            Check(
                name="weights_unchanged",
                status="fail",
                detail=f"{name} wrote the expert weights of layer(s) "
                f"{', '.join(map(str, changed))} in {when}; written again from their seeds",
            ),
        )
        return False

    def _probe(self, held: ModelHeld, name: str) -> Probe:
        """A block's turn of ``name``: its prefill, then its decode steps from the context."""
        run, runner, clock = self.run, held.runner, self.ctx.clock
        per_expert = self._expert_bytes(name)
        common = {"regime": Regime.MODEL, "layer": -1, "weights": "warm", "weight_copies": 1}
        rows: dict = {}
        if MODEL_PREFILL in run.stages:
            rows[MODEL_PREFILL] = {**common, "stage": MODEL_PREFILL,
                                   "mode": held.prefill_modes[name], "step": -1,
                                   "tokens_per_rank": run.batch * run.prompt,
                                   "live_rows": run.batch * run.prompt * self.scenario.model.top_k,
                                   "weight_bytes": -1}  # fmt: skip
        if MODEL_DECODE in run.stages:
            for i in range(run.decode_steps):
                rows[(MODEL_DECODE, i)] = {
                    **common,
                    "stage": MODEL_DECODE,
                    "step": i,
                    "mode": held.modes[name],
                    "weight_bytes": -1,
                }

        def measure() -> dict:
            times = {}
            if MODEL_PREFILL in run.stages:
                runner.use(held.backends[name])
                runner.reset_prefill()
                times[MODEL_PREFILL] = clock.sample_us(held.prefills[name])
                touched = runner.touched(MODEL_PREFILL)
                rows[MODEL_PREFILL]["weight_bytes"] = per_expert * sum(
                    v[0] for v in touched.values()
                )
            if MODEL_DECODE in run.stages:
                if held.modes[name] == "eager":
                    runner.use(held.backends[name])
                runner.restore_context()
                for i in range(run.decode_steps):
                    runner.at_step(i)
                    times[(MODEL_DECODE, i)] = clock.sample_us(held.calls[name])
                touched = runner.touched(MODEL_DECODE)
                for i in range(run.decode_steps):
                    rows[(MODEL_DECODE, i)]["weight_bytes"] = per_expert * sum(
                        v[i] for v in touched.values()
                    )
            return times

        return Probe(measure=measure, rows=rows)

    def _expert_bytes(self, name: str) -> int:
        """Bytes of one expert's weights as ``name`` reads them: its precision's format for a
        moebench arm, the model's bf16 parameters for a transformers backend, none for none."""
        m, arm = self.scenario.model, self.arms.get(name)
        if arm is None:
            return 0
        if arm.name.startswith(HF_PREFIX):
            biased = self.plan.experts.layout == GPT_OSS
            return (3 * m.hidden * m.intermediate + biased * (2 * m.intermediate + m.hidden)) * 2
        return int(
            facts(arm.family).expert_bytes(m.hidden, m.intermediate, 1, self.scenario.precision)
        )

    # ----------------------------------------------------------------- 4. after timing

    def after_timing(self, held: ModelHeld, timed: list[str], out: CaseRows) -> None:
        runner, run = held.runner, self.run
        runner.set_tokens(self.scenario.routing.seed + 1)  # other prompt and decode tokens
        runner.use("eager")
        ref_prefill = runner.run_prefill()
        ref_decode = runner.run_decode(runner.decode, run.check_steps)
        for name in timed:
            if name == NO_EXPERTS:
                continue
            try:
                errors = self._compare(held, name, ref_prefill, ref_decode)
            except Exception as exc:
                self.topology.recover(out, held.cols, [name], "fresh_inputs", exc)
                continue
            for row in self._gate_rows(held, errors, FRESH_GATES, "; other tokens"):
                out.add(held.cols, name, row)

    def finish(self, held: ModelHeld, timed: list[str], out: CaseRows) -> None:
        held.runner.close()
        held.calls.clear()
        held.runner = None
        self.topology.release()


def _error(got: torch.Tensor, want: torch.Tensor) -> float:
    return math.inf if nonfinite(got) else calc_diff(got, want)


def _router(s: Scenario) -> StepRouting | None:
    """The draws replacing every layer's routing (``model_run.routing: trace``), or None."""
    if s.model_run.routing != "trace":
        return None
    r = s.routing
    return StepRouting(
        family=r.family, seed=r.seed, experts=s.model.experts, top_k=s.model.top_k, ep=1,
        alignment=s.shape.alignment, trace_path=r.path,
        layer_map=trace_layer_map(r.path, s.model.moe_layers),
        options={k: getattr(r, k) for k in ("alpha", "hot_rank", "hot_fraction",
                                            "empty_fraction")},
    )  # fmt: skip
