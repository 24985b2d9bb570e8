"""`aot models`: list the presets with their exact parameter counts, or show one preset's config."""

from __future__ import annotations

import argparse
import json

from aot.models.preset_table import markdown_table, preset_rows
from aot.models.presets import get_preset


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list model presets with parameter counts",
        description="List every named preset with its block, depth, width, heads and exact parameter count "
        "(non-embedding too), beside the count the paper reports. Give a NAME to print its config.",
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
    return 0
