"""`aot models`: list the presets with their exact parameter counts, show one preset's config, or list the blocks
with their own options (``--blocks``)."""

from __future__ import annotations

import argparse
import json

from aot.blockspec import block_rows
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
    parser.add_argument(
        "--blocks",
        action="store_true",
        help="list the blocks (model.block) instead: module, mixer, what follows it, and each block's own options "
        "with their defaults and allowed values (set them flat in the model section: --set model.ista_step=0.2)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.blocks:
        rows = block_rows()
        print(json.dumps(rows, indent=2) if args.json else blocks_table(rows))
        return 0
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


def blocks_table(rows: list[dict]) -> str:
    """The blocks as a markdown table: options as ``name=default (allowed)``."""

    def options(row: dict) -> str:
        parts = []
        for name, option in row["options"].items():
            allowed = f" ({option['allowed']})" if "allowed" in option else ""
            parts.append(f"`{name}={json.dumps(option['default'])}`{allowed}")
        return "; ".join(parts) or "none"

    lines = ["| block | module | mixer | after the mixer | state | its own options (default) |", "|---" * 6 + "|"]
    for row in rows:
        state = "recurrent" if row["recurrent"] else "KV cache"
        after = row["after_mixer"] or "nothing"
        lines.append(f"| {row['block']} | {row['module']} | {row['mixer']} | {after} | {state} | {options(row)} |")
    lines.append(
        "\nA block's options go flat in the model section (`ista_step: 0.2`, `--set model.ista_step=0.2`); "
        "another block's option is refused in one line."
    )
    return "\n".join(lines)
