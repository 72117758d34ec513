"""The all-to-all exchange of a distributed case (docs/DESIGN.md section 7), one rank's side.

The exchange (``Exchange``), fixed-size slots with the counts on the device:

- ``dispatch``: each of the T * K slots of this rank's tokens goes to the rank owning its expert.
  Slots are packed per destination in their (token, slot) order into a send buffer of W blocks of
  S = T_max * K rows (the worst case: every slot of every token to one rank), so the all-to-all
  has equal, host-known split sizes and nothing is read back to the host. One payload row is the
  token's bytes (bf16 or FP8), its packed UE8M0 scale words (fp8) and the slot's global expert id.
  The per-destination counts travel in their own all_to_all_single of W int32; the receiver keeps
  the first ``count[src]`` rows of each source block and marks the rest -1 (not local), so stale
  rows past a count are never read. Variable-size all-to-all would need the split sizes on the
  host, a sync inside the timed region; the price of fixed slots is moving W * S rows however
  few are live.
- the arm's own five stages then run on the R = W * S received rows as tokens of one slot each
  (scatter, fc1, act, fc2, and combine with weight 1: back to received-row order), so the arms are
  untouched.
- ``sync``: an all_reduce of one scalar, the meeting point before the results go back. Its time
  on a rank is how long that rank waited for the slowest (plus the all_reduce's own latency).
- ``combine``: a second all_to_all_single returns each received row to its source block and slot,
  and the ``combine`` kernel sums each token's K slots with the router weights, in slot order and
  float32, as the single-process combine does.

Legend: T tokens of this rank, K top-k, D hidden, W world size, S slot rows per
destination, R = W * S received rows, B payload bytes per row, G4 packed scale words.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from moebench.comm.world import World
from moebench.kernels.combine import combine

_ID_BYTES = 4


class Exchange:
    """One case's dispatch and combine buffers on one rank, allocated once (module docstring).

    x_TD bf16 or FP8 [T, D] this rank's tokens; x_sf_TG4 int32 [T, G4] packed scales (fp8) or
    None; topk_ids_TK int32 [T, K] global expert ids; topk_weights_TK float32 [T, K].
    After ``dispatch``: ``x_RD`` [R, D] and ``x_sf_RG4`` [R, G4] (strided views of the received
    payload) and ``ids_R1`` int32 [R, 1] (the expert of each received row, -1 past a source's
    count) are the local FFN's tokens. After ``combine``: ``y_TD`` bf16 [T, D].
    """

    def __init__(
        self, world: World, *, x_TD: torch.Tensor, x_sf_TG4: torch.Tensor | None,
        topk_ids_TK: torch.Tensor, topk_weights_TK: torch.Tensor, experts_per_rank: int,
        slots_per_rank: int,
    ):  # fmt: skip
        dev = x_TD.device
        T, K = topk_ids_TK.shape
        D = x_TD.shape[1]
        W, S = world.size, slots_per_rank
        R = W * S
        self.W, self.S, self.E = W, S, experts_per_rank
        x_bytes = x_TD.contiguous().view(torch.uint8)  # [T, xb]
        xb = x_bytes.shape[1]
        sb = 0 if x_sf_TG4 is None else 4 * x_sf_TG4.shape[1]
        if xb % 4:
            raise ValueError(f"a token row must be a whole number of 4-byte words, got {xb} bytes")
        B = xb + sb + _ID_BYTES
        self._cols = (xb, sb)
        # The scale words in any packed layout (M-major included): ``pack`` copies them into
        # row-major payload rows.
        self.x_bytes, self.x_sf_TG4 = x_bytes, x_sf_TG4
        self.ids_TK = topk_ids_TK.to(torch.int32).contiguous()
        self.topk_weights_TK = topk_weights_TK.to(torch.float32).contiguous()
        # Poison (0x7F: NaN in FP8, huge in bf16) in every row no slot writes.
        self.send_RB = torch.full((R, B), 0x7F, dtype=torch.uint8, device=dev)
        self.recv_RB = torch.full((R, B), 0x7F, dtype=torch.uint8, device=dev)
        self.send_counts_W = torch.zeros(W, dtype=torch.int32, device=dev)
        self.recv_counts_W = torch.zeros(W, dtype=torch.int32, device=dev)
        self._token_of_slot = torch.arange(T * K, device=dev) // K
        # Packing moves 4-byte words: a token's row and scale bytes are first laid side by side
        # in one payload row (``_payload_TP``), then one gather and one indexed copy place every
        # slot's row.
        P = (xb + sb) // 4
        self._payload_TP = torch.empty(T, P, dtype=torch.int32, device=dev)
        self._slots_SP = torch.empty(T * K, P, dtype=torch.int32, device=dev)
        self._send_RP = self.send_RB.view(torch.int32)[:, :P]
        self._send_ids_R = self.send_RB[:, xb + sb :].view(torch.int32).view(R)
        self._recv_ids_WS = self.recv_RB[:, xb + sb :].view(torch.int32).view(W, S)
        self._slot_WS = torch.arange(S, device=dev, dtype=torch.int32).expand(W, S)
        self._minus_one = torch.tensor(-1, dtype=torch.int32, device=dev)
        self._ranks_W = torch.arange(W, device=dev)
        self.x_RD = self.recv_RB[:, :xb].view(x_TD.dtype)
        self.x_sf_RG4 = self.recv_RB[:, xb : xb + sb].view(torch.int32) if sb else None
        self.ids_R1 = torch.full((R, 1), -1, dtype=torch.int32, device=dev)
        self.ones_R1 = torch.ones(R, 1, dtype=torch.float32, device=dev)
        self.slot_row_TK = torch.full((T, K), -1, dtype=torch.int32, device=dev)
        self.back_RD = torch.empty(R, D, dtype=torch.bfloat16, device=dev)
        self.y_TD = torch.empty(T, D, dtype=torch.bfloat16, device=dev)
        self._flag = torch.zeros(1, device=dev)

    def for_layer(
        self, *, x_TD: torch.Tensor, x_sf_TG4: torch.Tensor | None, topk_ids_TK: torch.Tensor,
        topk_weights_TK: torch.Tensor,
    ) -> Exchange:  # fmt: skip
        """An exchange of another layer's tokens and routing (the same shapes) over this one's
        send, receive and return buffers: a model's layers run one after another and share
        their all-to-all buffers, so a step of L layers holds one set, not L. What one layer
        received is then only valid until the next layer's ``dispatch``."""
        row_bytes = x_TD.shape[1] * x_TD.element_size()
        if topk_ids_TK.shape != self.ids_TK.shape or row_bytes != self._cols[0]:
            raise ValueError("for_layer: the layer's tokens and routing must have this shape")
        ex = copy.copy(self)
        ex.x_bytes, ex.x_sf_TG4 = x_TD.contiguous().view(torch.uint8), x_sf_TG4
        ex.ids_TK = topk_ids_TK.to(torch.int32).contiguous()
        ex.topk_weights_TK = topk_weights_TK.to(torch.float32).contiguous()
        ex.slot_row_TK = torch.full_like(self.slot_row_TK, -1)
        return ex

    @property
    def received_rows(self) -> int:
        return self.W * self.S

    def pack(self) -> None:
        """Place this rank's slots in the send buffer, per destination in (token, slot) order,
        and count them (the first half of ``dispatch``: no collective)."""
        xb, sb = self._cols
        row = self.slot_rows()
        self._payload_TP.view(torch.uint8)[:, :xb].copy_(self.x_bytes)
        if sb:
            self._payload_TP[:, xb // 4 :].copy_(self.x_sf_TG4)
        torch.index_select(self._payload_TP, 0, self._token_of_slot, out=self._slots_SP)
        self._send_RP.index_copy_(0, row, self._slots_SP)
        self._send_ids_R.index_copy_(0, row, self.ids_TK.view(-1))

    def slot_rows(self) -> torch.Tensor:
        """Each slot's row in the send buffer (int64 [T*K]), also kept in ``slot_row_TK``, and
        the rows per destination in ``send_counts_W``. A slot's position in its destination
        block is how many earlier slots go there: slots keep their (token, slot) order."""
        dest = (self.ids_TK.view(-1) // self.E).to(torch.int64)  # owner rank of each slot
        # Row w of the mask marks the slots going to rank w (a comparison rather than one_hot,
        # which may check its input on the host); its running count along the row is each
        # slot's place. The scan runs along the slots: down the columns of the [T*K, W] mask it
        # took 404 us of device time on the H200 at T*K 4,096 and W 2 (W threads walk the
        # slots), along the rows 32 us, one 1-D scan of the flattened mask 59 us
        # (tools/bench_exchange.py, 2026-11-30).
        seen = (self._ranks_W[:, None] == dest[None, :]).cumsum(1)  # [W, T*K]
        pos = seen.gather(0, dest[None, :]).squeeze(0) - 1
        row = dest * self.S + pos
        self.slot_row_TK.view(-1).copy_(row)
        if seen.shape[1]:
            self.send_counts_W.copy_(seen[:, -1])
        else:
            self.send_counts_W.zero_()
        return row

    def dispatch(self) -> None:
        """Pack this rank's slots per destination, exchange counts and rows (no host sync)."""
        W, S = self.W, self.S
        self.pack()
        dist.all_to_all_single(self.recv_counts_W, self.send_counts_W)
        dist.all_to_all_single(self.recv_RB, self.send_RB)
        live = self._slot_WS < self.recv_counts_W[:, None]
        torch.where(live, self._recv_ids_WS, self._minus_one, out=self.ids_R1.view(W, S))

    def sync(self) -> None:
        """The meeting point before combine: returns when every rank has reached it."""
        dist.all_reduce(self._flag)

    def combine(self, y_RD: torch.Tensor) -> None:
        """Return the received rows' results (bf16 [R, D]) to their sources; sum each token."""
        dist.all_to_all_single(self.back_RD.view(torch.uint8), y_RD.view(torch.uint8))
        combine(self.back_RD, self.slot_row_TK, self.topk_weights_TK, self.y_TD)
