"""The launch ledger of a sweep on a cluster: ``OUT/launch.json``, which job trains which trial.

    {"launcher": "slurm",
     "trials": {"KEY": {"job": "1234_0", "describe": "lm cpu-quick ... seed 0", "folder": "OUT/runs/...",
                        "submitted": "2026-12-05 18:00 UTC", "tries": 1}},
     "planner": {"job": "1236", "after": ["1234"], "submitted": "..."},     # the job that submits the next phase
     "waiting": ["lm cpu-quick ... seed 1", ...]}                           # trials that wait for others

It is what ``aot sweep status OUT`` reads and what a resubmission checks before it submits a trial again (a trial
whose job is still queued or running is not submitted twice). Results never live here: a trial is finished when the
results store holds its row. Written atomically under its own lock, so the command and a planner job that write it
at once keep each other's entries; a ledger that cannot be read is an error, never an empty one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.run_folder import write_text_atomic
from aot.sweep.store import store_lock

LEDGER_FILE = "launch.json"


@dataclass
class Ledger:
    """What :data:`LEDGER_FILE` holds (see the module)."""

    trials: dict[str, dict[str, Any]] = field(default_factory=dict)
    planner: dict[str, Any] | None = None
    waiting: list[str] = field(default_factory=list)
    launcher: str = "slurm"

    def job_ids(self) -> list[str]:
        """Every job the ledger names (the trials' and the planner's)."""
        ids = [entry["job"] for entry in self.trials.values()]
        return ids + ([self.planner["job"]] if self.planner else [])

    def to_dict(self) -> dict[str, Any]:
        return {"launcher": self.launcher, "trials": self.trials, "planner": self.planner, "waiting": self.waiting}


def ledger_path(out: Path) -> Path:
    return Path(out) / LEDGER_FILE


def read_ledger(out: Path) -> Ledger:
    """The ledger of the sweep in ``out`` (empty when nothing was launched there yet)."""
    path = ledger_path(out)
    if not path.is_file():
        return Ledger()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Ledger(data["trials"], data.get("planner"), list(data.get("waiting", [])), data.get("launcher", "slurm"))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise AotError(
            f"launch ledger {str(path)!r} cannot be read ({exc}); move it away (the results store is separate, and "
            "resubmitting skips every finished trial)"
        ) from None


def update_ledger(out: Path, change: Any) -> Ledger:
    """Re-read the ledger, apply ``change(ledger)`` and write it in one step, holding its lock."""
    path = ledger_path(out)
    with store_lock(path):
        ledger = read_ledger(out)
        change(ledger)
        write_text_atomic(path, json.dumps(ledger.to_dict(), indent=2) + "\n")
    return ledger
