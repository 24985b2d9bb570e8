"""Errors that the `aot` command reports as one line (``aot: error: ...``) instead of a traceback, and the one
helper that says a name was renamed (:func:`warn_renamed`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class AotError(Exception):
    """A problem with the user's input that has a clear fix; the message names both."""


class ConfigError(AotError, ValueError):
    """A configuration value is invalid; the message names the field and the fix."""


def os_error_line(exc: OSError, doing: str = "") -> str:
    """One line for a failed file operation (disk full, read-only folder, ...): what failed, on which path."""
    what = exc.strerror or type(exc).__name__
    path = f" {str(exc.filename)!r}" if exc.filename else ""
    return f"{doing + ': ' if doing else ''}{what}{path}; free some space or pick a writable --out"


class RenamedWarning(FutureWarning):
    """A name aot renamed (a flag, a preset, a recipe, a Python name): the old one still works for one release.
    The ``aot`` command prints it as one line, ``aot: OLD is renamed NEW ...`` (:func:`aot.cli.main`)."""


#: the old names already warned about in this process (each is said once)
_renamed_said: set[str] = set()


def warn_renamed(old: str, new: str, why: str = "", *, kind: str = "name", stacklevel: int = 2) -> None:
    """Say once per process, as one :class:`RenamedWarning` line, that ``old`` is renamed ``new`` (``why``: what
    the new name is for) and that the old ``kind`` (name, flag, field) goes in the next release. The one helper
    every deprecated name of aot goes through."""
    if old in _renamed_said:
        return
    _renamed_said.add(old)
    import warnings

    because = f" ({why})" if why else ""
    warnings.warn(
        f"{old} is renamed {new}{because}; the old {kind} goes in the next release",
        RenamedWarning,
        stacklevel=stacklevel + 1,
    )


def renamed(name: str, table: dict[str, str], why: str = "", *, stacklevel: int = 2) -> str:
    """``name``, or its new name where ``table`` (old -> new) renamed it, said once (:func:`warn_renamed`)."""
    new = table.get(name)
    if new is None:
        return name
    warn_renamed(name, new, why, stacklevel=stacklevel + 1)
    return new


def renamed_attributes(module: str, table: dict[str, str], why: str = "") -> Callable[[str], Any]:
    """A module's ``__getattr__`` that gives a renamed module attribute by its old name for one release, said once:
    ``__getattr__ = renamed_attributes(__name__, {"OLD": "NEW"})``."""

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", f"{module}.{table[name]}", why, stacklevel=2)
        import sys

        return getattr(sys.modules[module], table[name])

    return __getattr__
