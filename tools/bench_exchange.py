"""Where the distributed dispatch's time goes: packing, the counts exchange and the rows exchange,
against a plain all_to_all_single of the same bytes, on real ranks (issue 7's follow-up).

The Exchange of moebench/comm/exchange.py at the v4-flash shapes (512 tokens a rank, top-8, hidden
4096, FP8 rows with packed UE8M0 scale words and the expert id: 4,228 bytes a row; 4,096 slot rows
per destination). Each piece is timed alone with CUDA events after a barrier, median of 30 reps,
ranks in step; bandwidth counts the bytes that cross to other ranks. Writes OUT/bench_exchange.json
from rank 0 and prints a table.

Usage (GPU, one process a GPU): torchrun --nproc-per-node N tools/bench_exchange.py OUT
Without torchrun (one GPU): python3 tools/bench_exchange.py OUT [W] times the packing alone for a
world of W ranks (default 2); the collectives need real ranks.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from moebench.comm.exchange import Exchange  # noqa: E402
from moebench.comm.world import NCCL_ENV, World  # noqa: E402

T, K, D, EXPERTS = 512, 8, 4096, 256
REPS = 30
SPIN_CYCLES = 2_000_000  # ~1 ms at 2 GHz: longer than the host needs to queue any piece below


def timed(fn, reps: int = REPS) -> float:
    """Median device microseconds of ``fn`` on this rank, every rep started together with the
    other ranks. The GPU spins before the start event while the host queues ``fn``'s launches,
    so a sequence of small PyTorch ops is timed on the device, not at the host's launch rate."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        if dist.is_initialized():
            dist.barrier()
        torch.cuda.synchronize()
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return statistics.median(out)


