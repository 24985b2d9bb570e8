"""The output folder of a command (``--out DIR``): checked writable before any work, files replaced atomically."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aot.errors import AotError, os_error_line

RESULTS_FILE = "results.json"  # what every experiment command writes into --out when it finishes


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


def write_results(out: str | Path, results: dict[str, Any]) -> Path:
    """Write a finished run's ``results.json`` into ``out`` in one step (see :func:`atomic_target`): a reader sees
    the old file or the whole new one, never a half-written one."""
    path = Path(out) / RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(results, indent=2) + "\n")
    return path


def read_results(run_dir: str | Path) -> dict[str, Any] | None:
    """The ``results.json`` of a finished run in ``run_dir``, or ``None`` when the run has not finished: the file
    is missing, unreadable, truncated, not JSON, or not the mapping a finished run writes (with its ``task`` and
    ``train`` sections). What skips finished runs (sweeps, benchmarks) asks this, never "the file exists"."""
    path = Path(run_dir) / RESULTS_FILE
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(results, dict) or not isinstance(results.get("task"), str):
        return None
    return results if isinstance(results.get("train"), dict) else None
