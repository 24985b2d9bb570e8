"""The task protocol: what a training task (``aot train lm``, ``vision``, ``icl``, ...) supplies, and nothing else.

A task is a :class:`Task` subclass. It declares

- its run config, a :class:`TaskRun` dataclass whose fields are the config's sections (``model`` and ``train``
  for every task, plus its own: ``data``, ``eval``, ...), and its named training recipes (``recipes``; ``aot train
  TASK --recipe NAME``; a model preset, ``model.preset``, is another thing: ``aot models``);
- its command line as data (:class:`TaskCommand`: help, description, examples, the task's own options as
  :class:`TaskOption` — each option's value becomes config fields; no argparse here: :mod:`aot.cli.train`
  turns the data into a sub-command);
- what only it knows: how to load its data (:meth:`Task.load_data`), build its model (:meth:`Task.build_model`),
  feed the trainer (:meth:`Task.setup`: batch source, loss, periodic evaluation, resume fingerprint), evaluate at
  the end (:meth:`Task.final_eval`), which results it adds (:meth:`Task.results`), its figures and its one-line
  summary.

:func:`aot.tasks.run_task` does the rest, the same for every task: device, distributed init, seeding, the
:class:`aot.train.Trainer`, results.json written atomically by the main process, the training curve.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import torch
from torch import nn

from aot.config import SHARED_FIELDS, ModelConfig
from aot.errors import ConfigError, renamed, warn_renamed
from aot.layering import build_sections, layer
from aot.models.base import AotModel
from aot.tasks.metric import Metric
from aot.train.distributed import env_from_torchrun
from aot.train.trainer import EvalFn, LossFn, TrainConfig, Trainer, TrainResult

R = TypeVar("R", bound="TaskRun")


@dataclass
class TaskRun:
    """Base of a task's run config. Subclasses add their own sections as dataclass fields, e.g.
    ``data: LMDataConfig`` and ``eval: LMEvalConfig``; ``model`` and ``train`` are common to all tasks.

    ``model`` is a dict: ``{"preset": NAME, **overrides}``; :meth:`model_config` turns it into a
    :class:`aot.config.ModelConfig`.
    """

    task: ClassVar[str] = ""  # the model task (ModelConfig.task) this run trains: lm, image, icl
    #: what building the run decided that the user should hear (said once the run starts, or with --dump-config)
    notes: ClassVar[list[str]] = []
    recipes: ClassVar[dict[str, dict[str, Any]]] = {}  # the task's named training recipes
    #: a renamed recipe's old name -> its new one (the old names work for one release, said once)
    recipe_renames: ClassVar[dict[str, str]] = {}
    model: dict[str, Any]
    train: TrainConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A task of an older aot that names its recipes ``presets`` keeps working for one release."""
        super().__init_subclass__(**kwargs)
        if "presets" in vars(cls) and "recipes" not in vars(cls):
            warn_renamed(f"{cls.__name__}.presets", "recipes", "training recipes", stacklevel=3)
            cls.recipes = vars(cls)["presets"]

    @classmethod
    def build(
        cls: type[R],
        recipe: str,
        config_file: str | None = None,
        flags: dict[str, Any] | None = None,
        sets: list[str] | None = None,
        model_preset: str | None = None,
    ) -> R:
        """Recipe < config file < flags < ``--set`` assignments (:func:`aot.layering.layer`), validated.
        ``model_preset`` swaps the model for a preset as it is: the training recipe's model overrides are dropped,
        except its context / image size, and one line on stderr names what was dropped (never silently)."""
        recipe = renamed(recipe, cls.recipe_renames, "training recipes", stacklevel=3)
        if recipe not in cls.recipes:
            raise ConfigError(f"unknown {cls.task} recipe {recipe!r}; use one of {', '.join(cls.recipes)}")
        merged = dict(cls.recipes[recipe])
        notes = []
        if model_preset:
            recipe_model = merged.get("model", {})
            kept = {k: v for k, v in recipe_model.items() if k in ("block_size", "image_size")}
            dropped = {k: v for k, v in recipe_model.items() if k not in ("preset", *kept)}
            if dropped:
                settings = ", ".join(f"{k}={v}" for k, v in dropped.items())
                again = " ".join(f"--set model.{k}={v}" for k, v in dropped.items())
                notes.append(
                    f"--model {model_preset} replaces recipe {recipe}'s model {recipe_model.get('preset')} and its "
                    f"settings {settings}; to keep them add {again}"
                )
            merged = {**merged, "model": {"preset": model_preset, **kept}}
        run = cls.from_dict(layer(merged, cls.sections(), config_file, flags, sets))
        vars(run)["notes"] = notes  # this run's own notes (the class holds the empty default)
        return run

    @classmethod
    def sections(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls: type[R], merged: dict[str, Any]) -> R:
        """Validate every section of a merged config; one-line :class:`ConfigError` naming the first bad field."""
        hints = typing.get_type_hints(cls)
        values = build_sections({name: hints[name] for name in cls.sections()}, merged)  # model stays a dict
        if "preset" not in values["model"]:
            raise ConfigError(f"the model section needs a preset name (see `aot models --task {cls.task}`)")
        run = cls(**values)
        run.model_config()  # validate the model section now, before any data is read
        return run

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.sections():
            value = getattr(self, name)
            out[name] = value if isinstance(value, dict) else dataclasses.asdict(value)
        return out

    def model_config(self, **fixed: Any) -> ModelConfig:
        """The model section as a :class:`ModelConfig`; ``fixed`` holds fields the data decides (vocab_size, ...).
        A model preset of another task (``aot train icl --model aot-mssa-l-cpu``, an LM) is a one-line error."""
        from aot.models.presets import get_preset

        preset = get_preset(self.model["preset"])
        preset_task = preset.fields.get("task", ModelConfig.task)
        if preset_task != self.task:
            raise ConfigError(
                f"model preset {preset.name!r} is for task {preset_task!r} and this run trains {self.task!r} models; "
                f"pick one of `aot models --task {self.task}`"
            )
        fields = {k: v for k, v in self.model.items() if k != "preset"}
        return preset.config(**{**fields, **fixed})


