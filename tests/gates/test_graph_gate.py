"""Gates 5 and 6 on the CPU: the routing variants of the graph replay gate, the gate's comparison
run with an eager stand-in for the graph, and the kernel names the arms declare for the dispatch
gate (the graph and the profiler themselves run only on the GPU)."""

import ast
from pathlib import Path

import pytest
import torch

from moebench.arm import prefill as pipeline
from moebench.arm import registry
from moebench.gates import dispatch as dispatch_gate
from moebench.gates import graph as graph_gate
from moebench.plan.inputs import build_problem, default_capacity
from moebench.routing.synthetic import rows_needed

ARMS = {name: registry.resolve(name) for name in registry.builtin_names()}

KERNELS = Path(pipeline.__file__).parents[1] / "kernels"


def jit_functions() -> set[str]:
    """Names of every @triton.jit function in moebench/kernels."""
    names = set()
    for path in KERNELS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                "jit" in ast.unparse(d) for d in node.decorator_list
            ):
                names.add(node.name)
    return names


def random_ids(T, K, E_global, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(E_global, generator=g)[:K] for _ in range(T)]).int()


@pytest.mark.parametrize(
    "T, K, E, offset, E_global, A, cap",
    [
        (8, 2, 4, 0, 8, 16, 96),  # rank 0 of EP2, capacity from the formula
        (8, 2, 4, 4, 8, 16, 96),  # rank 1: ids offset by the local experts
        (5, 3, 3, 0, 3, 16, 48),  # K = E, T smaller than the alignment, one rank
        (40, 2, 4, 4, 8, 16, None),  # tight capacity below the slots: a capacity-bound full buffer
        (3, 1, 7, 0, 7, 8, 64),  # prime E, fewer slots than an aligned chunk of every expert
    ],
)
def test_routing_variants_are_valid_and_say_what_they_mean(T, K, E, offset, E_global, A, cap):
    ids = random_ids(T, K, E_global)
    base = graph_gate.local_counts(ids, offset, E)
    cap = cap or rows_needed(base, A)
    assert rows_needed(base, A) <= cap  # the case's own routing fits
    v = graph_gate.routing_variants(ids, expert_offset=offset, experts=E, alignment=A,
                                    capacity_rows=cap)  # fmt: skip
    assert set(v) == set(graph_gate.VARIANTS)
    for name, new in v.items():
        assert new.shape == ids.shape and new.dtype == ids.dtype, name
        counts = graph_gate.local_counts(new, offset, E)
        assert rows_needed(counts, A) <= cap, name
        # Slots of other ranks' experts are untouched (except by the full buffer, which redeals).
        other = (ids < offset) | (ids >= offset + E)
        if name != "full":
            assert torch.equal(new[other], ids[other]), name
    assert torch.equal(graph_gate.local_counts(v["reversed"], offset, E), base.flip(0))
    empty = graph_gate.local_counts(v["empty"], offset, E)
    assert torch.equal(empty[1::2], torch.zeros_like(empty[1::2]))
    assert torch.equal(empty[0::2], base[0::2])
    assert int(graph_gate.local_counts(v["all_empty"], offset, E).sum()) == 0
    full = graph_gate.local_counts(v["full"], offset, E)
    assert bool((full % A == 0).all())
    assert int(full.sum()) == min(cap // A, T * K // A) * A
    if T * K > cap:
        assert int(full.sum()) > cap - A  # capacity-bound: no room for another aligned chunk
    # No token routed twice to one expert while an expert's count fits in the tokens.
    if int(full.max()) <= T:
        local = v["full"][(v["full"] >= 0)]
        assert local.numel() == int(full.sum())
        for t in range(T):
            row = v["full"][t][v["full"][t] >= 0]
            assert row.unique().numel() == row.numel()


def small_problem(precision, T=6, K=2, E=3, D=128, F=256, A=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g).to(torch.bfloat16)
    ids = random_ids(T, K, E, seed)
    w = torch.softmax(torch.randn(T, K, generator=g), dim=1)
    w13 = (torch.randn(E, 2 * F, D, generator=g) / D**0.5).to(torch.bfloat16)
    w2 = (torch.randn(E, D, F, generator=g) / F**0.5).to(torch.bfloat16)
    return build_problem(
        x_TD=x, topk_ids_TK=ids, topk_weights_TK=w, w13_EFD=w13, w2_EDF=w2, expert_offset=0,
        experts=E, alignment=A, capacity_rows=default_capacity(T, K, E, A), precision=precision,
        activation="silu",
    )  # fmt: skip


def test_graph_replay_skips_on_cpu_with_a_reason():
    p = small_problem("bf16")
    rows = graph_gate.graph_replay(ARMS["stock"], p, lambda: pipeline.Workspace(p))
    assert [(r.name, r.status) for r in rows] == [("graph_replay", "skip")]
    assert "CPU" in rows[0].detail


@pytest.mark.parametrize("arm", ["stock", "prefix_sum_masked"])
def test_graph_replay_logic_with_an_eager_stand_in(arm):
    """The gate's variants, comparisons, sentinels and restore, with the FFN itself standing in
    for the graph (a CUDA graph needs the GPU)."""
    p = small_problem("fp8")
    before = p.topk_ids_TK.clone()
    rows = graph_gate.graph_replay(
        ARMS[arm], p, lambda: pipeline.Workspace(p), capture_fn=lambda fn: fn
    )
    assert [r.name for r in rows] == [f"graph_replay_{v}" for v in graph_gate.VARIANTS]
    assert all(r.status == "pass" for r in rows), [r.detail for r in rows]
    if arm == "prefix_sum_masked":
        assert "padding kept its poison" in rows[0].detail
    assert torch.equal(p.topk_ids_TK, before)  # the case's routing is restored


def test_graph_replay_fails_when_the_replay_ignores_the_new_routing():
    """A 'graph' that keeps the routing it was captured with must fail every changed variant."""
    p = small_problem("bf16")
    frozen = p.topk_ids_TK.clone()

    def stale(fn):
        def replay():
            now = p.topk_ids_TK.clone()
            p.topk_ids_TK.copy_(frozen)
            fn()
            p.topk_ids_TK.copy_(now)

        return replay

    rows = graph_gate.graph_replay(ARMS["prefix_sum"], p, lambda: pipeline.Workspace(p),
                                   capture_fn=stale)  # fmt: skip
    assert {r.name: r.status for r in rows}["graph_replay_all_empty"] == "fail"
    assert torch.equal(p.topk_ids_TK, frozen)


def test_declared_kernel_names_are_real_triton_functions():
    real = jit_functions()
    for name, arm in ARMS.items():
        assert arm.launches and arm.forbidden, name
        for precision, launches in arm.launches.items():
            # "a|b": either alternative (a launch chosen per case)
            names = {k for entry in launches for k in entry.split("|")}
            assert names <= real, (name, precision, names - real)
            assert not names & set(arm.forbidden), (name, precision)
        assert set(arm.forbidden) <= real, (name, set(arm.forbidden) - real)
    masked_act = "_act_quant_masked_grid_kernel|_act_quant_masked_kernel"
    assert masked_act in ARMS["prefix_sum_masked"].launches["fp8"]
    assert "_act_quant_dense_kernel" in ARMS["prefix_sum_masked"].forbidden
    assert {"_act_quant_masked_grid_kernel", "_act_quant_masked_kernel"} <= set(
        ARMS["stock"].forbidden
    )
    assert "_grouped_gemm_fp8_live" in ARMS["prefix_sum"].launches["fp8"]


def test_dispatch_judge():
    expected, forbidden = dispatch_gate.declared(ARMS["prefix_sum_masked"], "fp8")
    plain = [k for k in expected if "|" not in k]
    # The masked activation may be either schedule (chosen per case), one of them must run.
    for schedule in ("_act_quant_masked_grid_kernel", "_act_quant_masked_kernel"):
        ok = dispatch_gate.judge(expected, forbidden, [*plain, schedule, "elementwise_kernel"])
        assert ok.status == "pass", ok.detail
    neither = dispatch_gate.judge(expected, forbidden, plain)
    assert neither.status == "fail" and "_act_quant_masked_grid_kernel" in neither.detail
    dense = [k for k in plain if "masked" not in k] + ["_act_quant_dense_kernel"]
    bad = dispatch_gate.judge(expected, forbidden, dense)
    assert bad.status == "fail"
    assert "_act_quant_masked_grid_kernel" in bad.detail and "_act_quant_dense_kernel" in bad.detail
    # Older Triton appended a signature to the entry name.
    assert dispatch_gate.base_name("_combine_0d1d2d3de") == "_combine"
    assert dispatch_gate.base_name("_grouped_gemm_fp8_live") == "_grouped_gemm_fp8_live"


def test_dispatch_skips_on_cpu():
    p = small_problem("bf16")
    stages = ARMS["stock"].build(pipeline.Workspace(p))
    row = dispatch_gate.dispatch(ARMS["stock"], stages, "bf16", torch.device("cpu"))
    assert row.status == "skip" and "interpreter" in row.detail


def test_cpu_clock_reports_unknown_telemetry_and_no_warning():
    from moebench.measure.clock import TELEMETRY, Clock

    clock = Clock(torch.device("cpu"))
    t = clock.telemetry()
    assert set(t) == set(TELEMETRY) and all(v != v for v in t.values())  # NaN
    assert clock.warnings() == []


def test_torch_gemm_backend_expects_none_of_our_gemm_kernels():
    from arms.prefill.prefix_sum import ARM as arm
    from moebench.gates.dispatch import GEMM_KERNELS, declared

    launches, forbidden = declared(arm, "bf16", "torch")
    assert not set(launches) & set(GEMM_KERNELS)
    assert set(GEMM_KERNELS) <= set(forbidden)
    assert "_act_quant_dense_kernel" in launches  # the rest of the declaration stands


def test_full_variant_never_uses_a_slot_that_holds_no_row():
    """Distributed ranks receive fixed-size slots; unused ones carry id -1 and poison rows. The
    full-buffer variant must leave them out (on the H200's two-GPU run it routed them and the
    gate reported poison in live rows)."""
    from moebench.gates.graph import NOT_LOCAL, local_counts, routing_variants

    ids = torch.full((200, 1), NOT_LOCAL, dtype=torch.int32)
    ids[:70, 0] = torch.arange(70, dtype=torch.int32) % 4  # 70 real rows, 130 unused slots
    full = routing_variants(ids, expert_offset=0, experts=4, alignment=16, capacity_rows=256)[
        "full"
    ]
    assert (full[70:] == NOT_LOCAL).all()
    counts = local_counts(full, 0, 4)
    assert int(counts.sum()) == 64 and all(int(c) % 16 == 0 for c in counts)
