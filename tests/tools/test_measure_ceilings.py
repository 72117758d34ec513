"""tools/measure_ceilings.py: a GPU's ceilings measured the way the H200's were, written as a
record and as the `Ceilings` literal core/ceilings.py takes; on a machine with no GPU, a one-line
refusal (exit 2) and nothing written."""

import json

import pytest
import torch
from tool_modules import tool

from moebench.core import ceilings


@pytest.fixture(scope="module")
def measure():
    return tool("measure_ceilings")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU here: the tool would measure it")
def test_no_gpu_is_refused_in_one_line_and_nothing_is_written(measure, tmp_path, capsys):
    out = tmp_path / "c.json"
    assert measure.main([str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs a CUDA GPU" in err
    assert not out.exists()
    assert measure.main([str(out), "--repeats", "0"]) == 2
    assert "--repeats" in capsys.readouterr().err and not out.exists()


def test_a_record_becomes_the_ceilings_literal_of_its_medians(measure):
    record = dict(gpu_name="NVIDIA H100 80GB HBM3", date="2026-12-07", torch="2.11.0+cu130",
                  copy_tbs=[2.974, 2.966, 2.969], copy_tbs_median=2.969,
                  tflops={"bf16": 762.2, "fp8": 1366.4}, l2_bytes=52428800)  # fmt: skip
    src = measure.ceilings_literal(json.loads(json.dumps(record)))
    c = eval(src, {"Ceilings": ceilings.Ceilings})  # the literal is core/ceilings.py's own type
    assert c.name == "H100 80GB HBM3" and c.copy_tbs == 2.97 and c.l2_bytes == 52428800
    assert c.tflops == {"fp8": 1366.0, "bf16": 762.0}
    assert "2026-12-07" in c.measured and "measure_ceilings" in c.measured
