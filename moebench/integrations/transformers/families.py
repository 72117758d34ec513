"""transformers' experts classes, family by family: how moebench builds one at a scenario's widths
and puts its weights into the class's own parameters, and how it reads a model's experts module
back into moebench's layout (docs/TRANSFORMERS.md).

Legend: E experts, D hidden, F intermediate (one expert's width). moebench's layouts: prefill
w13_EFD [E, 2F, D] with the gate's F rows then the up projection's, w2_EDF [E, D, F]; decode the
same shapes with the gate/up rows interleaved (row 2j gate, 2j+1 up of column j) and biases
b13_E2F [E, 2F], b2_ED [E, D].

Two parameter layouts cover the families (read from each class's source; 5.17 and 5.24 agree):

- ``concatenated`` (Qwen3-MoE, Mixtral, DeepSeek-V3, DeepSeek-V4, OLMoE): ``gate_up_proj``
  [E, 2F, D], gate rows then up rows; ``down_proj`` [E, D, F]; no biases; silu(gate) * up.
  This is moebench's prefill layout itself, so the parameters are moebench's tensors (no copy).
  DeepSeek-V4's experts clamp gate and up at ``swiglu_limit``; moebench's silu has no clamp, so
  its module is built with the limit at +inf (the clamps still run, as in the model, and change
  no finite value).
- ``gpt_oss``: ``gate_up_proj`` [E, D, 2F], transposed, its columns interleaved (column 2j the
  gate, 2j+1 the up projection of column j); ``gate_up_proj_bias`` [E, 2F]; ``down_proj``
  [E, F, D]; ``down_proj_bias`` [E, D]; swiglu_oai (alpha 1.702, limit 7): moebench's decode
  layout transposed, made contiguous as a checkpoint stores it.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import torch

from moebench.core import reference
from moebench.core.models import PRESETS
from moebench.core.vocabulary import DECODE, PREFILL

CONCATENATED = "concatenated"
GPT_OSS = "gpt_oss"


@dataclass(frozen=True, kw_only=True)
class ExpertsFamily:
    name: str  # transformers' model_type: the folder under transformers/models/
    label: str
    config: str  # the config class, exported by transformers
    experts: str  # the experts class, in transformers.models.<name>.modeling_<name>
    widths: tuple[str, str, str]  # the config keys of D, F and E
    layout: str  # CONCATENATED | GPT_OSS
    activation: str  # silu | swiglu_oai
    extra: tuple[tuple[str, float], ...] = ()  # further config values

    @property
    def moebench_family(self) -> str:
        """gpt-oss's layout is moebench's decode layout; the others are prefill's."""
        return DECODE if self.layout == GPT_OSS else PREFILL


def _family(name, label, config, experts, widths, layout=CONCATENATED, activation="silu", extra=()):
    return ExpertsFamily(name=name, label=label, config=config, experts=experts, widths=widths,
                         layout=layout, activation=activation, extra=extra)  # fmt: skip


