"""`aot models`: list the presets with their exact parameter counts, or show one preset's config."""

from __future__ import annotations

import argparse
import json

from aot.models.preset_table import markdown_table, preset_rows
from aot.models.presets import NAMING, get_preset


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list model presets with parameter counts",
        description="List every named preset with its block, depth, width, heads and exact parameter count "
        "(non-embedding too), beside the count the paper reports, and how a name reads (-l- a language model, -v- "
        "a vision model, -wide the width-over-depth CPU variant). Give a NAME to print its config. Model presets "
        "are what model.preset names; the training recipes of `aot train TASK --recipe` are another thing.",
    )
    parser.add_argument("name", nargs="?", help="a preset name: print its full config as JSON")
    parser.add_argument("--task", choices=["lm", "image", "icl"], help="only presets of this task")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.name:
        print(json.dumps(get_preset(args.name).config().to_dict(), indent=2))
        return 0
    rows = preset_rows(args.task)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(markdown_table(rows))
    print("\n" + "\n".join(NAMING))
    return 0