def main(out_dir: str) -> None:
    for key, value in NCCL_ENV.items():
        os.environ.setdefault(key, value)
    ranks = "LOCAL_RANK" in os.environ  # under torchrun: real ranks and collectives
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    if ranks:
        dist.init_process_group("nccl")
        rank, W = dist.get_rank(), dist.get_world_size()
    else:
        rank, W = 0, int(sys.argv[2]) if len(sys.argv) > 2 else 2
    dev = torch.device("cuda", local)
    world = World(rank=rank, size=W, local_rank=local, device=dev, backend="nccl",
                  timeout_s=300.0, ctl=None)  # fmt: skip
    g = torch.Generator(device=dev).manual_seed(rank)
    x = torch.randn(T, D, device=dev, generator=g).to(torch.float8_e4m3fn)
    sf = torch.randint(0, 1 << 30, (T, D // 512), device=dev, dtype=torch.int32, generator=g)
    ids = torch.randint(0, EXPERTS, (T, K), device=dev, dtype=torch.int32, generator=g)
    weights = torch.rand(T, K, device=dev, generator=g)
    ex = Exchange(world, x_TD=x, x_sf_TG4=sf, topk_ids_TK=ids, topk_weights_TK=weights,
                  experts_per_rank=EXPERTS // W, slots_per_rank=T * K)  # fmt: skip
    R, B = ex.recv_RB.shape
    cross = (W - 1) * ex.S * B  # bytes one rank sends to others in the rows exchange
    rows: list[dict] = []

    def row(name: str, us: float, nbytes: int | None = None) -> None:
        gbs = nbytes / us / 1e3 if nbytes else float("nan")
        rows.append({"piece": name, "us": us, "cross_bytes": nbytes or 0, "GB/s": gbs})

    if ranks:
        row("dispatch (whole, as shipped)", timed(ex.dispatch), cross)
        row(
            "all_to_all rows [R, B] uint8",
            timed(lambda: dist.all_to_all_single(ex.recv_RB, ex.send_RB)),
            cross,
        )
        row(
            "all_to_all counts [W] int32",
            timed(lambda: dist.all_to_all_single(ex.recv_counts_W, ex.send_counts_W)),
        )
        # The same bytes with a 16-byte multiple row and a wider element type.
        flat_send = torch.empty(R * B // 4, dtype=torch.int32, device=dev)
        flat_recv = torch.empty_like(flat_send)
        row(
            "all_to_all same bytes int32",
            timed(lambda: dist.all_to_all_single(flat_recv, flat_send)),
            cross,
        )
        y = torch.randn(R, D, device=dev).to(torch.bfloat16)
        row("combine all_to_all [R, D] bf16", timed(lambda: dist.all_to_all_single(ex.back_RD, y)),
            (W - 1) * ex.S * D * 2)  # fmt: skip
    # Packing alone: everything dispatch does before its collectives, as shipped (4-byte words)
    # and as first written (byte-wise index_copy_ of the row and scale columns).
    row("pack (Exchange.pack, word-wise)", timed(ex.pack))
    dest = (ex.ids_TK.view(-1) // ex.E).to(torch.int64)
    xb, sb = ex._cols
    tmp_x = torch.empty(T * K, xb, dtype=torch.uint8, device=dev)
    tmp_sf = torch.empty(T * K, sb, dtype=torch.uint8, device=dev)
    sf_bytes = ex.x_sf_TG4.contiguous().view(torch.uint8)  # row-major scale bytes [T, sb]

    def pack_bytewise() -> None:
        seen = (dest[:, None] == ex._ranks_W[None, :]).cumsum(0)
        pos = seen.gather(1, dest[:, None]).squeeze(1) - 1
        r = dest * ex.S + pos
        torch.index_select(ex.x_bytes, 0, ex._token_of_slot, out=tmp_x)
        ex.send_RB[:, :xb].index_copy_(0, r, tmp_x)
        torch.index_select(sf_bytes, 0, ex._token_of_slot, out=tmp_sf)
        ex.send_RB[:, xb : xb + sb].index_copy_(0, r, tmp_sf)
        ex._send_ids_R.index_copy_(0, r, ex.ids_TK.view(-1))

    ex.pack()
    shipped = ex.send_RB.clone()
    pack_bytewise()
    same = torch.equal(shipped, ex.send_RB)
    row(f"pack (first version; same bytes: {same})", timed(pack_bytewise))
    row("  slot rows, shipped (a scan along each row of [W, N])", timed(ex.slot_rows))
    N = dest.shape[0]
    slot_N = torch.arange(N, device=dev)

    def rows_flat() -> None:  # one 1-D scan of the flattened [W * N] mask
        hit = (ex._ranks_W[:, None] == dest[None, :]).view(-1)
        seen = hit.cumsum(0, dtype=torch.int32)
        upto = seen[ex._ranks_W * N + (N - 1)]
        before = upto - torch.diff(upto, prepend=upto.new_zeros(1))
        pos = seen[dest * N + slot_N] - 1 - before[dest]
        ex.slot_row_TK.view(-1).copy_(dest * ex.S + pos)
        ex.send_counts_W.copy_(upto - before)

    def rows_dim0() -> None:  # the first version: a scan down the columns of [N, W]
        seen = (dest[:, None] == ex._ranks_W[None, :]).cumsum(0)
        pos = seen.gather(1, dest[:, None]).squeeze(1) - 1
        ex.slot_row_TK.view(-1).copy_(dest * ex.S + pos)
        ex.send_counts_W.copy_(seen[-1])

    shipped_rows = ex.slot_rows().clone()
    for name, fn in (
        ("one 1-D scan of [W * N]", rows_flat),
        ("dim-0 scan of [N, W]", rows_dim0),
    ):
        fn()
        same = torch.equal(ex.slot_row_TK.view(-1), shipped_rows)
        row(f"  slot rows, {name} (same rows: {same})", timed(fn))
    r = ex.slot_rows()
    row("  word copies alone", timed(lambda: ex._send_RP.index_copy_(0, r, ex._slots_SP)))
    if ranks:
        for mb in (1, 4, 16, 64):
            n = mb << 20
            a, b = (
                torch.empty(n, dtype=torch.uint8, device=dev),
                torch.empty(n, dtype=torch.uint8, device=dev),
            )
            row(
                f"all_to_all {mb} MB total",
                timed(lambda a=a, b=b: dist.all_to_all_single(b, a)),
                n * (W - 1) // W,
            )
        # Peer copy without NCCL: one rank's block straight into the other GPU's memory.
        if W == 2 and torch.cuda.can_device_access_peer(local, 1 - local):
            other = torch.empty(ex.S * B, dtype=torch.uint8, device=torch.device("cuda", 1 - local))
            src = torch.empty(ex.S * B, dtype=torch.uint8, device=dev)
            row(
                "peer copy_ of one block (no NCCL)",
                timed(lambda: other.copy_(src, non_blocking=True)),
                ex.S * B,
            )
    peer = ranks and W > 1 and torch.cuda.can_device_access_peer(local, (local + 1) % W)
    if rank == 0:
        print(f"world {W}, R {R} rows x B {B} bytes, peer access {peer}")
        for r in rows:
            print(f"{r['piece']:<40} {r['us']:>10.1f} us  {r['GB/s']:>8.1f} GB/s")
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        nccl = ".".join(map(str, torch.cuda.nccl.version()))
        meta = {"world": W, "rows": R, "row_bytes": B, "peer_access": peer,
                "torch": torch.__version__, "nccl": nccl}  # fmt: skip
        (Path(out_dir) / "bench_exchange.json").write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1)
        )
    if ranks:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
