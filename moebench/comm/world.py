"""Real ranks (docs/DESIGN.md section 7): process group, all-to-all exchange, agreeing, gathering.

`topology.mode: distributed` runs one process per rank under torchrun, or under
``moebench run --nproc N``, which launches torchrun itself (``launch``). The world is dp x tp
ranks and the experts are spread over ep = dp x tp of them: rank r owns the global experts
[r * E, (r + 1) * E). Data moves over torch.distributed only: NCCL on GPUs, gloo on the CPU.

Tokens: every rank builds the same global routing and tokens from the seed; rank r = d * tp + j
takes its DP replica d's tokens [d * T_rank, (d + 1) * T_rank), split evenly among the replica's
tp ranks so that each token is dispatched exactly once (``token_range``; with tp = 1 rank r's
tokens are [r * T_rank, (r + 1) * T_rank)).

The exchange is ``comm.exchange``.

Failure: work is cut into phases (``phase``); at the end of each, every rank states on a gloo
control group whether it failed, so a rank's error reaches rank 0 (which records it) and every
rank stops at the same point. A rank blocked in a data collective by a peer that failed gets out
by the collective timeout (``init_process_group(timeout=...)``; gloo raises, and waits on a CUDA
event poll with a deadline, ``World.wait``), then joins the control exchange, whose own timeout is
longer. Legend: T tokens of this rank, K top-k, D hidden, W world size, S slot rows per
destination, R = W * S received rows, B payload bytes per row, G4 packed scale words.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from moebench.core.errors import MoebenchError, ScenarioError, typed_line
from moebench.spec.schema import Scenario

# NVLink multicast (NVLS) stays off in every rank this module starts or joins.
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}  # fmt: skip
DEFAULT_TIMEOUT_S = 300.0
# Before each timed pass the GPU spins (~1 ms at 2 GHz) while the host queues the whole pass:
# dispatch's index work and two collectives, the FFN, the meeting point and the return. Without
# it, event-to-event times would include the host's launch latency.
SPIN_CYCLES = 2_000_000


class RankFailure(Exception):
    """One or more ranks failed in a phase; every rank raises it at the same point.

    ``failures`` is [(rank, kind, message)], kind ``input`` (a MoebenchError: bad scenario or
    environment), ``timeout`` (waited for a peer) or ``error``. ``message`` leads with a root cause.
    """

    def __init__(self, where: str, failures: list[tuple[int, str, str]]):
        self.where = where
        self.failures = failures
        causes = [f for f in failures if f[1] != "timeout"] or failures
        first = causes[0]
        others = [f"rank {r}: {m}" for r, _, m in failures if (r, m) != (first[0], first[2])]
        more = f" (also {'; '.join(others)})" if others else ""
        self.message = f"rank {first[0]} failed {where}: {first[2]}{more}"
        super().__init__(self.message)

    @property
    def input_error(self) -> bool:
        return all(kind == "input" for _, kind, _ in self.failures)


@dataclass(frozen=True, kw_only=True)
class World:
    rank: int
    size: int
    local_rank: int
    device: torch.device
    backend: str  # nccl | gloo
    timeout_s: float
    ctl: Any  # a gloo group for control messages and gathered rows (CPU objects)

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def align(self) -> None:
        """Meet the other ranks on the data backend (untimed): a pass starts together."""
        flag = torch.zeros(1, device=self.device)
        dist.all_reduce(flag)

    def wait(self, event: torch.cuda.Event) -> None:
        """Wait for a CUDA event, polling, so that a peer that never comes ends in an error here
        (before NCCL's watchdog takes the process down) rather than a hang."""
        deadline = time.monotonic() + 0.8 * self.timeout_s
        while not event.query():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no progress in {0.8 * self.timeout_s:.0f} s: a peer rank stopped"
                )
            time.sleep(20e-6)


# --------------------------------------------------------------------------- the world


def env_world() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when started by torchrun, else None."""
    if "WORLD_SIZE" not in os.environ:
        return None
    get = os.environ.get
    return int(get("RANK", "0")), int(get("WORLD_SIZE")), int(get("LOCAL_RANK", get("RANK", "0")))


def world_size_needed(s: Scenario) -> int:
    return s.topology.dp * s.topology.tp


def check_world(s: Scenario, size: int) -> None:
    """ScenarioError unless ``size`` ranks fit the scenario (one rank per expert-parallel rank)."""
    t = s.topology
    where = s.path or s.name
    if t.mode != "distributed":
        raise ScenarioError(
            f"{where}: topology.mode: is {t.mode!r}; launching ranks needs 'distributed'"
        )
    need = world_size_needed(s)
    if size != need:
        raise ScenarioError(
            f"{where}: topology: the world has {size} rank(s) but the scenario needs dp x tp = "
            f"{t.dp} x {t.tp} = {need} (one rank per expert-parallel rank, ep = {t.ep})"
        )


def token_range(s: Scenario, rank: int) -> tuple[int, int]:
    """[start, end) of rank's tokens in the global step (module docstring)."""
    T, tp = s.shape.tokens_per_rank, s.topology.tp
    d, j = divmod(rank, tp)
    return d * T + j * T // tp, d * T + (j + 1) * T // tp