FAMILIES: dict[str, ExpertsFamily] = {
    f.name: f
    for f in (
        _family("qwen3_moe", "Qwen3-MoE", "Qwen3MoeConfig", "Qwen3MoeExperts",
                ("hidden_size", "moe_intermediate_size", "num_experts")),
        _family("mixtral", "Mixtral", "MixtralConfig", "MixtralExperts",
                ("hidden_size", "intermediate_size", "num_local_experts")),
        _family("deepseek_v3", "DeepSeek-V3", "DeepseekV3Config", "DeepseekV3Experts",
                ("hidden_size", "moe_intermediate_size", "n_routed_experts")),
        _family("deepseek_v4", "DeepSeek-V4", "DeepseekV4Config", "DeepseekV4Experts",
                ("hidden_size", "moe_intermediate_size", "n_routed_experts"),
                extra=(("swiglu_limit", math.inf),)),
        _family("olmoe", "OLMoE", "OlmoeConfig", "OlmoeExperts",
                ("hidden_size", "intermediate_size", "num_experts")),
        _family("gpt_oss", "gpt-oss", "GptOssConfig", "GptOssExperts",
                ("hidden_size", "intermediate_size", "num_local_experts"), layout=GPT_OSS,
                activation="swiglu_oai"),
    )
}  # fmt: skip
# The class an hf: arm builds where the model's preset gives none it can take, by the arm's
# moebench family and the scenario's activation (the first: where the activation is not known).
DEFAULT = {
    PREFILL: {"silu": "qwen3_moe", "swiglu_oai": "gpt_oss"},
    DECODE: {"swiglu_oai": "gpt_oss"},
}


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The experts class an ``hf:`` arm builds, the moebench family it is an arm of, and why."""

    experts: ExpertsFamily
    family: str  # prefill | decode
    why: str  # for the arm's summary


def choose(
    *, named: str | None, family: str = "", preset: str = "", activation: str = ""
) -> Choice:
    """The experts class of an ``hf:`` arm in its scenario (empty: not known): the class it names
    (``@mixtral``); else the class of the model's preset (``core/models.py``: its
    ``transformers``) where that class takes the arm's family's layout and computes the
    activation; else the default of that family and activation (``DEFAULT``). The arm's family
    is the named class's, else the scenario's other arms', else the preset class's, else prefill.
    A ValueError says why no class fits (a named class of another family, another activation,
    silu in the decode layout). All silu classes share one layout and one forward per backend:
    the choice changes the class, never the arithmetic."""
    by_preset = FAMILIES[PRESETS[preset]["transformers"]] if preset in PRESETS else None
    if named is not None:
        fam = FAMILIES[named]
        if family and fam.moebench_family != family:
            raise ValueError(f"{fam.label}'s experts take the {fam.moebench_family} layout; the "
                             f"scenario's other arms are {family} arms")  # fmt: skip
        choice = Choice(experts=fam, family=fam.moebench_family, why="named by the reference")
    else:
        if family:
            whence = "the family of the scenario's other arms"
        elif by_preset is not None:
            whence = f"the family of model {preset}'s {by_preset.label} experts"
        else:
            whence = "no other arm and no preset names a family"
        family = family or (by_preset.moebench_family if by_preset else PREFILL)
        if (
            by_preset is not None
            and by_preset.moebench_family == family
            and activation in ("", by_preset.activation)
        ):
            choice = Choice(experts=by_preset, family=family, why=f"the class of model {preset}")
        else:
            defaults = DEFAULT[family]
            if activation and activation not in defaults:
                builds = ", ".join(f"{FAMILIES[f].label}'s for {a}" for a, f in defaults.items())
                raise ValueError(f"a {family} arm ({whence}) builds the experts class {builds} "
                                 f"only; the scenario's activation is {activation}")  # fmt: skip
            fam = FAMILIES[defaults.get(activation) or next(iter(defaults.values()))]
            if not (preset or activation):
                reason = "resolved outside a scenario"
            elif by_preset is None:
                reason = "the model names no preset"
            elif by_preset.moebench_family != family:
                reason = (f"model {preset}'s {by_preset.label} experts take the "
                          f"{by_preset.moebench_family} layout")  # fmt: skip
            else:
                reason = (
                    f"model {preset}'s {by_preset.label} experts compute {by_preset.activation}"
                )
            choice = Choice(experts=fam, family=family,
                            why=f"the default of a {family} arm: {reason}")  # fmt: skip
    fam = choice.experts
    if activation and fam.activation != activation:
        raise ValueError(f"{fam.label}'s experts ({fam.experts}) compute {fam.activation}; the "
                         f"scenario's activation is {activation}")  # fmt: skip
    return choice


def experts_class(fam: ExpertsFamily) -> type:
    """The installed transformers' experts class of ``fam``."""
    modeling = importlib.import_module(f"transformers.models.{fam.name}.modeling_{fam.name}")
    return getattr(modeling, fam.experts)


def class_path(fam: ExpertsFamily) -> str:
    """Where the experts class ``build`` makes is defined: module and class name."""
    cls = experts_class(fam)
    return f"{cls.__module__}.{cls.__qualname__}"


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def build(fam: ExpertsFamily, *, hidden: int, intermediate: int, experts: int, backend: str):
    """An experts module of ``fam`` at these widths whose forward is ``backend`` (``"eager"``:
    the class's own), its parameters on the meta device until ``load`` gives them tensors."""
    import transformers

    d, f, e = fam.widths
    config = getattr(transformers, fam.config)(
        **{d: hidden, f: intermediate, e: experts}, **dict(fam.extra),
        num_experts_per_tok=1, experts_implementation=backend,
    )  # fmt: skip
    with torch.device("meta"):
        return experts_class(fam)(config)


def interleave(w_E2FX: torch.Tensor) -> torch.Tensor:
    """Gate rows then up rows ([E, 2F, ...]) -> row 2j gate, 2j+1 up of column j."""
    F = w_E2FX.shape[1] // 2
    return torch.stack((w_E2FX[:, :F], w_E2FX[:, F:]), dim=2).flatten(1, 2)


def deinterleave(w_E2FX: torch.Tensor) -> torch.Tensor:
    """The inverse of ``interleave``."""
    return torch.cat((w_E2FX[:, 0::2], w_E2FX[:, 1::2]), dim=1)


