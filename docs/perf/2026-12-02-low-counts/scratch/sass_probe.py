"""Scratch (eighth session): tools/sass_grouped_decode.py on the probe kernel
(grouped_dot_probe.py beside this file) with the scale rows padded to 96 bytes (SCALES_AHEAD 4
needs rows of scales 4-byte aligned). Usage: PYTHONPATH=$PWD python this.py OUT SPEC..."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, "tools")
import grouped_dot_probe  # noqa: E402
import sass_grouped_decode as tool  # noqa: E402

tool.grouped_dot._grouped_dot_mxfp4 = grouped_dot_probe._grouped_dot_mxfp4
values = tool.values


def padded(stage, tokens):
    v = values(stage, tokens)
    v["stride_sn"] = 96
    v["stride_se"] = v["N"] * 96
    return v


tool.values = padded
if __name__ == "__main__":
    tool.main(sys.argv[1], sys.argv[2:])
