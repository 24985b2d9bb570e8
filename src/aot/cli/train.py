"""`aot train TASK`: one sub-command per registered task (:data:`aot.tasks.TASKS`), built from the task's
:class:`aot.tasks.TaskCommand` data, and run by :func:`aot.tasks.run_task`. A new task needs no code here."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

import yaml

from aot.cli.options import add_train_args, fit_options, train_flags
from aot.errors import AotError
from aot.tasks import TASKS, Task, run_task


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model (language modelling, image classification, in-context regression)",
        description="Train a model with the shared trainer (AdamW/Lion, warm-up + cosine, bf16 autocast, "
        "checkpoints with exact --resume, DDP/FSDP under torchrun). Pick a task.",
        epilog="Example: aot train lm   (fetches Shakespeare if needed and trains the cpu-quick preset)",
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
            "Presets:",
            *(f"  {line}" for line in command.preset_notes),
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
    add_train_args(parser, task.presets, default_preset=command.default_preset, default_out=f"runs/{task.name}")
    parser.set_defaults(func=lambda args: run_command(task, args))
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


def run_command(task: Task, args: argparse.Namespace) -> int:
    run = task.build_run(args.preset, args.config, task_flags(task, args), args.set, model_preset=args.model)
    if args.dump_config:
        print(yaml.safe_dump(run.to_dict(), sort_keys=False), end="")
        return 0
    results = run_task(task, run, args.out, args.device, **fit_options(args))
    if results:
        print(task.summary(results, Path(args.out)))
        message = task.diverged(results)
        if message:
            raise AotError(message)
    return 0