def load(
    module: torch.nn.Module,
    fam: ExpertsFamily,
    *,
    w13: torch.Tensor,
    w2_EDF: torch.Tensor,
    interleaved: bool,
    b13_E2F: torch.Tensor | None = None,
    b2_ED: torch.Tensor | None = None,
) -> None:
    """Give ``module`` moebench's weights in its family's layout. ``w13`` [E, 2F, D]: gate rows
    then up rows, or interleaved (``interleaved``); absent biases are zero (exact: + 0)."""
    E, F2, D = w13.shape
    if fam.layout == CONCATENATED:
        if interleaved or b13_E2F is not None or b2_ED is not None:
            raise ValueError(f"{fam.label} experts take concatenated gate/up rows and no biases")
        params = {"gate_up_proj": w13, "down_proj": w2_EDF}
    else:
        w13_i = w13 if interleaved else interleave(w13)
        zeros = torch.zeros(E, F2 + D, dtype=w13.dtype, device=w13.device)
        params = {
            "gate_up_proj": w13_i.transpose(1, 2).contiguous(),
            "gate_up_proj_bias": b13_E2F if b13_E2F is not None else zeros[:, :F2],
            "down_proj": w2_EDF.transpose(1, 2).contiguous(),
            "down_proj_bias": b2_ED if b2_ED is not None else zeros[:, F2:],
        }
    for name, t in params.items():
        want = tuple(getattr(module, name).shape)
        if tuple(t.shape) != want:
            raise ValueError(
                f"transformers {transformers_version()}'s {type(module).__name__}.{name} has "
                f"shape {want}, not the {tuple(t.shape)} of the layout moebench knows"
            )
        setattr(module, name, torch.nn.Parameter(t, requires_grad=False))
    left = [n for n, t in module.named_parameters() if t.is_meta]
    if left:
        raise ValueError(f"{type(module).__name__} has parameters moebench does not fill: {left}")


@dataclass(frozen=True, kw_only=True)
class ExpertWeights:
    """A model's experts module in moebench's terms (views of its parameters, detached)."""

    w13: torch.Tensor  # [E, 2F, D], gate rows then up rows unless ``interleaved``
    w2_EDF: torch.Tensor
    interleaved: bool
    b13_E2F: torch.Tensor | None
    b2_ED: torch.Tensor | None
    activation: str

    def concatenated(self) -> torch.Tensor:
        return deinterleave(self.w13) if self.interleaved else self.w13

    def decode_layout(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """w13 interleaved, b13 and b2 (zeros where the module has none)."""
        w13 = self.w13 if self.interleaved else interleave(self.w13)
        E, F2, D = w13.shape
        zeros = torch.zeros(E, F2 + D, dtype=w13.dtype, device=w13.device)
        b13 = self.b13_E2F if self.b13_E2F is not None else zeros[:, :F2]
        b2 = self.b2_ED if self.b2_ED is not None else zeros[:, F2:]
        return w13, b13, b2


def read(module: torch.nn.Module) -> ExpertWeights:
    """What ``module``'s experts compute, in moebench's layout; a layout or a gate that moebench's
    arms do not compute is a ValueError naming the class and why."""
    cls = type(module).__name__
    gate, bias = getattr(module, "has_gate", True), getattr(module, "has_bias", False)
    transposed = getattr(module, "is_transposed", False)
    concatenated = getattr(module, "is_concatenated", True)
    if not gate or getattr(module, "has_post_expert_norm", False):
        raise ValueError(f"{cls}: moebench's arms compute gated experts without a post-expert norm")
    if transposed and not concatenated and bias:  # gpt-oss
        alpha, limit = getattr(module, "alpha", None), getattr(module, "limit", None)
        if (alpha, limit) != (reference.SWIGLU_ALPHA, reference.SWIGLU_LIMIT):
            raise ValueError(
                f"{cls}: swiglu_oai with alpha {alpha} and limit {limit}; moebench's has alpha "
                f"{reference.SWIGLU_ALPHA} and limit {reference.SWIGLU_LIMIT}"
            )
        return ExpertWeights(
            w13=module.gate_up_proj.detach().transpose(1, 2), interleaved=True,
            w2_EDF=module.down_proj.detach().transpose(1, 2),
            b13_E2F=module.gate_up_proj_bias.detach(), b2_ED=module.down_proj_bias.detach(),
            activation="swiglu_oai",
        )  # fmt: skip
    if transposed or not concatenated or bias:
        raise ValueError(
            f"{cls}: a layout moebench's arms do not take (transposed {transposed}, concatenated "
            f"{concatenated}, biases {bias}, and not gpt-oss's swiglu_oai)"
        )
    from transformers.integrations.moe import _default_apply_gate

    act = getattr(getattr(module, "config", None), "hidden_act", None)
    limit = getattr(module, "limit", None)
    plain = type(module)._apply_gate is _default_apply_gate
    if act != "silu" or not (plain or (cls == "DeepseekV4Experts" and limit == math.inf)):
        why = f"clamps at swiglu_limit {limit}" if limit is not None else f"act {act!r}"
        raise ValueError(f"{cls}: moebench's arms compute silu(gate) * up; this module {why}")
    return ExpertWeights(
        w13=module.gate_up_proj.detach(), w2_EDF=module.down_proj.detach(), interleaved=False,
        b13_E2F=None, b2_ED=None, activation="silu",
    )  # fmt: skip
