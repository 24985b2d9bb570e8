"""Errors that the `aot` command reports as one line (``aot: error: ...``) instead of a traceback."""

from __future__ import annotations


class AotError(Exception):
    """A problem with the user's input that has a clear fix; the message names both."""


class ConfigError(AotError, ValueError):
    """A configuration value is invalid; the message names the field and the fix."""
