"""Measurements that belong to a machine, made once and kept: ``$AOT_DATA/<name>.json`` (``~/.cache/aot`` by
default), ``{machine key: {entry key: entry}}``. The machine key names what makes a measurement valid on a later
run — the processor, the threads torch uses and torch's version — so another machine (or a changed set-up)
measures for itself. Used for the CPU matmul peak (:mod:`aot.bench.peaks`) and the bf16-or-fp32 choice
(:mod:`aot.bench.precision`)."""

from __future__ import annotations

import json
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


def read_entry(path: Path, key: str) -> dict[str, Any] | None:
    """This machine's entry ``key`` in the cache file, or None (missing or damaged file: measure again)."""
    entry = _read(path).get(machine_key(), {}).get(key)
    return entry if isinstance(entry, dict) else None


def write_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Store this machine's entry ``key`` (atomic rewrite); a folder that cannot be written only costs a
    measurement next time."""
    cache = _read(path)
    machine = cache.get(machine_key())
    if not isinstance(machine, dict):
        machine = cache[machine_key()] = {}
    machine[key] = entry
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
