"""`Arm.layout_bytes`: the copies of a layer's expert weights and scales an arm's build makes for
its kernels (the grouped arm's tile layouts, the sparse GEMV's rotated MXFP4), as the memory
estimates count them, against the copies a build really makes: every cache entry the build adds
(`pipeline.made_once`'s caches), its tensors' storage counted once. On the CPU the arm runs the
Triton tile where a launch asks for Gluon (``gpu=False``); on a GPU (``make test-gpu``) the Gluon
tiles' own copies."""

from __future__ import annotations

import pytest
import torch

from arms.decode import grouped_decode, pipeline
from moebench.arm import decode, registry
from moebench.arm.base import LayoutShapes
from moebench.plan import inputs

K, E_ALL, E = 2, 8, 4  # rank 1 of two: global experts [4, 8)
# fc1's R (D) 576: four whole 128-value steps and a 64-value tail; fc2's (F) 512: four steps.
D, F = 576, 512


def _caches() -> list[dict]:
    """Every cache a decode build makes its copies in (nested caches flattened)."""
    g = grouped_decode
    flat = [g._PLACED_WEIGHTS, g._GLUON_WORDS, g._GLUON_SCALES, g._FP8_GLUON_WEIGHTS,
            g._TILE_SCALES, pipeline._ROTATED_WEIGHTS]  # fmt: skip
    for nested in (g._PACKED_WEIGHTS, g._MX_PACKED_WEIGHTS, g._MX_DOT_ORDER_WEIGHTS,
                   g._PACKED_SCALES):  # fmt: skip
        flat += list(nested.values())
    return flat


def _entries() -> dict[tuple[int, int], object]:
    return {(id(c), k): v for c in _caches() for k, v in c.items()}


def _storage_bytes(values) -> int:
    seen: dict[int, int] = {}
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, tuple):
            stack += list(v)
        elif isinstance(v, torch.Tensor):
            st = v.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def _problem(precision: str, tokens: int, device: torch.device) -> decode.Problem:
    g = torch.Generator().manual_seed(tokens)
    ids = torch.stack([torch.randperm(E_ALL, generator=g)[:K] for _ in range(tokens)]).int()
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(E, 2 * E), hidden=D, intermediate=F, seed=tokens, device=device
    )
    x = inputs.make_tokens(tokens=tokens, hidden=D, seed=tokens, device=device)
    return inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=ids.to(device), topk_weights_TK=torch.ones(tokens, K, device=device),
        w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2, b2_ED=b2, expert_offset=E, experts=E_ALL,
        precision=precision, activation="swiglu_oai",
    )  # fmt: skip


def _made(arm_name: str, precision: str, tokens: tuple[int, ...], device) -> tuple[int, int]:
    """(bytes the builds at ``tokens`` really made, the arm's ``layout_bytes``), one weight set
    shared by every token count, as the model regime builds them."""
    arm = registry.resolve(arm_name)
    problems = [_problem(precision, T, device) for T in tokens]
    first = problems[0]
    before = _entries()
    for p in problems:  # the same weights at every count, as one model layer's
        p = decode.Problem(**{**p.__dict__, **{k: getattr(first, k) for k in (
            "w13", "w13_scale", "b13_E2F", "w2", "w2_scale", "b2_ED")}})  # fmt: skip
        arm.build(decode.Workspace(p, layout=arm.layout))
    new = [v for key, v in _entries().items() if key not in before]
    made = _storage_bytes(new)
    shapes = LayoutShapes(precision=precision, tokens=tokens, top_k=K, experts=E, hidden=D,
                          intermediate=F, gpu=device.type == "cuda")  # fmt: skip
    return made, arm.layout_bytes(shapes)


# token counts: 1 the one-slot GEMV, 3 the expert-loop tile, 8 the one-pass tile (E 4, top-2)
TOKENS = [(1,), (3,), (8,), (1, 3, 8)]


@pytest.mark.parametrize("tokens", TOKENS, ids=lambda t: "-".join(map(str, t)))
@pytest.mark.parametrize("precision", ["w8a16", "w4a16"])
@pytest.mark.parametrize("arm", ["grouped_decode", "sparse_decode"])
def test_layout_bytes_are_the_copies_a_build_makes(arm, precision, tokens):
    made, said = _made(arm, precision, tokens, torch.device("cpu"))
    assert said == made, (arm, precision, tokens, said, made)


def test_layout_bytes_count_a_copy_where_a_launch_reads_one():
    """The grouped arm at gpt-oss-20b's shapes on a GPU: nothing at one FP8 token (the one-slot
    GEMV reads the problem's own weights), the Gluon tile's copy from 16 tokens (the same size
    as the weights, R being steps and a tail), both where a model builds both."""
    gpt = dict(top_k=4, experts=32, hidden=2880, intermediate=2880)
    weights = 32 * (2 * 2880 * 2880 + 2880 * 2880)
    one = grouped_decode.layout_bytes(LayoutShapes(precision="w8a16", tokens=(1,), **gpt))
    many = grouped_decode.layout_bytes(LayoutShapes(precision="w8a16", tokens=(64,), **gpt))
    both = grouped_decode.layout_bytes(LayoutShapes(precision="w8a16", tokens=(1, 64), **gpt))
    assert one == 0 and many == weights and both == many


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the Gluon tiles' copies: a GPU")
@pytest.mark.parametrize("precision", ["w8a16", "w4a16"])
def test_layout_bytes_are_the_copies_a_build_makes_on_the_gpu(precision):
    made, said = _made("grouped_decode", precision, (1, 3, 8), torch.device("cuda"))
    assert said == made, (precision, said, made)
