"""Run folders are never overwritten: what ``aot train TASK --out DIR [--resume [auto]] [--force]`` does with DIR.

- a new run into a folder that holds a run is refused (one line naming ``--resume`` and ``--force``);
- ``--resume`` continues from the newest checkpoint that verifies (falling back to ``checkpoint.prev`` when the
  latest is damaged, and saying so); no checkpoint is an error;
- ``--resume auto`` resumes when it can, else starts (a folder with logs but no checkpoint is moved aside first);
- ``--force`` starts over: the old run is moved to a sibling folder ``DIR.old-N``, never deleted.

Only rank 0 looks at the folder and acts; every process gets its decision (:func:`plan_run`).

A cooldown branch (``aot train TASK --out BRANCH --branch-from RUN/checkpoint-step1000 --set train.steps=1250``)
starts a new run from another run's checkpoint instead of step 0 (:func:`plan_branch`). It is exact — the
branch's weights are those a run of its own ``train.steps`` would have from scratch, bit for bit — because
everything else equals the parent's (the fingerprint: model, data, every training setting but ``train.steps``),
the batch source is indexed by the step, and the checkpoint lies in the stable phase of a ``wsd`` schedule of
both lengths, where the rate does not depend on ``train.steps`` (:func:`aot.train.schedule.decay_start`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.run_folder import (
    TRAINER_JSON,
    check_writable_dir,
    checkpoint_candidates,
    holds_run,
    latest_good_checkpoint,
    move_aside,
    refuse_model_folder,
    verify_checkpoint,
)
from aot.train.checkpoint import check_fingerprint
from aot.train.distributed import DistEnv, broadcast_from_main
from aot.train.schedule import decay_start

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
    refuse_model_folder(out)  # whatever the mode: --force or --resume auto would move the model aside
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
    return _agreed_plan(lambda: _plan_on_main(out, mode, force), env)


def _agreed_plan(decide: Callable[[], RunPlan], env: DistEnv) -> RunPlan:
    """``decide()`` on rank 0, its plan (or its one-line error) given to every process."""
    outcome: tuple[RunPlan | None, str] = (None, "")
    if env.is_main:
        try:
            outcome = (decide(), "")
        except AotError as exc:
            outcome = (None, str(exc))
    agreed: tuple[RunPlan | None, str] = broadcast_from_main(outcome)  # type: ignore[assignment]
    plan, error = agreed
    if error:
        raise AotError(error)
    assert plan is not None
    return plan


# -- cooldown branches --------------------------------------------------------------------------------------

#: what a cooldown branch may set differently from its parent run (everything else must be equal)
BRANCH_CHANGES = ("train.steps",)


def _cooldown_start(train: dict[str, Any]) -> int:
    return decay_start(int(train["steps"]), int(train["warmup_steps"]), float(train.get("decay_fraction", 0.2)))


def _shortest_branch(step: int, train: dict[str, Any]) -> int:
    """The fewest ``train.steps`` whose cooldown starts at or after ``step``."""
    total = step + 1
    while _cooldown_start({**train, "steps": total}) < step:
        total += 1
    return total


def check_branch(state: dict[str, Any], fingerprint: dict[str, Any], train: dict[str, Any], folder: Path) -> None:
    """One line when a branch of ``train`` (this run's train config) from checkpoint ``folder`` (its trainer
    ``state``) would not be exact: another setting than ``train.steps`` differs from the parent's; the schedule is
    not ``wsd``; or the checkpoint's step lies in the cooldown of the parent or of the branch."""
    check_fingerprint(
        state.get("fingerprint", {}),
        fingerprint,
        folder,
        ignore=BRANCH_CHANGES,
        fix="a cooldown branch may change only train.steps; use the parent run's settings",
    )
    step = int(state["step"])
    if train["schedule"] != "wsd":
        raise AotError(
            f"--branch-from {str(folder)!r}: train.schedule={train['schedule']!r} sets every step's rate from "
            "train.steps, so a branch would not be the run of its length; branch from a train.schedule=wsd run"
        )
    parent = state.get("train_config", {})
    if step > _cooldown_start(parent):
        raise AotError(
            f"--branch-from {str(folder)!r}: step {step} lies in its run's cooldown (from step "
            f"{_cooldown_start(parent)}); branch from a checkpoint of the stable phase (train.keep_checkpoints)"
        )
    if step > _cooldown_start(train):
        raise AotError(
            f"--branch-from {str(folder)!r}: train.steps={train['steps']} starts its cooldown at step "
            f"{_cooldown_start(train)}, before the checkpoint's step {step}; set train.steps to at least "
            f"{_shortest_branch(step, train)}"
        )


def plan_branch(source: Path, out: Path, fingerprint: dict[str, Any], train: dict[str, Any], env: DistEnv) -> RunPlan:
    """The plan of a branch into ``out`` from checkpoint folder ``source`` (verified, and checked by
    :func:`check_branch` against this run's ``fingerprint`` and ``train`` config), decided on rank 0 and given to
    every process; a one-line error on every process otherwise."""
    return _agreed_plan(lambda: _branch_on_main(source, out, fingerprint, train), env)


def _branch_on_main(source: Path, out: Path, fingerprint: dict[str, Any], train: dict[str, Any]) -> RunPlan:
    state = read_branch_source(source)
    resolved = source.resolve()
    if resolved == out.resolve() or out.resolve() in resolved.parents:
        raise AotError(f"--branch-from {str(source)!r} lies inside --out {str(out)!r}; branch into a new --out")
    check_branch(state, fingerprint, train, source)
    note = f"branching from {str(source)!r} (step {state['step']}) to train.steps={train['steps']}"
    return RunPlan(source, state, (note,))


def read_branch_source(source: Path) -> dict[str, Any]:
    """The verified trainer state of the checkpoint folder ``source``; a one-line error when it is none."""
    if not (source / TRAINER_JSON).is_file():
        raise AotError(
            f"--branch-from {str(source)!r} is not a training checkpoint (no {TRAINER_JSON}); give one such as "
            "RUN/checkpoint-step1000 (train.keep_checkpoints keeps them)"
        )
    return verify_checkpoint(source)


def branch_config(source: Path) -> dict[str, Any] | None:
    """The whole run config the checkpoint ``source`` was trained with — what a branch's config starts from, with
    ``train.keep_checkpoints`` emptied — or ``None`` when it records none (written before checkpoints kept it)."""
    config = read_branch_source(source).get("run_config")
    if not isinstance(config, dict):
        return None
    train = dict(config.get("train", {}))
    train["keep_checkpoints"] = []
    return {**config, "train": train}
