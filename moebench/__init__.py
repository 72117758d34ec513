"""moebench: prove that a Mixture-of-Experts FFN change is faster, where, and why."""

from moebench.core.version import __version__

__all__ = ["__version__", "run_arm"]


def run_arm(*args, **kwargs):
    """See moebench.api.run_arm (imported lazily so that `import moebench` loads no kernels)."""
    from moebench.api import run_arm as _run_arm

    return _run_arm(*args, **kwargs)
