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
from dataclasses import dataclass
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
#: what only a training checkpoint holds (aot.train.checkpoint writes them beside trainer.json): a folder with one
#: of them and no trainer.json is a checkpoint that lost it, not a save_pretrained folder
CHECKPOINT_MARKERS = (TRAINER_JSON, "optimizer.safetensors", "rng-rank0.safetensors", "sharded")


class CheckpointDamaged(AotError):
    """A checkpoint folder whose files are missing, truncated or do not match their checksums: ``folder`` and
    ``reason`` (what is wrong, naming the file) say which."""

    def __init__(self, folder: Path, reason: str) -> None:
        self.folder, self.reason = Path(folder), reason
        super().__init__(f"checkpoint {str(folder)!r} is damaged: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.folder, self.reason)


class RunFileError(AotError):
    """A file of a run or export folder that does not hold what it should: one line naming the file (``path``),
    what is wrong with it (``problem``, naming the field) and the fix."""

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = Path(path), problem, fix
        super().__init__(f"{str(path)!r} {problem}; {fix}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.problem, self.fix)


def check_writable_dir(out: str | Path, create: bool = True) -> Path:
    """``out`` exists (created if needed) and is a folder this process can write into; a one-line
    :class:`AotError` otherwise (a file, a read-only folder, a full disk), before any work is done.
    ``create=False``: nothing is created — a missing ``out`` must be creatable (its nearest existing parent is a
    folder this process can write into), and the command makes it when it writes its first file."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise AotError(f"--out {str(out)!r} is a file, not a folder; pick a folder for the results")
    probed = out
    if not create:
        while not probed.exists() and probed != probed.parent:
            probed = probed.parent
        if not probed.is_dir():
            raise AotError(f"--out {str(out)!r} lies under {str(probed)!r}, which is not a folder; pick a folder")
    try:
        if create:
            out.mkdir(parents=True, exist_ok=True)
        probe = probed / f".write-test-{os.getpid()}"
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
        results = read_json_object(path, "")
    except RunFileError:
        return None
    if not isinstance(results.get("task"), str):
        return None
    return results if isinstance(results.get("train"), dict) else None


# -- reading the JSON files of a run or export folder ---------------------------------------------------------

#: what a JSON number may be read as (``bool`` is an ``int`` in Python, never a number here)
NUMBER: tuple[type, ...] = (int, float)


def read_json_object(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object in ``path``; a :class:`RunFileError` (one line naming the file, what is wrong and ``fix``)
    when it cannot be read, is not UTF-8, is not JSON (truncated, empty) or holds something else than an object."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        problem = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror})"
        raise RunFileError(path, problem, fix) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        raise RunFileError(path, problem, fix) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            problem = "is not valid JSON: the file is empty"
        elif exc.pos >= len(text.rstrip()):
            problem = "is not valid JSON: it ends early (truncated)"
        else:
            problem = f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        raise RunFileError(path, problem, fix) from None
    except RecursionError:
        raise RunFileError(path, "is not valid JSON here (nested too deeply)", fix) from None
    if not isinstance(doc, dict):
        raise RunFileError(path, f"must hold a JSON object of fields, not {json_kind(doc)}", fix)
    return doc


def json_kind(value: Any) -> str:
    """What a JSON value is, in words: ``a list``, ``a string``, ``null`` ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true / false"
    kinds = ((dict, "an object"), (list, "a list"), (str, "a string"), (int, "an integer"), (float, "a number"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def json_field(doc: dict[str, Any], dotted: str, kinds: type | tuple[type, ...], path: Path, fix: str) -> Any:
    """The value at ``dotted`` (``config.data.tokenizer``) of ``doc`` (read from ``path``), which must be one of
    ``kinds``; ``None`` when it (or a section above it) is absent. A value of another kind, or a section that is
    not an object, is a :class:`RunFileError` naming the file and the field."""
    value: Any = doc
    parts = dotted.split(".")
    for depth, key in enumerate(parts):
        if not isinstance(value, dict):
            raise _wrong_kind(path, ".".join(parts[:depth]), value, "an object", fix)
        if key not in value:
            return None
        value = value[key]
    allowed = kinds if isinstance(kinds, tuple) else (kinds,)
    if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
        named = [kind for kind in allowed if not (kind is int and float in allowed)]  # a number covers integers
        raise _wrong_kind(path, dotted, value, " or ".join(json_kind(kind()) for kind in named), fix)
    return value


def _wrong_kind(path: Path, dotted: str, value: Any, wanted: str, fix: str) -> RunFileError:
    shown = json.dumps(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return RunFileError(path, f"has {dotted} = {shown} ({json_kind(value)}), where {wanted} belongs", fix)


# -- runs in a folder -----------------------------------------------------------------------------------------


def holds_run(out: Path) -> bool:
    return out.is_dir() and any((out / name).exists() for name in RUN_MARKERS)


def holds_training_run(out: Path) -> bool:
    """Whether ``out`` holds what training writes: its metrics, a checkpoint, or a finished run's results.json
    (:func:`read_results`). Narrower than :func:`holds_run`: the results.json another command wrote (an
    evaluation, a benchmark) does not count, so that command may write into its own folder again."""
    if not out.is_dir():
        return False
    training = (METRICS_FILE, CHECKPOINT_DIR, PREV_DIR, OLD_DIR)
    return any((out / name).exists() for name in training) or read_results(out) is not None


def holds_model(folder: Path) -> str | None:
    """What model ``folder`` holds, in words, when it is a training checkpoint (:func:`is_checkpoint`) or a saved
    model (``config.json`` + ``model.safetensors``: ``save_pretrained``, ``aot export``); ``None`` otherwise."""
    if not folder.is_dir():
        return None
    if is_checkpoint(folder):
        return "a training checkpoint"
    if (folder / MODEL_CONFIG).is_file() and (folder / MODEL_WEIGHTS).is_file():
        return "a saved model (config.json + model.safetensors)"
    return None


def inside_model(out: Path) -> tuple[Path, str] | None:
    """The checkpoint or saved-model folder that ``out`` is or lies inside (``out`` itself first), with what it
    holds; ``None`` when there is none. Nothing may be written into such a folder but the model it holds."""
    here = Path(os.path.abspath(out))
    for folder in (here, *here.parents):
        what = holds_model(folder)
        if what is not None:
            return folder, what
    return None


def refuse_model_folder(out: str | Path, option: str = "--out") -> None:
    """A one-line :class:`AotError` when ``out`` is (or lies inside) a checkpoint or a saved model: a run, a
    report or an analysis written there would mix its files into that model's folder."""
    found = inside_model(Path(out))
    if found is not None:
        folder, what = found
        where = "is" if folder == Path(os.path.abspath(out)) else f"lies inside {str(folder)!r}, which is"
        raise AotError(
            f"{option} {str(out)!r} {where} {what}; writing there would mix new files into that model's folder — "
            "pick a new folder"
        )


def check_output_dir(out: str | Path, option: str = "--out", reads: str | Path | None = None) -> Path:
    """The output folder of a command that writes into one (analysis, evaluation, benchmark, report), checked
    before any work: never a training run (:func:`holds_training_run`: its results.json and checkpoints would be
    mixed with this command's), never a checkpoint or saved model, or a folder inside one
    (:func:`refuse_model_folder`), and writable or creatable (:func:`check_writable_dir`; nothing is created: a
    refused input must leave no folder behind, so the command makes ``out`` when it writes). ``reads``: the run
    the command reads, whose folder is its default output (``aot viz attention RUN``): that one may be a training
    run (not a checkpoint)."""
    refuse_as_output(out, option, reads)
    return check_writable_dir(out, create=False)


def refuse_as_output(out: str | Path, option: str = "--out", reads: str | Path | None = None) -> None:
    """The refusals of :func:`check_output_dir` alone, creating nothing (``--dry-run``)."""
    out = Path(out)
    refuse_model_folder(out, option)
    own = reads is not None and os.path.abspath(out) == os.path.abspath(reads)
    if not own and holds_training_run(out):
        raise AotError(
            f"{option} {str(out)!r} holds a training run; this command would write its results.json and "
            "files over the run's — pick a new folder"
        )


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


@dataclass(frozen=True)
class ModelFolder:
    """Where a run's trained model is: ``path`` holds its ``config.json`` (and ``model.safetensors``, or the
    shards of an FSDP checkpoint). ``state`` is the trainer state when ``path`` is a checkpoint whose checksums
    verified (``None``: a ``save_pretrained`` / export folder, which has none); ``damaged`` the checkpoints of the
    run that failed them and were passed over."""

    path: Path
    state: dict[str, Any] | None = None
    damaged: tuple[CheckpointDamaged, ...] = ()

    @property
    def step(self) -> int | None:
        return None if self.state is None else int(self.state.get("step", 0))

    def notices(self) -> list[str]:
        """One line per checkpoint passed over: ``checkpoint/ is damaged (...); using checkpoint.prev/ (step N)``."""
        used = f"{self.path.name}/ (step {self.step})"
        return [f"{bad.folder.name}/ is damaged ({bad.reason}); using {used}" for bad in self.damaged]


def model_folder(run_dir: Path) -> ModelFolder | None:
    """The folder holding a run's trained model, its checksums verified whenever it has them:

    - ``run_dir`` is a checkpoint (:func:`is_checkpoint`: it holds ``trainer.json`` or the optimizer / RNG state
      only training writes): it must verify;
    - ``run_dir`` holds checkpoints: the newest that verifies — a damaged latest one falls back to
      ``checkpoint.prev`` as ``--resume`` does (:attr:`ModelFolder.damaged` says which were passed over); a
      folder among them without ``trainer.json`` counts as damaged;
    - otherwise ``run_dir/checkpoint`` or ``run_dir`` when it holds ``config.json`` + ``model.safetensors`` (a
      ``save_pretrained`` or export folder: no checksums to check).

    None when the folder holds no model; a one-line :class:`AotError` when it holds checkpoints and none verifies
    (a damaged model is never used)."""
    if is_checkpoint(run_dir):
        try:
            return ModelFolder(run_dir, verify_checkpoint(run_dir))
        except CheckpointDamaged as exc:
            raise AotError(f"{exc}; no model was loaded — {_restore_hint(run_dir.parent)}") from None
    candidates = checkpoint_candidates(run_dir)
    if any(is_checkpoint(folder) for folder in candidates):
        best, damaged = _scan_checkpoints(candidates)
        if best is None:
            reasons = "; ".join(f"{bad.folder.name}/ is damaged ({bad.reason})" for bad in damaged)
            raise AotError(
                f"{str(run_dir)!r}: {reasons}, and no other checkpoint verifies; no model was loaded — "
                f"{_restore_hint(None)}"
            )
        return ModelFolder(best[0], best[1], tuple(damaged))
    for folder in (run_dir / CHECKPOINT_DIR, run_dir):
        if (folder / MODEL_CONFIG).is_file() and (folder / MODEL_WEIGHTS).is_file():
            return ModelFolder(folder)
    return None


def is_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` was written as a training checkpoint (so it must verify), not by save_pretrained."""
    return any((folder / name).exists() for name in CHECKPOINT_MARKERS)


def _restore_hint(run_dir: Path | None) -> str:
    if run_dir is not None and len(checkpoint_candidates(run_dir)) > 1:
        return f"give the run folder {str(run_dir)!r} to fall back to its previous checkpoint"
    return "restore the run folder from a copy or train it again"


def latest_good_checkpoint(
    out_dir: Path, damaged: list[tuple[Path, str]] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The verified checkpoint with the highest step, and its trainer state; the damaged ones are appended to
    ``damaged`` as (folder, reason). None when no checkpoint verifies."""
    best, bad = _scan_checkpoints(checkpoint_candidates(out_dir))
    if damaged is not None:
        damaged.extend((exc.folder, str(exc)) for exc in bad)
    return best


def _scan_checkpoints(
    folders: list[Path],
) -> tuple[tuple[Path, dict[str, Any]] | None, list[CheckpointDamaged]]:
    """Verify every folder: the one with the highest step that verifies (None if none does), and the damaged."""
    best: tuple[Path, dict[str, Any]] | None = None
    damaged: list[CheckpointDamaged] = []
    for folder in folders:
        try:
            state = verify_checkpoint(folder)
        except CheckpointDamaged as exc:
            damaged.append(exc)
            continue
        if best is None or state.get("step", 0) > best[1].get("step", 0):
            best = (folder, state)
    return best, damaged


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
        raise CheckpointDamaged(folder, f"{TRAINER_JSON} does not match its checksum")
    step = state.get("step", 0)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointDamaged(folder, f"{TRAINER_JSON} has step = {step!r}, not a step number")
    for name, digest in files.items():
        inside = Path(str(name))
        if inside.is_absolute() or ".." in inside.parts:
            raise CheckpointDamaged(folder, f"{TRAINER_JSON} lists {str(name)!r}, a file outside the checkpoint")
        path = folder / inside
        if not path.is_file():
            raise CheckpointDamaged(folder, f"{name} is missing")
        if file_sha256(path) != digest:
            raise CheckpointDamaged(folder, f"{name} does not match its sha256")
    return state


def read_trainer_state(folder: Path) -> dict[str, Any]:
    """``folder/trainer.json`` as read (not verified: :func:`verify_checkpoint`); :class:`CheckpointDamaged` when
    it is missing, unreadable, not JSON or not an object."""
    path = folder / TRAINER_JSON
    if not path.is_file():
        raise CheckpointDamaged(folder, f"{TRAINER_JSON} is missing")
    try:
        return read_json_object(path, "")
    except RunFileError as exc:
        raise CheckpointDamaged(folder, f"{TRAINER_JSON} {exc.problem}") from None


def require_model_folder(run_dir: Path, written_by: str = "`aot train TASK --out DIR`") -> ModelFolder:
    """:func:`model_folder`, or a one-line error saying what the folder lacks and which command writes one."""
    folder = model_folder(run_dir)
    if folder is not None:
        return folder
    raise AotError(
        f"{str(run_dir)!r} holds no model ({CHECKPOINT_DIR}/{MODEL_WEIGHTS} + {MODEL_CONFIG}); give a folder written "
        f"by {written_by} (after its first checkpoint)"
    )


# -- one writer per folder; whole folders written at once; failed writes as one line ----------------------------

LOCK_FILE = ".aot.lock"  # in a folder a command writes: held (fcntl.flock) for the whole command, with its pid


class FolderBusy(AotError):
    """Another process holds the folder's lock (:func:`folder_lock`)."""


_HELD_LOCKS: dict[str, int] = {}  # folder (resolved) -> the descriptor of this process's lock on it


@contextmanager
def folder_lock(folder: str | Path, option: str = "--out") -> Iterator[Path]:
    """Hold ``folder``'s lock for the block: an exclusive ``fcntl.flock`` on ``folder/.aot.lock`` (the folder and the
    file are created when missing), which holds this process's pid. Another process asking for it meanwhile gets
    :class:`FolderBusy`, one line naming the holder's pid, the folder and the fix (``option``: how the user names the
    folder). The OS drops the lock when the process ends, after kill -9 too, so a stale file never blocks anyone. On
    exit the lock file is removed, and the folder too when this call created it and nothing was written into it: a
    refused command leaves nothing behind. Yields the folder. A folder moved aside and made anew while locked
    (``--force``) takes its lock along through :func:`follow_lock`. Within one process it nests: a block inside
    another on the same folder holds the same lock."""
    import contextlib

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise AotError(f"{option} {str(folder)!r} is a file, not a folder; pick a folder")
    created = not folder.exists()
    key = str(folder.resolve())
    if key in _HELD_LOCKS:  # this process holds it already (an outer block)
        yield folder
        return
    try:
        _HELD_LOCKS[key] = _acquire_lock(folder, option)
        try:
            yield folder
        finally:
            fd = _HELD_LOCKS.pop(key)
            if _same_file(fd, folder / LOCK_FILE):
                (folder / LOCK_FILE).unlink(missing_ok=True)  # still holding the lock: nobody else holds this file
            os.close(fd)
    finally:
        if created:
            with contextlib.suppress(OSError):  # not empty: the command wrote into it, keep it
                folder.rmdir()


def folder_busy(folder: str | Path) -> bool:
    """Whether another process holds ``folder``'s lock now (a command is writing the folder): what a scheduler of
    many runs asks before it starts one, so that two of them never queue the same folder. A stale lock file (its
    holder was killed) is not busy. Asks with a shared lock taken and dropped at once, never waiting."""
    import fcntl

    path = Path(folder) / LOCK_FILE
    if str(Path(folder).resolve()) in _HELD_LOCKS:
        return False  # this process holds it
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def follow_lock(folder: str | Path, option: str = "--out") -> None:
    """``folder`` was moved aside and made anew (:func:`move_aside`) while this process held its lock: lock the new
    folder and let go of the moved one (whose lock file goes). Nothing when this process holds no lock on
    ``folder`` (another rank under torchrun) or the folder was not moved."""
    folder = Path(folder)
    key = str(folder.resolve())
    old = _HELD_LOCKS.get(key)
    if old is None or _same_file(old, folder / LOCK_FILE):
        return
    _HELD_LOCKS[key] = _acquire_lock(folder, option)
    moved = Path(f"/proc/self/fd/{old}")
    try:
        moved_file = Path(os.readlink(moved)) if moved.is_symlink() else None
    except OSError:
        moved_file = None
    if moved_file is not None and moved_file.name == LOCK_FILE:
        moved_file.unlink(missing_ok=True)
    os.close(old)


def _acquire_lock(folder: Path, option: str) -> int:
    """The descriptor of ``folder/.aot.lock``, exclusively locked, holding this process's pid; :class:`FolderBusy`
    when another process holds it."""
    import fcntl

    path = folder / LOCK_FILE
    while True:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise AotError(os_error_line(exc, f"cannot write into {option} {str(folder)!r}")) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another process
            holder = _holder_pid(fd)
            os.close(fd)
            raise FolderBusy(
                f"another aot process (pid {holder}) is using {str(folder)!r}; wait for it to finish or pick "
                f"another {option}"
            ) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder before us removed the file between our open and our lock: take the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise AotError(os_error_line(exc, f"cannot write into {option} {str(folder)!r}")) from None
    return fd


def _holder_pid(fd: int) -> str:
    """The pid the lock's holder wrote into the file. It writes it just after taking the lock, so a process that
    asks at that instant (the file still empty, or still naming a killed holder) waits for it a little; else "?"."""
    import time

    for _ in range(100):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit() and _alive(int(text)):
            return text
        time.sleep(0.01)
    return "?"


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, held = os.stat(path), os.fstat(fd)
        return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)
    except OSError:
        return False


def _drop_own_lock_file(folder: Path) -> None:
    """Remove ``folder``'s lock file when it names this process (a folder moved aside while this process held it)."""
    import contextlib

    path = folder / LOCK_FILE
    with contextlib.suppress(OSError, ValueError):
        if int(path.read_text().strip()) == os.getpid():
            path.unlink()


class WriteFailed(AotError):
    """A write that failed because of the disk or the folder (full disk, file-size limit, read-only folder): one
    line saying what was being written (``doing``) and why (``cause``, the OS error behind it)."""

    def __init__(self, cause: OSError, doing: str) -> None:
        self.cause, self.doing = cause, doing
        super().__init__(os_error_line(cause, doing))


def as_os_error(exc: BaseException) -> OSError | None:
    """The OS error behind a failed write: ``exc`` itself, the cause of a :class:`WriteFailed`, or the one that a
    library writing files itself names in its message (safetensors: ``... I/O error: File too large (os error
    27)``); None for anything else (a bug, not the disk)."""
    import re

    if isinstance(exc, WriteFailed):
        return exc.cause
    if isinstance(exc, OSError):
        return exc
    match = re.search(r"\(os error (\d+)\)", str(exc))
    if match is None:
        return None
    code = int(match.group(1))
    return OSError(code, os.strerror(code))


def fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` to the disk (before the rename that publishes the folder)."""
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


@contextmanager
def atomic_folder(out: Path, keep_old_as: Path | None = None) -> Iterator[Path]:
    """A scratch folder beside ``out``, unique to this process and call, to write ``out``'s new content into; on a
    clean exit it takes ``out``'s place in one step (``renameat2(RENAME_EXCHANGE)``: the new and the old folder
    swap names; two renames where the system has no exchange), then the old folder is removed, or renamed to
    ``keep_old_as``. On an error the scratch folder is removed and ``out`` is as it was. A kill at any moment leaves
    the old ``out`` or the whole new one, never a mixture (and at most a scratch folder, which the next call for
    the same ``out`` removes). The caller holds ``out``'s :func:`folder_lock` (so no other writer races it)."""
    import shutil

    out = Path(out)
    _remove_stale_scratch(out)
    scratch = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    scratch.mkdir(parents=True)
    try:
        yield scratch
        fsync_tree(scratch)
        if not out.exists():
            os.rename(scratch, out)
            return
        old = _swap(scratch, out)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if keep_old_as is None:
        shutil.rmtree(old, ignore_errors=True)
        return
    _drop_own_lock_file(old)
    try:
        os.rename(old, keep_old_as)
    except OSError as exc:
        doing = f"the new {str(out)!r} is written; its old content is in {str(old)!r}"
        raise AotError(os_error_line(exc, doing)) from None


def _swap(scratch: Path, out: Path) -> Path:
    """Give ``scratch``'s content the name ``out``; returns where ``out``'s old content now is."""
    if _exchange(scratch, out):
        return scratch
    aside = scratch.with_name(scratch.name[: -len(".tmp")] + ".old.tmp")
    os.rename(out, aside)
    try:
        os.rename(scratch, out)
    except OSError:
        os.rename(aside, out)
        raise
    return aside


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names of ``a`` and ``b`` in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False where the
    system or the file system cannot (the caller renames twice)."""
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _remove_stale_scratch(out: Path) -> None:
    """Remove the scratch folders of :func:`atomic_folder` calls for ``out`` whose process is gone (killed)."""
    import glob
    import shutil

    for path in out.parent.glob(f".{glob.escape(out.name)}.*-*.tmp"):
        pid = path.name[len(out.name) + 2 :].split("-", 1)[0]
        if path.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by another user
        return True
    return True
