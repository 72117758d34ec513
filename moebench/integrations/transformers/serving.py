"""A model being served, as the ``model`` regime times it (issue 27, docs/DESIGN.md section 14):
``batch`` sequences, a decode cache at ``context`` tokens, a prompt, and the two calls a request
makes, a prefill and a decode step, with whichever experts backend is set.

Legend: B sequences, P prompt tokens, C context tokens, N decode steps, K top-k, V vocabulary.

- **The decode step** (``decode``) reads the token of step ``step_idx`` (a device scalar) from a
  table [N, B] drawn once, writes the logits of every sequence into ``logits_BV`` and moves the
  cache one position on, all on the device: captured once (``measure.clock.Clock.capture``), its
  replay is a step, and step i is replayed after ``at_step(i)``. Its input tokens are the
  table's, never the model's own argmax: every arm decodes the same tokens.
- **The context**: before anything is timed the decode cache is filled with C tokens a sequence
  by transformers' grouped_mm experts (``fill_context``, in chunks; its K and V are the model's
  whatever backend computed them within bf16, and the context is only the state every arm starts
  from; the reference is never it), and ``restore_context`` returns to that
  state before every run of N steps, so that every arm decodes from the same cache.
- **The prefill** (``prefill``): P tokens a sequence from an empty cache of its own, the logits of
  the last token; the regime captures it as one CUDA graph where it captures the step
  (``model_run.prefill_graph``), replayed after ``reset_prefill``, or runs it eagerly.
- **Each layer's experts checked** (``record``, ``experts_error``): while ``record`` is a dict,
  every eager call's experts inputs (the hidden states, ids and weights the experts received)
  and output are kept per layer, so that the gates can hold each layer's output to transformers'
  eager experts on the very same inputs. Across a whole model two correct bf16 implementations'
  logits drift apart layer by layer (calc_diff 3e-4 to 2.7e-2 on the H200, transformers'
  grouped_mm against its eager experts), so the logits alone cannot hold an arm to its
  precision; one layer on its own inputs can. A captured replay runs no hook: the record is of
  eager calls only.
- **Routing.** A forward pre-hook on each MoE layer's experts module records the routing the
  experts receive (``routes``: [N, B, K] a layer for the decode steps, [B*P, K] for the prefill),
  and with ``draws`` replaces it first: each layer's top-k and weights of each step from a trace's
  recorded load (``routing.step_draws``), the same for every arm. The hook's device work is
  captured with the step; a hook is PyTorch's own interface, no monkeypatching.
"""

from __future__ import annotations

import inspect

import torch

from moebench.core.vocabulary import MODEL_DECODE, MODEL_PREFILL
from moebench.integrations.transformers.cache import SlotCache
from moebench.integrations.transformers.model import (
    DTYPE,
    ModelPlan,
    experts_modules,
    fill_chunk,
)

_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# Words a chunk of `bit_sum`: 128 MiB of int64 at most. A whole-tensor sum widened to int64 in one
# call allocates 8 / element_size times the tensor: 56 GiB for a DeepSeek-V3 layer's 28 GiB of
# bf16 experts on the H200 (2026-12-02), out of memory in the model regime's gates.
BIT_SUM_CHUNK = 1 << 24


def bit_sum(t: torch.Tensor) -> torch.Tensor:
    """The sum of ``t``'s words as integers, an int64 on its device (wrapping: a checksum, not a
    number), in chunks of BIT_SUM_CHUNK words so that the temporaries stay small; no sync."""
    words = t.detach().reshape(-1).view(_INTS[t.element_size()])
    parts = [words[i : i + BIT_SUM_CHUNK].sum(dtype=torch.int64)
             for i in range(0, words.numel(), BIT_SUM_CHUNK)]  # fmt: skip
    return torch.stack(parts).sum() if parts else words.new_zeros((), dtype=torch.int64)


FILL_BACKEND = "grouped_mm"  # transformers' own, on every device and family (eager where absent)
FILL = "fill"  # the context fill: the router's own choice, nothing recorded


