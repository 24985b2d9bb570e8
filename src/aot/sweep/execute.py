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


RowOf = Callable[[Any, dict[str, Any], Path], dict[str, Any]]


def run_trial(
    trial: Trial,
    runs: Path,
    store_path: Path,
    row_of: RowOf,
    spec: SweepSpec | None = None,
    device: str = "cpu",
    lock: str | None = None,
    log: Callable[[str], None] = print,
    keep_recorded: bool = True,
) -> tuple[str, dict[str, Any]]:
    """Train ``trial`` unless it finished or is recorded (see the module), record ``row_of(trial, results,
    folder)`` under its key, and return how it went (``trained``, ``finished``: refreshed from its folder,
    ``recorded``: kept as the store has it) with the store as it now is."""
    out = trial.folder(runs)
    results = finished_results(out)
    status = "finished"
    if results is None:
        store = read_store(store_path)
        if keep_recorded and trial.key in recorded_keys(store):
            return "recorded", store
        log(f"== {trial.describe()}")
        with cpu_lock(lock):
            results = train(trial.task, trial.build(), out, device)
        status = "trained"
    row = {"key": trial.key, **row_of(trial, results, out)}
    return status, record_rows(store_path, [row], spec)


OnRecord = Callable[[dict[str, Any], dict[str, Any], str], None]


def run_plan(
    make_plan: Callable[[dict[str, Any]], Plan[Any]],
    runs: Path,
    store_path: Path,
    row_of: RowOf,
    spec: SweepSpec | None = None,
    device: str = "cpu",
    lock: str | None = None,
    on_record: OnRecord | None = None,
    log: Callable[[str], None] = print,
    keep_recorded: bool = True,
) -> dict[str, Any]:
    """Run every trial of ``make_plan(store)`` (:func:`run_trial`); then plan again from the store, since a sweep
    that just finished gives its waiting seeds their lr, and run what is new, until nothing is. ``on_record(store,
    row, status)`` after each run (rewrite a table, print a line); ``keep_recorded``: see :func:`run_trial`. Returns
    the final store."""
    store = read_store(store_path)
    todo = list(make_plan(store).runs)
    while todo:
        for trial in todo:
            status, store = run_trial(trial, runs, store_path, row_of, spec, device, lock, log, keep_recorded)
            if on_record is not None:
                on_record(store, next(r for r in store["runs"] if r["key"] == trial.key), status)
        store = read_store(store_path)
        todo = [t for t in make_plan(store).runs if t.key not in recorded_keys(store)]
    return store
