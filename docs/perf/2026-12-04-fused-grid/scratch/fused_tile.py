"""Scratch (issue 28, 2026-12-04): the grouped decode's fc1 and fc2 tiles in ONE non-persistent
launch, one pass a program, the role of a program taken from a ticket (an atomic counter) so that
every fc2 program starts after every fc1 program has started: no program waits on one that has not
started, whatever order the hardware dispatches them in. An fc2 program of pass j waits (a spin on
an acquire load) until the NB1 fc1 programs of pass j have stored their rows (each adds 1 with
release after a barrier). Counters are never reset: the ticket gives the replay (epoch = ticket //
G) and fc2 of epoch r waits for (r + 1) * NB1 on its pass's counter; every fc1 program adds 1,
empty passes too, so each replay adds exactly NB1 to every pass's counter.

Not part of the package: the records' code. The arithmetic is `grouped_dot._fp8_pass` /
`_mxfp4_pass` unchanged, so the outputs must be the two launches' bit for bit.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moebench.kernels.grouped_dot import _fp8_pass, _fp8_step, _mxfp4_pass, _mxfp4_step, loaded_rows
from moebench.kernels.grouped_gemv import FOLD_SCALES_UP_TO, scale_words
from moebench.kernels.grouped_slots import expert_slots, scan_width, slot_epilogue, touched_pass
from moebench.kernels.jit import HAS_PDL, pdl_launch_dependents, pdl_wait


@triton.jit
def _role(ticket_ptr, G, NB1, NB2):
    t = tl.atomic_add(ticket_ptr, 1)
    epoch = t // G
    u = t - epoch * G
    G1 = NB1 * (G // (NB1 + NB2))
    is_fc1 = u < G1
    v = tl.where(is_fc1, u, u - G1)
    nb = tl.where(is_fc1, NB1, NB2)
    return is_fc1, epoch, (v // nb).to(tl.int32), (v % nb).to(tl.int32)


@triton.jit
def _wait_pass(done_ptr, j, need):
    c = tl.atomic_add(done_ptr + j, 0, sem="acquire")
    while c < need:
        c = tl.atomic_add(done_ptr + j, 0, sem="acquire")


@triton.jit
def _fused_fp8(
    x_ptr, ids_ptr, w1, ws1_ptr, b1_ptr, a_ptr, w2, ws2_ptr, b2_ptr, o_ptr, ticket_ptr, done_ptr,
    TK, K, expert_offset, E, D, F, G, NB1, NB2,
    stride_xt, stride_it, stride_ik, rows1, stride_b1e, stride_at, stride_ak,
    rows2, stride_b2e, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K1: tl.constexpr, EVEN_K2: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr,
    SCAN: tl.constexpr, NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr,
    SPIN: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    # The ticket after the wait: a replay's programs take theirs only once the kernel before has
    # finished, which finished only after the previous replay's fused launch did (each waits on
    # the one before), so two replays' tickets never interleave.
    pdl_wait(GDC)
    is_fc1, epoch, j, n_block = _role(ticket_ptr, G, NB1, NB2)
    e, count, m0 = touched_pass(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                BLOCK_E, SCAN, BLOCK_M)  # fmt: skip
    e64 = e.to(tl.int64)
    if is_fc1:
        if count > 0:
            _fp8_pass(x_ptr, ids_ptr, w1, e * rows1 + n_block * BLOCK_N, tl.load(ws1_ptr + e64),
                      b1_ptr, a_ptr, TK, K, expert_offset, D, e, e64, count, m0, n_block,
                      stride_xt, 0, stride_it, stride_ik, stride_b1e, stride_at, stride_ak, GLU,
                      BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K1, EXACT_RNE, SCAN, NUM_STAGES, INTERPRET,
                      True)  # fmt: skip
            tl.debug_barrier()
        tl.atomic_add(done_ptr + j, 1, sem="release")
    elif count > 0:
        if SPIN:
            _wait_pass(done_ptr, j, (epoch + 1) * NB1)
        _fp8_pass(a_ptr, ids_ptr, w2, e * rows2 + n_block * BLOCK_N, tl.load(ws2_ptr + e64),
                  b2_ptr, o_ptr, TK, K, expert_offset, F, e, e64, count, m0, n_block,
                  stride_at, stride_ak, stride_it, stride_ik, stride_b2e, stride_ot, stride_ok,
                  "none", BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K2, EXACT_RNE, SCAN, NUM_STAGES,
                  INTERPRET, True)  # fmt: skip


@triton.jit
def _mx_ptrs(w_ptr, ws_ptr, e64, n_block, stride_we, stride_wn, stride_se, stride_sn,
             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    rows64 = (n_block * BLOCK_N + loaded_rows(BLOCK_N)).to(tl.int64)
    w_at = (w_ptr + e64 * stride_we + rows64[:, None] * stride_wn
            + tl.arange(0, BLOCK_K // 2)[None, :])  # fmt: skip
    s_rows = ws_ptr + e64 * stride_se + rows64 * stride_sn
    s_at = s_rows[:, None] + tl.arange(0, BLOCK_K // 32)[None, :]
    s_words = (s_rows.to(tl.pointer_type(tl.int32))[:, None]
               + tl.arange(0, BLOCK_K // 128)[None, :])  # fmt: skip
    return w_at, s_at, s_words


@triton.jit
def _fused_mxfp4(
    x_ptr, ids_ptr, w1, ws1_ptr, b1_ptr, a_ptr, w2, ws2_ptr, b2_ptr, o_ptr, ticket_ptr, done_ptr,
    TK, K, expert_offset, E, D, F, G, NB1, NB2,
    stride_xt, stride_it, stride_ik, stride_w1e, stride_w1n, stride_s1e, stride_s1n, stride_b1e,
    stride_at, stride_ak,
    stride_w2e, stride_w2n, stride_s2e, stride_s2n, stride_b2e, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K1: tl.constexpr, EVEN_K2: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr,
    SCAN: tl.constexpr, NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr,
    SPIN: tl.constexpr,
    SCALE_WORDS: tl.constexpr, FOLD_SCALES: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    # The ticket after the wait: a replay's programs take theirs only once the kernel before has
    # finished, which finished only after the previous replay's fused launch did (each waits on
    # the one before), so two replays' tickets never interleave.
    pdl_wait(GDC)
    is_fc1, epoch, j, n_block = _role(ticket_ptr, G, NB1, NB2)
    e, count, m0 = touched_pass(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                BLOCK_E, SCAN, BLOCK_M)  # fmt: skip
    e64 = e.to(tl.int64)
    if is_fc1:
        if count > 0:
            w_at, s_at, s_words = _mx_ptrs(w1, ws1_ptr, e64, n_block, stride_w1e, stride_w1n,
                                           stride_s1e, stride_s1n, BLOCK_N, BLOCK_K)  # fmt: skip
            _mxfp4_pass(x_ptr, ids_ptr, w_at, s_at, s_words, b1_ptr, a_ptr, TK, K, expert_offset,
                        D, e, e64, count, m0, n_block, stride_xt, 0, stride_it, stride_ik,
                        stride_b1e, stride_at, stride_ak, GLU, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K1,
                        EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, SCALE_WORDS,
                        FOLD_SCALES)  # fmt: skip
            tl.debug_barrier()
        tl.atomic_add(done_ptr + j, 1, sem="release")
    elif count > 0:
        if SPIN:
            _wait_pass(done_ptr, j, (epoch + 1) * NB1)
        w_at, s_at, s_words = _mx_ptrs(w2, ws2_ptr, e64, n_block, stride_w2e, stride_w2n,
                                       stride_s2e, stride_s2n, BLOCK_N, BLOCK_K)  # fmt: skip
        _mxfp4_pass(a_ptr, ids_ptr, w_at, s_at, s_words, b2_ptr, o_ptr, TK, K, expert_offset, F,
                    e, e64, count, m0, n_block, stride_at, stride_ak, stride_it, stride_ik,
                    stride_b2e, stride_ot, stride_ok, "none", BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K2,
                    EXACT_RNE, SCAN, NUM_STAGES, INTERPRET, SCALE_WORDS, FOLD_SCALES)  # fmt: skip


class FusedStep:
    """fc1 and fc2 of one problem as one launch (the tiles and blocks of ``launch``, fc1's, which
    must be the one-pass tile); counters allocated once, never reset (module docstring)."""

    def __init__(self, p, ws, launch, s13, max13, s2, max2, *, pdl=True, spin=True,
                 max_registers=None):  # fmt: skip
        assert launch.path == "dot" and launch.pass_grid, launch
        self.p, self.ws, self.L = p, ws, launch
        self.s13, self.s2 = s13, s2
        T, K = p.topk_ids_TK.shape
        E = p.local_experts
        self.passes = min(E, T * K) + T * K // launch.block_m
        self.nb1 = p.w13.shape[1] // launch.block_n
        self.nb2 = p.w2.shape[1] // launch.block_n
        self.G = (self.nb1 + self.nb2) * self.passes
        dev = p.w13.device
        self.ticket = torch.zeros(1, dtype=torch.int64, device=dev)
        self.done = torch.zeros(self.passes, dtype=torch.int64, device=dev)
        self.fmt = "fp8" if p.w13.dtype != torch.uint8 else "mxfp4"
        self.fold = (self.fmt == "mxfp4" and max13 is not None and max2 is not None
                     and max(max13, max2) <= FOLD_SCALES_UP_TO)  # fmt: skip
        block_e = triton.next_power_of_2(E)
        D = p.w13.shape[2] * (2 if self.fmt == "mxfp4" else 1)
        F = p.w2.shape[2] * (2 if self.fmt == "mxfp4" else 1)
        self.common = dict(
            GLU=p.activation, BLOCK_M=launch.block_m, BLOCK_N=launch.block_n,
            BLOCK_K=launch.block_k, EVEN_K1=D % launch.block_k == 0, EVEN_K2=F % launch.block_k == 0, EXACT_RNE=not dev.type == "cuda",
            BLOCK_E=block_e, SCAN=scan_width(T * K, block_e, launch.block_m),
            NUM_STAGES=launch.num_stages, INTERPRET=dev.type != "cuda",
            GDC=pdl and HAS_PDL and dev.type == "cuda", SPIN=spin, num_warps=launch.num_warps,
        )  # fmt: skip
        if self.common["GDC"]:
            self.common["launch_pdl"] = True
        regs = launch.max_registers if max_registers is None else max_registers
        if regs:
            self.common["maxnreg"] = regs
        if self.fmt == "fp8":
            E1, N1, R1 = p.w13.shape
            E2, N2, R2 = p.w2.shape
            self.d1 = TensorDescriptor.from_tensor(p.w13.view(E1 * N1, R1),
                                                   [launch.block_n, launch.block_k])  # fmt: skip
            self.d2 = TensorDescriptor.from_tensor(p.w2.view(E2 * N2, R2),
                                                   [launch.block_n, launch.block_k])  # fmt: skip

    def run(self) -> None:
        p, ws, L = self.p, self.ws, self.L
        T, K = p.topk_ids_TK.shape
        E = p.local_experts
        D, F = p.x_TD.shape[1], ws.a.shape[-1]
        head = (p.x_TD, p.topk_ids_TK)
        tail = (self.ticket, self.done, T * K, K, p.expert_offset, E, D, F, self.G, self.nb1,
                self.nb2)  # fmt: skip
        if self.fmt == "fp8":
            args = (*head, self.d1, p.w13_scale, p.b13_E2F, ws.a, self.d2, p.w2_scale, p.b2_ED,
                    ws.o, *tail, p.x_TD.stride(0), *p.topk_ids_TK.stride(),
                    p.w13.shape[1], p.b13_E2F.stride(0), ws.a.stride(0), ws.a.stride(1),
                    p.w2.shape[1], p.b2_ED.stride(0), ws.o.stride(0), ws.o.stride(1))  # fmt: skip
            self.kernel = _fused_fp8[(self.G,)](*args, **self.common)
        else:
            args = (*head, p.w13, self.s13, p.b13_E2F, ws.a, p.w2, self.s2, p.b2_ED, ws.o, *tail,
                    p.x_TD.stride(0), *p.topk_ids_TK.stride(), p.w13.stride(0), p.w13.stride(1),
                    self.s13.stride(0), self.s13.stride(1), p.b13_E2F.stride(0), ws.a.stride(0),
                    ws.a.stride(1), p.w2.stride(0), p.w2.stride(1), self.s2.stride(0),
                    self.s2.stride(1), p.b2_ED.stride(0), ws.o.stride(0),
                    ws.o.stride(1))  # fmt: skip
            words = (scale_words(self.s13) and scale_words(self.s2) and L.block_k % 128 == 0)
            self.kernel = _fused_mxfp4[(self.G,)](*args, SCALE_WORDS=words, FOLD_SCALES=self.fold,
                                    **self.common)  # fmt: skip


# --- One body for both roles (the second form) ---------------------------------------------------
# The first form above inlines `_fp8_pass` / `_mxfp4_pass` twice (one a role), and ptxas then
# needs far more registers than the two launches' 80 (sm_90a, offline: FP8 186 uncapped, 296 B of
# stack at 80; MXFP4 255 and spilling uncapped). Here the role only selects the operands (the
# slots' rows, the weights' rows, the scales, the strides) and the epilogue: one weight loop, as in
# each of the two launches. FP8's weights come through one TMA descriptor over a copy of fc1's and
# fc2's weights as one [E * 2F + E * D, R] tensor (so that one descriptor serves both roles; the
# same bytes read, from another place), which needs R the same for both (D = F, as gpt-oss).


@triton.jit
def _fp8_loop(x_at, ids_ptr, w_src, w_row, R, m_ok, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr,
              INTERPRET: tl.constexpr):  # fmt: skip
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    for k0 in tl.range(0, R, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        acc = _fp8_step(acc, w_src, w_row, x_at, k0, R, m_ok, not EVEN_K, True, INTERPRET)
    return acc


@triton.jit
def _fused1_fp8(
    x_ptr, ids_ptr, wcat, ws1_ptr, b1_ptr, a_ptr, ws2_ptr, b2_ptr, o_ptr, ticket_ptr, done_ptr,
    TK, K, expert_offset, E, R, G, NB1, NB2, rows1, rows2,
    stride_xt, stride_it, stride_ik, stride_b1e, stride_at, stride_ak, stride_b2e, stride_ot,
    stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, SPIN: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    pdl_wait(GDC)  # before the ticket: replays never interleave (first form)
    is_fc1, epoch, j, n_block = _role(ticket_ptr, G, NB1, NB2)
    e, count, m0 = touched_pass(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                BLOCK_E, SCAN, BLOCK_M)  # fmt: skip
    if count > 0:
        if SPIN and not is_fc1:
            _wait_pass(done_ptr, j, (epoch + 1) * NB1)
        e64 = e.to(tl.int64)
        # The selects lose the launcher's divisibility hints, which the 16-byte copies of the
        # slots' rows need (without them: 2-byte copies, 186 registers in the offline compile).
        src = tl.multiple_of(tl.where(is_fc1, x_ptr, a_ptr), 16)
        sxt = tl.multiple_of(tl.where(is_fc1, stride_xt, stride_at), 16).to(tl.int64)
        sxk = tl.multiple_of(tl.where(is_fc1, 0, stride_ak), 16).to(tl.int64)
        w_row = tl.where(is_fc1, e * rows1, E * rows1 + e * rows2) + n_block * BLOCK_N
        scale = tl.load(tl.where(is_fc1, ws1_ptr, ws2_ptr) + e64)
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_at = src + (t64 * sxt + k64 * sxk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        acc = _fp8_loop(x_at, ids_ptr, wcat, w_row, R, m_ok, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K,
                        NUM_STAGES, INTERPRET)  # fmt: skip
        h = tl.trans(acc) * scale
        if is_fc1:
            slot_epilogue(h, n_block, e64, t64, k64, m_ok, b1_ptr, a_ptr, stride_b1e, stride_at,
                          stride_ak, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
            tl.debug_barrier()
        else:
            slot_epilogue(h, n_block, e64, t64, k64, m_ok, b2_ptr, o_ptr, stride_b2e, stride_ot,
                          stride_ok, "none", BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
    if is_fc1:
        tl.atomic_add(done_ptr + j, 1, sem="release")


@triton.jit
def _mx_loop(x_at, w_at, s_at, s_words, R, m_ok, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr,
             INTERPRET: tl.constexpr, FOLD_SCALES: tl.constexpr):  # fmt: skip
    """`_mxfp4_pass`'s loop with SCALE_WORDS, its epilogue left to the caller."""
    kg = tl.arange(0, BLOCK_K // 32)
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    r_main = R // BLOCK_K * BLOCK_K
    for k0 in tl.range(0, r_main, BLOCK_K, num_stages=NUM_STAGES if NUM_STAGES else None):
        words = tl.load(s_words + k0 // 128)
        s = tl.reshape((words[:, :, None] >> (8 * tl.arange(0, 4))[None, None, :]) & 0xFF,
                       [BLOCK_N, BLOCK_K // 32]).to(tl.uint8)  # fmt: skip
        acc = _mxfp4_step(acc, w_at, s, x_at, k0, R, m_ok, False, INTERPRET, FOLD_SCALES)
    if not EVEN_K:
        s_last = tl.load(s_at + r_main // 32, mask=(r_main // 32 + kg < R // 32)[None, :], other=0)
        acc = _mxfp4_step(acc, w_at, s_last, x_at, r_main, R, m_ok, True, INTERPRET, FOLD_SCALES)
    return acc


@triton.jit
def _fused1_mxfp4(
    x_ptr, ids_ptr, w1, ws1_ptr, b1_ptr, a_ptr, w2, ws2_ptr, b2_ptr, o_ptr, ticket_ptr, done_ptr,
    TK, K, expert_offset, E, R, G, NB1, NB2,
    stride_xt, stride_it, stride_ik, stride_w1e, stride_w1n, stride_s1e, stride_s1n, stride_b1e,
    stride_at, stride_ak,
    stride_w2e, stride_w2n, stride_s2e, stride_s2n, stride_b2e, stride_ot, stride_ok,
    GLU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr, EXACT_RNE: tl.constexpr, BLOCK_E: tl.constexpr, SCAN: tl.constexpr,
    NUM_STAGES: tl.constexpr, INTERPRET: tl.constexpr, GDC: tl.constexpr, SPIN: tl.constexpr,
    FOLD_SCALES: tl.constexpr,
):  # fmt: skip
    pdl_launch_dependents(GDC)
    pdl_wait(GDC)
    is_fc1, epoch, j, n_block = _role(ticket_ptr, G, NB1, NB2)
    e, count, m0 = touched_pass(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, E, j,
                                BLOCK_E, SCAN, BLOCK_M)  # fmt: skip
    if count > 0:
        if SPIN and not is_fc1:
            _wait_pass(done_ptr, j, (epoch + 1) * NB1)
        e64 = e.to(tl.int64)
        # The selects lose the launcher's divisibility hints, which the 16-byte copies of the
        # slots' rows need (without them: 2-byte copies, 186 registers in the offline compile).
        src = tl.multiple_of(tl.where(is_fc1, x_ptr, a_ptr), 16)
        sxt = tl.multiple_of(tl.where(is_fc1, stride_xt, stride_at), 16).to(tl.int64)
        sxk = tl.multiple_of(tl.where(is_fc1, 0, stride_ak), 16).to(tl.int64)
        w_ptr = tl.multiple_of(tl.where(is_fc1, w1, w2), 16)
        s_ptr = tl.multiple_of(tl.where(is_fc1, ws1_ptr, ws2_ptr), 16)
        swe = tl.multiple_of(tl.where(is_fc1, stride_w1e, stride_w2e), 16).to(tl.int64)
        swn = tl.multiple_of(tl.where(is_fc1, stride_w1n, stride_w2n), 16).to(tl.int64)
        sse = tl.multiple_of(tl.where(is_fc1, stride_s1e, stride_s2e), 16).to(tl.int64)
        ssn = tl.multiple_of(tl.where(is_fc1, stride_s1n, stride_s2n), 16).to(tl.int64)
        w_at, s_at, s_words = _mx_ptrs(w_ptr, s_ptr, e64, n_block, swe, swn, sse, ssn, BLOCK_N,
                                       BLOCK_K)  # fmt: skip
        t64, k64 = expert_slots(ids_ptr, stride_it, stride_ik, TK, K, expert_offset, e, count, m0,
                                BLOCK_M, SCAN)  # fmt: skip
        m_ok = m0 + tl.arange(0, BLOCK_M) < count
        x_at = src + (t64 * sxt + k64 * sxk)[None, :] + tl.arange(0, BLOCK_K)[:, None]
        acc = _mx_loop(x_at, w_at, s_at, s_words, R, m_ok, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K,
                       NUM_STAGES, INTERPRET, FOLD_SCALES)  # fmt: skip
        h = tl.trans(acc)
        if is_fc1:
            slot_epilogue(h, n_block, e64, t64, k64, m_ok, b1_ptr, a_ptr, stride_b1e, stride_at,
                          stride_ak, GLU, BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
            tl.debug_barrier()
        else:
            slot_epilogue(h, n_block, e64, t64, k64, m_ok, b2_ptr, o_ptr, stride_b2e, stride_ot,
                          stride_ok, "none", BLOCK_M, BLOCK_N, EXACT_RNE)  # fmt: skip
    if is_fc1:
        tl.atomic_add(done_ptr + j, 1, sem="release")


class FusedStep1(FusedStep):
    """The second form: one body for both roles (above)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        p = self.p
        assert p.w13.shape[2] == p.w2.shape[2], "one body needs R the same for fc1 and fc2"
        c = dict(self.common)
        even1, even2 = c.pop("EVEN_K1"), c.pop("EVEN_K2")
        c["EVEN_K"] = even1 and even2
        self.common1 = c
        if self.fmt == "fp8":
            E1, N1, R1 = p.w13.shape
            E2, N2, _ = p.w2.shape
            self.wcat = torch.cat([p.w13.reshape(E1 * N1, R1), p.w2.reshape(E2 * N2, R1)])
            self.dcat = TensorDescriptor.from_tensor(self.wcat, [self.L.block_n, self.L.block_k])
        else:
            assert scale_words(self.s13) and scale_words(self.s2) and self.L.block_k % 128 == 0

    def run(self) -> None:
        p, ws = self.p, self.ws
        T, K = p.topk_ids_TK.shape
        E = p.local_experts
        R = p.x_TD.shape[1]
        tail = (self.ticket, self.done, T * K, K, p.expert_offset, E, R, self.G, self.nb1,
                self.nb2)  # fmt: skip
        if self.fmt == "fp8":
            args = (p.x_TD, p.topk_ids_TK, self.dcat, p.w13_scale, p.b13_E2F, ws.a, p.w2_scale,
                    p.b2_ED, ws.o, *tail, p.w13.shape[1], p.w2.shape[1], p.x_TD.stride(0),
                    *p.topk_ids_TK.stride(), p.b13_E2F.stride(0), ws.a.stride(0), ws.a.stride(1),
                    p.b2_ED.stride(0), ws.o.stride(0), ws.o.stride(1))  # fmt: skip
            self.kernel = _fused1_fp8[(self.G,)](*args, **self.common1)
        else:
            args = (p.x_TD, p.topk_ids_TK, p.w13, self.s13, p.b13_E2F, ws.a, p.w2, self.s2,
                    p.b2_ED, ws.o, *tail, p.x_TD.stride(0), *p.topk_ids_TK.stride(),
                    p.w13.stride(0), p.w13.stride(1), self.s13.stride(0), self.s13.stride(1),
                    p.b13_E2F.stride(0), ws.a.stride(0), ws.a.stride(1), p.w2.stride(0),
                    p.w2.stride(1), self.s2.stride(0), self.s2.stride(1), p.b2_ED.stride(0),
                    ws.o.stride(0), ws.o.stride(1))  # fmt: skip
            self.kernel = _fused1_mxfp4[(self.G,)](*args, FOLD_SCALES=self.fold, **self.common1)
