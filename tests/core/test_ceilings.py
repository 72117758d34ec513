"""moebench.core.ceilings: which GPU's measured figures a run is set against. Floors and fractions
only against the GPU's own (`for_gpu`); the check that refuses impossible times also against a
measured GPU that bounds it from above (`bound_for_gpu`), never for a GPU faster than any
measured."""

from moebench.core.ceilings import H200, bound_for_gpu, for_gpu


def test_only_the_h200_has_measured_ceilings():
    assert for_gpu("NVIDIA H200") is H200
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL", "NVIDIA B200", ""):
        assert for_gpu(name) is None, name


def test_an_h100_is_bounded_by_the_h200_and_a_b200_by_nothing():
    assert bound_for_gpu("NVIDIA H200") is H200
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"):
        assert bound_for_gpu(name) is H200, name
    # faster than any measured GPU: a bound drawn from the H200 would refuse its honest times
    assert bound_for_gpu("NVIDIA B200") is None
