"""Errors that the `aot` command reports as one line (``aot: error: ...``) instead of a traceback."""

from __future__ import annotations

import os
from pathlib import Path


class AotError(Exception):
    """A problem with the user's input that has a clear fix; the message names both."""


class ConfigError(AotError, ValueError):
    """A configuration value is invalid; the message names the field and the fix."""


def os_error_line(exc: OSError, doing: str = "") -> str:
    """One line for a failed file operation (disk full, read-only folder, ...): what failed, on which path."""
    what = exc.strerror or type(exc).__name__
    path = f" {str(exc.filename)!r}" if exc.filename else ""
    return f"{doing + ': ' if doing else ''}{what}{path}; free some space or pick a writable --out"


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path``'s content in one step (a scratch file, then a rename): a crash or a full disk leaves the
    old file whole."""
    scratch = path.with_name(path.name + ".tmp")
    try:
        scratch.write_text(text)
        os.replace(scratch, path)
    except OSError:
        scratch.unlink(missing_ok=True)
        raise
