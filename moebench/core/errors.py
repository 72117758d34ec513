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


def one_line(what: BaseException | str, limit: int | None = None, *, first: bool = False) -> str:
    """An exception's message (or a text) on one line: its lines joined (``first``: its first
    non-empty line only), runs of whitespace one space, cut at a word boundary past ``limit``
    (``clip``). An exception without a message is its type's name. Every one-line error of
    moebench goes through here."""
    text = str(what)
    if first:
        text = next((ln for ln in text.splitlines() if ln.strip()), "")
    text = " ".join(text.split())
    if not text and isinstance(what, BaseException):
        return type(what).__name__
    return clip(text, limit) if limit is not None else text


def typed_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message`` (the type alone without one), at most ``limit``
    characters."""
    message = one_line(exc, first=True) if str(exc).strip() else ""
    return clip(f"{type(exc).__name__}: {message}" if message else type(exc).__name__, limit)
