"""The results store of a sweep: one JSON file, written in one step, that every sweep and benchmark shares.

    {"sweep": {"task": "lm", "preset": "cpu-bench", "group": [...], ...},   # how to read it (aot.sweep.spec)
     "machine": {...},                                                       # the machine that wrote the last row
     "runs": [{"key": "fbc3bd13af", ...}, ...]}                              # one row per run, keyed

A row is whatever its writer records of a run (its axes, then :mod:`aot.sweep.metrics`' numbers); ``key`` names it
and ``run_dir`` says where its run folder was. :func:`record_rows` re-reads the file just before it writes, so
several processes recording into one store (two lanes of a benchmark) keep each other's rows, and replaces the
file atomically, so a reader never sees half of it. A store that cannot be read is an error, never an empty one
(which the next write would make permanent). Stores written before this format (``runs`` a mapping from key to
entry) are read as rows with that key.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info
from aot.sweep.spec import SweepSpec

STORE_FILE = "results.json"


def read_store(path: str | Path) -> dict[str, Any]:
    """The store at ``path`` (``{"runs": []}`` when there is no file yet); a one-line :class:`AotError` when the file
    is there but truncated or not a store. Rows of the earlier mapping format come back as a list, keyed."""
    path = Path(path)
    if not path.is_file():
        return {"runs": []}
    try:
        store = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AotError(
            f"results store {str(path)!r} cannot be read ({exc}); restore it from git or move it away"
        ) from None
    if not isinstance(store, dict) or not isinstance(store.get("runs"), (list, dict)):
        raise AotError(f"results store {str(path)!r} has no 'runs' list; is it a sweep's results.json?")
    if isinstance(store["runs"], dict):
        store["runs"] = [{"key": key, **entry} for key, entry in store["runs"].items()]
    return store


def store_spec(store: dict[str, Any]) -> SweepSpec:
    """How ``store``'s rows are read; a one-line error when it does not say."""
    if "sweep" not in store:
        raise AotError("the results store declares no sweep (its 'sweep' entry: task, group, ...)")
    return SweepSpec.from_dict(store["sweep"])


def write_store(path: str | Path, store: dict[str, Any]) -> None:
    """Replace the store at ``path`` in one step."""
    write_text_atomic(Path(path), json.dumps(store, indent=2) + "\n")


def record_rows(path: str | Path, rows: list[dict[str, Any]], spec: SweepSpec | None = None) -> dict[str, Any]:
    """Add ``rows`` to the store at ``path`` (a row with a key already recorded replaces it), re-reading the file
    first; stamp the machine (and ``spec``, when given); write it in one step. Returns the store as written. The
    read and the write hold the store's lock (:func:`store_lock`), so that jobs finishing at once on a cluster all
    keep their rows."""
    with store_lock(path):
        store = read_store(path)
        keys = {row["key"] for row in rows}
        store["runs"] = [r for r in store["runs"] if r["key"] not in keys] + list(rows)
        if spec is not None:
            store["sweep"] = spec.to_dict()
        store["machine"] = machine_info()
        write_store(path, store)
    return store


@contextlib.contextmanager
def store_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on ``.NAME.lock`` beside the store ``NAME`` while reading and rewriting it (waiting for a
    holder: a write takes milliseconds). flock is taken on the open file, so a killed holder releases it; it works
    across the nodes of a cluster on a shared file system that supports it (NFSv4, Lustre, GPFS)."""
    import fcntl

    lock = Path(path).with_name(f".{Path(path).name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def recorded_keys(store: dict[str, Any]) -> set[str]:
    return {row["key"] for row in store["runs"]}
