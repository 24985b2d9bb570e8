"""``aot sweep --launcher slurm``: every trial of a study is a Slurm job, submitted through submitit.

A submission round (:func:`submit_round`) plans the study from its results store and submits, as one job array,
every trial that can start now and is neither finished (a row in the store, or a whole results.json in its
folder) nor queued or running (the ledger, :mod:`aot.sweep.launch.ledger`, and squeue). Each job trains its trial
(:class:`TrialJob`; under torchrun when it asks for more than one GPU) and records its row in the store, under the
store's lock. Trials that wait for others (the seeds that take an lr sweep's winner, cooldown branches that need
their parent's checkpoint) are submitted by the next round: by a small planner job (:class:`PlannerJob`) that
starts when the round's jobs have ended (``--dependency=afterany``), or by the command itself with ``--wait``.

Resubmitting the same command after a crash, a cancellation, preemption or a time-out submits what is neither
finished nor in flight; a killed trial continues from its checkpoint (``--resume auto``). A job that reaches its
time limit is requeued by submitit (its callable is :class:`submitit.helpers.Checkpointable`) up to three times.
A planner job never resubmits a trial that already failed once: that is the user's call (the same command).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import submitit

from aot.errors import AotError
from aot.run_folder import folder_busy
from aot.sweep.execute import Study
from aot.sweep.launch.jobs import JobState, failure_line, job_states, last_line, require_slurm
from aot.sweep.launch.ledger import Ledger, read_ledger, update_ledger
from aot.sweep.launch.resources import Resources
from aot.sweep.store import read_store, recorded_keys
from aot.sweep.training import finished_results


def now_utc() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


LOG_DIR = "slurm"  # OUT/slurm/: submitit's pickles and each job's log.out / log.err


@dataclass(frozen=True)
class SlurmLaunch:
    """Where and how a study runs on Slurm: its folder ``out``, each trial's ``resources``, the ``device`` its
    training asks for (auto: the job's GPU when it has one), and whether rounds chain through planner jobs."""

    out: Path
    resources: Resources
    device: str = "auto"
    chain: bool = True

    @property
    def logs(self) -> Path:
        return self.out / LOG_DIR


class TrialJob(submitit.helpers.Checkpointable):
    """The function of one trial's job: train it (continuing from its checkpoint) and record its row. Requeued by
    submitit, as it is, when the job reaches its time limit."""

    def __init__(self, study: Study, trial: Any, out: Path, device: str, gpus: int) -> None:
        self.study, self.trial, self.out, self.device, self.gpus = study, trial, Path(out), device, gpus

    def __call__(self) -> str:
        execution = self.study.execution(self.out, self.device)
        if self.gpus > 1 and finished_results(self.trial.folder(execution.runs)) is None:
            run_under_torchrun(self.trial.argv(execution.runs), self.gpus, self.device)
        status, _ = execution.run_trial(self.trial)  # after torchrun: finds the finished run and records it
        return status


def run_under_torchrun(argv: list[str], gpus: int, device: str) -> None:
    """``aot ARGV`` on ``gpus`` processes of this node (torchrun --standalone); one line when it fails."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}"]
    command += ["-m", "aot.cli", *argv, "--device", device]
    code = subprocess.call(command)
    if code != 0:
        raise AotError(f"torchrun of `aot {' '.join(argv[:2])}` on {gpus} GPUs exited with {code} (see the job's log)")


class PlannerJob:
    """The function of a planner job: the next submission round, started when the previous round's jobs ended."""

    def __init__(self, study: Study, launch: SlurmLaunch) -> None:
        self.study, self.launch = study, launch

    def __call__(self) -> str:
        for name in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_")) and k != "SLURM_CONF"]:
            del os.environ[name]  # this job's own allocation must not shape the jobs it submits
        report = submit_round(self.study, self.launch, automatic=True)
        return report.summary()


@dataclass
class Round:
    """What a submission round did: trials ``submitted`` (key → job), ``running`` (in flight already), ``held``
    (their folder is held by another process), ``failed`` (key → why; a planner job does not resubmit them),
    ``finished``, the number ``waiting`` for others, and the ``planner`` job it chained (or None)."""

    submitted: dict[str, str] = field(default_factory=dict)
    running: dict[str, str] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    finished: int = 0
    waiting: int = 0
    planner: str | None = None

    def summary(self) -> str:
        parts = [f"{self.finished} finished", f"{len(self.submitted)} submitted", f"{len(self.running)} in flight"]
        parts += [f"{len(self.failed)} failed", f"{self.waiting} waiting for others"]
        if self.held:
            parts.append(f"{len(self.held)} held by another process")
        text = ", ".join(parts)
        return text + (f"; planner job {self.planner} submits the next phase when these end" if self.planner else "")


def executor(launch: SlurmLaunch, resources: Resources, name: str) -> submitit.SlurmExecutor:
    pool = submitit.SlurmExecutor(folder=launch.logs, max_num_timeout=3)
    pool.update_parameters(job_name=name, **resources.sbatch_options())
    return pool


def submit_jobs(pool: submitit.SlurmExecutor, functions: list[Callable[[], Any]]) -> list[str]:
    """Submit ``functions`` as one job array (one job when there is one); their job ids. sbatch's refusal (the
    controller down, a partition that does not exist, ...) is one line."""
    try:
        if len(functions) == 1:
            return [pool.submit(functions[0]).job_id]
        with pool.batch():
            jobs = [pool.submit(function) for function in functions]
        return [job.job_id for job in jobs]
    except (submitit.core.utils.FailedJobError, subprocess.CalledProcessError, OSError) as exc:
        raise AotError(
            f"sbatch refused the jobs: {last_line(str(exc)) or exc}; is the Slurm controller up (`sinfo`), and do the "
            "partition and account exist?"
        ) from None


def submit_round(
    study: Study, launch: SlurmLaunch, automatic: bool = False, log: Callable[[str], None] = print
) -> Round:
    """One submission round (see the module). ``automatic``: a planner job's round, which leaves failed trials to
    the user."""
    require_slurm()
    execution = study.execution(launch.out, launch.device, log)
    ledger = read_ledger(launch.out)
    states = job_states(ledger.job_ids())
    result = Round()
    while True:  # record runs that finished without a row (their job ended before recording), then plan again
        store = read_store(execution.store)
        plan = study.plan(store)
        unrecorded = [
            t for t in plan.runs if t.key not in recorded_keys(store) and finished_results(t.folder(execution.runs))
        ]
        if not unrecorded:
            break
        for trial in unrecorded:
            execution.run_trial(trial)
    recorded = recorded_keys(store)
    to_submit = []
    for trial in plan.runs:
        entry = ledger.trials.get(trial.key)
        state = states.get(entry["job"], JobState("UNKNOWN")) if entry else None
        if trial.key in recorded:
            result.finished += 1
        elif state is not None and state.active:
            result.running[trial.key] = entry["job"]  # type: ignore[index]
        elif folder_busy(trial.folder(execution.runs)):
            result.held.append(trial.key)
            log(f"not submitted: {trial.describe()}: its run folder is held by another process (a job or a command)")
        elif automatic and entry is not None:
            result.failed[trial.key] = failure_line(entry["job"], state or JobState("UNKNOWN"), launch.logs)
        else:
            to_submit.append(trial)
    result.waiting = len(plan.pending)
    if to_submit:
        pool = executor(launch, launch.resources, f"aot-{study.task}")
        jobs = [TrialJob(study, t, launch.out, launch.device, launch.resources.gpus) for t in to_submit]
        ids = submit_jobs(pool, list(jobs))
        result.submitted = {t.key: job for t, job in zip(to_submit, ids)}
    in_flight = sorted({job.split("_")[0] for job in [*result.running.values(), *result.submitted.values()]})
    if launch.chain and plan.pending and in_flight:
        pool = executor(launch, Resources(cpus=1, mem="2G", time="30"), f"aot-{study.task}-plan")
        pool.update_parameters(dependency="afterany:" + ":".join(in_flight))
        result.planner = submit_jobs(pool, [PlannerJob(study, launch)])[0]

    def note(ledger: Ledger) -> None:
        for trial in to_submit:
            entry = ledger.trials.get(trial.key, {})
            ledger.trials[trial.key] = {
                "job": result.submitted[trial.key],
                "describe": trial.describe(),
                "folder": str(trial.folder(execution.runs)),
                "submitted": now_utc(),
                "tries": int(entry.get("tries", 0)) + 1,
            }
        if result.planner is not None:
            ledger.planner = {"job": result.planner, "after": in_flight, "submitted": now_utc()}
        ledger.waiting = [t.describe() for t in plan.pending]

    update_ledger(launch.out, note)
    for trial in to_submit:
        log(f"submitted job {result.submitted[trial.key]}: {trial.describe()}")
    for key, why in result.failed.items():
        log(f"failed, not resubmitted by the planner: {ledger.trials[key]['describe']}: {why}")
    return result


def wait_for_jobs(launch: SlurmLaunch, poll_seconds: float, log: Callable[[str], None]) -> None:
    """Return when none of the ledger's jobs is queued or running; a line each time the count changes."""
    last = -1
    while True:
        active = [job for job, state in job_states(read_ledger(launch.out).job_ids()).items() if state.active]
        if not active:
            return
        if len(active) != last:
            log(f"{len(active)} jobs queued or running ({', '.join(active[:6])}{' ...' if len(active) > 6 else ''})")
            last = len(active)
        time.sleep(poll_seconds)


def launch_slurm(
    study: Study,
    launch: SlurmLaunch,
    wait: bool = False,
    poll_seconds: float = 10.0,
    log: Callable[[str], None] = print,
) -> Round:
    """Submit the study (a round; with ``wait``, round after round until nothing new can start) and say what
    happened. Without ``wait``, planner jobs chain the rounds on the cluster (``launch.chain``)."""
    study.check()
    launch.out.mkdir(parents=True, exist_ok=True)
    if wait:
        launch = SlurmLaunch(launch.out, launch.resources, launch.device, chain=False)
    result = submit_round(study, launch, automatic=False, log=log)
    while wait:
        wait_for_jobs(launch, poll_seconds, log)
        result = submit_round(study, launch, automatic=True, log=log)
        if not result.submitted:
            break
    log(result.summary())
    return result
