"""A sweep of one task over a ``--set`` grid and seeds: what ``aot sweep`` runs (the engine's own user).

Every config of the grid (:func:`aot.sweep.grid.grid_configs`, ``train.lr`` left out) trains at each lr of
``train.lr`` with the first seed; the other seeds train at the config's winning lr only. Run folders go under
``OUT/runs/``, the store is ``OUT/results.json`` and the table ``OUT/table.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.errors import ConfigError
from aot.sweep.execute import Execution
from aot.sweep.grid import LR_FIELD, SEED_FIELD, Plan, folder_name, grid_configs, parse_axes, plan_sweep, run_key
from aot.sweep.metrics import Metric, task_metrics
from aot.sweep.render import summary_markdown
from aot.sweep.selection import Axes, Summary, seed_summary, sweep_winners
from aot.sweep.spec import SweepSpec
from aot.sweep.store import STORE_FILE
from aot.sweep.training import build_run
from aot.tasks import TaskRun

#: the row fields of an ``aot sweep`` store: a config is its grid assignments (lr and seed apart)
AXES = Axes(group=("config",))


@dataclass(frozen=True)
class GridSweep:
    """The sweep ``aot sweep`` was asked for: ``task``'s training ``recipe`` (with ``model`` and ``config_file``),
    the grid of ``--set`` assignments, and the seeds."""

    task: str
    recipe: str
    sets: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    model: str | None = None
    config_file: str | None = None

    @property
    def axes(self) -> dict[str, list[str]]:
        return parse_axes(self.sets)

    @property
    def lrs(self) -> list[str | None]:
        """The lrs of the sweep as given (None: the recipe's only)."""
        return list(self.axes.get(LR_FIELD, [None]))

    @property
    def configs(self) -> list[tuple[str, ...]]:
        """The grid's configs: every combination of the values of the axes other than ``train.lr``."""
        return grid_configs({k: v for k, v in self.axes.items() if k != LR_FIELD})

    @property
    def fixed(self) -> list[str]:
        """The assignments of the axes with one value (every run has them; tables leave them out)."""
        return [f"{k}={v[0]}" for k, v in self.axes.items() if len(v) == 1 and k != LR_FIELD]

    def varying(self, config: Sequence[str]) -> list[str]:
        """The assignments of ``config`` that tell it from the grid's other configs."""
        fixed = set(self.fixed)
        return [a for a in config if a not in fixed]

    @property
    def metric(self) -> Metric:
        return task_metrics(self.task).metric

    def spec(self) -> SweepSpec:
        extra: dict[str, Any] = {"model": self.model, "config_file": self.config_file, "seeds": list(self.seeds)}
        return SweepSpec(self.task, self.recipe, AXES.group, extra={k: v for k, v in extra.items() if v})

    def trial(self, config: tuple[str, ...], lr: str | None, seed: int) -> GridTrial:
        return GridTrial(self, config, lr, seed)

    def check(self) -> None:
        """Every run of the grid builds into a valid config (an unknown section.field, a bad value: one line)."""
        if SEED_FIELD in self.axes:
            raise ConfigError("give the seeds with --seeds, not --set train.seed=...")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"--seeds {' '.join(map(str, self.seeds))} repeats a seed")
        for config in self.configs:
            for lr in self.lrs:
                self.trial(config, lr, self.seeds[0]).build()

    def own_rows(self, store: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of ``store`` that are runs of this sweep (an --out may hold an earlier sweep's too)."""
        keys = {self.trial(c, lr, seed).key for c in self.configs for lr in self.lrs for seed in self.seeds}
        return [r for r in store["runs"] if r["key"] in keys]

    def plan(self, store: dict[str, Any]) -> Plan[GridTrial]:
        """Every run: the lr sweep at the first seed, the other seeds at each config's winner."""
        given = {float(lr): lr for lr in self.lrs if lr is not None}
        winners = sweep_winners(self.own_rows(store), AXES, self.metric, list(given) or None, self.seeds[0])
        by_config = {key[0]: given.get(lr, f"{lr:g}") for key, lr in winners.items()}
        return plan_sweep(
            [(config, self.lrs) for config in self.configs],
            self.seeds,
            lambda config: by_config.get(config_text(self.varying(config))),
            self.trial,
        )

    def execution(self, out: Path, device: str = "auto", log: Callable[[str], None] = print) -> Execution:
        """How its runs train and are recorded under ``out``: folders in ``out/runs``, rows in ``out/results.json``."""
        return Execution(out / "runs", out / STORE_FILE, trial_row, self.spec(), device, log=log)

    def row_line(self, row: dict[str, Any]) -> str:
        """A recorded run in one line: its config, lr, seed and metric (the progress line of a sweep)."""
        value = row.get(self.metric.field)
        shown = "—" if value is None else f"{value:.4f}"
        return f"{row['config']} lr {row['lr']:g} seed {row['seed']}: {self.metric.name} {shown}"

    def summaries(self, store: dict[str, Any]) -> list[Summary]:
        return seed_summary(self.own_rows(store), AXES, self.metric, sweep_seed=self.seeds[0])

    def markdown(self, store: dict[str, Any]) -> str:
        command = " ".join(
            [f"aot sweep {self.task} --recipe {self.recipe}"]
            + ([f"--model {self.model}"] if self.model else [])
            + ([f"--config {self.config_file}"] if self.config_file else [])
            + [f"--set {a}" for a in self.fixed]
        )
        note = (
            f"Every run: `{command}`. Best lr: the best {self.metric.name} at seed {self.seeds[0]} (the sweep "
            "seed); mean and min-max over the seeds at that lr."
        )
        return summary_markdown(self.summaries(store), self.metric, f"Sweep of {self.task}", note)


def config_text(config: Sequence[str]) -> str:
    """How a row names its config: its assignments, space-separated ("—" for the preset as it is)."""
    return " ".join(config) or "—"


@dataclass(frozen=True)
class GridTrial:
    """One run of a :class:`GridSweep`: a config of the grid at an lr (None: the preset's) and a seed."""

    sweep: GridSweep
    config: tuple[str, ...]
    lr: str | None
    seed: int

    @property
    def task(self) -> str:
        return self.sweep.task

    @property
    def sets(self) -> list[str]:
        return [*self.config, *([f"{LR_FIELD}={self.lr}"] if self.lr is not None else []), f"{SEED_FIELD}={self.seed}"]

    @property
    def key(self) -> str:
        s = self.sweep
        return run_key(s.task, s.recipe, s.model, s.config_file, self.sets)

    def folder(self, runs: Path) -> Path:
        return runs / folder_name(" ".join(self.sets), self.key)

    def build(self) -> TaskRun:
        s = self.sweep
        return build_run(s.task, s.recipe, self.sets, s.model, s.config_file)

    def describe(self) -> str:
        config = config_text(self.sweep.varying(self.config))
        lr = self.lr or ("best" if len(self.sweep.lrs) > 1 else "recipe")
        return f"{self.task} {self.sweep.recipe} {config} lr {lr} seed {self.seed}"

    def parent(self, runs: Path) -> Path | None:
        return None  # every run of a grid trains from scratch

    def argv(self, runs: Path) -> list[str]:
        s = self.sweep
        return [
            "train", self.task, "--recipe", s.recipe,
            *(["--model", s.model] if s.model else []),
            *(["--config", s.config_file] if s.config_file else []),
            *[a for item in self.sets for a in ("--set", item)],
            "--resume", "auto", "--out", str(self.folder(runs)),
        ]  # fmt: skip


def trial_row(trial: GridTrial, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A store row: the config, lr and seed the run trained with, its folder, then the task's numbers."""
    return {
        "config": config_text(trial.sweep.varying(trial.config)),
        "lr": float(results["config"]["train"]["lr"]),
        "seed": int(results["config"]["train"]["seed"]),
        "sets": trial.sets,
        "run_dir": str(folder),
        **task_metrics(trial.task).row(results),
    }


def run_grid_sweep(
    sweep: GridSweep, out: str | Path, device: str = "auto", log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Check the grid, then train every run not finished under ``out`` (a progress line per run), record the store
    and rewrite the table after each; returns the store (:func:`aot.sweep.launch.local.run_local`)."""
    from aot.sweep.launch.local import run_local

    return run_local(sweep, out, device, log)
