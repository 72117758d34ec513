"""Scratch (issue 28, 2026-12-04): the fused launch (`fused_tile`) against the arm's two launches
under the interpreter, bit for bit, both formats, one and two passes an expert, and a second
replay on the same counters (the epoch rule). Usage: TRITON_INTERPRET=1 PYTHONPATH=$PWD:DIR
python3 DIR/cpu_check.py"""

import sys

import torch

sys.path.insert(0, "tests/arms")
import test_grouped_decode_arm as t  # noqa: E402
from test_grouped_decode_arm import routing  # noqa: E402
from moebench.plan import inputs  # noqa: E402


def problem(precision, activation, ids, weights, D=64, F=64):
    # the test's problem with D = F (the one-body form needs fc1's R equal to fc2's)
    w13, b13, w2, b2 = inputs.make_decode_weights(
        experts=range(t.E, 2 * t.E), hidden=D, intermediate=F, seed=3, device=torch.device("cpu"))
    x = inputs.make_tokens(tokens=ids.shape[0], hidden=D, seed=3, device=torch.device("cpu"))
    return inputs.build_decode_problem(
        x_TD=x, topk_ids_TK=ids, topk_weights_TK=weights, w13_E2FD=w13, b13_E2F=b13, w2_EDF=w2,
        b2_ED=b2, expert_offset=t.E, experts=t.E_ALL, precision=precision, activation=activation)


from arms.decode import grouped_decode  # noqa: E402
from fused_tile import FusedStep, FusedStep1  # noqa: E402
from moebench.arm import decode  # noqa: E402
from moebench.kernels.combine_topk import combine_topk  # noqa: E402

bad = 0
for precision in ("w8a16", "w4a16"):
    for tokens, seed in ((16, 1), (40, 2), (96, 3)):
        ids, wts = routing(tokens, seed)
        p = problem(precision, "swiglu_oai", ids, wts)
        fc1, _ = grouped_decode.launches(p)
        assert fc1.pass_grid, fc1
        ws0 = decode.Workspace(p, layout="TKD")
        ws0.poison()
        for st in grouped_decode.build_stages(ws0):
            st.run()
        ws = decode.Workspace(p, layout="TKD")
        s13, m13 = grouped_decode.tiles_scales(p.w13, p.w13_scale, fc1)
        s2, m2 = grouped_decode.tiles_scales(p.w2, p.w2_scale, fc1)
        for cls in (FusedStep, FusedStep1):
          step = cls(p, ws, fc1, s13, m13, s2, m2, pdl=False)
          for replay in range(2):
            ws.poison()
            step.run()
            combine_topk(ws.o, p.topk_ids_TK, p.topk_weights_TK, ws.y_TD,
                         expert_offset=p.expert_offset, local_experts=p.local_experts,
                         layout=ws.layout)  # fmt: skip
            same = torch.equal(ws.y_TD, ws0.y_TD)
            most = int(torch.bincount(p.topk_ids_TK.flatten().long(), minlength=64)[
                p.expert_offset : p.expert_offset + p.local_experts].max())
            print(precision, "most slots an expert", most, tokens, "replay", replay, "bitwise", same, "ticket",
                  int(step.ticket), "done", step.done.tolist()[:4], "G", step.G)
            bad += not same
print("FAILED" if bad else "all bitwise")
