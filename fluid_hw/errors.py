"""Every error fluid-hw raises derives from :class:`FluidError`.

Errors name the thing that is wrong (op, variable, file) and, where there is
one, the fix.  No other module of the project defines exception classes that do
not derive from :class:`FluidError`.
"""

from __future__ import annotations

__all__ = [
    "unknown_name",
    "FluidError",
    "FormatError",
    "UnknownNameError",
    "UnknownOpError",
    "OpAttrError",
    "ShapeError",
    "VerifyError",
    "ExecutionError",
    "FeedError",
    "FetchError",
    "GradientError",
]


class FluidError(Exception):
    """Base class of every error raised by fluid-hw."""


class FormatError(FluidError):
    """A serialized program, model directory or parameter file is malformed:
    truncated, corrupted, of a newer format version, or inconsistent."""


class UnknownNameError(FluidError, KeyError):
    """A name (op type, pass, back end, variable...) was looked up in a
    registry that does not hold it.  The message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UnknownOpError(UnknownNameError):
    """An op type is not registered."""


class OpAttrError(FluidError):
    """An op attribute is missing, of the wrong type or outside its allowed values."""



class ShapeError(FluidError):
    """Shape or dtype inference failed: the op's inputs do not fit together."""


class VerifyError(FluidError):
    """A program is structurally invalid (dangling variable, bad block index...)."""


class ExecutionError(FluidError):
    """A kernel failed while running; names the op type, its index and outputs."""


class FeedError(FluidError):
    """A value fed to :meth:`Executor.run` does not match its variable."""


class FetchError(FluidError):
    """A fetch target does not exist or was never computed."""


class GradientError(FluidError):
    """A gradient was requested that cannot be built."""


def unknown_name(kind: str, name: str, known: object,
                 cls: type[UnknownNameError] = UnknownNameError) -> UnknownNameError:
    """The error for a registry lookup that failed: names ``name``, suggests close
    matches and lists every known name.  ``kind`` reads like "op type" or "pass"."""
    import difflib

    names = sorted(str(k) for k in known)  # type: ignore[attr-defined]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return cls(f"unknown {kind} {name!r}.{hint} Known: {', '.join(names) or 'none'}")
