"""Tests run the real Triton kernels on the CPU through the interpreter.

The variable must be set before triton is imported anywhere, so it is set here, at collection.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