def max_tokens(s: Scenario) -> int:
    """The most tokens any rank dispatches: the slot blocks are sized for it."""
    T, tp = s.shape.tokens_per_rank, s.topology.tp
    return -(-T // tp)


def init_world(s: Scenario, device_type: str, timeout_s: float) -> World:
    """Join the process group torchrun set up; errors name what does not fit."""
    env = env_world()
    if env is None:
        n = world_size_needed(s)
        raise MoebenchError(
            f"{s.path or s.name}: topology.mode distributed needs one process per rank: pass "
            f"--nproc {n}, or start it under torchrun --nproc-per-node {n}"
        )
    rank, size, local = env
    check_world(s, size)
    if not timeout_s > 0:
        raise MoebenchError(f"--dist-timeout: must be > 0 seconds, got {timeout_s:g}")
    for key, value in NCCL_ENV.items():
        os.environ.setdefault(key, value)
    if device_type == "cuda":
        if local >= torch.cuda.device_count():
            raise MoebenchError(
                f"rank {rank}: local rank {local} but only {torch.cuda.device_count()} GPU(s) "
                "are visible"
            )
        torch.cuda.set_device(local)
        device, backend = torch.device("cuda", local), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, timeout=dt.timedelta(seconds=timeout_s))
    # The control group outlives a data collective that timed out, hence its longer timeout.
    ctl = dist.new_group(backend="gloo", timeout=dt.timedelta(seconds=2 * timeout_s + 60))
    return World(rank=rank, size=size, local_rank=local, device=device, backend=backend,
                 timeout_s=timeout_s, ctl=ctl)  # fmt: skip


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


# --------------------------------------------------------------------------- agreeing


def _kind(exc: BaseException) -> str:
    if isinstance(exc, MoebenchError):
        return "input"
    text = str(exc)
    if isinstance(exc, TimeoutError) or "Timed out" in text or "timed out" in text:
        return "timeout"
    return "error"


def describe(exc: BaseException) -> str:
    return typed_line(exc, 300)


def phase(world: World, where: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on this rank, then agree with every rank on the control group.

    Returns ``fn``'s result when no rank failed. Otherwise every rank raises at the same point: a
    rank whose own ``fn`` raised a MoebenchError re-raises it when every failure is of that kind
    (a bad scenario is the same error everywhere), and RankFailure otherwise.
    """
    own: BaseException | None = None
    status = None
    result = None
    try:
        result = fn()
    except Exception as exc:  # reported to every rank below, then raised again
        own = exc
        status = (_kind(exc), describe(exc))
    statuses = all_gather(world, status)
    failures = [(r, st[0], st[1]) for r, st in enumerate(statuses) if st is not None]
    if not failures:
        return result
    failure = RankFailure(where, failures)
    if isinstance(own, MoebenchError) and failure.input_error:
        raise own
    raise failure from own


def all_gather(world: World, obj: Any) -> list:
    out: list = [None] * world.size
    dist.all_gather_object(out, obj, group=world.ctl)
    return out


def gather(world: World, obj: Any) -> list | None:
    """Every rank's ``obj`` on rank 0 (a list by rank), None elsewhere; outside timed regions."""
    out: list | None = [None] * world.size if world.leader else None
    dist.gather_object(obj, out, dst=0, group=world.ctl)
    return out


def broadcast(world: World, obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    box = [obj if world.leader else None]
    dist.broadcast_object_list(box, src=0, group=world.ctl)
    return box[0]


# --------------------------------------------------------------------------- launching


def launch(nproc: int, args: list[str], *, command: str) -> int:
    """Run ``moebench ARGS`` as ``nproc`` ranks under torchrun; returns the run's exit code.

    Rank 0 writes the exit code the CLI means (0, 1, 2, 3) to a file, so that the ranks can end
    without torchrun reading an ordinary outcome as a crashed worker; a crash gives torchrun's code.
    """
    env = dict(os.environ)
    env.update(NCCL_ENV)
    env.setdefault("OMP_NUM_THREADS", "1")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory(prefix="moebench-launch-") as tmp:
        code_file = Path(tmp) / "exit_code"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(nproc), "--module", "moebench.cli", *args,
               "--exit-code-file", str(code_file), "--launch-command", command]  # fmt: skip
        proc = subprocess.run(cmd, env=env, check=False)
        try:
            return int(code_file.read_text().strip())
        except (OSError, ValueError):
            return proc.returncode or 1