def tokens(shape: tuple[int, ...], vocab: int, seed: int, device) -> torch.Tensor:
    """int64 token ids, seeded (on the host, so that every device draws the same)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g).to(device)


class ModelRunner:
    """The calls of a served model (module docstring). ``draws``: {layer: (ids [N+1, T?, K],
    weights)} replacing the router's choice, decode steps first (``[N, B, K]``) and the prefill's
    (``[B*P, K]``) under the key ``(layer, MODEL_PREFILL)``; None: the model's own router."""

    def __init__(self, model, p: ModelPlan, *, batch: int, context: int, prompt: int,
                 steps: int, device, seed: int, draws: dict | None = None):  # fmt: skip
        self.model, self.plan, self.device = model, p, torch.device(device)
        self.B, self.C, self.P, self.N = batch, context, prompt, steps
        self.K = int(p.config.num_experts_per_tok)
        self.vocab = int(p.config.vocab_size)
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"  # 5.24 renamed it
        self.decode_cache = SlotCache(list(p.kinds), context + steps, p.window, device, DTYPE)
        self.prefill_cache = SlotCache(list(p.kinds), prompt, p.window, device, DTYPE)
        self.empty = {MODEL_DECODE: self.decode_cache.snapshot(),
                      MODEL_PREFILL: self.prefill_cache.snapshot()}  # fmt: skip
        self.context_state: dict | None = None
        self.step_idx = torch.zeros(1, dtype=torch.int64, device=device)
        self.ids_B1 = torch.zeros(batch, 1, dtype=torch.int64, device=device)
        self.logits_BV = torch.zeros(batch, self.vocab, dtype=DTYPE, device=device)
        self.prefill_BV = torch.zeros(batch, self.vocab, dtype=DTYPE, device=device)
        self.set_tokens(seed)
        self.phase = FILL
        self.draws = draws
        self.experts = experts_modules(model)
        ids = lambda *shape: torch.zeros(*shape, self.K, dtype=torch.int64, device=device)  # noqa: E731
        self.routes = {layer: {MODEL_DECODE: ids(steps, batch), MODEL_PREFILL: ids(batch * prompt)}
                       for layer in self.experts}  # fmt: skip
        self.record: dict[int, list[tuple[torch.Tensor, ...]]] | None = None
        self.hooks = [m.register_forward_pre_hook(self._hook(layer), with_kwargs=True)
                      for layer, m in self.experts.items()]  # fmt: skip
        self.hooks += [m.register_forward_hook(self._recorder(layer), with_kwargs=True)
                       for layer, m in self.experts.items()]  # fmt: skip

    # ----------------------------------------------------------------- inputs

    def set_tokens(self, seed: int) -> None:
        """The prompt [B, P] and the decode steps' tokens [N, B], written in place (a captured
        step reads the table's address): another seed gives the fresh inputs of the gates
        after timing."""
        prompt = tokens((self.B, self.P), self.vocab, seed * 2 + 1, self.device)
        steps = tokens((self.N, self.B), self.vocab, seed * 2 + 2, self.device)
        if not hasattr(self, "prompt_BP"):
            self.prompt_BP, self.steps_NB = prompt, steps
        else:
            self.prompt_BP.copy_(prompt)
            self.steps_NB.copy_(steps)

    def use(self, backend: str) -> None:
        """Set the experts backend of every MoE layer (outside anything timed)."""
        self.model.set_experts_implementation(backend)

    def at_step(self, i: int) -> None:
        self.step_idx.fill_(i)

    # ----------------------------------------------------------------- the calls

    def _forward(self, cache: SlotCache, ids: torch.Tensor) -> torch.Tensor:
        """Logits of the last token of every sequence [B, V] after ``ids`` [B, q]."""
        masks = cache.begin(ids.shape[1])
        out = self.model(
            input_ids=ids, position_ids=cache.positions[None], use_cache=True, logits_to_keep=1,
            attention_mask=cache.model_mask(masks), **{self.cache_kw: cache},
        )  # fmt: skip
        cache.end()
        return out.logits[:, -1]

    def decode(self) -> None:
        """One decode step of every sequence: step ``step_idx``'s tokens (module docstring)."""
        self.phase = MODEL_DECODE
        with torch.no_grad():
            self.ids_B1.copy_(self.steps_NB.index_select(0, self.step_idx).T)
            self.logits_BV.copy_(self._forward(self.decode_cache, self.ids_B1))

    def prefill(self) -> None:
        """The prompt of every sequence from the empty prefill cache (``reset_prefill`` first)."""
        self.phase = MODEL_PREFILL
        with torch.no_grad():
            self.prefill_BV.copy_(self._forward(self.prefill_cache, self.prompt_BP))

    def reset_prefill(self) -> None:
        self.prefill_cache.restore(self.empty[MODEL_PREFILL])

    def fill_context(self, seed: int) -> None:
        """C tokens a sequence into the decode cache (module docstring), in chunks whose
        attention scores stay within ``ATTENTION_BUDGET``; the state every decode starts from."""
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

        self.use(FILL_BACKEND if FILL_BACKEND in ALL_EXPERTS_FUNCTIONS else "eager")
        self.phase = FILL
        cache = self.decode_cache
        cache.restore(self.empty[MODEL_DECODE])
        context = tokens((self.B, self.C), self.vocab, seed * 2 + 3, self.device)
        chunk, _ = fill_chunk(self.plan, self.B, self.C, self.N)
        with torch.no_grad():
            for a in range(0, self.C, chunk):
                self._forward(cache, context[:, a : a + chunk])
        self.context_state = cache.snapshot()

    def restore_context(self) -> None:
        self.decode_cache.restore(self.context_state)

    def run_decode(self, call, steps: int) -> list[torch.Tensor]:
        """``steps`` decode steps from the context through ``call`` (the step or its replay),
        the logits of each (float32 copies)."""
        self.restore_context()
        out = []
        for i in range(steps):
            self.at_step(i)
            call()
            out.append(self.logits_BV.float())
        return out

    def run_prefill(self) -> torch.Tensor:
        self.reset_prefill()
        self.prefill()
        return self.prefill_BV.float()

    # ----------------------------------------------------------------- routing

    def _hook(self, layer: int):
        def hook(module, args, kwargs):
            if self.phase == FILL:
                return None
            if kwargs or len(args) != 3:
                raise RuntimeError(f"{type(module).__name__} was called with other arguments "
                                   "than (hidden_states, top_k_index, top_k_weights)")  # fmt: skip
            hidden, ids, weights = args
            if self.draws is not None:
                want_ids, want_w = self.draws[(layer, self.phase)]
                if self.phase == MODEL_DECODE:
                    want_ids = want_ids.index_select(0, self.step_idx)[0]
                    want_w = want_w.index_select(0, self.step_idx)[0]
                ids, weights = want_ids.to(ids.dtype), want_w.to(weights.dtype)
            seen = self.routes[layer][self.phase]
            if self.phase == MODEL_DECODE:
                seen.index_copy_(0, self.step_idx, ids.reshape(1, *seen.shape[1:]))
            else:
                seen.copy_(ids.reshape(seen.shape))
            return (hidden, ids, weights), kwargs

        return hook

    def _recorder(self, layer: int):
        def hook(module, args, kwargs, output):
            if self.record is not None and self.phase != FILL:
                calls = self.record.setdefault(layer, [])
                calls.append(tuple(t.detach().clone() for t in (*args, output)))

        return hook

    def experts_error(self, record: dict[int, list[tuple[torch.Tensor, ...]]],
                      error) -> tuple[float, str]:  # fmt: skip
        """(the worst ``error(output, eager's)`` of the recorded experts calls, where it was):
        each call's output against transformers' eager experts on the call's own inputs."""
        self.use("eager")
        self.phase = FILL  # the routing hook passes the recorded routing through
        worst, where = 0.0, ""
        with torch.no_grad():
            for layer, calls in record.items():
                for i, (hidden, ids, weights, out) in enumerate(calls):
                    want = self.experts[layer](hidden, ids, weights)
                    err = error(out.float(), want.float())
                    if err > worst or not where:
                        worst, where = err, f"layer {layer}, call {i}"
        return worst, where

    def touched(self, phase: str) -> dict[int, list[int]]:
        """{layer: experts that received a token} per decode step (a list of counts over the
        steps) or, for the prefill, one count; read back from the device once."""
        out = {}
        for layer, seen in self.routes.items():
            ids = seen[phase].cpu()
            if phase == MODEL_DECODE:
                out[layer] = [int(torch.unique(ids[i]).numel()) for i in range(ids.shape[0])]
            else:
                out[layer] = [int(torch.unique(ids).numel())]
        return out

    def fingerprint(self) -> dict[int, tuple[int, ...]]:
        """{layer: a sum of the bits of each of its expert parameters} (one read of them, one
        sync): an arm that writes the model's weights changes it (docs/DESIGN.md section 15)."""
        sums = [bit_sum(t) for m in self.experts.values() for t in m.parameters()]
        flat = torch.stack(sums).tolist()
        out, i = {}, 0
        for layer, m in self.experts.items():
            n = len(list(m.parameters()))
            out[layer], i = tuple(flat[i : i + n]), i + n
        return out

    def close(self) -> None:
        for h in self.hooks:
            h.remove()
