"""``aot sweep status OUT``: what each launched trial of a sweep is doing, from the ledger, the results store and
Slurm: finished (the store holds its row), queued (with the scheduler's reason), running, failed (why, in one
line), and the trials that wait for others."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from aot.errors import AotError
from aot.sweep.launch.jobs import failure_line, job_states
from aot.sweep.launch.ledger import LEDGER_FILE, read_ledger
from aot.sweep.launch.slurm import LOG_DIR
from aot.sweep.store import STORE_FILE, read_store, recorded_keys


def trial_states(out: Path) -> list[tuple[str, str, str]]:
    """(state, trial, detail) of every trial the ledger names: finished, queued, running or failed."""
    ledger = read_ledger(out)
    if not ledger.trials:
        raise AotError(
            f"nothing was launched from {str(out)!r} (no {LEDGER_FILE}); submit with `aot sweep ... --launcher slurm "
            f"--out {out}`"
        )
    recorded = recorded_keys(read_store(out / STORE_FILE))
    states = job_states(entry["job"] for key, entry in ledger.trials.items() if key not in recorded)
    rows = []
    for key, entry in ledger.trials.items():
        job = entry["job"]
        if key in recorded:
            rows.append(("finished", entry["describe"], f"job {job}"))
            continue
        state = states[job]
        if state.state == "PENDING":
            rows.append(("queued", entry["describe"], f"job {job}" + (f", {state.reason}" if state.reason else "")))
        elif state.active:
            rows.append(("running", entry["describe"], f"job {job}"))
        else:
            rows.append(("failed", entry["describe"], f"job {job}: {failure_line(job, state, out / LOG_DIR)}"))
    return rows


def status_text(out: Path) -> str:
    """The status page: a line per trial, then the counts, the waiting trials and the planner job."""
    rows = trial_states(out)
    ledger = read_ledger(out)
    order = {"running": 0, "queued": 1, "failed": 2, "finished": 3}
    lines = [f"{state:9s} {trial}  ({detail})" for state, trial, detail in sorted(rows, key=lambda r: order[r[0]])]
    lines += [f"waiting   {trial}  (for the trials it depends on)" for trial in ledger.waiting]
    counts = Counter(state for state, _, _ in rows)
    summary = ", ".join(f"{counts[s]} {s}" for s in order if counts[s])
    lines.append(f"{summary}{', ' if summary else ''}{len(ledger.waiting)} waiting")
    if ledger.planner:
        planner = job_states([ledger.planner["job"]])[ledger.planner["job"]]
        verb = "submits" if planner.active else "submitted"
        lines.append(f"planner job {ledger.planner['job']} ({planner.state.lower()}) {verb} the next phase")
    if counts["failed"]:
        lines.append("resubmit with the same `aot sweep` command: failed trials continue from their checkpoints")
    return "\n".join(lines)
