"""`aot train TASK`: one sub-command per registered task (:data:`aot.tasks.TASKS`), built from the task's
:class:`aot.tasks.TaskCommand` data, and run by :func:`aot.tasks.run_task`. A new task needs no code here."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from aot.cli.options import add_train_args, fit_options, train_flags
from aot.errors import AotError
from aot.layering import layer
from aot.tasks import TASKS, Task, run_task
from aot.train.resume import branch_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model (language modelling, image classification, in-context regression)",
        description="Train a model with the shared trainer (AdamW/Lion, warm-up + cosine, bf16 autocast, "
        "checkpoints with exact --resume, DDP/FSDP under torchrun). Pick a task.",
        epilog="Example: aot train lm   (fetches Shakespeare if needed and trains the cpu-mssa recipe)",
    )
    tasks = parser.add_subparsers(dest="task", metavar="TASK")
    for task in TASKS.values():
        add_task_parser(tasks, task)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)


def add_task_parser(subparsers: argparse._SubParsersAction, task: Task) -> argparse.ArgumentParser:
    """``aot train NAME`` from the task's :class:`~aot.tasks.TaskCommand`."""
    command = task.command
    epilog = "\n".join(
        [
            "Examples:",
            *(f"  {line}" for line in command.examples),
            "Recipes (--recipe NAME; a model preset is --model NAME, `aot models`):",
            *(f"  {line}" for line in command.recipe_notes),
            "Print the full config with --dump-config.",
        ]
    )
    parser = subparsers.add_parser(
        task.name,
        help=command.help,
        description=textwrap.fill(command.description, width=100),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for option in command.options:
        if option.kind is bool:
            parser.add_argument(option.flag, action="store_true", default=None, help=option.help)
        else:
            parser.add_argument(option.flag, type=option.kind, metavar=option.metavar, help=option.help)
    add_train_args(parser, task.recipes, default_recipe=command.default_recipe, default_out=f"runs/{task.name}")
    parser.add_argument(
        "--branch-from",
        metavar="CHECKPOINT",
        help="a cooldown branch: start from another run's stable-phase checkpoint (RUN/checkpoint-stepN, kept by "
        "train.keep_checkpoints of a train.schedule=wsd run) with that run's config; only train.steps may differ "
        "(--set train.steps=N); the weights are those a run of N steps gives from scratch",
    )
    # None = not given: a branch takes its parent's config, a new run the default recipe
    parser.set_defaults(func=lambda args: run_command(task, args), recipe=None)
    return parser


def task_flags(task: Task, args: argparse.Namespace) -> dict[str, Any]:
    """The config sections set by the shared flags and the task's own options (those given)."""
    flags = train_flags(args)
    for option in task.command.options:
        value = getattr(args, option.flag.lstrip("-").replace("-", "_"))
        if value is None:
            continue
        for section, fields in option.to_config(value).items():
            flags.setdefault(section, {}).update(fields)
    return flags


def build_run(task: Task, args: argparse.Namespace) -> Any:
    """The run config: recipe < --config < flags < --set; for ``--branch-from``, the parent's config (kept in its
    checkpoint) in place of the recipe."""
    parent = None
    if args.branch_from:
        if args.recipe is not None or args.model is not None:
            raise AotError(
                "--branch-from takes the parent run's config; drop --recipe / --model (change train.steps with --set)"
            )
        parent = branch_config(Path(args.branch_from))
    if parent is None:  # a new run, or a checkpoint written before checkpoints kept their config: the usual layers
        args.recipe = args.recipe or task.command.default_recipe
        return task.build_run(args.recipe, args.config, task_flags(task, args), args.set, model_preset=args.model)
    return task.run_cls.from_dict(layer(parent, task.run_cls.sections(), args.config, task_flags(task, args), args.set))


def run_command(task: Task, args: argparse.Namespace) -> int:
    run = build_run(task, args)
    if args.dump_config:
        for note in run.notes:
            print(f"aot: {note}", file=sys.stderr)
        print(yaml.safe_dump(run.to_dict(), sort_keys=False), end="")
        return 0
    results = run_task(task, run, args.out, args.device, branch_from=args.branch_from, **fit_options(args))
    if results:
        print(task.summary(results, Path(args.out)))
        message = task.diverged(results)
        if message:
            raise AotError(message)
    return 0
