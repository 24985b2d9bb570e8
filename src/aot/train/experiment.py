"""What every training task shares (``aot train lm``, ``aot train vision``, ``aot train icl``, ...).

A run is one config made of sections: ``model`` (a model preset name plus field overrides), ``train``
(:class:`aot.train.TrainConfig`) and the task's own sections (``data``, ``eval``, ...), each a dataclass. A task
declares them by subclassing :class:`TaskRun`; this module merges the layers of a run's config in one order —

    the task's named preset  <  --config FILE  <  command-line flags  <  --set section.field=value

— validates every section, adds the command-line options all tasks share (:func:`add_train_args`), and draws the
training curve (:func:`plot_training_curve`). A task module adds only what is its own: data, loss, metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from aot.config import ModelConfig, from_dict, load_config_file
from aot.errors import ConfigError
from aot.train.trainer import PRECISIONS, TrainConfig

R = TypeVar("R", bound="TaskRun")


@dataclasses.dataclass
class TaskRun:
    """Base of a task's run config. Subclasses add their own sections as dataclass fields, e.g.
    ``data: LMDataConfig`` and ``eval: LMEvalConfig``; ``model`` and ``train`` are common to all tasks.

    ``model`` is a dict: ``{"preset": NAME, **overrides}``; :meth:`model_config` turns it into a
    :class:`aot.config.ModelConfig`.
    """

    task: ClassVar[str] = ""
    presets: ClassVar[dict[str, dict[str, Any]]] = {}  # the task's named training presets
    model: dict[str, Any]
    train: TrainConfig

    @classmethod
    def build(
        cls: type[R],
        preset: str,
        config_file: str | None = None,
        flags: dict[str, Any] | None = None,
        sets: list[str] | None = None,
        model_preset: str | None = None,
    ) -> R:
        """Preset < config file < flags < ``--set`` assignments, validated (:func:`build_run_config`)."""
        return build_run_config(cls, cls.presets, preset, config_file, flags, sets, model_preset)

    @classmethod
    def sections(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls: type[R], merged: dict[str, Any]) -> R:
        """Validate every section of a merged config; one-line :class:`ConfigError` naming the first bad field."""
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for name in cls.sections():
            raw = merged.get(name, {})
            if not isinstance(raw, dict):
                raise ConfigError(f"section {name!r} must be a mapping of field: value, got {type(raw).__name__}")
            if name == "model":
                if "preset" not in raw:
                    raise ConfigError(f"the model section needs a preset name (see `aot models --task {cls.task}`)")
                values[name] = dict(raw)
            elif name == "train":
                values[name] = TrainConfig.from_dict(raw)
            else:
                values[name] = from_dict(hints[name], raw, name)
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
        """The model section as a :class:`ModelConfig`; ``fixed`` holds fields the data decides (vocab_size, ...)."""
        from aot.models import preset_config

        fields = {k: v for k, v in self.model.items() if k != "preset"}
        return preset_config(self.model["preset"], **{**fields, **fixed})


def merge(base: dict[str, Any], override: dict[str, Any], sections: tuple[str, ...]) -> dict[str, Any]:
    """``override``'s fields replace ``base``'s, section by section; an unknown section is a one-line error."""
    merged = copy.deepcopy(base)
    for section, values in override.items():
        if section not in sections:
            raise ConfigError(f"unknown section {section!r} in the config; use {', '.join(sections)}")
        if values is None:  # an empty section in YAML (`train:`)
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"section {section!r} must be a mapping of field: value")
        merged.setdefault(section, {}).update(values)
    return merged


def parse_set(assignments: list[str]) -> dict[str, Any]:
    """``["train.lr=3e-4", "model.n_layer=8"]`` → ``{"train": {"lr": 3e-4}, "model": {"n_layer": 8}}``."""
    import yaml

    override: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set {item!r} must look like section.field=value (e.g. train.lr=3e-4)")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw  # not YAML: keep the text; the field's type check names it
        if isinstance(value, str):  # YAML 1.1 reads "3e-3" as a string; numbers without a dot are still numbers
            with contextlib.suppress(ValueError):
                value = float(value)
        override.setdefault(section, {})[name] = value
    return override


def build_run_config(
    run_cls: type[R],
    presets: dict[str, dict[str, Any]],
    preset: str,
    config_file: str | None = None,
    flags: dict[str, Any] | None = None,
    sets: list[str] | None = None,
    model_preset: str | None = None,
) -> R:
    """Preset < config file < flags < ``--set`` assignments, validated. ``model_preset`` swaps the model for a
    preset as it is (the training preset's model overrides are dropped, except its context / image size)."""
    if preset not in presets:
        raise ConfigError(f"unknown {run_cls.task} preset {preset!r}; use one of {', '.join(presets)}")
    sections = run_cls.sections()
    merged = copy.deepcopy(presets[preset])
    if model_preset:
        kept = {k: v for k, v in merged.get("model", {}).items() if k in ("block_size", "image_size")}
        merged["model"] = {"preset": model_preset, **kept}
    if config_file:
        merged = merge(merged, load_config_file(config_file), sections)
    merged = merge(merged, flags or {}, sections)
    merged = merge(merged, parse_set(sets or []), sections)
    return run_cls.from_dict(merged)


# -- command line -----------------------------------------------------------------------------------------


def add_train_args(
    parser: argparse.ArgumentParser, presets: dict[str, dict[str, Any]], default_preset: str, default_out: str
) -> None:
    """The options every ``aot train TASK`` has: preset, model, steps, batch, lr, precision, compile, resume,
    ``--set``, ``--dump-config`` and the experiment options (config, seed, device, out)."""
    from aot.cli import add_experiment_args

    parser.add_argument(
        "--preset",
        default=default_preset,
        help=f"training preset: {', '.join(presets)} (default: {default_preset})",
    )
    parser.add_argument("--model", help="model preset (see `aot models`); replaces the training preset's model")
    parser.add_argument("--steps", type=int, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, help="global batch size (all processes together)")
    parser.add_argument("--lr", type=float, help="peak learning rate")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="auto (default): bf16 autocast where it is measured faster on this machine (cached), else fp32; "
        "or bf16 / fp32",
    )
    parser.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="yes",
        choices=("yes", "auto"),
        help="continue the run in --out exactly from its last good checkpoint (an error when there is none); "
        "`--resume auto`: resume when there is a checkpoint, else start",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="start over in an --out that holds a run: the old run is moved to a sibling folder OUT.old-N",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override any field (repeatable)"
    )
    parser.add_argument("--dump-config", action="store_true", help="print the merged config as YAML and exit")
    add_experiment_args(parser, default_out=default_out)
    # no default: the seed comes from the config (train.seed, default 0) unless --seed is given, so that a
    # dumped config fed back with --config reproduces the run
    parser.set_defaults(seed=None)


