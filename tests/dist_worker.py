"""One rank of the distributed tests, started by torchrun from tests/run/test_distributed.py.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/dist_worker.py MODE OUT

Each rank writes what it saw to OUT/rank<r>.json; the test reads and judges it. MODE:

- ``units``: the exchange (rows reach their experts' ranks and come back to their tokens, for
  dp x tp = 2 x 1 and 1 x 2), then the agreement: a rank's error reaches every rank, and a rank
  blocked in a collective by a peer that failed gets out by the timeout.
- ``runner_failure``: a whole distributed run in which rank 1 fails while timing; rank 0 must
  record the failure in the manifest and both ranks must stop (OUT holds the results folder).
- ``arm_error``: a whole distributed run in which one arm raises on every rank; the run must end
  ``errors`` with that arm's ``error`` rows, the other arms timed.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from unittest import mock

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from moebench.comm import world as distributed  # noqa: E402
from moebench.comm.exchange import Exchange  # noqa: E402
from moebench.core.errors import MoebenchError  # noqa: E402
from moebench.spec.load import parse_scenario  # noqa: E402

SCENARIO = """\
name: worker
model: {{id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}}
topology: {{ep: 2, dp: {dp}, tp: {tp}, mode: distributed}}
routing: {{family: uniform, seed: 5}}
shape: {{tokens_per_rank: {tokens}, alignment: 16}}
precision: bf16
measure: {{regimes: [ffn], warmup: 0, blocks: 1, iterations: 1}}
"""


def scenario(dp: int = 2, tp: int = 1, tokens: int = 5):
    return parse_scenario(SCENARIO.format(dp=dp, tp=tp, tokens=tokens))


def exchange_roundtrip(world, s) -> dict:
    """Dispatch, an 'FFN' that returns each received row as it came, combine: every token must
    come back as the weighted sum of its K copies, sum_k w[t, k] * x[t]."""
    from moebench.routing import synthetic as routing
    from moebench.spec.schema import global_tokens, local_experts

    T, K = global_tokens(s), s.model.top_k
    rt = routing.synthesize(family="uniform", tokens=T, experts=s.model.experts, top_k=K,
                            ep=s.topology.ep, seed=5)  # fmt: skip
    g = torch.Generator().manual_seed(1)
    x = torch.randn(T, s.model.hidden, generator=g).to(torch.bfloat16)
    t0, t1 = distributed.token_range(s, world.rank)
    ex = Exchange(
        world, x_TD=x[t0:t1], x_sf_TG4=None, topk_ids_TK=rt.topk_ids_TK[t0:t1],
        topk_weights_TK=rt.topk_weights_TK[t0:t1], experts_per_rank=local_experts(s),
        slots_per_rank=distributed.max_tokens(s) * K,
    )  # fmt: skip
    ex.dispatch()
    E = local_experts(s)
    live = ex.ids_R1[:, 0] >= 0
    owned = bool(((ex.ids_R1[live, 0] // E) == world.rank).all())
    ex.combine(ex.x_RD.clone())
    want = (rt.topk_weights_TK[t0:t1, :, None] * x[t0:t1, None, :].float()).sum(1)
    local_slots = int(((rt.topk_ids_TK // E) == world.rank).sum())
    return {
        "tokens": [t0, t1],
        "received_live": int(live.sum()),
        "expected_live": local_slots,
        "owned": owned,
        "max_error": float((ex.y_TD.float() - want).abs().max()) if t1 > t0 else 0.0,
    }


def units(out: Path) -> dict:
    seen: dict = {}
    world = distributed.init_world(scenario(), "cpu", timeout_s=4.0)
    seen["dp2"] = exchange_roundtrip(world, scenario())
    seen["tp2"] = exchange_roundtrip(world, scenario(dp=1, tp=2, tokens=7))

    def fails_on_one():
        if world.rank == 1:
            raise ValueError("rank one broke")
        return "fine"

    try:
        distributed.phase(world, "in a test", fails_on_one)
    except distributed.RankFailure as exc:
        seen["failure"] = {"message": exc.message, "input": exc.input_error}

    def bad_input():
        raise MoebenchError("same mistake everywhere")

    try:
        distributed.phase(world, "in a test", bad_input)
    except MoebenchError as exc:
        seen["input"] = {"type": type(exc).__name__, "message": str(exc)}

    def blocked():  # rank 1 fails before the collective rank 0 waits in
        if world.rank == 1:
            raise RuntimeError("gone before the all-to-all")
        buf = torch.zeros(2, dtype=torch.int32)
        dist.all_to_all_single(torch.empty_like(buf), buf)

    try:
        distributed.phase(world, "in a blocked collective", blocked)
    except distributed.RankFailure as exc:
        seen["blocked"] = {"message": exc.message, "kinds": [k for _, k, _ in exc.failures]}
    return seen


def runner_failure(out: Path) -> dict:
    from moebench.run import layer, start
    from moebench.run.options import RunOptions

    s = scenario()
    real = layer.time_layer

    def broken(*args, **kwargs):
        if kwargs["cols"]["rank"] == 1:
            raise RuntimeError("injected while timing")
        return real(*args, **kwargs)

    options = RunOptions(results_dir=out / "results", dist_timeout_s=8.0)
    with mock.patch.object(layer, "time_layer", broken):
        try:
            start.run(s, options)
        except distributed.RankFailure as exc:
            return {"message": exc.message}
    return {"message": None}


def arm_error(out: Path) -> dict:
    """An arm that raises on every rank: ``error`` rows and a run that ends ``errors`` (exit 1),
    the other arms gated and timed, as in simulated mode."""
    import dataclasses

    import arms.prefill.prefix_sum as module
    from moebench.run import start
    from moebench.run.options import RunOptions

    def broken(ws):
        raise RuntimeError("injected arm error")

    options = RunOptions(results_dir=out / "results", dist_timeout_s=30.0)
    with mock.patch.object(module, "ARM", dataclasses.replace(module.ARM, build=broken)):
        summary = start.run(scenario(), options)
    return {"status": summary.status, "errors": summary.errors, "mismatches": summary.mismatches}


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    rank = int(os.environ["RANK"])
    try:
        modes = {"units": units, "runner_failure": runner_failure, "arm_error": arm_error}
        seen = modes[mode](out)
    except BaseException:
        seen = {"crash": traceback.format_exc()}
    (out / f"rank{rank}.json").write_text(json.dumps(seen, indent=1))
    sys.stdout.flush()
    os._exit(0)  # a failed collective may be left unmatched: skip the teardown


if __name__ == "__main__":
    main()
