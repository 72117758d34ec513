"""The one error family. The CLI catches it, prints one line on stderr and exits 2."""


class MoebenchError(Exception):
    """A user mistake or an environment problem: bad scenario, missing trace, hash mismatch."""


class ScenarioError(MoebenchError):
    """A scenario document that does not validate; the message names the field path."""


class TraceError(MoebenchError):
    """A routing trace that is missing, malformed or pinned to another model."""


class SourceDriftError(MoebenchError):
    """The code about to run is not the code the scenario pinned."""


class ResultsError(MoebenchError):
    """The results folder cannot be written, or a run to resume is not what it claims."""


class DeviceFault(Exception):
    """A device error that left the CUDA context unusable stopped the run (not a user mistake:
    the CLI exits 3). Finished cases are kept; the message says how to resume."""


def clip(text: str, limit: int = 200) -> str:
    """``text`` on one line of at most ``limit`` characters: runs of whitespace become one space,
    and a longer text is cut at the last word boundary that fits and ends in "...", so that a
    one-line error never stops mid-word (only a single word longer than the limit is cut)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: max(limit - 3, 1)]
    cut = head.rfind(" ")
    if cut > 0 and text[len(head)] != " ":
        head = head[:cut]
    return head.rstrip(" ,;:") + "..."
