"""Measurements that belong to a machine, made once and kept: ``$AOT_DATA/<name>.json`` (``~/.cache/aot`` by
default), ``{machine key: {entry key: entry}}``. The machine key names what makes a measurement valid on a later
run — the processor, the threads torch uses and torch's version — so another machine (or a changed set-up)
measures for itself. Used for the CPU matmul peak (:mod:`aot.bench.peaks`) and the bf16-or-fp32 choice
(:mod:`aot.bench.precision`).

A training run measures inside :func:`deferred_writes`: what it measures is held in memory (and read back by this
process) until the run has finished, so a run refused for its inputs, or failing midway, leaves the cache files
as they were."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from aot.run_folder import write_text_atomic
from aot.runinfo import cpu_model


def machine_key() -> str:
    """What makes a measurement valid on another run: the processor, the threads and torch."""
    return f"{cpu_model()} | threads={torch.get_num_threads()} | torch={torch.__version__}"


def cache_path(name: str) -> Path:
    from aot.data.corpora import data_dir

    return data_dir() / f"{name}.json"


#: entries written inside :func:`deferred_writes`, not in their files yet: (file, machine key, entry key) -> entry
_held: dict[tuple[Path, str, str], dict[str, Any]] | None = None


@contextmanager
def deferred_writes() -> Iterator[None]:
    """Hold the entries written inside the block in memory (this process reads them back) and write them to their
    files when the block ends without an error; drop them otherwise. Nested blocks write when the outermost ends."""
    global _held
    if _held is not None:
        yield
        return
    held: dict[tuple[Path, str, str], dict[str, Any]] = {}
    _held = held
    try:
        yield
    finally:
        _held = None
    for (path, machine, key), entry in held.items():  # only after a clean end: an error skipped this
        _write(path, machine, key, entry)


def read_entry(path: Path, key: str) -> dict[str, Any] | None:
    """This machine's entry ``key`` in the cache file (or held by :func:`deferred_writes`), or None (missing or
    damaged file: measure again)."""
    if _held is not None and (path, machine_key(), key) in _held:
        return _held[(path, machine_key(), key)]
    entry = _read(path).get(machine_key(), {}).get(key)
    return entry if isinstance(entry, dict) else None


def write_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Store this machine's entry ``key`` (atomic rewrite; held until the end of a :func:`deferred_writes` block);
    a folder that cannot be written only costs a measurement next time."""
    if _held is not None:
        _held[(path, machine_key(), key)] = entry
        return
    _write(path, machine_key(), key, entry)


def _write(path: Path, machine: str, key: str, entry: dict[str, Any]) -> None:
    cache = _read(path)
    entries = cache.get(machine)
    if not isinstance(entries, dict):
        entries = cache[machine] = {}
    entries[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(cache, indent=2) + "\n")
    except OSError:
        pass


def now_utc() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
