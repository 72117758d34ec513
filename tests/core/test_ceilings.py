"""moebench.core.ceilings: which GPU's measured figures a run is set against. Floors and fractions
only against the GPU's own (`for_gpu`); the check that refuses impossible times also against a
measured GPU that bounds it from above (`bound_for_gpu`), never for a GPU faster than any
measured."""

from moebench.core.ceilings import GPUS, H100_SXM, H200, bound_for_gpu, for_gpu


def test_the_h200_and_the_h100_sxm_have_measured_ceilings_and_no_other_gpu():
    assert for_gpu("NVIDIA H200") is H200
    assert for_gpu("NVIDIA H100 80GB HBM3") is H100_SXM
    # the PCIe and NVL cards are other memory systems: the SXM's figures are not theirs
    for name in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA B200", ""):
        assert for_gpu(name) is None, name


def test_other_h100s_are_bounded_by_the_h200_the_sxm_by_its_own_and_a_b200_by_nothing():
    assert bound_for_gpu("NVIDIA H200") is H200
    assert bound_for_gpu("NVIDIA H100 80GB HBM3") is H100_SXM
    for name in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL"):
        assert bound_for_gpu(name) is H200, name
    # faster than any measured GPU: a bound drawn from the H200 would refuse its honest times
    assert bound_for_gpu("NVIDIA B200") is None


def test_every_record_is_below_the_h200s_and_names_how_it_was_measured():
    """The H200 is the fastest GPU measured, so its figures bound every other record (the check
    on other H100s leans on that), and each record says when and how it was measured."""
    for c in GPUS.values():
        assert c.copy_tbs <= H200.copy_tbs and c.l2_bytes <= H200.l2_bytes
        assert c.measured and set(c.tflops) == {"fp8", "bf16"}
    # the SXM's floor: bytes at its own copy rate, not the H200's
    assert H100_SXM.floor_us(2.97e6) == 1.0