def train_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ``train`` section set by the shared flags of :func:`add_train_args` (those given)."""
    given = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "precision": args.precision,
        "compile": args.compile,
        "seed": args.seed,
    }
    return {"train": {k: v for k, v in given.items() if v is not None}}


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """``Trainer.fit``'s run-folder options from the shared flags: ``resume`` (``no``/``yes``/``auto``), ``force``."""
    return {"resume": args.resume or "no", "force": bool(args.force)}


def dump_config(run: TaskRun) -> str:
    import yaml

    return yaml.safe_dump(run.to_dict(), sort_keys=False)


def plot_training_curve(
    out: Path,
    curve: list[dict[str, float]],
    evals: list[dict[str, Any]],
    *,
    x_per_step: float,
    x_label: str,
    eval_key: str,
    y_label: str,
    title: str,
    reference_lines: dict[str, float] | None = None,
    filename: str = "loss_curve.png",
) -> Path:
    """Training loss against ``step * x_per_step`` (tokens, images, prompts), the periodic evaluations
    (``evals[i][eval_key]`` at ``evals[i]["step"]``) and horizontal reference lines (baselines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([c["step"] * x_per_step for c in curve], [c["loss"] for c in curve], label="train", lw=1)
    points = [e for e in evals if eval_key in e]
    if points:
        ax.plot([e["step"] * x_per_step for e in points], [e[eval_key] for e in points], "o-", label="held out")
    for (name, value), style in zip((reference_lines or {}).items(), (":", "--", "-.", (0, (1, 3)))):
        ax.axhline(value, color="gray", ls=style, lw=1, label=name)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    path = out / filename
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
