"""Errors that the `aot` command reports as one line (``aot: error: ...``) instead of a traceback."""

from __future__ import annotations


class AotError(Exception):
    """A problem with the user's input that has a clear fix; the message names both."""


class ConfigError(AotError, ValueError):
    """A configuration value is invalid; the message names the field and the fix."""


def os_error_line(exc: OSError, doing: str = "") -> str:
    """One line for a failed file operation (disk full, read-only folder, ...): what failed, on which path."""
    what = exc.strerror or type(exc).__name__
    path = f" {str(exc.filename)!r}" if exc.filename else ""
    return f"{doing + ': ' if doing else ''}{what}{path}; free some space or pick a writable --out"