@dataclass(frozen=True)
class TaskOption:
    """One command-line option of a task: ``--flag VALUE`` sets the config fields ``to_config(VALUE)`` returns
    (``{section: {field: value}}``; the section's own checks then validate it). ``kind=bool`` makes it a switch
    (``--no-fetch``)."""

    flag: str
    help: str
    to_config: Callable[[Any], dict[str, dict[str, Any]]]
    kind: type = str
    metavar: str | None = None


def sets_field(section: str, name: str) -> Callable[[Any], dict[str, dict[str, Any]]]:
    """The usual :attr:`TaskOption.to_config`: the value goes into ``section.name``."""
    return lambda value: {section: {name: value}}


@dataclass(frozen=True)
class TaskCommand:
    """``aot train NAME``'s texts and options (rendered by :mod:`aot.cli.train`)."""

    help: str
    description: str
    examples: tuple[str, ...]
    recipe_notes: tuple[str, ...]
    default_recipe: str
    options: tuple[TaskOption, ...] = ()


@dataclass
class Setup:
    """What the trainer is handed for a task's run (:meth:`Task.setup`)."""

    batches: Any  # a batch source: ``get(step, start, stop)`` (see aot.train.trainer)
    loss: LossFn
    evaluate: EvalFn | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)  # what a resumed run must match
    state: Any = None  # task-specific objects the final evaluation and the results need (held-out sets, ...)


D = TypeVar("D")

#: what every task's :attr:`Task.smoke` run shares: 1 layer, 2 steps, no periodic evaluation, fp32
SMOKE = ("model.n_layer=1", "train.steps=2", "train.eval_every=0", "train.progress=false", "train.precision=fp32")


