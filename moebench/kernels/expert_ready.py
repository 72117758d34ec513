"""fc2 waiting for fc1 expert by expert, not for the whole of fc1 (`Launch.expert_ready`).

Why: with programmatic dependent launch, fc2's programs become resident while fc1's second wave
streams (the FP8 tile at 16-64 tokens: 1,440 fc1 programs at 6 an SM on 132 SMs), then wait for
all of fc1 before they read anything. fc1's programs run in expert order, so most of fc2's
experts have all of their activations long before fc1's last program ends. Measured on an H100
(docs/perf/HISTORY.md, 2026-12-06): fc2 with no wait at all (wrong outputs, a timing ablation)
took 10-14 us off a 140-160 us step; this is the exact form of that.

The counters: int32 ``ready`` [2, E] on the device, zero when made, never reset. Row 0 counts fc1
programs that have *started* on expert e, row 1 those that have *finished* it (their stores
done). Both only grow (wrapping past 2^31, compared by their difference), so the state after any
sequence of launches (fc1 alone, fc2 alone, a step, an interrupted step) is a valid start for the
next one: fc2 waits while started - done > 0, which is never the case unless an fc1 launch is in
flight.

The order that makes it exact:
- an fc1 program (`signal_started`) waits for the kernel before it (its dependent-launch wait),
  counts itself started, and only then lets fc2 launch, the trigger data-dependent on the
  counter's returned value (so the count is performed in the L2 before fc2 can be scheduled);
  fc2's programs therefore start only once every fc1 program has counted itself, and read a
  started count that no longer grows during this step;
- it counts itself done (`signal_done`) after a CTA barrier behind its stores, with release
  semantics; fc2 (`wait_for_expert`) reads done with acquire semantics until it equals started;
- fc1 counts itself started after its own dependent-launch wait, so the next step's fc1 cannot
  raise started while this step's fc2 still waits (the next fc1 waits for this step's combine,
  which waits for this fc2).
Without programmatic dependent launch (the interpreter, or no PDL) the kernels run one after the
other and fc2 finds started == done at once.

What it asks of the caller: fc1 and fc2 of one step share one counters tensor (the arm makes one
per build, `grouped_decode.build_stages`; fc2 given other counters than its fc1's would not wait
at all), and fc2 with "wait" follows its fc1 or a kernel that does not let the next one launch
early: it skips the whole-grid wait, so after another fc2 of the same stages (which lets the next
launch start at once) the two could overlap. The arm's step, each stage timed alone (a graph a
call, a flush or a sleep before it) and the model regime's layers all keep that.

A wait that does not end within WAIT_LIMIT reads of the counter gives up and lets the program
run: its outputs may then be wrong, which the reference gate catches; a hang would not be.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moebench.kernels.jit import pdl_launch_dependents_after, pdl_wait

WAIT_LIMIT = tl.constexpr(1 << 22)

# A launch's role, as the kernels' READY: fc1 signals, fc2 waits, "" neither.
READY_ROLES = {"": 0, "signal": 1, "wait": 2}


@triton.jit
def signal_started(ready_ptr, e, GDC: tl.constexpr):
    """fc1: after the previous kernel (its dependent-launch wait), count this program started on
    expert ``e`` and only then let the next kernel launch (module docstring)."""
    pdl_wait(GDC)
    old = tl.atomic_add(ready_ptr + e, 1, sem="relaxed")
    pdl_launch_dependents_after(old, GDC)


@triton.jit
def signal_done(ready_ptr, e, E):
    """fc1: this program's stores are done; count it finished on expert ``e``."""
    tl.debug_barrier()
    tl.atomic_add(ready_ptr + E + e, 1, sem="release")


@triton.jit
def wait_for_expert(ready_ptr, e, E):
    """fc2: wait until every fc1 program started on expert ``e`` has finished (module
    docstring), at most WAIT_LIMIT reads."""
    started = tl.atomic_add(ready_ptr + e, 0, sem="acquire")
    done = tl.atomic_add(ready_ptr + E + e, 0, sem="acquire")
    reads = 0
    while (started - done > 0) & (reads < WAIT_LIMIT):
        done = tl.atomic_add(ready_ptr + E + e, 0, sem="acquire")
        reads += 1


@triton.jit
def wait_for_inputs(ready_ptr, e, E, READY: tl.constexpr, GDC: tl.constexpr):
    """What a tile program on expert ``e`` does before it reads its inputs, which may be the
    previous kernel's outputs: READY 1 (fc1) `signal_started`, 2 (fc2) `wait_for_expert`, 0 the
    dependent-launch wait for the whole previous kernel."""
    if READY == 1:
        signal_started(ready_ptr, e, GDC)
    elif READY == 2:
        wait_for_expert(ready_ptr, e, E)
    else:
        pdl_wait(GDC)


def ready_counters(experts: int, device) -> torch.Tensor:
    """New counters for ``experts`` local experts (module docstring): int32 [2, E], zero."""
    return torch.zeros(2, experts, dtype=torch.int32, device=device)


def check_ready(ready: torch.Tensor | None, experts: int, device, check) -> None:
    """The launcher's check of ``ready``: int32 [2, E], contiguous, on the operands' device."""
    check(
        ready is not None
        and ready.dtype == torch.int32
        and tuple(ready.shape) == (2, experts)
        and ready.is_contiguous()
        and ready.device == device,
        f"expert_ready needs int32 [2, {experts}] contiguous counters on {device} "
        f"(expert_ready.ready_counters), got "
        f"{None if ready is None else (ready.dtype, tuple(ready.shape), str(ready.device))}",
    )
