"""What Slurm says of a sweep's jobs, asked without submitit's watcher (which needs accounting): ``squeue`` for the
jobs still queued or running, then ``sacct`` where the cluster keeps accounting, then ``scontrol show job`` (which
knows an ended job for MinJobAge, 5 minutes by default); and why a job ended without a result, read from its
submitit log files when the scheduler no longer says.
"""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aot.errors import AotError

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD"}

#: how an ended job's state reads, and what to do about it
ENDINGS = {
    "TIMEOUT": "over its time limit: resubmitting resumes it from its last checkpoint; raise --time",
    "OUT_OF_MEMORY": "out of memory: raise --mem (or lower train.micro_batch_size)",
    "CANCELLED": "cancelled: resubmitting resumes it from its last checkpoint",
    "NODE_FAIL": "its node failed: resubmitting resumes it from its last checkpoint",
    "PREEMPTED": "preempted: resubmitting resumes it from its last checkpoint",
    "BOOT_FAIL": "its node did not boot: resubmit",
    "DEADLINE": "past its deadline: resubmit",
}


@dataclass(frozen=True)
class JobState:
    """A job's state as Slurm names it (PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...; UNKNOWN when nothing
    says) and the scheduler's reason or exit code."""

    state: str
    reason: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


def require_slurm() -> None:
    """One line when Slurm's commands are not here."""
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        raise AotError(
            "--launcher slurm needs Slurm's sbatch and squeue on PATH (not found): run on the cluster's login node, "
            "or train here with --launcher local"
        )


def _slurm(command: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AotError(f"{command[0]} did not answer ({exc}); is the Slurm controller up (`sinfo`)?") from None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def live_jobs() -> dict[str, JobState]:
    """This user's queued and running jobs, array tasks one by one (``1234_0``), as squeue lists them."""
    done = _slurm(["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i|%T|%r"])
    if done.returncode != 0:
        raise AotError(
            f"squeue failed: {last_line(done.stderr) or 'no message'}; is the Slurm controller up (`sinfo`)?"
        )
    states = {}
    for line in done.stdout.splitlines():
        job, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if job:
            states[job] = JobState(state, "" if reason in ("None", "(null)") else reason)
    return states


def ended_jobs(job_ids: Iterable[str]) -> dict[str, JobState]:
    """The final state of ended jobs: from sacct where accounting is kept, else from scontrol (recent jobs only)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    states: dict[str, JobState] = {}
    done = _slurm(["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(ids)])
    if done.returncode == 0:
        for line in done.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 3 and parts[0] in ids:
                states[parts[0]] = JobState(parts[1].split()[0], f"exit {parts[2]}")
    for job in ids:
        if job not in states:
            shown = _slurm(["scontrol", "show", "job", "-o", job])
            state = re.search(r"JobState=(\S+)", shown.stdout)
            if shown.returncode == 0 and state:
                code = re.search(r"ExitCode=(\S+)", shown.stdout)
                states[job] = JobState(state.group(1), f"exit {code.group(1)}" if code else "")
    return states


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """The state of each of ``job_ids`` (UNKNOWN for a job no command knows any more)."""
    ids = list(job_ids)
    live = live_jobs()
    states = {job: live[job] for job in ids if job in live}
    states.update(ended_jobs(job for job in ids if job not in states))
    return {job: states.get(job, JobState("UNKNOWN")) for job in ids}


def failure_line(job: str, state: JobState, logs: Path) -> str:
    """Why ``job`` ended without a result, in one line: the exception its function raised (submitit's result
    pickle), else what Slurm wrote into its log (a time limit, the OOM killer, a cancellation), else its state."""
    from submitit.core.utils import JobPaths

    paths = JobPaths(logs, job, 0)
    try:
        import pickle

        with paths.result_pickle.open("rb") as handle:
            outcome, value = pickle.load(handle)
        if outcome == "error":  # the traceback's last line, without the exception's class
            return re.sub(r"^[\w.]+(Error|Exception|Interrupt)\w*: ", "", last_line(str(value)))
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, TypeError):
        pass
    try:
        tail = paths.stderr.read_text(errors="replace")[-20_000:]
    except OSError:
        tail = ""
    if "DUE TO TIME LIMIT" in tail:
        return ENDINGS["TIMEOUT"]
    if re.search(r"oom[-_ ]kill|out of memory", tail, re.IGNORECASE):
        return ENDINGS["OUT_OF_MEMORY"]
    if "CANCELLED" in tail:
        return ENDINGS["CANCELLED"]
    if state.state in ENDINGS:
        return ENDINGS[state.state]
    where = f" (log {paths.stderr})" if paths.stderr.is_file() else ""
    return f"{state.state.lower()} {state.reason}".strip() + where
