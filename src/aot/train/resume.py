"""Run folders are never overwritten: what ``aot train TASK --out DIR [--resume [auto]] [--force]`` does with DIR.

- a new run into a folder that holds a run is refused (one line naming ``--resume`` and ``--force``);
- ``--resume`` continues from the newest checkpoint that verifies (falling back to ``checkpoint.prev`` when the
  latest is damaged, and saying so); no checkpoint is an error;
- ``--resume auto`` resumes when it can, else starts (a folder with logs but no checkpoint is moved aside first);
- ``--force`` starts over: the old run is moved to a sibling folder ``DIR.old-N``, never deleted.

Only rank 0 looks at the folder and acts; every process gets its decision (:func:`plan_run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.run_folder import check_writable_dir, checkpoint_candidates, holds_run, latest_good_checkpoint, move_aside
from aot.train.distributed import DistEnv, broadcast_from_main

RESUME_MODES = ("no", "yes", "auto")


@dataclass
class RunPlan:
    """What to do: resume from ``checkpoint`` (with its trainer ``state``) or start at step 0; ``notes`` are the
    lines to print (what was moved aside, which checkpoint is used and why)."""

    checkpoint: Path | None = None
    state: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()


def resume_mode(resume: bool | str | None) -> str:
    mode = ("yes" if resume else "no") if resume is None or isinstance(resume, bool) else resume
    if mode not in RESUME_MODES:
        raise AotError(f"resume={resume!r} is not one of {', '.join(RESUME_MODES)}")
    return str(mode)


def _plan_on_main(out: Path, mode: str, force: bool) -> RunPlan:
    check_writable_dir(out)
    notes: list[str] = []
    if mode in ("yes", "auto"):
        damaged: list[tuple[Path, str]] = []
        found = latest_good_checkpoint(out, damaged)
        if found is not None:
            folder, state = found
            for bad, reason in damaged:
                moved = bad.with_name(f"{bad.name}.damaged")
                if moved.exists():
                    import shutil

                    shutil.rmtree(moved, ignore_errors=True)
                bad.rename(moved)  # kept for inspection; the next save must not rotate it in as "previous"
                notes.append(f"{reason}; moved it to {moved.name}")
            used = "the previous checkpoint " if damaged else ""
            notes.append(f"resuming from {used}{str(folder)!r} (step {state.get('step')})")
            return RunPlan(folder, state, tuple(notes))
        if mode == "yes":
            if damaged:
                raise AotError(
                    "; ".join(reason for _, reason in damaged) + " and no other checkpoint verifies; "
                    "start over with --force (the run is moved aside)"
                )
            raise AotError(
                f"--resume: {str(out)!r} holds no checkpoint to resume from; drop --resume to start a new run, "
                "or use --resume auto"
            )
        if holds_run(out) or checkpoint_candidates(out):
            notes.append(f"--resume auto: no usable checkpoint in {str(out)!r}; moved the old run to {move_aside(out)}")
        return RunPlan(notes=tuple(notes))
    if holds_run(out):
        if not force:
            raise AotError(
                f"--out {str(out)!r} already holds a run; add --resume to continue it, or --force to start over "
                f"(the old run is moved to {out.name}.old-N)"
            )
        notes.append(f"--force: moved the old run in {str(out)!r} to {move_aside(out)}")
    return RunPlan(notes=tuple(notes))


def plan_run(out: Path, resume: bool | str | None, force: bool, env: DistEnv) -> RunPlan:
    """Decide on rank 0 (and act: move an old run aside), then give every process the same plan or the same
    one-line error."""
    mode = resume_mode(resume)
    if mode != "no" and force:
        raise AotError("--resume and --force contradict each other: --resume continues the run, --force starts over")
    outcome: tuple[RunPlan | None, str] = (None, "")
    if env.is_main:
        try:
            outcome = (_plan_on_main(out, mode, force), "")
        except AotError as exc:
            outcome = (None, str(exc))
    agreed: tuple[RunPlan | None, str] = broadcast_from_main(outcome)  # type: ignore[assignment]
    plan, error = agreed
    if error:
        raise AotError(error)
    assert plan is not None
    return plan