class Task(Generic[D]):
    """A training task; see the module docstring. ``D`` is the type of what :meth:`load_data` returns."""

    name: ClassVar[str]  # the sub-command: aot train NAME
    run_cls: ClassVar[type[TaskRun]]
    command: ClassVar[TaskCommand]
    #: the entry of results.json that must be finite for a run not to have diverged: section, key, its name
    finite_result: ClassVar[tuple[str, str, str]] = ("train", "final_train_loss", "loss")
    #: what an lr sweep ranks this task's runs by (:mod:`aot.sweep`)
    metric: ClassVar[Metric]
    #: the smallest run that goes through every path of the task (1 layer, 2 steps): its training recipe and
    #: ``--set`` assignments, which the test suite trains every task with (data a task needs from a file apart)
    smoke: ClassVar[tuple[str, tuple[str, ...]]]

    @property
    def recipes(self) -> dict[str, dict[str, Any]]:
        """The task's named training recipes (``aot train NAME --recipe RECIPE``)."""
        return self.run_cls.recipes

    @property
    def presets(self) -> dict[str, dict[str, Any]]:
        """The old name of :attr:`recipes` (one release)."""
        warn_renamed("Task.presets", "Task.recipes", "training recipes")
        return self.recipes

    def build_run(
        self,
        recipe: str,
        config_file: str | None = None,
        flags: dict[str, Any] | None = None,
        sets: list[str] | None = None,
        model_preset: str | None = None,
    ) -> TaskRun:
        """The run config: recipe < config file < flags < ``--set``, validated (:meth:`TaskRun.build`); a
        renamed recipe's old name still works for one release, said once."""
        return self.run_cls.build(recipe, config_file, flags, sets, model_preset)

    def store_row(self, results: dict[str, Any]) -> dict[str, Any]:
        """The numbers a results-store row keeps of a finished run (its ``results.json``): size, budget, the
        :attr:`metric` and what a table shows beside it, speed, the date (:func:`aot.tasks.metric.dated_row`)."""
        raise NotImplementedError

    # -- what each task supplies, in the order run_task calls it ----------------------------------------
    def check(self, run: Any, device: torch.device | None = None) -> None:
        """One-line errors about the run that need no data (called before anything is read), such as
        :meth:`check_memory`."""

    def planned_model(self, run: Any) -> tuple[ModelConfig, int]:
        """The model the run will train and the tokens a sample puts through it, known before any data is read
        (for the memory check and for a sweep's cost estimate: :func:`aot.bench.flops.training_flops_per_sample`)."""
        raise NotImplementedError

    def check_memory(
        self,
        run: TaskRun,
        cfg: ModelConfig,
        seq_len: int,
        data: Mapping[str, int] | None = None,
        device: torch.device | None = None,
    ) -> None:
        """Refuse, in one line and before any data is read, a run whose training step cannot fit in this
        machine's memory (:func:`aot.models.budget.training_need`: the weights, their gradients and
        optimizer state, one forward pass's activations of ``seq_len`` tokens per row and this process's rows,
        and the ``data`` the task holds). A task's :meth:`check` calls it with the model its data will give."""
        from aot.models import build_model
        from aot.models.budget import check_training_fits, rows_per_pass, training_need

        rows = rows_per_pass(run.train.batch_size, run.train.micro_batch_size, env_from_torchrun().world_size)
        check_training_fits(training_need(cfg, build_model, rows, seq_len, run.train.optimizer, data), device)

    def load_data(self, run: Any, is_main: bool) -> D:
        """The task's data (read once; under torchrun the main process prepares caches first)."""
        raise NotImplementedError

    def build_model(self, run: Any, data: D) -> AotModel:
        """The model, after the seed is set (so its init is the seed's)."""
        raise NotImplementedError

    def setup(self, run: Any, data: D, model: AotModel, device: torch.device) -> Setup:
        raise NotImplementedError

    def seq_len(self, run: Any, model: AotModel) -> int:
        """Tokens a sample puts through the backbone (for the FLOPs of a step, hence MFU)."""
        raise NotImplementedError

    def final_eval(self, run: Any, data: D, setup: Setup, trainer: Trainer, device: torch.device) -> dict[str, Any]:
        """The final held-out evaluation (every process runs it; the main one records it)."""
        raise NotImplementedError

    def results(
        self, run: Any, data: D, setup: Setup, model: AotModel, result: TrainResult, final: dict[str, Any]
    ) -> dict[str, Any]:
        """The task's own entries of results.json: ``model`` and ``train`` keys to add, and its top-level keys."""
        raise NotImplementedError

    def save_artifacts(self, out: Path, data: D) -> None:
        """Files beside results.json that make the run folder load on its own (e.g. the tokenizer)."""

    def figures(self, out: Path, results: dict[str, Any]) -> list[Path]:
        return []

    def summary(self, results: dict[str, Any], out: Path) -> str:
        """The line ``aot train NAME`` prints at the end."""
        raise NotImplementedError

    def diverged(self, results: dict[str, Any]) -> str | None:
        """A one-line message when the run diverged (``results[section][key]``, :attr:`finite_result`, is not
        finite), else ``None``."""
        section, key, what = self.finite_result
        if math.isfinite(results[section][key]):
            return None
        return f"training diverged (non-finite {what}); lower --lr"


def model_summary(model: nn.Module, cfg: ModelConfig, *extra: str) -> dict[str, Any]:
    """The ``model`` entry of results.json: block, depth, width, parameter counts, and the ``extra`` fields (a
    block's option reads as its default for a block without it: :meth:`ModelConfig.option`)."""
    summary: dict[str, Any] = {"block": cfg.block, "n_layer": cfg.n_layer, "n_embd": cfg.n_embd}
    summary.update({name: getattr(cfg, name) if name in SHARED_FIELDS else cfg.option(name) for name in extra})
    summary["params"] = model.num_params()  # type: ignore[operator]
    summary["non_embedding_params"] = model.num_params(non_embedding=True)  # type: ignore[operator]
    return summary
