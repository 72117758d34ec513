"""tools/bench_decode.py's read kernels on the CPU (the interpreter): the one-launch read of two
tensors' expert ranges reads every word of each touched expert of each, and nothing past them, so
that the floor it times is the read of exactly the step's bytes."""

import os

import pytest
import torch
from tool_modules import tool

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="the read kernels run in the interpreter"
)


@pytest.fixture(scope="module")
def bench_decode():
    return tool("bench_decode")


def _xor(words: torch.Tensor) -> int:
    acc = 0
    for v in words.flatten().tolist():
        acc ^= v
    return acc


def test_one_launch_reads_every_word_of_each_touched_expert_of_both_tensors(bench_decode):
    g = torch.Generator().manual_seed(0)
    # fc1-like [E, 2F, D] and fc2-like [E, D, F] FP8 values; a read chunk of 4 KiB does not
    # divide either expert's 6,144 or 3,072 bytes, so the last program of each is partial.
    w1 = torch.randint(0, 256, (4, 96, 64), dtype=torch.uint8, generator=g)
    w2 = torch.randint(0, 256, (4, 64, 48), dtype=torch.uint8, generator=g)
    experts = [1, 3]
    rows, run, sink = bench_decode.read_both(w1, w2, experts)
    assert len(rows) == len(bench_decode.READ_LAUNCHES)
    run()
    words1, words2 = (w.view(torch.int32).reshape(4, -1) for w in (w1, w2))
    want = [_xor(words1[e]) for e in experts] + [_xor(words2[e]) for e in experts]
    # Each item's programs' XORs together are its expert's words' XOR; an untouched expert
    # differs (so a read of the wrong expert or of too few words would not pass).
    assert [_xor(sink[i]) for i in range(4)] == want
    assert _xor(words1[0]) != want[0] and _xor(words2[2]) != want[3]


def test_each_read_launch_size_gives_the_same_xor(bench_decode):
    w1 = torch.arange(2 * 40 * 32, dtype=torch.int32).reshape(2, 40, 32)
    w2 = torch.arange(2 * 32 * 20, dtype=torch.int32).reshape(2, 32, 20) * 7
    saved = bench_decode.READ_LAUNCHES
    try:
        for launch in saved[:3]:
            bench_decode.READ_LAUNCHES = [launch]
            _, run, sink = bench_decode.read_both(w1, w2, [0, 1])
            run()
            got = [_xor(sink[i]) for i in range(4)]
            assert got == [_xor(w1[0]), _xor(w1[1]), _xor(w2[0]), _xor(w2[1])], launch
    finally:
        bench_decode.READ_LAUNCHES = saved
