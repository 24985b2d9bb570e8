"""The output folder of a command (``--out DIR``): checked writable before any work, files replaced atomically."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """A scratch path beside ``path``, unique to this process and call, to write ``path``'s new content into; on
    a clean exit it replaces ``path`` in one step (a rename), on an error it is removed. A crash or a full disk
    leaves the old file whole, and two processes writing the same file at once (two runs tokenizing one corpus
    into a fresh cache) each finish with a whole file instead of renaming each other's scratch away."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield scratch
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text`` in one step (see :func:`atomic_target`)."""
    with atomic_target(path) as scratch:
        scratch.write_text(text)
