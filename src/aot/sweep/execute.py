"""Running a sweep's plan: skip what finished, train the rest, record a row per run, plan again when a sweep
finishes (its winner releases the other seeds).

A run counts as finished only when its folder holds a whole results.json of a finished run
(:func:`aot.sweep.training.finished_results`: a truncated or unparsable file is not); its row is then refreshed
from it without training. A run the store already records, without a finished folder here (another machine
trained it, or its folder was cleaned up), is kept as recorded. Anything else trains, continuing from its
checkpoint when it was killed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aot.bench.lock import cpu_lock
from aot.sweep.grid import Plan
from aot.sweep.spec import SweepSpec
from aot.sweep.store import read_store, record_rows, recorded_keys
from aot.sweep.training import finished_results, train
from aot.tasks import TaskRun


class Trial(Protocol):
    """One run of a sweep, as the executor needs it."""

    @property
    def key(self) -> str: ...

    @property
    def task(self) -> str: ...

    def folder(self, runs: Path) -> Path: ...

    def build(self) -> TaskRun: ...

    def describe(self) -> str: ...


class LaunchedTrial(Trial, Protocol):
    """A run a launcher can start anywhere (:mod:`aot.sweep.launch`): it also says the checkpoint it branches from
    and the command line that trains it."""

    def parent(self, runs: Path) -> Path | None:
        """The checkpoint this run branches from (a WSD cooldown branch: ``aot train --branch-from``), or None."""
        ...

    def argv(self, runs: Path) -> list[str]:
        """The ``aot`` command line that trains it into :meth:`folder` (how a launcher starts it under torchrun, and
        what its log shows)."""
        ...


def branch_parent(trial: Trial, runs: Path) -> Path | None:
    """The checkpoint ``trial`` branches from (None for a trial that does not say: a benchmark's own trials)."""
    parent = getattr(trial, "parent", None)
    return parent(runs) if callable(parent) else None


class Study(Protocol):
    """What ``aot sweep`` runs, with any launcher: a plan of trials over what the store holds, and where and how
    they train and are recorded. :class:`aot.sweep.task_sweep.GridSweep` (a ``--set`` grid) and
    :class:`aot.sweep.scaling.plan.ScalingStudy` (a sweep file of ``kind: scaling``) are the two. A study is
    pickled into each cluster job, so it holds plain values only."""

    @property
    def task(self) -> str: ...

    def check(self) -> None:
        """One-line errors before anything trains (an unknown field, a bad value)."""
        ...

    def plan(self, store: dict[str, Any]) -> Plan[Any]:
        """The trials (each a :class:`LaunchedTrial`): ``runs`` can start now, ``pending`` wait for others."""
        ...

    def execution(self, out: Path, device: str = "auto", log: Callable[[str], None] = print) -> Execution:
        """Where its runs train (a folder each) and how they are recorded (the store, its rows, its spec)."""
        ...

    def markdown(self, store: dict[str, Any]) -> str:
        """Its summary table (OUT/table.md), rewritten after each run."""
        ...


RowOf = Callable[[Any, dict[str, Any], Path], dict[str, Any]]
OnRecord = Callable[[dict[str, Any], dict[str, Any], str], None]


@dataclass(frozen=True)
class Execution:
    """Where a sweep's runs live (``runs``: a folder per trial) and are recorded (``store``: the results store,
    a row ``row_of(trial, results, folder)`` per run, stamped with ``spec``), on which ``device``, holding which
    flock(1)-style ``lock`` around each training, printing through ``log``; ``keep_recorded``: see the module."""

    runs: Path
    store: Path
    row_of: RowOf
    spec: SweepSpec | None = None
    device: str = "cpu"
    lock: str | None = None
    log: Callable[[str], None] = print
    keep_recorded: bool = True

    def run_trial(self, trial: Trial) -> tuple[str, dict[str, Any]]:
        """Train ``trial`` unless it finished or is recorded (see the module), record its row under its key, and
        return how it went (``trained``, ``finished``: refreshed from its folder, ``recorded``: kept as the store
        has it) with the store as it now is."""
        out = trial.folder(self.runs)
        results = finished_results(out)
        status = "finished"
        if results is None:
            store = read_store(self.store)
            if self.keep_recorded and trial.key in recorded_keys(store):
                return "recorded", store
            self.log(f"== {trial.describe()}")
            with cpu_lock(self.lock):
                results = train(
                    trial.task, trial.build(), out, self.device, branch_from=branch_parent(trial, self.runs)
                )
            status = "trained"
        row = {"key": trial.key, **self.row_of(trial, results, out)}
        return status, record_rows(self.store, [row], self.spec)

    def run_plan(
        self, make_plan: Callable[[dict[str, Any]], Plan[Any]], on_record: OnRecord | None = None
    ) -> dict[str, Any]:
        """Run every trial of ``make_plan(store)`` (:meth:`run_trial`); then plan again from the store, since a
        sweep that just finished gives its waiting seeds their lr, and run what is new, until nothing is.
        ``on_record(store, row, status)`` after each run (rewrite a table, print a line). Returns the store."""
        store = read_store(self.store)
        todo = list(make_plan(store).runs)
        while todo:
            for trial in todo:
                status, store = self.run_trial(trial)
                if on_record is not None:
                    on_record(store, next(r for r in store["runs"] if r["key"] == trial.key), status)
            store = read_store(self.store)
            todo = [t for t in make_plan(store).runs if t.key not in recorded_keys(store)]
        return store
