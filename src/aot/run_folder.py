"""A run folder on disk (``--out DIR`` of every command), in one place: its layout, checked writable before any work,
files replaced atomically, the finished run's ``results.json``, whether a folder holds a run (and moving an old
one aside, never deleting it), and reading its checkpoints — verified by sha256 — down to the folder that holds
the trained model.

Layout of a training run's folder::

    DIR/results.json            the finished run (written last, atomically)       RESULTS_FILE
    DIR/metrics.jsonl           one row per logged step
    DIR/checkpoint/             the latest checkpoint: config.json, model.safetensors, trainer.json, ...
    DIR/checkpoint.prev/        the one before (a damaged latest one falls back to it)
    DIR/aot_tokenizer.json, DIR/tokenizer.json   what loads the tokenizer (lm runs; aot.data.tokenizers)

What a checkpoint holds and how it is written: :mod:`aot.train.checkpoint`; what ``--resume`` / ``--force`` do
with a folder: :mod:`aot.train.resume`.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aot.errors import AotError, os_error_line

RESULTS_FILE = "results.json"  # what every experiment command writes into --out when it finishes
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoint"
PREV_DIR = "checkpoint.prev"
OLD_DIR = ".checkpoint.old"  # the previous layout's name for the instant between two renames
TRAINER_JSON = "trainer.json"
MODEL_WEIGHTS = "model.safetensors"
MODEL_CONFIG = "config.json"
#: what makes a folder hold a run
RUN_MARKERS = (METRICS_FILE, RESULTS_FILE, CHECKPOINT_DIR, PREV_DIR, OLD_DIR)


class CheckpointDamaged(AotError):
    """A checkpoint folder whose files are missing, truncated or do not match their checksums."""


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


# -- runs in a folder -----------------------------------------------------------------------------------------


def holds_run(out: Path) -> bool:
    return out.is_dir() and any((out / name).exists() for name in RUN_MARKERS)


def move_aside(out: Path) -> Path:
    """Rename ``out`` to the first free sibling ``out.old-N`` and recreate it empty; returns the new name."""
    out = out.resolve()
    n = 1
    while (target := out.with_name(f"{out.name}.old-{n}")).exists():
        n += 1
    try:
        out.rename(target)
        out.mkdir()
    except OSError as exc:
        raise AotError(os_error_line(exc, f"cannot move the old run in {str(out)!r} aside")) from None
    return target


# -- reading checkpoints --------------------------------------------------------------------------------------


def checkpoint_candidates(out_dir: Path) -> list[Path]:
    """The checkpoint folders under ``out_dir`` (latest first by name); one without a ``trainer.json`` is listed
    too, so that it is reported as damaged rather than silently ignored."""
    return [out_dir / name for name in (CHECKPOINT_DIR, OLD_DIR, PREV_DIR) if (out_dir / name).is_dir()]


def find_checkpoint(out_dir: Path) -> Path | None:
    """The newest checkpoint under ``out_dir`` that verifies (see :func:`latest_good_checkpoint`), else None."""
    found = latest_good_checkpoint(out_dir)
    return found[0] if found else None


def model_folder(run_dir: Path) -> Path | None:
    """The folder whose ``config.json`` + ``model.safetensors`` hold a run's trained model: the newest checkpoint
    that verifies (so a damaged latest one falls back to the previous), else ``run_dir/checkpoint`` or ``run_dir``
    itself when it holds the two files (a ``save_pretrained`` or export folder). None when there is none (e.g. only
    a sharded FSDP checkpoint: ``aot export safetensors`` writes one)."""
    found = latest_good_checkpoint(run_dir)
    candidates = ([found[0]] if found else []) + [run_dir / CHECKPOINT_DIR, run_dir]
    for folder in candidates:
        if (folder / MODEL_CONFIG).is_file() and (folder / MODEL_WEIGHTS).is_file():
            return folder
    return None


def latest_good_checkpoint(
    out_dir: Path, damaged: list[tuple[Path, str]] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The verified checkpoint with the highest step, and its trainer state; the damaged ones are appended to
    ``damaged`` as (folder, reason). None when no checkpoint verifies."""
    best: tuple[Path, dict[str, Any]] | None = None
    for folder in checkpoint_candidates(out_dir):
        try:
            state = verify_checkpoint(folder)
        except CheckpointDamaged as exc:
            if damaged is not None:
                damaged.append((folder, str(exc)))
            continue
        if best is None or int(state.get("step", 0)) > int(best[1].get("step", 0)):
            best = (folder, state)
    return best


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def state_digest(state: dict[str, Any]) -> str:
    body = {k: v for k, v in state.items() if k != "state_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def verify_checkpoint(folder: Path) -> dict[str, Any]:
    """The trainer state of ``folder`` after checking the sha256 of every file it lists and of itself;
    :class:`CheckpointDamaged` (one line naming the folder and the file) otherwise."""
    state = read_trainer_state(folder)
    files = state.get("files")
    if not isinstance(files, dict) or state.get("state_sha256") != state_digest(state):
        raise CheckpointDamaged(f"checkpoint {str(folder)!r} is damaged: {TRAINER_JSON} does not match its checksum")
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            raise CheckpointDamaged(f"checkpoint {str(folder)!r} is damaged: {name} is missing")
        if file_sha256(path) != digest:
            raise CheckpointDamaged(f"checkpoint {str(folder)!r} is damaged: {name} does not match its sha256")
    return state


def read_trainer_state(folder: Path) -> dict[str, Any]:
    try:
        state = json.loads((folder / TRAINER_JSON).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not valid JSON"
        raise CheckpointDamaged(
            f"checkpoint {str(folder)!r} is damaged: {TRAINER_JSON} is unreadable ({reason})"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointDamaged(f"checkpoint {str(folder)!r} is damaged: {TRAINER_JSON} is not a JSON object")
    return state


def require_model_folder(run_dir: Path, written_by: str = "`aot train TASK --out DIR`") -> Path:
    """:func:`model_folder`, or a one-line error saying what the folder lacks and which command writes one."""
    folder = model_folder(run_dir)
    if folder is not None:
        return folder
    raise AotError(
        f"{str(run_dir)!r} holds no model ({CHECKPOINT_DIR}/{MODEL_WEIGHTS} + {MODEL_CONFIG}); give a folder written "
        f"by {written_by} (after its first checkpoint)"
    )
