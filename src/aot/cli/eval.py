"""`aot eval TASK`: evaluate trained runs. Each task lives in its own module with ``register(subparsers)``;
add the module to ``EVAL_TASK_MODULES`` to give ``aot eval`` a new task (lm zero-shot, icl curves, ...)."""

from __future__ import annotations

import argparse
import importlib

EVAL_TASK_MODULES: list[str] = ["aot.cli.eval_lm", "aot.cli.eval_icl", "aot.cli.eval_harness"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate trained runs (zero-shot LM protocols, in-context-learning curves, lm-evaluation-harness)",
        description="Evaluate run folders written by `aot train TASK`: lm and icl write results.json (and their "
        "figures) into --out; harness runs lm-evaluation-harness's own command line. Pick a task.",
    )
    tasks = parser.add_subparsers(dest="task", metavar="TASK")
    for name in EVAL_TASK_MODULES:
        importlib.import_module(name).register(tasks)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)
