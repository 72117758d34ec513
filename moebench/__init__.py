"""moebench: prove that a Mixture-of-Experts FFN change is faster, where, and why."""

__version__ = "0.1.0"
