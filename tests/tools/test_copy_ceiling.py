"""tools/copy_ceiling.py: the copy ceiling a bench divides by is its own GPU's, moebench's measured
figure where it has one, else one measured on the spot, never another GPU's; none on a CPU."""

import math

import pytest
import torch
from tool_modules import tool


@pytest.fixture(scope="module")
def ceiling():
    return tool("copy_ceiling")


def test_a_cpu_has_no_copy_ceiling(ceiling):
    tbs, where = ceiling.copy_tbs(torch.device("cpu"))
    assert math.isnan(tbs) and where == "no GPU"


def test_a_gpu_with_a_measured_ceiling_takes_it_and_another_is_measured(ceiling, monkeypatch):
    measured = []
    monkeypatch.setattr(ceiling, "measure_copy_tbs", lambda d: measured.append(d) or 3.1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H200")
    cuda = torch.device("cuda")
    tbs, where = ceiling.copy_tbs(cuda)
    assert tbs == 4.27 and "H200" in where and measured == []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H100 80GB HBM3")
    tbs, where = ceiling.copy_tbs(cuda)
    assert tbs == 2.97 and "H100 80GB HBM3" in where and measured == []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H100 PCIe")
    tbs, where = ceiling.copy_tbs(cuda)
    assert tbs == 3.1 and measured == [cuda]
    assert "measured now on NVIDIA H100 PCIe" in where
