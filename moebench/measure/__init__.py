"""Measurement: the one clock and everything that times with it (docs/DESIGN.md section 6).

Start with ``clock`` (``Clock``: device events on the GPU, a synchronised host clock on the CPU),
then ``rotation`` (the arms' Williams order within a block) and ``graphs`` (the one CUDA graph
capture). The timing of a rank's regimes, cold weights (``cold``) and the profile regime
(``profile``) build on them; ``bench`` lends the clock and the rotation to ``tools/``.
"""
