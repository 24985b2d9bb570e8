"""Sweep files: a sweep written down once (``aot sweep --file FILE``) instead of as flags, with what each trial asks a
cluster for. Two kinds:

    # kind: grid (the default): what `aot sweep TASK --recipe ... --set ... --seeds ...` says
    task: lm
    recipe: cpu-quick              # optional: the task's training recipe (was preset:, which works for one release)
    model: aot-mssa-l-cpu-wide     # optional: a model preset (`aot models`)
    config: configs/lm.yaml        # optional: a config file under the grid's values
    grid:                          # each field an axis; train.lr with several values is the lr sweep
      train.lr: [1.0e-3, 3.0e-3]
      model.n_layer: [4, 6]
    seeds: [0, 1]                  # the first is the sweep's; the others train at each config's best lr
    launcher:                      # optional: each trial's job on `--launcher slurm` (flags override)
      gpus: 1
      cpus: 8
      mem: 64G
      time: "4:00:00"
      partition: gpu
      account: my-project
      extra: {qos: high}           # any other sbatch option

    # kind: scaling: a scaling study's families, sizes, budgets and lr rule (aot.sweep.scaling.plan)

A field the file's kind does not know is a one-line error naming it and the known ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aot.errors import ConfigError
from aot.sweep.execute import Study
from aot.sweep.launch.resources import Resources
from aot.sweep.spec import renamed_fields
from aot.sweep.task_sweep import GridSweep

GRID_FIELDS = ("kind", "task", "recipe", "model", "config", "grid", "seeds", "launcher")


@dataclass(frozen=True)
class SweepFile:
    """A sweep file read: the ``study`` it describes and the ``resources`` its ``launcher:`` section asks for."""

    study: Study
    resources: Resources


def read_sweep_file(path: str | Path) -> SweepFile:
    """The sweep in the YAML file ``path`` (see the module)."""
    source = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--file {source!r} cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--file {source!r} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"--file {source!r} must hold a mapping (task:, grid:, seeds:, ...); see `aot sweep --help`")
    data = renamed_fields(data, source)
    kind = data.get("kind", "grid")
    resources = Resources.from_mapping(data.get("launcher") or {}, source)
    if kind == "scaling":
        from aot.sweep.scaling.plan import ScalingStudy

        return SweepFile(ScalingStudy.from_dict(dict(data), source), resources)
    if kind != "grid":
        raise ConfigError(f"{source}: kind {kind!r} is unknown; use grid (the default) or scaling")
    return SweepFile(grid_sweep(data, source), resources)


def grid_sweep(data: Mapping[str, Any], source: str) -> GridSweep:
    """The :class:`GridSweep` of a ``kind: grid`` file."""
    unknown = sorted(set(data) - set(GRID_FIELDS))
    if unknown:
        raise ConfigError(f"{source}: field {unknown[0]!r} is unknown; a grid sweep file has {', '.join(GRID_FIELDS)}")
    if "task" not in data:
        raise ConfigError(f"{source}: no task; give task: lm (or vision, icl, recall)")
    from aot.tasks import TASKS, get_task

    task = str(data["task"])
    if task not in TASKS:
        raise ConfigError(f"{source}: task {task!r} is unknown; use one of {', '.join(TASKS)}")
    grid = data.get("grid") or {}
    if not isinstance(grid, Mapping):
        raise ConfigError(f"{source}: grid must map section.field to a value or a list of values")
    sets = tuple(f"{name}={','.join(map(yaml_text, as_list(values)))}" for name, values in grid.items())
    seeds = tuple(int(s) for s in as_list(data.get("seeds", [0])))
    return GridSweep(
        task=task,
        recipe=str(data.get("recipe") or get_task(task).command.default_recipe),
        sets=sets,
        seeds=seeds,
        model=data.get("model"),
        config_file=data.get("config"),
    )


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def yaml_text(value: Any) -> str:
    """A value as ``--set`` would be given it: a scalar as written, a list or mapping in YAML's flow style."""
    if isinstance(value, (list, dict)):
        return yaml.safe_dump(value, default_flow_style=True).strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
