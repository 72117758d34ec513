"""moebench's version, recorded in every manifest (kept equal to pyproject.toml's)."""

__version__ = "0.1.0"
