"""Where an export writes (``aot export safetensors`` / ``aot export hf``): never over a user's run, and all at once.

- OUT_DIR is refused (one line naming it and the fix) when it holds a training run (:func:`aot.run_folder.holds_run`),
  a checkpoint or model (``config.json`` / ``model.safetensors`` / ``trainer.json``: e.g. a run's ``checkpoint/``)
  or any other file — unless it is an earlier export of the same format, which ``aot_export.json`` (written into
  every export: its format and source) says. ``--force`` replaces it anyway; what it held is then moved to
  ``OUT_DIR.old-N``, never deleted.
- The export is written into a scratch folder beside OUT_DIR and swapped in with one rename
  (:func:`aot.run_folder.atomic_folder`), under OUT_DIR's lock (:func:`aot.run_folder.folder_lock`): a kill at any
  moment leaves the old OUT_DIR or the whole new one; a failed write (full disk, file-size limit, read-only
  folder) is one line and leaves OUT_DIR as it was, with no scratch folder behind.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aot.errors import AotError
from aot.run_folder import (
    LOCK_FILE,
    MODEL_CONFIG,
    MODEL_WEIGHTS,
    TRAINER_JSON,
    WriteFailed,
    as_os_error,
    atomic_folder,
    folder_lock,
    holds_run,
)

EXPORT_RECORD = "aot_export.json"  # {"format": ..., "source": ...}: what makes a folder an earlier export
MODEL_FILES = (MODEL_CONFIG, MODEL_WEIGHTS, TRAINER_JSON)


def export_format(folder: Path) -> str | None:
    """The format of the export in ``folder`` (from its ``aot_export.json``), or None when it is not one."""
    try:
        record = json.loads((folder / EXPORT_RECORD).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return record.get("format") if isinstance(record, dict) and isinstance(record.get("format"), str) else None


def out_problem(out: Path, fmt: str) -> str | None:
    """What ``out`` holds that an export of ``fmt`` must not replace without ``--force``; None when it is missing,
    empty or an earlier export of ``fmt``."""
    names = {p.name for p in out.iterdir()} - {LOCK_FILE} if out.is_dir() else set()
    if not names or export_format(out) == fmt:
        return None
    if holds_run(out):
        return "holds a training run"
    other = export_format(out)
    if other is not None:
        return f"holds an export of another format ({other})"
    if names & set(MODEL_FILES):
        return f"holds a checkpoint or model ({', '.join(sorted(names & set(MODEL_FILES)))})"
    return "holds other files"


def check_out(out: Path, fmt: str, force: bool) -> bool:
    """Refuse ``out`` (one line) unless an export may replace it; returns whether its content must be kept aside
    (``--force`` over something that is not an earlier export of ``fmt``)."""
    if out.exists() and not out.is_dir():
        raise AotError(f"OUT_DIR {str(out)!r} is a file, not a folder; give a new or empty folder")
    problem = out_problem(out, fmt)
    if problem is not None and not force:
        raise AotError(
            f"OUT_DIR {str(out)!r} {problem}; give a new or empty folder (or an earlier `aot export {fmt}`), or add "
            f"--force to replace it (what it holds is moved to {out.name}.old-N, not deleted)"
        )
    return problem is not None


@contextmanager
def export_folder(out: str | Path, fmt: str, source: str | Path, force: bool = False) -> Iterator[Path]:
    """Check ``out`` (see the module docstring), take its lock and yield the scratch folder to write the export of
    ``source`` into; on a clean exit the export record is added and the folder swapped in. Enter it before reading
    the run, so a refused OUT_DIR costs nothing."""
    out = Path(out)
    check_out(out, fmt, force)
    with folder_lock(out, option="OUT_DIR"):
        keep = check_out(out, fmt, force)  # again, under the lock
        aside = _free_sibling(out) if keep else None
        try:
            with atomic_folder(out, keep_old_as=aside) as scratch:
                yield scratch
                record = {"format": fmt, "source": str(Path(source).resolve())}
                (scratch / EXPORT_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        except Exception as exc:
            cause = as_os_error(exc)
            if cause is None:
                raise
            plain = OSError(cause.errno, cause.strerror)  # its file is in the scratch folder, gone now
            raise WriteFailed(plain, f"cannot write the export into {str(out)!r} (left as it was)") from None
    if aside is not None:
        print(f"aot: --force: moved what {str(out)!r} held to {str(aside)!r}", file=sys.stderr, flush=True)


def _free_sibling(out: Path) -> Path:
    n = 1
    while (target := out.with_name(f"{out.name}.old-{n}")).exists():
        n += 1
    return target
