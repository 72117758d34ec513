"""The clock's spin before a sample: the long one (the SM clock back up) only after a host gap."""

import torch

from moebench.measure.clock import IDLE_GAP_S, SPIN_CYCLES, WAKE_CYCLES, Clock


def test_a_sample_after_a_host_gap_wakes_the_device_and_back_to_back_ones_do_not():
    clock = Clock(torch.device("cpu"))
    assert clock.spin_cycles(0.0) == WAKE_CYCLES  # nothing ran yet: the device may be idle
    clock._finished = 10.0
    assert clock.spin_cycles(10.0 + IDLE_GAP_S / 2) == SPIN_CYCLES
    assert clock.spin_cycles(10.0 + 2 * IDLE_GAP_S) == WAKE_CYCLES
    assert clock.wakes == 2
    assert WAKE_CYCLES >= 10 * SPIN_CYCLES
