"""The output folder of a command (``--out DIR``): checked writable before any work, files replaced atomically."""

from __future__ import annotations

import os
from pathlib import Path

from aot.errors import AotError, os_error_line


def check_writable_dir(out: str | Path) -> Path:
    """``out`` exists (created if needed) and is a folder this process can write into; a one-line
    :class:`AotError` otherwise (a file, a read-only folder, a full disk), before any work is done."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise AotError(f"--out {str(out)!r} is a file, not a folder; pick a folder for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise AotError(os_error_line(exc, f"cannot write into --out {str(out)!r}")) from None
    return out


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
