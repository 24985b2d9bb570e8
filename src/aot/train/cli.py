"""`aot train TASK`: the training commands. Each task lives in its own module with ``register(subparsers)``;
add the module to ``TRAIN_TASK_MODULES`` to give ``aot train`` a new task (image, icl, ...)."""

from __future__ import annotations

import argparse
import importlib

TRAIN_TASK_MODULES = [
    "aot.train.lm_task",
    "aot.train.vision_task",
    "aot.train.icl_task",
]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model (language modelling, image classification, ...)",
        description="Train a model with the shared trainer (AdamW/Lion, warm-up + cosine, bf16 autocast, "
        "checkpoints with exact --resume, DDP/FSDP under torchrun). Pick a task.",
        epilog="Example: aot train lm   (fetches Shakespeare if needed and trains the cpu-quick preset)",
    )
    tasks = parser.add_subparsers(dest="task", metavar="TASK")
    for name in TRAIN_TASK_MODULES:
        importlib.import_module(name).register(tasks)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)
