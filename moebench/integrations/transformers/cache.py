"""A static KV cache whose every write and mask follows a position held on the device, so that a
decode step of a whole transformers model replays as one CUDA graph (docs/DESIGN.md section 14).

transformers' ``StaticCache`` keeps the length of a sliding-window layer as a Python integer and
makes a small tensor from the host on every full-window update; its mask functions read lengths
on the host too. Captured once, such a step would replay with the capture's positions, or not be
captured at all (a host-to-device copy cannot be captured). Here the position is a device
tensor: ``begin`` computes the step's positions, each attention layer's ``update`` writes its keys
and values at their slots with ``index_copy_``, ``masks`` are built from the positions the slots
hold, and ``end`` advances the position, all on the device. The models call ``update`` (their
``cache`` / ``past_key_values`` argument) and ``get_seq_length``; the step passes ``position_ids``
and the masks itself, so no transformers mask function runs.

Legend: B sequences, H cached heads, L slots of a layer, q tokens a sequence in this call.

- A full-attention layer holds ``length`` slots, position p in slot p.
- A sliding-window layer (``layer_types``, ``sliding_window`` W) holds ``min(W, length)`` slots,
  position p in slot ``p % L`` (a ring). A call of one token writes its slot and attends to the
  ring; a call of q > 1 tokens attends to the ring and its own keys (``cat``: a prompt longer than
  the window needs keys the ring would already have overwritten), then writes its last L tokens.
- Every sequence of the batch is at the same position (a static batch of equal lengths).

The masks are additive, ``[1, 1, q, keys]`` in the model's dtype (0 where a key is visible, the
dtype's minimum elsewhere), which eager and SDPA attention both take. ``snapshot`` / ``restore``
put the cache back to a state (the position, the slots' positions, the rings) so that every arm
decodes from the same context; full layers need no copy, since a decode writes only past the
context and the masks hide what it wrote.
"""

from __future__ import annotations

import torch

FULL = "full_attention"
SLIDING = "sliding_attention"


class SlotCache:
    """The KV cache of one model at ``length`` positions (module docstring). ``kinds``: each
    layer's attention kind (``FULL`` or ``SLIDING``); ``window``: the sliding window."""

    is_compileable = True  # what transformers asks of a static cache

    def __init__(self, kinds: list[str], length: int, window: int | None, device, dtype):
        bad = sorted({k for k in kinds if k not in (FULL, SLIDING)})
        if bad:
            raise ValueError(f"attention kinds {bad}: moebench's cache holds {FULL} and {SLIDING}")
        if SLIDING in kinds and not window:
            raise ValueError("sliding-window layers without a sliding_window")
        self.kinds = list(kinds)
        self.is_sliding = [k == SLIDING for k in self.kinds]
        self.length, self.window = length, window or length
        self.device, self.dtype = torch.device(device), dtype
        self.lengths = [min(self.window, length) if s else length for s in self.is_sliding]
        self.pos = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.slot_pos = {
            k: torch.full((n,), -1, dtype=torch.int64, device=self.device)
            for k, n in zip(self.kinds, self.lengths, strict=True)
        }  # the position each slot holds, per kind (-1: none)
        self.kv: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.kinds)
        self._arange = torch.arange(max(length, 1), device=self.device)
        self.positions = self.pos.clone()
        self.q = 1

    # ----------------------------------------------------------------- a call of the model

    def begin(self, q: int) -> dict[str, torch.Tensor]:
        """Before a forward of ``q`` tokens a sequence at the cache's position: the positions
        (``self.positions``, [q]) and each kind's additive mask [1, 1, q, keys]."""
        self.q = q
        self.positions = self.pos + self._arange[:q]
        masks = {}
        for kind, held in self.slot_pos.items():
            n = held.shape[0]
            if kind == SLIDING and q > 1:
                keys = torch.cat((held, self.positions))  # the ring, then this call's own keys
                last = self.positions[-min(q, n) :]
                held.index_copy_(0, last % n, last)
            else:
                held.index_copy_(0, self.positions % n, self.positions)
                keys = held
            query = self.positions[:, None]
            visible = (keys[None, :] >= 0) & (keys[None, :] <= query)
            if kind == SLIDING:
                visible &= query - keys[None, :] < self.window
            masks[kind] = torch.where(visible, 0.0, torch.finfo(self.dtype).min).to(self.dtype)[
                None, None
            ]
        return masks

    def end(self) -> None:
        """After the forward: the position moves past this call's tokens."""
        self.pos.add_(self.q)

    def model_mask(self, masks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | torch.Tensor:
        """What the model's ``attention_mask`` takes: one tensor when every layer has one kind (a
        4-D mask transformers passes through), else the mapping by kind (gpt-oss's)."""
        kinds = set(self.kinds)
        return masks if len(kinds) > 1 else masks[self.kinds[0]]

    # ----------------------------------------------------------------- what the model calls

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Write this call's keys and values [B, H, q, dim] of layer ``layer_idx``; return the
        keys and values its attention reads (the layer's slots, or for a sliding layer's prompt
        the ring and this call's own)."""
        n = self.lengths[layer_idx]
        if self.kv[layer_idx] is None:  # the first call (outside any capture) allocates
            B = key_states.shape[0]
            self.kv[layer_idx] = tuple(
                torch.zeros(B, t.shape[1], n, t.shape[-1], dtype=t.dtype, device=t.device)
                for t in (key_states, value_states)
            )
        keys, values = self.kv[layer_idx]
        q = key_states.shape[-2]
        if self.is_sliding[layer_idx] and q > 1:
            seen = torch.cat((keys, key_states), dim=-2), torch.cat((values, value_states), dim=-2)
            last = min(q, n)
            slots = self.positions[-last:] % n
            keys.index_copy_(2, slots, key_states[:, :, -last:])
            values.index_copy_(2, slots, value_states[:, :, -last:])
            return seen
        slots = self.positions % n
        keys.index_copy_(2, slots, key_states)
        values.index_copy_(2, slots, value_states)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> torch.Tensor:
        return self.pos

    # ----------------------------------------------------------------- states

    def snapshot(self) -> dict:
        """The state a later ``restore`` returns to (the rings copied; full layers need not be)."""
        rings = {i: tuple(t.clone() for t in kv) for i, kv in enumerate(self.kv)
                 if kv is not None and self.is_sliding[i]}  # fmt: skip
        return {"pos": self.pos.clone(), "slots": {k: v.clone() for k, v in self.slot_pos.items()},
                "rings": rings}  # fmt: skip

    def restore(self, state: dict) -> None:
        """Back to ``state``, in place: the addresses a captured graph reads stay the same."""
        self.pos.copy_(state["pos"])
        for k, v in state["slots"].items():
            self.slot_pos[k].copy_(v)
        for i, saved in state["rings"].items():
            for t, s in zip(self.kv[i], saved, strict=True):
                t.copy_(s)

    def nbytes(self) -> int:
        """Bytes of the keys and values allocated so far."""
        return sum(t.numel() * t.element_size() for kv in self.kv if kv is not None for t in kv)
